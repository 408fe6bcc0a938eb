//! The approval inbox: what a run waits on, expiry, cancel, delete, prune, listing.

use super::*;

impl Agent {
    /// What the suspended run `run_id` waits on — the ids a decision names, the server,
    /// tool and arguments, and the tool's definition as shown (or the input requests
    /// with their schemas) — for an application that never saw the [`Outcome`].
    /// `None` when the run does not wait.
    pub async fn pending(&self, run_id: &str) -> Result<Option<Pending>> {
        let Some(record) = self.inner.store.load(run_id).await? else {
            return Ok(None);
        };
        if record.status != RunStatus::Suspended {
            return Ok(None);
        }
        let state = self.read(run_id, record.state)?;
        let (Some(s), Some(call)) = (state.suspension.as_ref(), state.pending.first()) else {
            return Ok(None);
        };
        // What the person was shown: the last request for this call.
        let shown = state.events.iter().rev().find_map(|e| match e {
            Event::ApprovalRequested {
                server,
                tool,
                arguments,
                binding,
            } if *tool == call.name => Some((server.clone(), arguments.clone(), binding.clone())),
            _ => None,
        });
        let (server, arguments, waits) = match s.waits {
            Waits::Approval => {
                let (server, arguments, binding) =
                    shown.unwrap_or_else(|| (String::new(), call.arguments.clone(), None));
                let (description, input_schema) = match &call.shown {
                    Some((d, schema)) => (Some(d.clone()), Some(schema.clone())),
                    None => (None, None),
                };
                (
                    server,
                    arguments,
                    PendingWait::Approval {
                        binding,
                        description,
                        input_schema,
                    },
                )
            }
            Waits::Input => {
                let Some(input) = &call.input else {
                    return Err(Error::store(format!(
                        "run {run_id} waits for input it does not have"
                    )));
                };
                let given: Vec<&String> = call.answers.iter().map(|(k, _)| k).collect();
                let requests = input
                    .requests()
                    .map_err(|e| Error::store(format!("run {run_id}: {e}")))?
                    .into_iter()
                    .filter(|(k, _)| !given.contains(&k))
                    .collect();
                (
                    input.server().to_owned(),
                    call.arguments.clone(),
                    PendingWait::Input { requests },
                )
            }
        };
        Ok(Some(Pending {
            run_id: run_id.to_owned(),
            suspension: s.id.clone(),
            decision: s.decision.clone(),
            server,
            tool: call.name.clone(),
            arguments,
            waits,
        }))
    }

    /// Expires the suspensions whose time has passed (see
    /// [`AgentBuilder::suspension_expiry`]): for each, the call it waited on does not
    /// run — the model reads "expired, not run" — and the run goes on, or ends
    /// ([`Expiry::End`]); `Event::SuspensionExpired`. Returns what became of each run
    /// expired now (a run decided meanwhile is left to its decision). Call it from a
    /// timer; any process with the store may.
    pub async fn expire_due(&self) -> Result<Vec<(String, Result<Outcome>)>> {
        let mut out = Vec::new();
        let mut filter = crate::store::RunFilter::new()
            .status(RunStatus::Suspended)
            .limit(1000);
        // A page at a time (id order): runs expired on one page leave the listing,
        // and the cursor goes on past the last id seen.
        loop {
            let page = self.inner.store.list(&filter).await?;
            for run in page.runs {
                if let Some(done) = self.expire(&run.id).await.transpose() {
                    out.push((run.id, done));
                }
            }
            match page.next {
                Some(next) => filter = filter.cursor(next),
                None => return Ok(out),
            }
        }
    }

    /// Expires `run_id`'s suspension if its time has passed; `None` when it has not
    /// (or the run was decided meanwhile).
    pub(super) async fn expire(&self, run_id: &str) -> Result<Option<Outcome>> {
        let Some(record) = self.inner.store.load(run_id).await? else {
            return Ok(None);
        };
        let mut state = self.read(run_id, record.state)?;
        let Some(s) = state
            .suspension
            .clone()
            .filter(|s| s.expires_at.is_some_and(|at| now_ms() >= at))
        else {
            return Ok(None);
        };
        // Before the claim: a policy this agent may not apply leaves the run as it is.
        self.resume_policy(&mut state)?;
        let Some((_, lease)) = self.claim(run_id, Claim::Suspended(&s.id)).await? else {
            return Ok(None);
        };
        state.lease = Some(lease);
        state.suspension = None;
        let Some(call) = (!state.pending.is_empty()).then(|| state.pending.remove(0)) else {
            return self
                .fail(
                    state,
                    None,
                    Error::store(format!("run {run_id} waits for nothing")),
                )
                .await
                .map(Some);
        };
        self.event(
            &mut state,
            Event::SuspensionExpired {
                suspension: s.id,
                decision: s.decision,
                tool: call.name.clone(),
            },
        );
        state.results.push(Block::ToolResult {
            id: call.id,
            content: json!({
                "error": format!("expired: nobody decided in time; `{}` was not run", call.name)
            })
            .to_string(),
            is_error: true,
        });
        if self.inner.on_expiry == Expiry::End {
            close_turn(
                &mut state,
                "not run: the run ended when a suspension expired",
            );
            self.event(&mut state, Event::RunFinished);
            self.save(&mut state, RunStatus::Finished).await?;
            return Ok(Some(Outcome::Expired {
                run_id: run_id.to_owned(),
            }));
        }
        self.drive(state, None).await.map(Some)
    }

    /// Cancels a run that waits (or failed): the calls it waited on do not run, the
    /// transcript records them as cancelled (so the model would read it), and the run
    /// ends `cancelled` (`Event::RunCancelled`). Of a cancel and a decision at once, one
    /// wins. A run that does not wait or fail is refused with `is_not_suspended()`.
    pub async fn cancel(&self, run_id: &str, by: &str) -> Result<()> {
        let record = self.inner.store.load(run_id).await?.ok_or_else(|| {
            Error::not_suspended(format!("run {run_id} is unknown to the run store"))
        })?;
        let status = record.status;
        let mut state = self.read(run_id, record.state)?;
        let claim = match (status, state.suspension.as_ref()) {
            (RunStatus::Suspended, Some(s)) => Claim::Suspended(&s.id),
            (RunStatus::Failed, _) => Claim::Failed,
            _ => {
                return Err(Error::not_suspended(format!(
                    "run {run_id} neither waits nor has failed: there is nothing to cancel"
                )))
            }
        };
        let Some((_, lease)) = self.claim(run_id, claim).await? else {
            return Err(Error::not_suspended(format!(
                "run {run_id} was decided or cancelled meanwhile"
            )));
        };
        state.lease = Some(lease);
        close_turn(
            &mut state,
            &format!("the run was cancelled by {by}; this call did not run"),
        );
        state.suspension = None;
        self.event(&mut state, Event::RunCancelled { by: by.to_owned() });
        self.save(&mut state, RunStatus::Cancelled).await
    }

    /// Forgets the run `run_id` (whatever it stands at); `false` when there was none.
    pub async fn delete(&self, run_id: &str) -> Result<bool> {
        self.inner.store.delete(run_id).await
    }

    /// Forgets the runs that ended (finished or cancelled) more than `age` ago; how
    /// many.
    pub async fn prune(&self, age: std::time::Duration) -> Result<u64> {
        let cutoff = crate::store::unix_now().saturating_sub(age.as_secs());
        self.inner.store.prune(cutoff).await
    }

    /// The runs of this agent's store that `filter` names, a page at a time.
    pub async fn runs(&self, filter: &crate::store::RunFilter) -> Result<crate::store::RunPage> {
        self.inner.store.list(filter).await
    }

    /// The background tasks a suspended run waits on (server, task id): calls a server
    /// runs as tasks that paused for input. They keep running on the server; resuming
    /// the run answers them and waits for their results. Listen to them with
    /// `Mcp::listen_for` to hear how they stand (the seed's `pending_tasks`).
    pub async fn pending_tasks(&self, run_id: &str) -> Result<Vec<(String, String)>> {
        let state = self.load(run_id).await?;
        Ok(state
            .pending
            .iter()
            .filter_map(|c| {
                let input = c.input.as_ref()?;
                Some((input.server().to_owned(), input.task_id()?.to_owned()))
            })
            .collect())
    }
}
