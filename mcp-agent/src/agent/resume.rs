//! Taking a stored run up again: a decision ([`Agent::resume`]), a retry of a failed run, a recovery of a run whose process died, and the policy a resumed run goes on under.

use mcp_runtime::InputResponse;

use crate::error::{Error, Result};
use crate::store::{Claim, Lease, LedgerEntry, LedgerKind, RunRecord, RunStatus};

use super::clock::{now, now_ms};
use super::decision::{Allowance, Always, Decision, DecisionKind, Outcome};
use super::events::Event;
use super::handle::Agent;
use super::ids::random_id;
use super::run::suspended_outcome;
use super::state::{CallState, PersonApproval, RunState};

/// How long a sub-agent's run found stale by another path is left to its parent's loop
/// before it is looked at again.
const CHILD_BACK_OFF_MS: u64 = 30_000;

impl Agent {
    /// Continues a suspended run with a person's decision on one call it waits for —
    /// in this process or another (with the same store). `decision_id` is the
    /// `decision` of that call (in the [`Outcome`]'s `calls`, or [`pending`]): a
    /// decision applies to exactly that call of exactly that suspension, once. Anything
    /// else — the same decision again (a double click, a retried request), one for an
    /// earlier suspension of the run, an answer to a call that waits for approval or an
    /// approval of one that waits for input, a decision for a run that is not waiting —
    /// is refused with an error for which [`is_stale_decision`](Error::is_stale_decision)
    /// is true, and changes nothing. When other calls of the suspension still wait, the
    /// decision is kept and the run waits on (the outcome lists what is left); once
    /// every call is decided it goes on. An error while it goes on never leaves it
    /// stuck: see [`Event::RunFailed`] and [`retry`](Self::retry).
    ///
    /// [`pending`]: Self::pending
    pub async fn resume(
        &self,
        run_id: &str,
        decision_id: &str,
        decision: Decision,
    ) -> Result<Outcome> {
        self.decide(run_id, [(decision_id, decision)]).await
    }

    /// Several decisions on calls of one suspension at once (see
    /// [`resume`](Self::resume)): all apply, or — when any of them does not apply —
    /// none does.
    pub async fn decide<I, S>(&self, run_id: &str, decisions: I) -> Result<Outcome>
    where
        I: IntoIterator<Item = (S, Decision)>,
        S: Into<String>,
    {
        let decisions: Vec<(String, Decision)> = decisions
            .into_iter()
            .map(|(id, d)| (id.into(), d))
            .collect();
        match self.decide_as(run_id, decisions, false, false).await? {
            Some(outcome) => Ok(outcome),
            None => Err(Error::store(format!(
                "run {run_id}: the decision was only kept"
            ))),
        }
    }

    /// Records a person's decision on one call a suspended run waits for, and returns
    /// at once: nothing runs. It is checked exactly as [`resume`](Self::resume) checks
    /// it — bound to that call of that suspension, single use (a second record or
    /// resume of it is refused with `is_stale_decision()`), refused once the
    /// suspension expired — and kept with the run, in its sealed state. The run waits
    /// on until every call of the suspension is decided; then it is **ready**: a
    /// [`Worker`](crate::Worker) of any process with the store continues it
    /// ([`Agent::worker`]). A decision recorded here counts for a later
    /// [`resume`](Self::resume) of the run's other calls too.
    pub async fn record_decision(
        &self,
        run_id: &str,
        decision_id: &str,
        decision: Decision,
    ) -> Result<()> {
        self.decide_as(
            run_id,
            vec![(decision_id.to_owned(), decision)],
            true,
            false,
        )
        .await
        .map(drop)
    }

    /// [`decide`](Self::decide) — or, when `record`, only keep the decisions (the run
    /// stays waiting, ready for a worker once nothing is left undecided): `None`.
    pub(super) async fn decide_as(
        &self,
        run_id: &str,
        decisions: Vec<(String, Decision)>,
        record: bool,
        via_parent: bool,
    ) -> Result<Option<Outcome>> {
        if decisions.is_empty() {
            return Err(Error::config("no decision given"));
        }
        let refuse = |reason: String, waiting: bool| {
            for (id, d) in &decisions {
                let event = Event::DecisionRefused {
                    decision: id.clone(),
                    by: d.by().to_owned(),
                    reason: reason.clone(),
                    principal: Some(d.principal.clone()),
                };
                self.inner.callbacks.emit(run_id, &event);
            }
            Error::stale(format!("run {run_id}: {reason}"), waiting)
        };
        let named = decisions
            .iter()
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let mut tries = 0;
        let mut authorized = false;
        let (claimed, lease) = loop {
            let record = self.inner.books.record(run_id).await?;
            let state = self.inner.books.read(&record)?;
            // A sub-agent's run is decided on through the run it works for (its
            // `authorize`, its inbox, the calls it waits on).
            if let (Some(parent), false) = (&state.parent, via_parent) {
                return Err(refuse(
                    format!(
                        "the run is a sub-agent's run: give the decision to the run it works for, {}",
                        parent.run
                    ),
                    false,
                ));
            }
            // The decisions a parent waits on follow its sub-agents' runs (the truth):
            // brought up to date first when they differ.
            if record.status == RunStatus::Suspended
                && tries < 100
                && self.resync(&record, &state).await?
            {
                tries += 1;
                continue;
            }
            let sid = state
                .suspension
                .as_ref()
                .map(|s| s.id.clone())
                .filter(|s| record.suspension.as_deref() == Some(s.as_str()));
            // Another decision on this suspension is being kept (claimed, not yet
            // saved): when it leaves the run waiting in it, these may still apply.
            let busy = record.status == RunStatus::Running
                && sid.is_some()
                && applicable(&state, &decisions).is_ok();
            if busy && tries < 100 {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
            if record.status != RunStatus::Suspended {
                let status = match record.status {
                    RunStatus::Running => "is running (decided already, or being resumed)",
                    RunStatus::Finished => "has finished",
                    RunStatus::Failed => "has failed (retry it)",
                    RunStatus::Cancelled => "was cancelled",
                    _ => "waits",
                };
                return Err(refuse(
                    format!("the run {status}: decision {named} applies to nothing"),
                    false,
                ));
            }
            let Some(sid) = sid else {
                return Err(refuse(
                    "the run waits in no suspension a decision can name (kept by an older version)"
                        .into(),
                    false,
                ));
            };
            // Refused before the claim when it cannot apply; checked again on what the
            // claim returns (another decision on the same suspension may come first).
            applicable(&state, &decisions).map_err(|(why, waiting)| refuse(why, waiting))?;
            // Asked once, on the run as its sealed state says, before anything is
            // claimed: a refusal leaves the run as it was.
            if !authorized {
                self.authorize_decisions(&state, &sid, &decisions).await?;
                authorized = true;
            }
            // Atomic: of two resumes of this suspension, one gets the run.
            if let Some(c) = self
                .inner
                .books
                .claim(run_id, Claim::Suspended(&sid))
                .await?
            {
                break c;
            }
            tries += 1;
            if tries > 100 {
                return Err(refuse(
                    format!("decision {named} was applied already (or the run moved on)"),
                    false,
                ));
            }
        };
        let waiting = |r| RunRecord {
            status: RunStatus::Suspended,
            ..r
        };
        let mut state = self
            .take_up(run_id, claimed.clone(), lease, waiting)
            .await?;
        if let Err((why, still)) = applicable(&state, &decisions) {
            self.inner.books.put_back(run_id, waiting(claimed)).await;
            return Err(refuse(why, still));
        }
        // A decision the sent ledger records as spent (a call it approved was sent)
        // never applies again, whatever the run's row says.
        if let Some((id, _)) = decisions.iter().find(|(id, _)| state.spent.contains(id)) {
            self.inner.books.put_back(run_id, waiting(claimed)).await;
            return Err(refuse(
                format!("decision {id} was spent: the call it approved was sent (the sent ledger records it)"),
                false,
            ));
        }
        // Decisions on calls a sub-agent's run waits on are recorded there (the calls
        // that waited on them no longer do).
        let mut decisions = decisions;
        if let Err(e) = self.forward_decisions(&mut state, &mut decisions).await {
            self.inner.books.put_back(run_id, waiting(claimed)).await;
            return Err(e);
        }
        // The run as it waits, to put back if an error stops it before anything ran.
        let kept = state.clone();
        let mut standing = Vec::new();
        for (id, decision) in decisions {
            match self.apply(&mut state, &id, decision) {
                Ok(granted) => standing.extend(granted),
                Err(e) => {
                    // Checked above, so not expected: the run waits as it was.
                    self.inner.books.put_back(run_id, waiting(claimed)).await;
                    return Err(e);
                }
            }
        }
        for allowance in &standing {
            if let Err(e) = self.keep_allowance(allowance).await {
                return self.fail(state, Some(kept), e).await.map(Some);
            }
        }
        if record || state.pending.iter().any(|c| c.at.awaits_person()) {
            // Other calls still wait (the same suspension, for the decisions left), or
            // the decisions are only recorded: once none is left the save marks the
            // run due for a worker.
            if let Err(e) = self.save(&mut state, RunStatus::Suspended).await {
                return self.fail(state, Some(kept), e).await.map(Some);
            }
            if record {
                return Ok(None);
            }
            let delegated = self.delegated_listing(&state).await;
            return suspended_outcome(&state, delegated).map(Some);
        }
        state.suspension = None;
        self.decided(state, kept).await.map(Some)
    }

    /// Applies one decision (checked by [`applicable`]) to the call it names; the
    /// standing allowance it grants, if any.
    fn apply(
        &self,
        state: &mut RunState,
        id: &str,
        decision: Decision,
    ) -> Result<Option<Allowance>> {
        let mut standing = None;
        let Some(i) = state
            .pending
            .iter()
            .position(|c| c.at.decision() == Some(id))
        else {
            return Err(Error::store(format!("decision {id} names no call")));
        };
        let kind = decision.kind_name();
        let Decision {
            principal,
            kind: what,
            allowed_tools,
            always,
        } = decision;
        let by = principal.display_name().to_owned();
        let tool = state.pending[i].name.clone();
        let at = std::mem::replace(&mut state.pending[i].at, CallState::New);
        let event = match at {
            CallState::AwaitingApproval(a) => {
                let mut binding = a.binding;
                let approved = !matches!(what, DecisionKind::Deny { .. });
                match what {
                    DecisionKind::Deny { message } => {
                        state.pending[i].at = CallState::Denied {
                            by: by.clone(),
                            message: message.map(|m| crate::error::clip(&m, 4000)),
                        };
                    }
                    DecisionKind::Approve | DecisionKind::Edit { .. } => {
                        if let DecisionKind::Edit { arguments } = what {
                            if let Some(b) = &mut binding {
                                b.arguments = mcp_runtime::digest::sha256_json(&arguments);
                            }
                            state.pending[i].arguments = arguments;
                        }
                        match (always, &binding) {
                            (Some(Always::Run), Some(b)) => {
                                state.always.push(Allowance::new(b, &by, None, None));
                            }
                            (Some(Always::Agent), Some(b)) => {
                                standing = Some(Allowance::new(
                                    b,
                                    &by,
                                    self.inner.policy.scope().clone(),
                                    state.options.tenant.clone(),
                                ));
                            }
                            _ => {}
                        }
                        state.pending[i].at = CallState::Approved {
                            person: Some(Box::new(PersonApproval {
                                by: by.clone(),
                                decision: Some(id.to_owned()),
                                binding: binding.clone(),
                                skill: a.skill,
                                grant_tools: allowed_tools,
                            })),
                        };
                    }
                    DecisionKind::Answer { .. } => {
                        return Err(Error::store(format!(
                            "decision {id} answers a call that waits for approval"
                        )))
                    }
                }
                Event::ApprovalDecided {
                    tool,
                    approved,
                    by,
                    at: now(),
                    binding,
                    decision: id.to_owned(),
                    kind: kind.to_owned(),
                    principal: Some(principal),
                }
            }
            CallState::AwaitingInput {
                input,
                mut answers,
                asker,
                ..
            } => {
                let given = match what {
                    DecisionKind::Answer { answers } => answers,
                    _ => {
                        // A denial declines every request, those callbacks answered
                        // too (the server's withheld state still goes back with it).
                        answers.answers.clear();
                        answers.withheld.clear();
                        answers.callbacks.clear();
                        Vec::new()
                    }
                };
                let mut actions = Vec::new();
                for key in input.keys() {
                    if answers.has(key) {
                        continue; // a callback answered it
                    }
                    let answer = given
                        .iter()
                        .find(|(k, _)| k == key)
                        .map(|(_, a)| a.clone())
                        .unwrap_or(InputResponse::Decline);
                    actions.push(answer.action().to_owned());
                    // Its secret fields stay in this agent's memory.
                    self.keep_person_answer(&state.id, &input, key, &answer, &mut answers)?;
                }
                state.pending[i].at = CallState::Answered {
                    input,
                    answers,
                    asker,
                };
                Event::InputAnswered {
                    tool,
                    actions,
                    by,
                    at: now(),
                    principal: Some(principal),
                }
            }
            other => {
                state.pending[i].at = other;
                return Err(Error::store(format!(
                    "decision {id} names a call that waits for nobody"
                )));
            }
        };
        self.event(state, event);
        // The save that keeps the decision records it in the sent ledger: a copy of
        // the run from before it (that would take the decision again) is refused.
        state.ledger.push(LedgerEntry::new(
            LedgerKind::Decided,
            format!("{id}@{}", state.seq + 1),
            Some(id.to_owned()),
            0,
        ));
        Ok(standing)
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
    /// store — once the run's lease has ended (see [`AgentBuilder::lease`](crate::AgentBuilder::lease)), and goes
    /// on from what was last kept: a decision kept is applied, finished calls do not
    /// run again, and a call that had been sent without its result being kept is not
    /// sent again — the model reads that its outcome is unknown
    /// ([`Event::OutcomeUnknown`]) — unless the tool says a repeat is harmless. A run
    /// that is not running on an ended lease (it waits, has ended, is held by a live
    /// process, or is unknown) is refused with an error for which `is_not_suspended()`
    /// is true.
    pub async fn recover(&self, run_id: &str) -> Result<Outcome> {
        self.recover_as(run_id, false).await
    }

    /// [`recover`](Self::recover); a sub-agent's run only when `child` (its parent's
    /// loop takes it up).
    pub(super) async fn recover_as(&self, run_id: &str, child: bool) -> Result<Outcome> {
        let Some((claimed, lease)) = self
            .inner
            .books
            .claim(run_id, Claim::Stale(now_ms()))
            .await?
        else {
            return Err(Error::not_suspended(format!(
                "run {run_id} is not running on an ended lease (it waits, has ended, is held by a live process, or is unknown)"
            )));
        };
        self.recover_claimed_as(run_id, claimed, lease, child).await
    }

    /// [`recover`](Self::recover) of a run this process claimed (under `lease`).
    pub(super) async fn recover_claimed(
        &self,
        run_id: &str,
        claimed: RunRecord,
        lease: Lease,
    ) -> Result<Outcome> {
        self.recover_claimed_as(run_id, claimed, lease, false).await
    }

    async fn recover_claimed_as(
        &self,
        run_id: &str,
        claimed: RunRecord,
        lease: Lease,
        child: bool,
    ) -> Result<Outcome> {
        // A sub-agent's run is recovered only by its parent's loop (this agent may
        // not be the sub-agent): put back, its lease ended a little later.
        if !child
            && self
                .inner
                .books
                .read(&claimed)
                .is_ok_and(|s| s.parent.is_some())
        {
            let mut back = claimed;
            if let Some(l) = &mut back.lease {
                l.until = now_ms().saturating_add(CHILD_BACK_OFF_MS);
            }
            self.inner.books.put_back(run_id, back).await;
            return Err(Error::not_suspended(format!(
                "run {run_id} is a sub-agent's run: the loop of the run it works for recovers it"
            )));
        }
        // Left recoverable (running on an ended lease) when this agent cannot read it
        // or may not apply its policy.
        let ended = |r: RunRecord| RunRecord {
            lease: r.lease.map(|l| Lease { until: 0, ..l }),
            ..r
        };
        let mut state = self.take_up(run_id, claimed, lease, ended).await?;
        // Died between a claim and keeping what the claim was for: the suspension it
        // was claimed from no longer applies (its decisions are spent), and the calls
        // that waited in it wait again under new decision ids.
        state.suspension = None;
        for call in &mut state.pending {
            match &mut call.at {
                CallState::AwaitingApproval(a) => a.decision = random_id()?,
                CallState::AwaitingInput { decision, .. } => *decision = random_id()?,
                _ => {}
            }
        }
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
            let page = self.inner.books.store().list(&filter).await?;
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
        // A sub-agent's run that failed: its parent's call took the error.
        if let Some(record) = self.inner.books.store().load(run_id).await? {
            if let Some(parent) = self.inner.books.read(&record)?.parent {
                return Err(Error::not_suspended(format!(
                    "run {run_id} is a sub-agent's run: its failure was the result of a call of run {}",
                    parent.run
                )));
            }
        }
        let Some((claimed, lease)) = self.inner.books.claim(run_id, Claim::Failed).await? else {
            return Err(Error::not_suspended(format!(
                "run {run_id} has not failed (it waits, runs, has finished, or is unknown)"
            )));
        };
        self.retry_claimed(run_id, claimed, lease, false).await
    }

    /// [`retry`](Self::retry) of a run this process claimed (under `lease`).
    pub(super) async fn retry_claimed(
        &self,
        run_id: &str,
        claimed: RunRecord,
        lease: Lease,
        by_worker: bool,
    ) -> Result<Outcome> {
        // Left failed, for a person to look at (unreadable) or for an agent whose
        // policy fits.
        let failed = |r| RunRecord {
            status: RunStatus::Failed,
            ..r
        };
        let mut state = self.take_up(run_id, claimed, lease, failed).await?;
        state.failure = None;
        state.retry_at = None;
        if by_worker {
            state.retries = state.retries.saturating_add(1);
        } else {
            // A person's retry: workers may retry it again as many times.
            state.retries = 0;
        }
        self.event(&mut state, Event::RunRetried);
        self.drive(state, None).await
    }

    /// The state of a run this process just claimed (under `lease`), checked and under
    /// the policy it goes on under. When it cannot be taken up — unreadable, changed in
    /// the store, or a policy this agent may not apply — the run is put back as `back`
    /// makes it, and the error returned.
    pub(super) async fn take_up(
        &self,
        run_id: &str,
        claimed: RunRecord,
        lease: Lease,
        back: impl FnOnce(RunRecord) -> RunRecord,
    ) -> Result<RunState> {
        let prepared = self.inner.books.read(&claimed).and_then(|mut s| {
            self.inner.policy.resume(&mut s)?;
            Ok(s)
        });
        let prepared = match prepared {
            Ok(mut state) => match self.check_ledger(&mut state).await {
                Ok(()) => Ok(state),
                Err(e) => Err((e, std::mem::take(&mut state.events))),
            },
            Err(e) => Err((e, Vec::new())),
        };
        match prepared {
            Ok(mut state) => {
                state.lease = Some(lease);
                state.persisted = true;
                Ok(state)
            }
            Err((e, events)) => {
                // Put back as it was, with what was found (a rollback) in its log.
                let mut back = back(claimed);
                for event in events {
                    if let Ok(v) = serde_json::to_value(&event) {
                        back.events.push(v);
                    }
                }
                self.inner.books.put_back(run_id, back).await;
                Err(e)
            }
        }
    }
}

/// Whether every decision applies to what the run waits for now: each names a call
/// of its suspension that waits for a person, once, with a decision of the right
/// kind, before the suspension expired. Otherwise why not, and whether the run still
/// waits.
fn applicable(
    state: &RunState,
    decisions: &[(String, Decision)],
) -> std::result::Result<(), (String, bool)> {
    let Some(s) = &state.suspension else {
        return Err(("the run waits in no suspension".into(), false));
    };
    if let Some(at) = s.expires_at.filter(|at| now_ms() >= *at) {
        return Err((
            format!(
                "the suspension expired ({at} ms since the epoch) before the decision came; it no longer applies"
            ),
            false,
        ));
    }
    for (n, (id, d)) in decisions.iter().enumerate() {
        if decisions[..n].iter().any(|(other, _)| other == id) {
            return Err((format!("decision {id} is given twice"), true));
        }
        let Some(call) = state.pending.iter().find(|c| c.at.names(id)) else {
            return Err((
                format!(
                    "decision {id} is not one the run waits for (it was applied already, or belongs to an earlier suspension)"
                ),
                true,
            ));
        };
        match (&call.at, &d.kind) {
            (CallState::AwaitingApproval(_), DecisionKind::Answer { .. }) => {
                return Err((
                    format!("decision {id} waits for an approval or a denial, not for answers"),
                    true,
                ))
            }
            (CallState::AwaitingApproval(a), DecisionKind::Edit { .. }) if a.skill.is_some() => {
                return Err((
                    format!("decision {id} is a skill load: approve or deny it (it has no arguments to edit)"),
                    true,
                ))
            }
            (
                CallState::AwaitingInput { .. },
                DecisionKind::Approve | DecisionKind::Edit { .. },
            ) => {
                return Err((
                    format!("decision {id} waits for input: resume it with Decision::answer (or deny, which declines)"),
                    true,
                ))
            }
            _ => {}
        }
    }
    Ok(())
}
