//! Workers: a loop that claims the runs due for work from the store — ready (every
//! decision recorded), held by a process that died (an ended lease), waiting in a
//! suspension that expired — and continues them, a bounded number at once.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::error::{Error, Result};
use crate::store::{Lease, RunRecord, RunStatus};

use super::bookkeeping::set_due;
use super::clock::now_ms;
use super::decision::Outcome;
use super::handle::Agent;
use super::state::RunState;

/// How a [`Worker`] works: how many runs at once, how often it looks for work, how
/// long a shutdown waits for the runs in flight.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// The most runs it continues at once (at least 1; 4 by default).
    pub concurrency: usize,
    /// How long it waits, when it found nothing to do, before it looks again (1 s by
    /// default; at least 10 ms).
    pub poll: Duration,
    /// How long a shutdown waits for the runs in flight to end (30 s by default);
    /// those still running then are handed back (their leases end at once, and any
    /// worker recovers them).
    pub grace: Duration,
    /// How long a run this worker could not take up (unreadable, or under a policy
    /// this agent may not apply) is left alone before a worker tries it again (60 s by
    /// default).
    pub back_off: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            concurrency: 4,
            poll: Duration::from_secs(1),
            grace: Duration::from_secs(30),
            back_off: Duration::from_secs(60),
        }
    }
}

impl WorkerOptions {
    /// The defaults.
    pub fn new() -> Self {
        WorkerOptions::default()
    }
    /// At most `n` runs at once.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }
    /// Looks for work every `poll` when idle.
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }
    /// A shutdown waits `grace` for the runs in flight.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
    /// A run that could not be taken up is tried again after `back_off`.
    pub fn back_off(mut self, back_off: Duration) -> Self {
        self.back_off = back_off;
        self
    }
}

/// A worker of an agent ([`Agent::worker`]): [`run`](Worker::run) it on as many
/// processes and machines as you like, all with the same store. Each due run is
/// claimed by one of them atomically (PostgreSQL: `FOR UPDATE SKIP LOCKED`), held by a
/// lease renewed while it runs, and continued as [`Agent::resume`], [`Agent::recover`]
/// and [`Agent::expire_due`] would: no run is continued by two workers, and a run a
/// dead worker held is recovered (at most once for each call sent) once its lease
/// ends.
#[derive(Debug)]
pub struct Worker {
    agent: Agent,
    options: WorkerOptions,
}

/// What a worker holds: each run in flight, by its task, with its lease.
type Held = HashMap<tokio::task::Id, (String, Lease)>;

impl Agent {
    /// A worker continuing this agent's due runs (see [`Worker`]).
    pub fn worker(&self, options: WorkerOptions) -> Worker {
        Worker {
            agent: self.clone(),
            options,
        }
    }

    /// Continues a run claimed as due (its `status` the one it had before the claim).
    /// The store's `due_at` is only a hint: a waiting or failed run is continued only
    /// when its sealed state says it is due (ready, expired, or its retry time come);
    /// otherwise it is put back, due when the state says.
    pub(super) async fn continue_due(
        &self,
        mut claimed: RunRecord,
        lease: Lease,
    ) -> Result<Outcome> {
        let run_id = claimed.id.clone();
        let state = match self.inner.books.read(&claimed) {
            Ok(state) => state,
            // Held by a process that stopped: recovery puts it back as it finds it.
            Err(_) if claimed.status == RunStatus::Running => {
                return self.recover_claimed(&run_id, claimed, lease).await;
            }
            Err(e) => {
                self.inner.books.put_back(&run_id, claimed).await;
                return Err(e);
            }
        };
        // A sub-agent's run is its parent loop's to take up: never due for a worker
        // (one left running goes to recovery, which leaves it to that loop too).
        if state.parent.is_some() && claimed.status == RunStatus::Running {
            return self.recover_claimed(&run_id, claimed, lease).await;
        }
        if state.parent.is_some() {
            let mut back = claimed;
            set_due(&mut back.state, None);
            self.inner.books.put_back(&run_id, back).await;
            return Err(Error::not_suspended(format!(
                "run {run_id} is a sub-agent's run: the loop of the run it works for takes it up"
            )));
        }
        let ready = !state.pending.iter().any(|c| c.at.awaits_person());
        if claimed.status == RunStatus::Running {
            // Its holder stopped. When it kept nothing since its claim, the state is
            // still the one saved failed, or waiting with every decision recorded or
            // its time run out: what the claim was for is still to do (nothing of it
            // was sent), and is done as for a claim of the run as it was.
            let expired = state
                .suspension
                .as_ref()
                .and_then(|s| s.expires_at)
                .is_some_and(|at| at <= now_ms());
            claimed.status = match state.saved_as {
                Some(RunStatus::Failed) => RunStatus::Failed,
                Some(RunStatus::Suspended) if ready || expired => RunStatus::Suspended,
                _ => return self.recover_claimed(&run_id, claimed, lease).await,
            };
        }
        let due = match claimed.status {
            RunStatus::Failed => state.retry_at,
            RunStatus::Suspended if ready => Some(0),
            RunStatus::Suspended => state.suspension.as_ref().and_then(|s| s.expires_at),
            _ => None,
        };
        if due.is_none_or(|at| at > now_ms()) {
            let mut back = claimed;
            set_due(&mut back.state, due);
            self.inner.books.put_back(&run_id, back).await;
            return Err(Error::not_suspended(format!(
                "run {run_id} is not due for a worker yet"
            )));
        }
        match claimed.status {
            RunStatus::Failed => self.retry_claimed(&run_id, claimed, lease, true).await,
            _ if !ready => self.expire_claimed(&run_id, claimed, lease).await,
            _ => {
                let waiting = |r| RunRecord {
                    status: RunStatus::Suspended,
                    ..r
                };
                let mut state = self.take_up(&run_id, claimed, lease, waiting).await?;
                state.suspension = None;
                self.go_on(state).await
            }
        }
    }

    /// Keeps a run whose decisions were all recorded as running, then goes on. An
    /// error fails it (a person may retry it): put back as ready, it would be taken up
    /// again at once.
    pub(super) async fn go_on(&self, mut state: RunState) -> Result<Outcome> {
        if let Err(e) = self.save(&mut state, RunStatus::Running).await {
            return self.fail(state, None, e).await;
        }
        self.drive(state, None).await
    }

    /// Whether this agent can take up a claimed run (it reads it, and may apply its
    /// policy); when it cannot, the run is put back as it was, due again after
    /// `back_off`, and why is returned.
    async fn can_take_up(&self, claimed: &RunRecord, back_off: Duration) -> Option<Error> {
        let (e, events) = match self.inner.books.read(claimed) {
            Err(e) => (e, Vec::new()),
            Ok(mut state) => match self.inner.policy.resume(&mut state) {
                Err(e) => (e, Vec::new()),
                Ok(()) => match self.check_ledger(&mut state).await {
                    Ok(()) => return None,
                    Err(e) => (e, std::mem::take(&mut state.events)),
                },
            },
        };
        let later = now_ms().saturating_add(back_off.as_millis().min(u64::MAX as u128) as u64);
        let mut back = claimed.clone();
        for event in events {
            if let Ok(v) = serde_json::to_value(&event) {
                back.events.push(v);
            }
        }
        match back.status {
            // A running copy put back from before its ledger is parked: held under a
            // lease that never ends, recovered by no one (taken up again after every
            // back-off, it would only log its refusal again and again); a person
            // deletes it, or puts the newest copy back.
            RunStatus::Running if e.is_rolled_back() => {
                if let Some(l) = &mut back.lease {
                    l.until = u64::MAX;
                }
            }
            // Recovered once its lease ends (the worker's, ended later).
            RunStatus::Running => {
                if let Some(l) = &mut back.lease {
                    l.until = later;
                }
            }
            // A copy put back from before its ledger is for a person (cancel or delete
            // it): never due again.
            _ if e.is_rolled_back() => set_due(&mut back.state, None),
            _ => set_due(&mut back.state, Some(later)),
        }
        self.inner.books.put_back(&claimed.id, back).await;
        Some(e)
    }
}

impl Worker {
    /// Claims and continues due runs until `shutdown` completes; then claims no more,
    /// waits up to the grace period for the runs in flight, and hands the rest back
    /// (their leases end at once: any worker recovers them). Errors of single runs are
    /// logged (and in the runs' events); a store that cannot be reached is tried
    /// again at the next poll.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<()> {
        let concurrency = self.options.concurrency.max(1);
        let poll = self.options.poll.max(Duration::from_millis(10));
        let mut shutdown = std::pin::pin!(shutdown);
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut held: Held = HashMap::new();
        let mut due = self.agent.inner.books.due_signal();
        loop {
            // Marked seen before claiming: a run made due after the claim wakes the wait.
            due.borrow_and_update();
            let free = concurrency.saturating_sub(tasks.len());
            let mut full = false;
            if free > 0 {
                match self.claim(free).await {
                    Ok((runs, lease)) => {
                        full = runs.len() == free;
                        for run in runs {
                            self.spawn(&mut tasks, &mut held, run, lease.clone()).await;
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "a worker could not claim due runs"),
                }
            }
            // A full batch: there may be more to claim at once. Otherwise until the
            // store or this agent tells of a run due, or the poll.
            let wait = if full { Duration::ZERO } else { poll };
            tokio::select! {
                _ = &mut shutdown => break,
                Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    self.ended(done, &mut held).await;
                }
                _ = due.changed() => {}
                _ = self.wait_due(wait) => {}
            }
        }
        // Drain: the runs in flight may end within the grace period.
        let grace = tokio::time::sleep(self.options.grace);
        tokio::pin!(grace);
        while !tasks.is_empty() {
            tokio::select! {
                _ = &mut grace => break,
                Some(done) = tasks.join_next_with_id() => self.ended(done, &mut held).await,
            }
        }
        tasks.abort_all();
        while let Some(done) = tasks.join_next_with_id().await {
            self.ended(done, &mut held).await;
        }
        Ok(())
    }

    /// Waits up to `wait` for the store to tell of a run due (a store that cannot
    /// tell, or fails to, is waited out).
    async fn wait_due(&self, wait: Duration) {
        if wait.is_zero() {
            return;
        }
        let until = tokio::time::Instant::now() + wait;
        let store = self.agent.inner.books.store();
        if let Ok(Err(e)) = tokio::time::timeout_at(until, store.wait_due(wait)).await {
            tracing::debug!(error = %e, "a worker cannot be told of due runs; it polls");
            tokio::time::sleep_until(until).await;
        }
    }

    /// Claims up to `n` due runs, under one new lease of this worker.
    async fn claim(&self, n: usize) -> Result<(Vec<RunRecord>, Lease)> {
        let books = &self.agent.inner.books;
        let lease = books.new_lease()?;
        let runs = books.store().claim_due(now_ms(), &lease, n).await?;
        Ok((runs, lease))
    }

    /// Continues `run` in a task of its own (or puts it back when this agent cannot
    /// take it up).
    async fn spawn(&self, tasks: &mut JoinSet<()>, held: &mut Held, run: RunRecord, lease: Lease) {
        if let Some(e) = self.agent.can_take_up(&run, self.options.back_off).await {
            tracing::warn!(run = %run.id, error = %e, "a worker cannot take up this run; it is left for later");
            return;
        }
        let agent = self.agent.clone();
        let id = run.id.clone();
        let task = tasks.spawn({
            let (id, lease) = (id.clone(), lease.clone());
            async move {
                match agent.continue_due(run, lease).await {
                    Ok(_) => tracing::debug!(run = %id, "a worker continued the run"),
                    Err(e) => tracing::warn!(run = %id, error = %e, "a worker's run stopped with an error"),
                }
            }
        });
        held.insert(task.id(), (id, lease));
    }

    /// A run's task ended: when it did not end by itself (it was aborted at shutdown,
    /// or panicked), the run is handed back — its lease ends now (after `back_off`,
    /// when it panicked).
    async fn ended(
        &self,
        done: std::result::Result<(tokio::task::Id, ()), tokio::task::JoinError>,
        held: &mut Held,
    ) {
        let (id, finished, panicked) = match done {
            Ok((id, ())) => (id, true, false),
            Err(e) => (e.id(), false, e.is_panic()),
        };
        let Some((run_id, lease)) = held.remove(&id) else {
            return;
        };
        if finished {
            return;
        }
        // Aborted at shutdown: any worker may take it up at once. Panicked (a callback
        // of the application, a model or host): not before `back_off`, so a run that
        // panics every time is not taken up again and again across the fleet.
        let until = if panicked {
            now_ms().saturating_add(
                u64::try_from(self.options.back_off.as_millis()).unwrap_or(u64::MAX),
            )
        } else {
            0
        };
        let ended = Lease { until, ..lease };
        match self.agent.inner.books.store().renew(&run_id, &ended).await {
            Ok(_) => tracing::info!(run = %run_id, "a worker handed the run back"),
            Err(e) => {
                tracing::warn!(run = %run_id, error = %e, "a worker could not hand the run back; it is recovered when its lease ends")
            }
        }
    }
}
