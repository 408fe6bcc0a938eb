//! The run bookkeeping: where runs are kept, how they are sealed, held (leases) and
//! how long their suspensions wait — saving, loading, claiming and holding a run.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::store::{Claim, Durability, Lease, LedgerKind, RunRecord, RunStatus, RunStore};

use super::clock::now_ms;
use super::decision::Expiry;
use super::events::Event;
use super::ids::random_id;
use super::integrity::{IntegrityKey, Sealed, INTEGRITY_FIELD};
use super::state::{RunState, OLDEST_STATE_VERSION, STATE_VERSION};
use super::transcript;

/// When a worker should take up a run saved as `status`: a waiting run whose calls
/// are all decided (recorded, not yet run) at once; one still waiting when its
/// suspension expires; a failed one when its retry is due; any other never (a run held by a dead process is found by its
/// lease).
fn due_at(state: &RunState, status: RunStatus) -> Option<u64> {
    // A sub-agent's run is taken up only by its parent's loop, never by a worker.
    if state.parent.is_some() {
        return None;
    }
    match status {
        RunStatus::Suspended if !state.pending.iter().any(|c| c.at.awaits_person()) => {
            Some(now_ms())
        }
        RunStatus::Suspended => state.suspension.as_ref().and_then(|s| s.expires_at),
        RunStatus::Failed => state.retry_at,
        _ => None,
    }
}

/// Sets (or, with `None`, removes) the `due_at` hint of a stored state (see
/// [`RunRecord::due_at`]).
pub(super) fn set_due(state: &mut Value, due: Option<u64>) {
    if let Value::Object(m) = state {
        match due {
            Some(at) => {
                m.insert(DUE_FIELD.into(), Value::from(at));
            }
            None => {
                m.remove(DUE_FIELD);
            }
        }
    }
}

/// The field of a stored state that holds its `due_at` hint.
const DUE_FIELD: &str = "due_at";

/// Where and how an agent keeps its runs.
pub(super) struct Bookkeeping {
    store: Arc<dyn RunStore>,
    /// MACs stored runs, when set.
    integrity: Option<IntegrityKey>,
    /// How long a hold on a run lasts unless renewed.
    lease: Duration,
    /// How long a suspension waits for a decision.
    expiry: Option<Duration>,
    /// What an expired suspension does.
    on_expiry: Expiry,
    /// For each run watched in this process, bumped after each of its saves: what
    /// wakes its watchers at once, whatever the store (and only its watchers).
    saved: std::sync::Mutex<HashMap<String, tokio::sync::watch::Sender<u64>>>,
    /// Bumped after each save of this agent that left a run due now: what wakes its
    /// workers at once, whatever the store.
    due: tokio::sync::watch::Sender<u64>,
}

/// How many runs' wake-ups are kept before those nobody watches any more are dropped.
const SWEEP_AT: usize = 256;

impl Bookkeeping {
    /// Runs kept in `store`, sealed with `integrity` (when set), held for `lease` at
    /// a time; a suspension waits `expiry` (for ever without), then does `on_expiry`.
    pub(super) fn new(
        store: Arc<dyn RunStore>,
        integrity: Option<IntegrityKey>,
        lease: Duration,
        expiry: Option<Duration>,
        on_expiry: Expiry,
    ) -> Bookkeeping {
        Bookkeeping {
            store,
            integrity,
            lease,
            expiry,
            on_expiry,
            saved: std::sync::Mutex::new(HashMap::new()),
            due: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Changes after every save of `run` by this agent (what its watchers wait on,
    /// with the store's own wait).
    pub(super) fn saves(&self, run: &str) -> tokio::sync::watch::Receiver<u64> {
        let mut saved = crate::store::lock(&self.saved);
        if saved.len() >= SWEEP_AT && !saved.contains_key(run) {
            saved.retain(|_, tell| tell.receiver_count() > 0);
        }
        saved
            .entry(run.to_owned())
            .or_insert_with(|| tokio::sync::watch::Sender::new(0))
            .subscribe()
    }

    /// Changes after each save of this agent that left a run due now.
    pub(super) fn due_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.due.subscribe()
    }

    /// Wakes the watchers of `run` in this process.
    fn tell_saved(&self, run: &str) {
        let mut saved = crate::store::lock(&self.saved);
        if let Some(tell) = saved.get(run) {
            if tell.receiver_count() == 0 {
                saved.remove(run);
            } else {
                tell.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    /// The store.
    pub(super) fn store(&self) -> &dyn RunStore {
        &*self.store
    }

    /// The integrity key, when stored things are sealed.
    pub(super) fn integrity(&self) -> Option<&IntegrityKey> {
        self.integrity.as_ref()
    }

    /// What an expired suspension does.
    pub(super) fn on_expiry(&self) -> Expiry {
        self.on_expiry
    }

    /// When a suspension made now expires (milliseconds since the epoch), if ever.
    pub(super) fn suspension_expires_at(&self) -> Option<u64> {
        self.expiry
            .map(|d| now_ms().saturating_add(d.as_millis().min(u64::MAX as u128) as u64))
    }

    /// Keeps the run, as durably as `durability` says.
    pub(super) async fn save(
        &self,
        state: &mut RunState,
        status: RunStatus,
        durability: Durability,
    ) -> Result<()> {
        // The MAC covers the save counter and the status saved with: an older copy
        // put back is found by the ledger, a row mixed from two saves by its parts.
        state.seq += 1;
        state.saved_as = Some(status);
        // Only the messages since the last flushed save are written (their large
        // values once, apart); the state carries where they are and the digest of them
        // all.
        let mut results: Vec<Value> = Vec::with_capacity(state.results.len());
        for r in &state.results {
            results.push(
                serde_json::to_value(r)
                    .map_err(|e| Error::store(format!("cannot encode the run: {e}")))?,
            );
        }
        let appended = transcript::append(&state.log, &state.messages, &mut results)?;
        state.transcript = appended.mark.clone();
        // The results are in the state as `results` (their large values referred to),
        // not encoded a second time.
        let kept_results = std::mem::take(&mut state.results);
        let encoded = serde_json::to_value(&*state);
        state.results = kept_results;
        let mut state_json =
            encoded.map_err(|e| Error::store(format!("cannot encode the run: {e}")))?;
        if let Value::Object(m) = &mut state_json {
            m.insert("results".into(), Value::Array(results));
        }
        if let Some(key) = &self.integrity {
            key.seal(Sealed::Run, &state.id, &mut state_json)?;
        }
        // Beside the sealed state, not under its MAC: a scheduling hint for workers
        // (what a worker then does is decided by the sealed state alone).
        set_due(&mut state_json, due_at(state, status));
        let mut ledger = std::mem::take(&mut state.ledger);
        for entry in &mut ledger {
            entry.seq = state.seq;
            entry.mac = None;
            if let Some(key) = &self.integrity {
                let value = serde_json::to_value(&*entry)
                    .map_err(|e| Error::store(format!("cannot encode a ledger entry: {e}")))?;
                entry.mac = Some(key.tag(Sealed::Ledger, &state.id, &value)?);
            }
        }
        if let Some(lease) = &mut state.lease {
            lease.until = self.lease_end();
        }
        let suspension = match status {
            RunStatus::Suspended => state.suspension.as_ref().map(|s| s.id.clone()),
            _ => None,
        };
        let mut events = Vec::with_capacity(state.events.len());
        for e in &state.events {
            events.push(
                serde_json::to_value(e)
                    .map_err(|e| Error::store(format!("cannot encode an event: {e}")))?,
            );
        }
        let record = RunRecord {
            id: state.id.clone(),
            status,
            suspension,
            state: state_json,
            lease: state.lease.clone(),
            transcript: appended.transcript,
            blobs: appended.blobs,
            events,
            durability,
            ledger,
            first: !state.persisted,
        };
        // Not kept (an error), or kept only as soon as the store can (deferred): the
        // next save writes these entries and blobs again (`transcript::Kept`).
        self.store.save(&record).await?;
        if durability == Durability::Flushed {
            state.log = transcript::Kept {
                mark: appended.mark,
                messages: appended.messages,
                blobs: appended.held,
                rewritten: false,
            };
        }
        self.tell_saved(&record.id);
        if matches!(status, RunStatus::Suspended | RunStatus::Failed)
            && record.due_at().is_some_and(|at| at <= now_ms())
        {
            self.due.send_modify(|n| *n = n.wrapping_add(1));
        }
        for entry in record.ledger {
            if entry.kind == LedgerKind::Sent {
                state.sent.insert(entry.item);
                state.spent.extend(entry.decision);
            }
        }
        state.events.clear();
        state.persisted = true;
        Ok(())
    }

    /// A new hold on a run, for this process: a fresh owner token, ending one lease
    /// period from now.
    pub(super) fn new_lease(&self) -> Result<Lease> {
        Ok(Lease {
            owner: random_id()?,
            until: self.lease_end(),
        })
    }

    /// When a lease taken or renewed now ends (milliseconds since the epoch).
    pub(super) fn lease_end(&self) -> u64 {
        now_ms().saturating_add(self.lease.as_millis().min(u64::MAX as u128) as u64)
    }

    /// Claims `run_id` as `claim` says, under a new lease of this process.
    pub(super) async fn claim(
        &self,
        run_id: &str,
        claim: Claim<'_>,
    ) -> Result<Option<(RunRecord, Lease)>> {
        let lease = self.new_lease()?;
        Ok(self
            .store
            .claim(run_id, claim, &lease)
            .await?
            .map(|r| (r, lease)))
    }

    /// Renews this process's lease on the run while the run is worked on; returns
    /// (with the error to stop with) only when another process holds the run now.
    pub(super) async fn hold(&self, run_id: &str, lease: Option<Lease>) -> Error {
        let Some(mut lease) = lease else {
            return std::future::pending().await;
        };
        let every = (self.lease / 3).max(std::time::Duration::from_millis(10));
        loop {
            tokio::time::sleep(every).await;
            lease.until = self.lease_end();
            match self.store.renew(run_id, &lease).await {
                Ok(true) => {}
                Ok(false) => return crate::store::lease_lost(run_id),
                // A store that is down a moment: the next renewal tries again, and a
                // save that cannot be made stops the run.
                Err(e) => {
                    tracing::warn!(run = %run_id, error = %e, "the run's lease could not be renewed")
                }
            }
        }
    }

    /// The events of a run, from its log in the store, in the order they happened
    /// (every save appends the events since the last; none is ever rewritten).
    pub(super) async fn events(&self, run_id: &str) -> Result<Vec<Event>> {
        let kept = self.store.events(run_id).await?;
        kept.into_iter()
            .map(|e| {
                serde_json::from_value(e).map_err(|e| {
                    Error::store(format!("an event of run {run_id} cannot be read: {e}"))
                })
            })
            .collect()
    }

    /// The stored run `run_id`, checked and parsed (see [`Self::read`]).
    pub(super) async fn load(&self, run_id: &str) -> Result<RunState> {
        self.read(&self.record(run_id).await?)
    }

    /// The row kept for `run_id`; an unknown run is `is_not_suspended()`.
    pub(super) async fn record(&self, run_id: &str) -> Result<RunRecord> {
        self.store.load(run_id).await?.ok_or_else(|| {
            Error::not_suspended(format!("run {run_id} is unknown to the run store"))
        })
    }

    /// A stored run's state, checked (its integrity, with a key; that its row's
    /// status and suspension are those it was saved with) and parsed.
    pub(super) fn read(&self, record: &RunRecord) -> Result<RunState> {
        let run_id = record.id.as_str();
        let mut state = record.state.clone();
        set_due(&mut state, None);
        if let Some(key) = &self.integrity {
            key.open(Sealed::Run, run_id, &mut state)?;
        } else if let Value::Object(m) = &mut state {
            m.remove(INTEGRITY_FIELD);
        }
        let version = state.get("version").and_then(Value::as_u64).unwrap_or(1);
        if !(u64::from(OLDEST_STATE_VERSION)..=u64::from(STATE_VERSION)).contains(&version) {
            return Err(Error::store(format!(
                "run {run_id} is kept in format {version}, and this version of mcp-agent reads formats {OLDEST_STATE_VERSION} to {STATE_VERSION}: finish or cancel it with the version that kept it"
            )));
        }
        let blobs: HashMap<&str, &str> = record
            .blobs
            .iter()
            .map(|b| (b.digest.as_str(), b.data.as_str()))
            .collect();
        let mut checked = HashSet::new();
        if let Some(Value::Array(results)) = state.get_mut("results") {
            transcript::intern_blocks(run_id, results, &blobs, &mut checked)?;
        }
        let mut state: RunState = serde_json::from_value(state)
            .map_err(|e| Error::store(format!("run {run_id} cannot be read: {e}")))?;
        if version == u64::from(STATE_VERSION) {
            // The transcript is the store's log, checked against the sealed digest.
            let (messages, kept) =
                transcript::read(record, &state.transcript, &blobs, &mut checked)?;
            state.messages = messages;
            state.log = kept;
        } else {
            // Version 3: the transcript is in the state; the next save moves it to
            // the log, from its first entry.
            state.transcript = Default::default();
        }
        state.version = STATE_VERSION;
        if state.id != run_id {
            return Err(Error::store(format!(
                "the run kept under {run_id} says it is run {}: it is not used",
                state.id
            )));
        }
        // The row's parts come from one save: its status is the one saved (or
        // `running`, which a claim makes it), a waiting row's suspension the state's.
        let mixed = match state.saved_as {
            None => true,
            Some(saved) => {
                (record.status != saved && record.status != RunStatus::Running)
                    || (record.status == RunStatus::Suspended
                        && record.suspension.as_deref()
                            != state.suspension.as_ref().map(|s| s.id.as_str()))
            }
        };
        if mixed {
            return Err(Error::store(format!(
                "run {run_id}: its row's status or suspension is not the one its state was saved with (the row was put together from different saves, or changed outside the agent); it is not used"
            )));
        }
        state.persisted = true;
        Ok(state)
    }

    /// Reads the run's sent ledger into `state` (what was sent, which decisions are
    /// spent), each entry checked with the integrity key; the newest save it records
    /// (a run whose save counter is behind it is a copy put back from before).
    pub(super) async fn read_ledger(&self, state: &mut RunState) -> Result<u64> {
        let entries = self.store.ledger(&state.id).await?;
        let mut newest = 0;
        for mut entry in entries {
            if let Some(key) = &self.integrity {
                let tag = entry.mac.take().unwrap_or_default();
                let value = serde_json::to_value(&entry)
                    .map_err(|e| Error::store(format!("cannot encode a ledger entry: {e}")))?;
                if !key.verify(Sealed::Ledger, &state.id, &value, &tag)? {
                    return Err(Error::store(format!(
                        "a ledger entry of run {} failed its integrity check: it was changed outside the agent, or kept without (or with another) integrity key; the run is not used",
                        state.id
                    )));
                }
            }
            newest = newest.max(entry.seq);
            if entry.kind == LedgerKind::Sent {
                state.spent.extend(entry.decision);
                state.sent.insert(entry.item);
            }
        }
        Ok(newest)
    }

    /// Keeps `record` as it was before a claim took it (an error is logged: the run is
    /// then left running on its lease, for `Agent::recover`).
    pub(super) async fn put_back(&self, run_id: &str, mut record: RunRecord) {
        // The row alone: its transcript and blobs are in the store as they were.
        record.transcript.entries.clear();
        record.blobs.clear();
        if let Err(e) = self.store.save(&record).await {
            tracing::error!(run = %run_id, error = %e, "the run could not be put back");
        }
    }
}
