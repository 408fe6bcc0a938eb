//! Taking a stored run up again: a decision ([`Agent::resume`]), a retry of a failed run, a recovery of a run whose process died, and the policy a resumed run goes on under.

use super::*;

impl Agent {
    /// Continues a suspended run with a person's decision on what it waits for — in
    /// this process or another (with the same store). `decision_id` is the `decision`
    /// of the [`Outcome`] that suspended the run: a decision applies to exactly that
    /// call of exactly that suspension, once. Anything else — the same decision again
    /// (a double click, a retried request), one for an earlier suspension of the run,
    /// an answer to a call that waits for approval or an approval of one that waits
    /// for input, a decision for a run that is not waiting — is refused with an error
    /// for which [`is_stale_decision`](Error::is_stale_decision) is true, and changes
    /// nothing. An error while the run goes on never leaves it stuck: see
    /// [`Event::RunFailed`] and [`retry`](Self::retry).
    pub async fn resume(
        &self,
        run_id: &str,
        decision_id: &str,
        decision: Decision,
    ) -> Result<Outcome> {
        let RunRecord {
            status,
            suspension: stored_suspension,
            state: stored,
            ..
        } = self.inner.store.load(run_id).await?.ok_or_else(|| {
            Error::not_suspended(format!("run {run_id} is unknown to the run store"))
        })?;
        let refuse = |reason: String, waiting: bool| {
            let event = Event::DecisionRefused {
                decision: decision_id.to_owned(),
                by: decision.by.clone(),
                reason: reason.clone(),
            };
            for f in &self.inner.on_event {
                f(run_id, &event);
            }
            Error::stale(format!("run {run_id}: {reason}"), waiting)
        };
        if status != RunStatus::Suspended {
            let status = match status {
                RunStatus::Running => "is running (decided already, or being resumed)",
                RunStatus::Finished => "has finished",
                RunStatus::Failed => "has failed (retry it)",
                RunStatus::Cancelled => "was cancelled",
                _ => "waits",
            };
            return Err(refuse(
                format!("the run {status}: decision {decision_id} applies to nothing"),
                false,
            ));
        }
        let mut state = self.read(run_id, stored)?;
        // The run as it waits, to put back if an error stops it before anything ran.
        let kept = state.clone();
        let Some(waiting) = state
            .suspension
            .clone()
            .filter(|s| stored_suspension.as_deref() == Some(s.id.as_str()))
        else {
            return Err(refuse(
                "the run waits in no suspension a decision can name (kept by an older version)"
                    .into(),
                false,
            ));
        };
        if waiting.decision != decision_id {
            return Err(refuse(
                format!(
                    "decision {decision_id} is not the one the run waits for (it was applied already, or belongs to an earlier suspension)"
                ),
                true,
            ));
        }
        if let Some(at) = waiting.expires_at.filter(|at| now_ms() >= *at) {
            return Err(refuse(
                format!(
                    "the suspension expired ({} ms since the epoch) before decision {decision_id} came; it no longer applies",
                    at
                ),
                false,
            ));
        }
        match (waiting.waits, decision.answering) {
            (Waits::Approval, true) => {
                return Err(refuse(
                    format!("decision {decision_id} waits for an approval or a denial, not for answers"),
                    true,
                ))
            }
            (Waits::Input, false) if decision.approved => {
                return Err(refuse(
                    format!("decision {decision_id} waits for input: resume it with Decision::answer (or deny, which declines)"),
                    true,
                ))
            }
            _ => {}
        }
        self.resume_policy(&mut state)?;
        // Atomic: of two resumes of this suspension, one gets the run.
        let Some((_, lease)) = self.claim(run_id, Claim::Suspended(&waiting.id)).await? else {
            return Err(refuse(
                format!("decision {decision_id} was applied already"),
                false,
            ));
        };
        let mut kept = kept;
        kept.lease = Some(lease.clone());
        state.lease = Some(lease);
        state.persisted = true;
        state.suspension = None;
        let Some(call) = state.pending.first_mut() else {
            return self
                .fail(
                    state,
                    Some(kept),
                    Error::store(format!("run {run_id} waits for nothing")),
                )
                .await;
        };
        let tool = call.name.clone();
        if waiting.waits == Waits::Input {
            let Some(input) = call.input.clone() else {
                let e = Error::store(format!("run {run_id} waits for input it does not have"));
                return self.fail(state, Some(kept), e).await;
            };
            let mut actions = Vec::new();
            for key in input.keys() {
                if call.answers.iter().any(|(k, _)| k == key) {
                    continue; // a callback answered it
                }
                let answer = decision
                    .answers
                    .iter()
                    .find(|(k, _)| k == key)
                    .filter(|_| decision.approved)
                    .map(|(_, a)| a.clone())
                    .unwrap_or(InputResponse::Decline);
                actions.push(answer.action().to_owned());
                call.answers.push((key.to_owned(), answer.to_value()));
            }
            call.answered = true;
            self.event(
                &mut state,
                Event::InputAnswered {
                    tool,
                    actions,
                    by: decision.by,
                    at: now(),
                },
            );
            return self.decided(state, kept).await;
        }
        call.approved = Some(decision.approved);
        call.grant_tools = decision.approved && decision.allowed_tools;
        let binding = call.binding.clone();
        if !decision.approved {
            call.denial = decision.message.map(|m| m.chars().take(4000).collect());
        }
        self.event(
            &mut state,
            Event::ApprovalDecided {
                tool,
                approved: decision.approved,
                by: decision.by,
                at: now(),
                binding,
            },
        );
        self.decided(state, kept).await
    }

    /// Keeps the decision just applied to `state` (before anything runs on it), then
    /// goes on. Until it is kept, an error puts the run back as it was (`kept`).
    async fn decided(&self, mut state: RunState, kept: RunState) -> Result<Outcome> {
        if let Err(e) = self.save(&mut state, RunStatus::Running).await {
            return self.fail(state, Some(kept), e).await;
        }
        self.drive(state, Some(kept)).await
    }

    /// Takes over a run whose process stopped working on it — it died, or lost its
    /// store — once the run's lease has ended (see [`AgentBuilder::lease`]), and goes
    /// on from what was last kept: a decision kept is applied, finished calls do not
    /// run again, and a call that had been sent without its result being kept is not
    /// sent again — the model reads that its outcome is unknown
    /// ([`Event::OutcomeUnknown`]) — unless the tool says a repeat is harmless. A run
    /// that is not running on an ended lease (it waits, has ended, is held by a live
    /// process, or is unknown) is refused with an error for which `is_not_suspended()`
    /// is true.
    pub async fn recover(&self, run_id: &str) -> Result<Outcome> {
        let Some((claimed, lease)) = self.claim(run_id, Claim::Stale(now_ms())).await? else {
            return Err(Error::not_suspended(format!(
                "run {run_id} is not running on an ended lease (it waits, has ended, is held by a live process, or is unknown)"
            )));
        };
        let prepared = self
            .read(run_id, claimed.state.clone())
            .and_then(|mut s| self.resume_policy(&mut s).map(|()| s));
        let mut state = match prepared {
            Ok(s) => s,
            Err(e) => {
                // Left recoverable (running on an ended lease) by an agent that can
                // read it, or whose policy fits.
                let ended = Lease {
                    owner: lease.owner,
                    until: 0,
                };
                let _ = self
                    .inner
                    .store
                    .save(&RunRecord {
                        lease: Some(ended),
                        ..claimed
                    })
                    .await;
                return Err(e);
            }
        };
        state.lease = Some(lease);
        // Died between a claim and keeping what the claim was for: the suspension it
        // was claimed from no longer applies (its decision is spent).
        state.suspension = None;
        self.event(&mut state, Event::RunRecovered);
        self.drive(state, None).await
    }

    /// Recovers every run of the store whose process stopped working on it (see
    /// [`recover`](Self::recover)): what became of each. Runs held by live processes
    /// are left to them. Call it at start-up, or from a timer; any process with the
    /// store may.
    pub async fn recover_stale(&self) -> Result<Vec<(String, Result<Outcome>)>> {
        let mut out = Vec::new();
        let mut filter = crate::store::RunFilter::new()
            .status(RunStatus::Running)
            .limit(1000);
        loop {
            let page = self.inner.store.list(&filter).await?;
            for run in page.runs {
                match self.recover(&run.id).await {
                    Err(e) if e.is_not_suspended() => {} // held, or moved on meanwhile
                    done => out.push((run.id, done)),
                }
            }
            match page.next {
                Some(next) => filter = filter.cursor(next),
                None => return Ok(out),
            }
        }
    }

    /// Continues a run an error stopped after something had run (status `failed`,
    /// see [`Event::RunFailed`]): from where it stopped, without running again the
    /// calls that finished. Of two retries one gets the run; a run that has not failed
    /// is refused with an error for which `is_not_suspended()` is true.
    pub async fn retry(&self, run_id: &str) -> Result<Outcome> {
        let Some((claimed, lease)) = self.claim(run_id, Claim::Failed).await? else {
            return Err(Error::not_suspended(format!(
                "run {run_id} has not failed (it waits, runs, has finished, or is unknown)"
            )));
        };
        let prepared = self
            .read(run_id, claimed.state.clone())
            .and_then(|mut s| self.resume_policy(&mut s).map(|()| s));
        let mut state = match prepared {
            Ok(s) => s,
            Err(e) => {
                // Left as it was: failed, for a person to look at (unreadable) or for
                // an agent whose policy fits.
                let _ = self
                    .inner
                    .store
                    .save(&RunRecord {
                        status: RunStatus::Failed,
                        ..claimed
                    })
                    .await;
                return Err(e);
            }
        };
        state.failure = None;
        state.lease = Some(lease);
        self.event(&mut state, Event::RunRetried);
        self.drive(state, None).await
    }

    /// The policy a resumed run goes on under: the one kept with it — unless this
    /// agent states its own (its builder set the mode, the allow-list or the step
    /// limit), which may only be tighter, and is then kept with the run. A looser one
    /// is an error naming what differs, and the run is not taken. A run kept under
    /// `ask` goes on under `approve` in an agent that states no policy (the callback
    /// is code of the agent that started it).
    pub(super) fn resume_policy(&self, state: &mut RunState) -> Result<()> {
        let Some(kept) = state.policy.clone() else {
            return Ok(()); // kept by an older version: the agent's own
        };
        if self.inner.policy_stated {
            let mut looser = self.inner.gate.looser_than(&kept.mode, &kept.allow);
            if self.inner.max_steps > kept.max_steps {
                looser.push(format!(
                    "max_steps {} is more than {}",
                    self.inner.max_steps, kept.max_steps
                ));
            }
            if !looser.is_empty() {
                return Err(Error::config(format!(
                    "run {} goes on under mode `{}` with allow-list {:?} and max_steps {}; this agent's policy would loosen it ({}): resume it with an agent that states no policy, or a tighter one",
                    state.id,
                    kept.mode,
                    kept.allow,
                    kept.max_steps,
                    looser.join("; ")
                )));
            }
            state.gate = None;
            state.policy = Some(self.own_policy());
            return Ok(());
        }
        let mode = match kept.mode.as_str() {
            "ask" => Mode::Approve,
            other => Mode::parse(other).map_err(|e| {
                Error::store(format!("run {} keeps an unknown mode: {e}", state.id))
            })?,
        };
        state.gate = Some(Arc::new(Gate::new(mode, kept.allow.clone())));
        Ok(())
    }

    /// The policy this agent was built with.
    pub(super) fn own_policy(&self) -> Policy {
        Policy {
            mode: self.inner.gate.mode().name().to_owned(),
            allow: self.inner.gate.allowed().map(str::to_owned).collect(),
            max_steps: self.inner.max_steps,
        }
    }

    /// The gate a run goes on under.
    pub(super) fn gate(&self, state: &RunState) -> Arc<Gate> {
        state
            .gate
            .clone()
            .unwrap_or_else(|| self.inner.gate.clone())
    }

    /// The step limit a run goes on under.
    pub(super) fn max_steps(&self, state: &RunState) -> u32 {
        state
            .policy
            .as_ref()
            .map_or(self.inner.max_steps, |p| p.max_steps)
    }
}
