//! What a run store is: the [`RunStore`] trait and what it keeps (runs, leases,
//! filters, pages), with the helpers the SQL stores share. At the bottom of `store/`:
//! the stores implement it.

use std::collections::BTreeMap;

use mcp_runtime::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

pub use super::appended::{Blob, Transcript};

/// Where a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// The loop is working on it.
    Running,
    /// It waits for a person's decision.
    Suspended,
    /// It ended.
    Finished,
    /// An error stopped it after something had run (a tool call, a model turn). It
    /// keeps its transcript, what already ran and the error;
    /// [`Agent::retry`](crate::Agent::retry) continues it from where it stopped.
    Failed,
    /// A person or the application cancelled it ([`Agent::cancel`](crate::Agent::cancel)).
    Cancelled,
}

#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
impl RunStatus {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Suspended => "suspended",
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    pub(super) fn parse(s: &str) -> Option<RunStatus> {
        match s {
            "running" => Some(RunStatus::Running),
            "suspended" => Some(RunStatus::Suspended),
            "finished" => Some(RunStatus::Finished),
            "failed" => Some(RunStatus::Failed),
            "cancelled" => Some(RunStatus::Cancelled),
            _ => None,
        }
    }
}

/// A run as kept: its status, the suspension it waits in, its state (pending calls,
/// counters, policy: small, replaced at every save), its transcript (appended to) and
/// the large values they refer to (kept once); and, as saved, how durable the save
/// must be.
#[derive(Clone, Debug)]
pub struct RunRecord {
    /// The run's id.
    pub id: String,
    /// Where it stands.
    pub status: RunStatus,
    /// The id of the suspension the run waits in (every suspension has its own; a
    /// decision names it), when it waits.
    pub suspension: Option<String>,
    /// Its state, as JSON: everything but the transcript and the large values
    /// (`transcript`, `blobs`), replaced at every save.
    pub state: Value,
    /// Its transcript: on a save, the entries it appends; on a load, all of it.
    pub transcript: Transcript,
    /// Large values (an image, a long tool result) the state and the transcript refer
    /// to by digest: on a save, those not kept yet (a store keeps each once, and
    /// leaves one it holds as it is); on a load, every one kept for the run.
    pub blobs: Vec<Blob>,
    /// Who holds the run and until when: the process that claimed it (or started
    /// it). Only the holder's saves are kept (see [`RunStore::save`]).
    pub lease: Option<Lease>,
    /// Events to append to the run's log with this save, in order (a load returns
    /// none: [`RunStore::events`] reads the log).
    pub events: Vec<Value>,
    /// How soon the save must be on disk (a load returns [`Durability::Flushed`]).
    pub durability: Durability,
    /// Entries to append to the run's sent ledger with this save, atomically (a load
    /// returns none: [`RunStore::ledger`] reads the ledger). An entry whose kind and
    /// item the ledger holds already fails the whole save (nothing is kept), with an
    /// error for which `is_rolled_back()` is true.
    pub ledger: Vec<LedgerEntry>,
    /// This save creates the run (its first). A later save of a run that is no longer
    /// kept — it was deleted meanwhile — is refused with an error for which
    /// `is_deleted()` is true: a deleted run stays deleted.
    pub first: bool,
}

impl RunRecord {
    /// When a worker should take the run up (milliseconds since the epoch), as the
    /// agent keeps it in the state (`due_at`): a waiting run whose decisions are all
    /// recorded ([`Agent::record_decision`](crate::Agent::record_decision)), or whose
    /// suspension expires. A store keeps it beside the state so that
    /// [`RunStore::claim_due`] finds due runs cheaply.
    pub fn due_at(&self) -> Option<u64> {
        self.state.get("due_at").and_then(Value::as_u64)
    }
}

/// One entry of a run's **sent ledger**: append-only, never changed nor deleted by
/// the agent. Before a call is sent, the save that records it as sent appends a
/// `Sent` entry; the save that keeps a person's decision appends a `Decided` entry.
/// A call already in the ledger is never sent again and a decision in it never
/// applies again, whatever the run's row says; a run whose save counter is behind the
/// ledger's was put back from an older copy, and is refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LedgerEntry {
    /// What it records.
    pub kind: LedgerKind,
    /// For `Sent`: the call's key and how many times it was sent before (`key/round`);
    /// for `Decided`: the decision id. Unique in a run's ledger with `kind`.
    pub item: String,
    /// The person's decision that approved the call (`Sent`), when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// The save counter of the save that appended it.
    pub seq: u64,
    /// `hmac-sha256:…` of the entry (with an integrity key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

impl LedgerEntry {
    /// An entry (the agent MACs it when it has a key).
    pub fn new(kind: LedgerKind, item: String, decision: Option<String>, seq: u64) -> Self {
        LedgerEntry {
            kind,
            item,
            decision,
            seq,
            mac: None,
        }
    }
}

/// What a [`LedgerEntry`] records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LedgerKind {
    /// A call was (about to be) sent to its server.
    Sent,
    /// A person's decision was applied.
    Decided,
}

impl LedgerKind {
    /// Its name in a store (`sent`, `decided`).
    pub fn as_str(self) -> &'static str {
        match self {
            LedgerKind::Sent => "sent",
            LedgerKind::Decided => "decided",
        }
    }
}

/// How soon a save must be on disk: what a power cut (or an operating system crash)
/// may lose. A crash of the process itself loses no save that returned, whichever
/// this is. A store may always flush; one that defers must keep saves in order (a
/// deferred save lost to a power cut takes only later saves with it, never earlier
/// ones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// On disk before the save returns (an fsync). The agent asks for it where losing
    /// the save could make something run twice or undo what a person saw: the save
    /// made before calls are sent (a recovered run finds them in doubt, never unsent),
    /// a suspension, the run's end.
    #[default]
    Flushed,
    /// On disk soon (at the store's next flushed save or checkpoint); a power cut may
    /// lose it. The agent asks for it only for the results of calls just made: a run
    /// recovered without them finds those calls in doubt — recorded as sent by the
    /// flushed save before them — and never sends them again.
    Deferred,
}

/// A process's hold on a run it works on: an owner token of its own and an expiry.
/// While the holder works it renews the lease ([`RunStore::renew`]); a run whose
/// holder died is left `running` with a lease that expires, and
/// [`Agent::recover`](crate::Agent::recover) takes it over ([`Claim::Stale`]). A
/// holder whose lease was taken over can no longer save the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The holder (a random token, new for every claim).
    pub owner: String,
    /// When the hold ends unless renewed (milliseconds since the epoch).
    pub until: u64,
}

/// Which runs [`RunStore::list`] returns: all by default; by status, by when they
/// last changed (seconds since the epoch), by owner (tenant, who started it, labels),
/// a page at a time (at most `limit`, 100 by default and at most 1000, after the
/// `cursor` a previous page returned), in id order.
///
/// The owner filters match the columns a store keeps beside each run's state, which
/// a store's writer could change: [`Agent::inbox`](crate::Agent::inbox) checks each
/// run found against its sealed state, and authorization reads only the state.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RunFilter {
    /// Only runs in this status.
    pub status: Option<RunStatus>,
    /// Only runs of this tenant ([`RunOptions::tenant`](crate::RunOptions::tenant)).
    pub tenant: Option<String>,
    /// Only runs started by the principal with this id
    /// ([`RunOptions::started_by`](crate::RunOptions::started_by)).
    pub started_by: Option<String>,
    /// Only runs that carry every one of these labels (`key = value`).
    pub labels: BTreeMap<String, String>,
    /// Only runs that last changed before this time.
    pub before: Option<u64>,
    /// Only runs that last changed at or after this time.
    pub after: Option<u64>,
    /// The most runs in one page (0 means 100; more than 1000 means 1000).
    pub limit: usize,
    /// Where a previous page ended ([`RunPage::next`]).
    pub cursor: Option<String>,
}

impl RunFilter {
    /// Every run, 100 a page.
    pub fn new() -> RunFilter {
        RunFilter::default()
    }
    /// Only runs in `status`.
    pub fn status(mut self, status: RunStatus) -> Self {
        self.status = Some(status);
        self
    }
    /// Only runs of `tenant`.
    pub fn tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }
    /// Only runs started by the principal whose id is `id`.
    pub fn started_by(mut self, id: impl Into<String>) -> Self {
        self.started_by = Some(id.into());
        self
    }
    /// Only runs that carry the label `key = value` (with the other labels asked for).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
    /// True when the owner of a run (tenant, who started it, labels) is what this
    /// filter asks for.
    pub fn owns(
        &self,
        tenant: Option<&str>,
        started_by: Option<&str>,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        self.tenant.as_deref().is_none_or(|t| tenant == Some(t))
            && self
                .started_by
                .as_deref()
                .is_none_or(|p| started_by == Some(p))
            && self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
    /// Only runs that last changed before `secs` (seconds since the epoch).
    pub fn before(mut self, secs: u64) -> Self {
        self.before = Some(secs);
        self
    }
    /// Only runs that last changed at or after `secs`.
    pub fn after(mut self, secs: u64) -> Self {
        self.after = Some(secs);
        self
    }
    /// At most `n` runs a page.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = n;
        self
    }
    /// The page after the one that returned this cursor.
    pub fn cursor(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }
    /// The page size this filter asks for.
    pub fn page_size(&self) -> usize {
        match self.limit {
            0 => 100,
            n => n.min(1000),
        }
    }
}

/// A run as listed: no state, just where it stands, whose it is and what it spent —
/// as the store's columns say (the run's sealed state is the truth: see
/// [`RunFilter`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunSummary {
    /// The run's id.
    pub id: String,
    /// Where it stands.
    pub status: RunStatus,
    /// The suspension it waits in, when it waits.
    pub suspension: Option<String>,
    /// When it last changed (seconds since the epoch).
    pub updated_at: u64,
    /// The tenant it belongs to.
    pub tenant: Option<String>,
    /// The id of the principal who started it.
    pub started_by: Option<String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The input tokens its model calls read, summed.
    pub input_tokens: u64,
    /// The output tokens its model calls wrote, summed.
    pub output_tokens: u64,
}

impl RunSummary {
    /// A summary (for stores of your own).
    pub fn new(
        id: String,
        status: RunStatus,
        suspension: Option<String>,
        updated_at: u64,
    ) -> RunSummary {
        RunSummary {
            id,
            status,
            suspension,
            updated_at,
            tenant: None,
            started_by: None,
            labels: BTreeMap::new(),
            input_tokens: 0,
            output_tokens: 0,
        }
    }

    /// The same summary, of a run owned by `tenant`, started by the principal whose
    /// id is `started_by`, carrying `labels`.
    pub fn with_owner(
        mut self,
        tenant: Option<String>,
        started_by: Option<String>,
        labels: BTreeMap<String, String>,
    ) -> RunSummary {
        self.tenant = tenant;
        self.started_by = started_by;
        self.labels = labels;
        self
    }

    /// The same summary, of a run that spent these tokens.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> RunSummary {
        self.input_tokens = input_tokens;
        self.output_tokens = output_tokens;
        self
    }
}

/// One page of [`RunStore::list`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RunPage {
    /// The runs, in id order.
    pub runs: Vec<RunSummary>,
    /// Give it to [`RunFilter::cursor`] for the next page; `None` on the last.
    pub next: Option<String>,
}

impl RunPage {
    /// The page of `all` that `filter` names (for stores that filter in memory).
    pub fn of(mut all: Vec<RunSummary>, filter: &RunFilter) -> RunPage {
        all.retain(|r| {
            filter.status.is_none_or(|s| s == r.status)
                && filter.owns(r.tenant.as_deref(), r.started_by.as_deref(), &r.labels)
                && filter.before.is_none_or(|b| r.updated_at < b)
                && filter.after.is_none_or(|a| r.updated_at >= a)
                && filter.cursor.as_deref().is_none_or(|c| r.id.as_str() > c)
        });
        all.sort_by(|a, b| a.id.cmp(&b.id));
        page_of(all, filter.page_size())
    }
}

/// What a claim takes: a run in this status and, for a suspended run, in this
/// suspension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim<'a> {
    /// A suspended run, waiting in the suspension with this id.
    Suspended(&'a str),
    /// A failed run ([`Agent::retry`](crate::Agent::retry)).
    Failed,
    /// A finished run, given more input ([`Agent::follow_up`](crate::Agent::follow_up)).
    Finished,
    /// A running run whose holder stopped renewing its lease: the lease ended before
    /// this time (milliseconds since the epoch), or it has none
    /// ([`Agent::recover`](crate::Agent::recover)).
    Stale(u64),
}

impl Claim<'_> {
    /// True when `run` is what this claim takes.
    pub fn matches(&self, run: &RunRecord) -> bool {
        match self {
            Claim::Suspended(s) => {
                run.status == RunStatus::Suspended && run.suspension.as_deref() == Some(*s)
            }
            Claim::Failed => run.status == RunStatus::Failed,
            Claim::Finished => run.status == RunStatus::Finished,
            Claim::Stale(now) => {
                run.status == RunStatus::Running
                    && run.lease.as_ref().is_none_or(|l| l.until < *now)
            }
        }
    }

    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(super) fn status(&self) -> &'static str {
        match self {
            Claim::Suspended(_) => "suspended",
            Claim::Failed => "failed",
            Claim::Finished => "finished",
            Claim::Stale(_) => "running",
        }
    }

    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(super) fn suspension(&self) -> Option<&str> {
        match self {
            Claim::Suspended(s) => Some(s),
            Claim::Failed | Claim::Finished | Claim::Stale(_) => None,
        }
    }

    /// For a stale claim: the time the lease must have ended before (as SQL wants it).
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(super) fn stale_before(&self) -> Option<i64> {
        match self {
            Claim::Stale(now) => Some(sql_int(*now)),
            _ => None,
        }
    }
}

/// A `u64` as SQL's signed 64-bit integer (saturating).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(super) fn sql_int(n: u64) -> i64 {
    n.min(i64::MAX as u64) as i64
}

/// The error a save or a renewal gets when another process holds the run now.
pub(crate) fn lease_lost(id: &str) -> Error {
    Error::lease_lost(format!(
        "run {id} is held by another process now (its lease ended and the run was recovered, or it was claimed again): this process's changes to it are not kept"
    ))
}

/// Keeps runs. `claim` is what makes a decision apply exactly once: of two resumes of
/// one suspension, one gets the run and the other `None`; a decision for another
/// suspension of the same run gets `None` too. Leases make a run a process died on
/// recoverable, and fence the dead (or only slow) process out once it is.
pub trait RunStore: Send + Sync + 'static {
    /// Keeps the run (replacing its row and state, appending its transcript entries,
    /// keeping the blobs it does not hold yet; see [`Transcript`] and [`Blob`]) and
    /// appends its `events` to the run's event log — only when the kept run's lease owner is the record's
    /// (both none counts as the same), or nothing is kept under its id yet; otherwise
    /// an error for which `is_lease_lost()` is true, and nothing changes. Atomic: the
    /// state, the transcript entries, the blobs and the events are kept together or
    /// not at all.
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, Result<()>>;
    /// The run's event log, in the order appended (empty for an unknown run): at most
    /// its first 100,000 events, whatever the store holds.
    fn events<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<Value>>>;
    /// The events of the run's log after the one numbered `after` (from the first when
    /// `None`), in order, each with its number: at most `limit` of them (at least 1, at
    /// most [`MAX_EVENTS_PAGE`]). Every event a save appends is numbered 1, 2, 3, … in
    /// its run's log, with no gap, never renumbered. The default reads
    /// [`events`](Self::events) and numbers them by their place in it.
    fn events_after<'a>(
        &'a self,
        id: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<(u64, Value)>>> {
        Box::pin(async move {
            let (after, limit) = (after.unwrap_or(0), page_limit(limit));
            let all = self.events(id).await?;
            Ok(all
                .into_iter()
                .zip(1u64..)
                .skip_while(|(_, n)| *n <= after)
                .take(limit)
                .map(|(e, n)| (n, e))
                .collect())
        })
    }
    /// Returns when the run `id` may have events after the one numbered `after`: at
    /// once when it has, else when a save appended some, or after a while (a bounded
    /// time, at most [`EVENTS_MAX_WAIT`]) — the caller reads with
    /// [`events_after`](Self::events_after) again either way. The default waits
    /// [`EVENTS_POLL`] and returns (a bounded poll); the memory store wakes its waiters on
    /// every save, PostgreSQL by `LISTEN/NOTIFY`.
    fn wait_events<'a>(&'a self, id: &'a str, after: u64) -> BoxFuture<'a, Result<()>> {
        let _ = (id, after);
        Box::pin(async {
            tokio::time::sleep(EVENTS_POLL).await;
            Ok(())
        })
    }
    /// Returns when a run may have become due for a worker (a save made one ready or
    /// failed it for a retry now), or after `max` — the worker claims again either
    /// way: a hint, never a promise. The default waits `max` (workers poll);
    /// PostgreSQL wakes its workers with `LISTEN/NOTIFY`.
    fn wait_due(&self, max: std::time::Duration) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            tokio::time::sleep(max).await;
            Ok(())
        })
    }
    /// The run kept under `id`, with its whole transcript (`from..to`) and every blob
    /// kept for it, read together (one snapshot).
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>>>;
    /// Moves the run `id` to running under `lease`, atomically, when it is what
    /// `claim` takes (its status; for a suspended run its suspension id; for a stale
    /// run an expired lease), and returns it (with the new lease); `None` otherwise
    /// (decided already, another suspension, finished, held, or unknown). What it
    /// returns is read as [`load`](Self::load) reads it (transcript and blobs).
    fn claim<'a>(
        &'a self,
        id: &'a str,
        claim: Claim<'a>,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<RunRecord>>>;
    /// Takes, atomically and under `lease`, up to `limit` runs due for a worker at
    /// `now` (milliseconds since the epoch): waiting or failed runs whose
    /// [`due_at`](RunRecord::due_at) has come, and running runs whose lease ended
    /// before `now` (or that have none). Each is moved to running under `lease`, as
    /// [`claim`](Self::claim) does, and returned with the **status it had before the
    /// claim** (what the worker does with it). Of two claimers at once, each run goes
    /// to one. The default lists the runs and claims them one by one with
    /// [`claim`](Self::claim) (correct, but it reads every waiting run); the SQL stores
    /// take them with one statement.
    fn claim_due<'a>(
        &'a self,
        now: u64,
        lease: &'a Lease,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>>> {
        Box::pin(claim_due_by_listing(self, now, lease, limit))
    }
    /// Extends the hold of `lease.owner` on the run `id` to `lease.until`. `false` when
    /// another owner holds the run now; `true` when the owner does (or nothing is kept
    /// under `id` yet).
    fn renew<'a>(&'a self, id: &'a str, lease: &'a Lease) -> BoxFuture<'a, Result<bool>>;
    /// The runs `filter` names, a page at a time.
    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<RunPage>>;
    /// The run's sent ledger, in the order appended (empty for an unknown run): at
    /// most its first 100,000 entries. Entries outlive [`delete`](Self::delete) and
    /// [`prune`](Self::prune): the ledger is append-only.
    fn ledger<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LedgerEntry>>>;
    /// Forgets the run `id`, its events, transcript and blobs (never its ledger);
    /// `false` when there was none.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>>;
    /// Forgets the runs that ended (finished or cancelled) before `secs` (seconds since
    /// the epoch), with their events, transcripts and blobs; how many.
    fn prune(&self, secs: u64) -> BoxFuture<'_, Result<u64>>;
    /// Keeps a standing allowance ("always allow this tool" for every run of the
    /// agents that share this store) under `id`, replacing what was kept under it.
    /// The agent writes and reads it (with its integrity MAC, when it has a key).
    fn save_allowance<'a>(&'a self, id: &'a str, allowance: &'a Value)
        -> BoxFuture<'a, Result<()>>;
    /// Every standing allowance kept (at most 10,000).
    fn allowances(&self) -> BoxFuture<'_, Result<Vec<Value>>>;
    /// Forgets the allowance `id`; `false` when there was none.
    fn delete_allowance<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>>;
}

/// [`RunStore::claim_due`] for a store that has no query of its own: list, load,
/// and claim each due run with [`RunStore::claim`].
async fn claim_due_by_listing<S: RunStore + ?Sized>(
    store: &S,
    now: u64,
    lease: &Lease,
    limit: usize,
) -> Result<Vec<RunRecord>> {
    let mut out = Vec::new();
    for status in [RunStatus::Running, RunStatus::Suspended, RunStatus::Failed] {
        let mut filter = RunFilter::new().status(status).limit(1000);
        loop {
            let page = store.list(&filter).await?;
            for run in page.runs {
                if out.len() >= limit {
                    return Ok(out);
                }
                let Some(kept) = store.load(&run.id).await? else {
                    continue;
                };
                let due = kept.due_at().is_some_and(|at| at <= now);
                let claim = match (kept.status, kept.suspension.as_deref()) {
                    (RunStatus::Running, _) => Claim::Stale(now),
                    (RunStatus::Suspended, Some(s)) if due => Claim::Suspended(s),
                    (RunStatus::Failed, _) if due => Claim::Failed,
                    _ => continue,
                };
                if !claim.matches(&kept) {
                    continue;
                }
                if let Some(mut got) = store.claim(&run.id, claim, lease).await? {
                    got.status = kept.status;
                    out.push(got);
                }
            }
            match page.next {
                Some(next) => filter = filter.cursor(next),
                None => break,
            }
        }
    }
    Ok(out)
}

/// The most events of one run a store returns.
pub(crate) const MAX_EVENTS: usize = 100_000;

/// The most events one [`RunStore::events_after`] returns.
pub const MAX_EVENTS_PAGE: usize = 1000;

/// How long a [`RunStore::wait_events`] that cannot be told of new events waits
/// before the caller reads again: the bounded poll of SQLite and of stores of your
/// own.
pub const EVENTS_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// The longest a [`RunStore::wait_events`] waits before it returns (with or without
/// news).
pub const EVENTS_MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A page size as [`RunStore::events_after`] takes it: 1 to [`MAX_EVENTS_PAGE`].
pub(crate) fn page_limit(limit: usize) -> usize {
    limit.clamp(1, MAX_EVENTS_PAGE)
}

/// The most ledger entries of one run a store returns.
pub(crate) const MAX_LEDGER: usize = 100_000;

/// The error of a save whose ledger entries the ledger holds already.
pub(crate) fn already_in_ledger(id: &str) -> Error {
    Error::rolled_back(format!(
        "run {id}: what this save records as sent or decided is in the run's ledger already — the run was put back from an older copy; nothing is kept"
    ))
}

/// The error of a save of a run deleted while this process held it.
pub(crate) fn deleted(id: &str) -> Error {
    Error::deleted(format!(
        "run {id} was deleted while this process held it: it stays deleted, and this process's changes to it are not kept"
    ))
}

/// The most standing allowances a store returns.
pub(crate) const MAX_ALLOWANCES: usize = 10_000;

impl<T: RunStore + ?Sized> RunStore for std::sync::Arc<T> {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, Result<()>> {
        (**self).save(run)
    }
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        (**self).load(id)
    }
    fn events<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<Value>>> {
        (**self).events(id)
    }
    fn events_after<'a>(
        &'a self,
        id: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<(u64, Value)>>> {
        (**self).events_after(id, after, limit)
    }
    fn wait_events<'a>(&'a self, id: &'a str, after: u64) -> BoxFuture<'a, Result<()>> {
        (**self).wait_events(id, after)
    }
    fn wait_due(&self, max: std::time::Duration) -> BoxFuture<'_, Result<()>> {
        (**self).wait_due(max)
    }
    fn claim<'a>(
        &'a self,
        id: &'a str,
        claim: Claim<'a>,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        (**self).claim(id, claim, lease)
    }
    fn renew<'a>(&'a self, id: &'a str, lease: &'a Lease) -> BoxFuture<'a, Result<bool>> {
        (**self).renew(id, lease)
    }
    fn claim_due<'a>(
        &'a self,
        now: u64,
        lease: &'a Lease,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>>> {
        (**self).claim_due(now, lease, limit)
    }
    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<RunPage>> {
        (**self).list(filter)
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        (**self).delete(id)
    }
    fn ledger<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LedgerEntry>>> {
        (**self).ledger(id)
    }
    fn prune(&self, secs: u64) -> BoxFuture<'_, Result<u64>> {
        (**self).prune(secs)
    }
    fn save_allowance<'a>(
        &'a self,
        id: &'a str,
        allowance: &'a Value,
    ) -> BoxFuture<'a, Result<()>> {
        (**self).save_allowance(id, allowance)
    }
    fn allowances(&self) -> BoxFuture<'_, Result<Vec<Value>>> {
        (**self).allowances()
    }
    fn delete_allowance<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        (**self).delete_allowance(id)
    }
}

/// The time now, in seconds since the epoch.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A page of `runs` (in id order, at least one past `size` when more follow).
pub(super) fn page_of(mut runs: Vec<RunSummary>, size: usize) -> RunPage {
    let next = (runs.len() > size).then(|| runs[size - 1].id.clone());
    runs.truncate(size);
    RunPage { runs, next }
}
