//! Runs kept in memory, for one process.

use std::collections::HashMap;
use std::sync::Mutex;

use mcp_runtime::BoxFuture;
use serde_json::Value;

use super::contract::{
    already_in_ledger, deleted, lease_lost, page_limit, unix_now, Blob, Claim, Durability, Lease,
    LedgerEntry, LedgerKind, RunFilter, RunPage, RunRecord, RunStatus, RunStore, Transcript,
    EVENTS_MAX_WAIT, MAX_ALLOWANCES, MAX_EVENTS, MAX_LEDGER,
};
use super::owner::Owner;
use crate::error::{Error, Result};
use mcp_runtime_core::lock;

/// A run as the memory store keeps it: the record (its transcript's bounds, no
/// entries), when it last changed, its events, its transcript log and its blobs.
type Kept = (RunRecord, u64, Vec<Value>, Log);

/// A run's sent ledger, and what it holds (kind and item) for a look-up in constant
/// time.
type Ledger = (
    Vec<LedgerEntry>,
    std::collections::HashSet<(LedgerKind, String)>,
);

/// A run's transcript log and blobs: entries numbered from `base` (those before it
/// forgotten).
#[derive(Debug, Default)]
struct Log {
    base: u64,
    entries: Vec<Value>,
    blobs: HashMap<String, String>,
}

impl Log {
    /// Appends what a save carries (entries replace those kept under their numbers;
    /// a new segment forgets those before it; blobs are kept once).
    fn append(&mut self, t: &Transcript, blobs: &[Blob]) {
        if t.starts_segment() || self.entries.is_empty() {
            self.base = t.first_entry();
            self.entries.clear();
        }
        if t.starts_segment() {
            self.blobs
                .retain(|d, _| blobs.iter().any(|b| b.digest == *d));
        }
        let at = t.first_entry().saturating_sub(self.base) as usize;
        self.entries.truncate(at);
        // A gap (entries the store never had) is kept as nulls: a load finds the
        // transcript does not read.
        self.entries.resize(at, Value::Null);
        self.entries.extend(t.entries.iter().cloned());
        for b in blobs {
            self.blobs
                .entry(b.digest.clone())
                .or_insert_with(|| b.data.clone());
        }
    }

    /// The record with its transcript `from..to` and every blob.
    fn full(&self, r: &RunRecord) -> RunRecord {
        let (from, to) = (r.transcript.from, r.transcript.to);
        let start = from.saturating_sub(self.base) as usize;
        let end = to.saturating_sub(self.base) as usize;
        let entries = self
            .entries
            .get(start.min(self.entries.len())..end.min(self.entries.len()))
            .unwrap_or_default()
            .to_vec();
        let mut out = r.clone();
        out.transcript = Transcript::new(from, to, entries);
        out.blobs = self
            .blobs
            .iter()
            .map(|(d, v)| Blob::new(d.clone(), v.clone()))
            .collect();
        out
    }
}

/// Runs kept in memory, for the life of the process. Bounded: at most
/// [`MemoryRunStore::DEFAULT_CAPACITY`] runs (or the capacity given); when full, the
/// run that ended longest ago makes room, and a new run is refused (a store error)
/// when every kept run still waits or runs.
#[derive(Debug)]
pub struct MemoryRunStore {
    runs: Mutex<HashMap<String, Kept>>,
    allowances: Mutex<std::collections::BTreeMap<String, Value>>,
    /// Each run's sent ledger (append-only; outlives the run).
    ledgers: Mutex<HashMap<String, Ledger>>,
    capacity: usize,
    /// Bumped by every save that appends events: what wakes the waiters.
    appended: tokio::sync::watch::Sender<u64>,
}

impl Default for MemoryRunStore {
    fn default() -> Self {
        MemoryRunStore::with_capacity(MemoryRunStore::DEFAULT_CAPACITY)
    }
}

impl MemoryRunStore {
    /// How many runs a default memory store keeps.
    pub const DEFAULT_CAPACITY: usize = 10_000;

    /// A store that keeps at most `capacity` runs (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        MemoryRunStore {
            runs: Mutex::new(HashMap::new()),
            allowances: Mutex::new(Default::default()),
            ledgers: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
            appended: tokio::sync::watch::Sender::new(0),
        }
    }
}

fn ended(status: RunStatus) -> bool {
    matches!(status, RunStatus::Finished | RunStatus::Cancelled)
}

impl RunStore for MemoryRunStore {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, Result<()>> {
        let mut runs = lock(&self.runs);
        if let Some((kept, _, _, _)) = runs.get(&run.id) {
            if owner(&kept.lease) != owner(&run.lease) {
                let e = lease_lost(&run.id);
                return Box::pin(async move { Err(e) });
            }
        } else if !run.first {
            let e = deleted(&run.id);
            return Box::pin(async move { Err(e) });
        }
        let mut ledgers = lock(&self.ledgers);
        if !run.ledger.is_empty() {
            let (kept, held) = match ledgers.get(&run.id) {
                Some((kept, held)) => (kept.len(), Some(held)),
                None => (0, None),
            };
            // Too many is refused before looking for one twice (in the save's own
            // entries' time).
            let twice = kept + run.ledger.len() > MAX_LEDGER || {
                let mut seen: std::collections::HashSet<(LedgerKind, &str)> =
                    std::collections::HashSet::new();
                !run.ledger.iter().all(|e| {
                    seen.insert((e.kind, &e.item))
                        && !held.is_some_and(|h| h.contains(&(e.kind, e.item.clone())))
                })
            };
            if twice {
                let e = already_in_ledger(&run.id);
                return Box::pin(async move { Err(e) });
            }
        }
        if !runs.contains_key(&run.id) && runs.len() >= self.capacity {
            // Make room: the run that ended longest ago goes.
            let oldest = runs
                .iter()
                .filter(|(_, (r, _, _, _))| ended(r.status))
                .min_by_key(|(_, (_, at, _, _))| *at)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => {
                    runs.remove(&id);
                }
                None => {
                    let cap = self.capacity;
                    return Box::pin(async move {
                        Err(Error::store(format!(
                            "the memory run store is full: its {cap} runs all wait or run (use MemoryRunStore::with_capacity, or a durable store)"
                        )))
                    });
                }
            }
        }
        // The events are appended to the run's log, in order; so are its transcript
        // entries to its own.
        let (mut events, mut log) = runs
            .remove(&run.id)
            .map(|(_, _, e, l)| (e, l))
            .unwrap_or_default();
        events.extend(run.events.iter().cloned());
        log.append(&run.transcript, &run.blobs);
        if !run.ledger.is_empty() {
            let (kept, held) = ledgers.entry(run.id.clone()).or_default();
            kept.extend(run.ledger.iter().cloned());
            held.extend(run.ledger.iter().map(|e| (e.kind, e.item.clone())));
        }
        // Kept as a load returns it: no events nor ledger, flushed, not a first save
        // (its transcript and blobs beside it).
        let kept = RunRecord {
            id: run.id.clone(),
            status: run.status,
            suspension: run.suspension.clone(),
            state: run.state.clone(),
            lease: run.lease.clone(),
            transcript: Transcript::new(run.transcript.from, run.transcript.to, Vec::new()),
            blobs: Vec::new(),
            events: Vec::new(),
            ledger: Vec::new(),
            durability: Durability::Flushed,
            first: false,
        };
        runs.insert(run.id.clone(), (kept, unix_now(), events, log));
        drop(runs);
        if !run.events.is_empty() {
            self.appended.send_modify(|n| *n = n.wrapping_add(1));
        }
        Box::pin(async { Ok(()) })
    }
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        let r = lock(&self.runs).get(id).map(|(r, _, _, log)| log.full(r));
        Box::pin(async move { Ok(r) })
    }
    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<RunPage>> {
        let all = lock(&self.runs)
            .values()
            .map(|(r, at, _, _)| {
                let owner = Owner::of(&r.state);
                owner.summary(r.id.clone(), r.status, r.suspension.clone(), *at)
            })
            .collect();
        let p = RunPage::of(all, filter);
        Box::pin(async move { Ok(p) })
    }
    fn events<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<Value>>> {
        let events = lock(&self.runs)
            .get(id)
            .map(|(_, _, e, _)| e.iter().take(MAX_EVENTS).cloned().collect())
            .unwrap_or_default();
        Box::pin(async move { Ok(events) })
    }
    fn events_after<'a>(
        &'a self,
        id: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<(u64, Value)>>> {
        let skip = usize::try_from(after.unwrap_or(0)).unwrap_or(usize::MAX);
        let events = lock(&self.runs)
            .get(id)
            .map(|(_, _, e, _)| {
                e.iter()
                    .zip(1u64..)
                    .skip(skip)
                    .take(page_limit(limit))
                    .map(|(e, n)| (n, e.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Box::pin(async move { Ok(events) })
    }
    fn wait_events<'a>(&'a self, id: &'a str, after: u64) -> BoxFuture<'a, Result<()>> {
        // Subscribed before looking: a save after the look wakes this waiter.
        let mut appended = self.appended.subscribe();
        let has = lock(&self.runs)
            .get(id)
            .is_some_and(|(_, _, e, _)| e.len() as u64 > after);
        Box::pin(async move {
            if !has {
                let _ = tokio::time::timeout(EVENTS_MAX_WAIT, appended.changed()).await;
            }
            Ok(())
        })
    }
    fn ledger<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LedgerEntry>>> {
        let entries = lock(&self.ledgers)
            .get(id)
            .map(|(kept, _)| kept.clone())
            .unwrap_or_default();
        Box::pin(async move { Ok(entries) })
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let gone = lock(&self.runs).remove(id).is_some();
        Box::pin(async move { Ok(gone) })
    }
    fn prune(&self, secs: u64) -> BoxFuture<'_, Result<u64>> {
        let mut runs = lock(&self.runs);
        let before = runs.len();
        runs.retain(|_, (r, at, _, _)| !(ended(r.status) && *at < secs));
        let n = (before - runs.len()) as u64;
        Box::pin(async move { Ok(n) })
    }
    fn save_allowance<'a>(
        &'a self,
        id: &'a str,
        allowance: &'a Value,
    ) -> BoxFuture<'a, Result<()>> {
        let mut kept = lock(&self.allowances);
        let full = kept.len() >= MAX_ALLOWANCES && !kept.contains_key(id);
        if !full {
            kept.insert(id.to_owned(), allowance.clone());
        }
        Box::pin(async move {
            if full {
                return Err(Error::store(format!(
                    "the memory run store keeps at most {MAX_ALLOWANCES} allowances"
                )));
            }
            Ok(())
        })
    }
    fn allowances(&self) -> BoxFuture<'_, Result<Vec<Value>>> {
        let all = lock(&self.allowances).values().cloned().collect();
        Box::pin(async move { Ok(all) })
    }
    fn delete_allowance<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let gone = lock(&self.allowances).remove(id).is_some();
        Box::pin(async move { Ok(gone) })
    }
    fn claim<'a>(
        &'a self,
        id: &'a str,
        claim: Claim<'a>,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        let mut runs = lock(&self.runs);
        let claimed = match runs.get_mut(id) {
            Some((r, at, _, log)) if claim.matches(r) => {
                r.status = RunStatus::Running;
                r.lease = Some(lease.clone());
                *at = unix_now();
                Some(log.full(r))
            }
            _ => None,
        };
        Box::pin(async move { Ok(claimed) })
    }
    fn claim_due<'a>(
        &'a self,
        now: u64,
        lease: &'a Lease,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>>> {
        let mut runs = lock(&self.runs);
        let mut claimed = Vec::new();
        for (r, at, _, log) in runs.values_mut() {
            if claimed.len() >= limit {
                break;
            }
            let due = match r.status {
                RunStatus::Running => Claim::Stale(now).matches(r),
                RunStatus::Suspended | RunStatus::Failed => r.due_at().is_some_and(|d| d <= now),
                _ => false,
            };
            if due {
                let mut was = log.full(r);
                r.status = RunStatus::Running;
                r.lease = Some(lease.clone());
                *at = unix_now();
                was.lease = Some(lease.clone());
                claimed.push(was);
            }
        }
        Box::pin(async move { Ok(claimed) })
    }
    fn renew<'a>(&'a self, id: &'a str, lease: &'a Lease) -> BoxFuture<'a, Result<bool>> {
        let mut runs = lock(&self.runs);
        let ours = match runs.get_mut(id) {
            Some((r, _, _, _)) => match &mut r.lease {
                Some(l) if l.owner == lease.owner => {
                    l.until = lease.until;
                    true
                }
                _ => false,
            },
            None => true,
        };
        Box::pin(async move { Ok(ours) })
    }
}

/// The owner of a lease, if any.
fn owner(lease: &Option<Lease>) -> Option<&str> {
    lease.as_ref().map(|l| l.owner.as_str())
}
