//! Where runs are kept while they wait for a person: [`MemoryRunStore`] for one
//! process, [`SqliteRunStore`] (default feature `sqlite`) in a file, for runs resumed
//! by another process or after a restart.

use std::collections::HashMap;
use std::sync::Mutex;

use mcp_runtime::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

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
    fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Suspended => "suspended",
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Option<RunStatus> {
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

/// A run as kept: its status, the suspension it waits in, and its whole state
/// (transcript, pending calls, events).
#[derive(Clone, Debug)]
pub struct RunRecord {
    /// The run's id.
    pub id: String,
    /// Where it stands.
    pub status: RunStatus,
    /// The id of the suspension the run waits in (every suspension has its own; a
    /// decision names it), when it waits.
    pub suspension: Option<String>,
    /// Its state, as JSON.
    pub state: Value,
    /// Who holds the run and until when: the process that claimed it (or started
    /// it). Only the holder's saves are kept (see [`RunStore::save`]).
    pub lease: Option<Lease>,
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
/// last changed (seconds since the epoch), a page at a time (at most `limit`, 100 by
/// default and at most 1000, after the `cursor` a previous page returned), in id order.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RunFilter {
    /// Only runs in this status.
    pub status: Option<RunStatus>,
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

/// A run as listed: no state, just where it stands.
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
        }
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
            Claim::Stale(now) => {
                run.status == RunStatus::Running
                    && run.lease.as_ref().is_none_or(|l| l.until < *now)
            }
        }
    }

    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    fn status(&self) -> &'static str {
        match self {
            Claim::Suspended(_) => "suspended",
            Claim::Failed => "failed",
            Claim::Stale(_) => "running",
        }
    }

    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    fn suspension(&self) -> Option<&str> {
        match self {
            Claim::Suspended(s) => Some(s),
            Claim::Failed | Claim::Stale(_) => None,
        }
    }

    /// For a stale claim: the time the lease must have ended before (as SQL wants it).
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    fn stale_before(&self) -> Option<i64> {
        match self {
            Claim::Stale(now) => Some(sql_int(*now)),
            _ => None,
        }
    }
}

/// A `u64` as SQL's signed 64-bit integer (saturating).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
fn sql_int(n: u64) -> i64 {
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
    /// Keeps the run (replacing what was kept under its id) — only when the kept run's
    /// lease owner is the record's (both none counts as the same), or nothing is kept
    /// under its id yet; otherwise an error for which `is_lease_lost()` is true, and
    /// nothing changes. Atomic.
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, Result<()>>;
    /// The run kept under `id`.
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>>>;
    /// Moves the run `id` to running under `lease`, atomically, when it is what
    /// `claim` takes (its status; for a suspended run its suspension id; for a stale
    /// run an expired lease), and returns it (with the new lease); `None` otherwise
    /// (decided already, another suspension, finished, held, or unknown).
    fn claim<'a>(
        &'a self,
        id: &'a str,
        claim: Claim<'a>,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<RunRecord>>>;
    /// Extends the hold of `lease.owner` on the run `id` to `lease.until`. `false` when
    /// another owner holds the run now; `true` when the owner does (or nothing is kept
    /// under `id` yet).
    fn renew<'a>(&'a self, id: &'a str, lease: &'a Lease) -> BoxFuture<'a, Result<bool>>;
    /// The runs `filter` names, a page at a time.
    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<RunPage>>;
    /// Forgets the run `id`; `false` when there was none.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>>;
    /// Forgets the runs that ended (finished or cancelled) before `secs` (seconds since
    /// the epoch); how many.
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

/// The most standing allowances a store returns.
pub(crate) const MAX_ALLOWANCES: usize = 10_000;

impl<T: RunStore + ?Sized> RunStore for std::sync::Arc<T> {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, Result<()>> {
        (**self).save(run)
    }
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        (**self).load(id)
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
    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<RunPage>> {
        (**self).list(filter)
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        (**self).delete(id)
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

/// Runs kept in memory, for the life of the process. Bounded: at most
/// [`MemoryRunStore::DEFAULT_CAPACITY`] runs (or the capacity given); when full, the
/// run that ended longest ago makes room, and a new run is refused (a store error)
/// when every kept run still waits or runs.
#[derive(Debug)]
pub struct MemoryRunStore {
    runs: Mutex<HashMap<String, (RunRecord, u64)>>,
    allowances: Mutex<std::collections::BTreeMap<String, Value>>,
    capacity: usize,
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
            capacity: capacity.max(1),
        }
    }
}

fn ended(status: RunStatus) -> bool {
    matches!(status, RunStatus::Finished | RunStatus::Cancelled)
}

/// A lock that a panic elsewhere does not poison for good.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RunStore for MemoryRunStore {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, Result<()>> {
        let mut runs = lock(&self.runs);
        if let Some((kept, _)) = runs.get(&run.id) {
            if owner(&kept.lease) != owner(&run.lease) {
                let e = lease_lost(&run.id);
                return Box::pin(async move { Err(e) });
            }
        }
        if !runs.contains_key(&run.id) && runs.len() >= self.capacity {
            // Make room: the run that ended longest ago goes.
            let oldest = runs
                .iter()
                .filter(|(_, (r, _))| ended(r.status))
                .min_by_key(|(_, (_, at))| *at)
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
        runs.insert(run.id.clone(), (run.clone(), unix_now()));
        Box::pin(async { Ok(()) })
    }
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        let r = lock(&self.runs).get(id).map(|(r, _)| r.clone());
        Box::pin(async move { Ok(r) })
    }
    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<RunPage>> {
        let all = lock(&self.runs)
            .values()
            .map(|(r, at)| RunSummary::new(r.id.clone(), r.status, r.suspension.clone(), *at))
            .collect();
        let p = RunPage::of(all, filter);
        Box::pin(async move { Ok(p) })
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let gone = lock(&self.runs).remove(id).is_some();
        Box::pin(async move { Ok(gone) })
    }
    fn prune(&self, secs: u64) -> BoxFuture<'_, Result<u64>> {
        let mut runs = lock(&self.runs);
        let before = runs.len();
        runs.retain(|_, (r, at)| !(ended(r.status) && *at < secs));
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
            Some((r, at)) if claim.matches(r) => {
                r.status = RunStatus::Running;
                r.lease = Some(lease.clone());
                *at = unix_now();
                Some(r.clone())
            }
            _ => None,
        };
        Box::pin(async move { Ok(claimed) })
    }
    fn renew<'a>(&'a self, id: &'a str, lease: &'a Lease) -> BoxFuture<'a, Result<bool>> {
        let mut runs = lock(&self.runs);
        let ours = match runs.get_mut(id) {
            Some((r, _)) => match &mut r.lease {
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

/// Runs kept in a SQLite file (created with its table when missing): no server, no
/// setup, and a run suspended by one process can be resumed by another. Claims are
/// single `UPDATE … WHERE status = 'suspended'` statements, so a decision applies once
/// even with several processes on one file.
#[cfg(feature = "sqlite")]
#[derive(Clone)]
pub struct SqliteRunStore {
    path: std::path::PathBuf,
    /// One connection, reused (opened again after a failure).
    conn: std::sync::Arc<Mutex<Option<rusqlite::Connection>>>,
}

#[cfg(feature = "sqlite")]
impl std::fmt::Debug for SqliteRunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteRunStore")
            .field("path", &self.path)
            .finish()
    }
}

#[cfg(feature = "sqlite")]
impl SqliteRunStore {
    /// A store in this file; its folder is created when missing.
    pub fn open(path: impl Into<std::path::PathBuf>) -> Result<Self> {
        let store = SqliteRunStore {
            path: path.into(),
            conn: std::sync::Arc::new(Mutex::new(None)),
        };
        if let Some(dir) = store.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::store(format!("cannot create {}: {e}", dir.display())))?;
        }
        let c = store.connection()?;
        // Write-ahead logging: one fsync per save (still synchronous=FULL), and
        // readers in other processes do not block a writer.
        c.execute_batch(
            "PRAGMA journal_mode = WAL;
                 CREATE TABLE IF NOT EXISTS mcp_agent_runs (
                 id TEXT PRIMARY KEY,
                 status TEXT NOT NULL,
                 state TEXT NOT NULL,
                 updated_at INTEGER NOT NULL,
                 suspension TEXT,
                 lease_owner TEXT,
                 lease_until INTEGER
             );
             CREATE TABLE IF NOT EXISTS mcp_agent_allowances (
                 id TEXT PRIMARY KEY,
                 allowance TEXT NOT NULL
             );",
        )
        .map_err(|e| store.fail(e))?;
        store.migrate(&c)?;
        *lock(&store.conn) = Some(c);
        Ok(store)
    }

    /// A table made before runs had suspension ids or leases gains the columns (its
    /// suspended runs have no suspension id, so no decision applies to them: they are
    /// refused as stale; its running runs have no lease, so they can be recovered).
    fn migrate(&self, c: &rusqlite::Connection) -> Result<()> {
        for (column, kind) in [
            ("suspension", "TEXT"),
            ("lease_owner", "TEXT"),
            ("lease_until", "INTEGER"),
        ] {
            let has: bool = c
                .query_row(
                    "SELECT COUNT(*) FROM pragma_table_info('mcp_agent_runs') WHERE name = ?1",
                    [column],
                    |r| r.get::<_, i64>(0),
                )
                .map(|n| n > 0)
                .map_err(|e| self.fail(e))?;
            if !has {
                c.execute_batch(&format!(
                    "ALTER TABLE mcp_agent_runs ADD COLUMN {column} {kind};"
                ))
                .map_err(|e| self.fail(e))?;
            }
        }
        Ok(())
    }

    fn fail(&self, e: rusqlite::Error) -> Error {
        Error::store(format!("the run store {}: {e}", self.path.display()))
    }

    fn connection(&self) -> Result<rusqlite::Connection> {
        let c = rusqlite::Connection::open(&self.path).map_err(|e| self.fail(e))?;
        // Other processes may hold the file a moment: wait for them.
        c.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(|e| self.fail(e))?;
        Ok(c)
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&SqliteRunStore, &rusqlite::Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = lock(&store.conn);
            let c = match conn.take() {
                Some(c) => c,
                None => store.connection()?,
            };
            let out = f(&store, &c);
            if out.is_ok() {
                *conn = Some(c);
            }
            out
        })
        .await
        .map_err(|e| Error::store(format!("the run store task failed: {e}")))?
    }
}

/// A run as a row gives it: id, status, suspension, state, lease owner, lease end.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
type Row = (
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    Option<i64>,
);

#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn record((id, status, suspension, state, owner, until): Row) -> Result<RunRecord> {
    Ok(RunRecord {
        id,
        status: RunStatus::parse(&status)
            .ok_or_else(|| Error::store(format!("unknown run status `{status}`")))?,
        suspension,
        state: serde_json::from_str(&state)
            .map_err(|e| Error::store(format!("a stored run cannot be read: {e}")))?,
        lease: owner.map(|owner| Lease {
            owner,
            until: until.unwrap_or(0).max(0) as u64,
        }),
    })
}

/// The lease columns of a record: owner, end.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn lease_columns(lease: &Option<Lease>) -> (Option<String>, Option<i64>) {
    match lease {
        Some(l) => (Some(l.owner.clone()), Some(sql_int(l.until))),
        None => (None, None),
    }
}

#[cfg(feature = "sqlite")]
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(feature = "sqlite")]
impl RunStore for SqliteRunStore {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, Result<()>> {
        let (id, status, state) = (run.id.clone(), run.status.as_str(), run.state.to_string());
        let suspension = run.suspension.clone();
        let (owner, until) = lease_columns(&run.lease);
        Box::pin(self.blocking(move |s, c| {
            // Fenced: a row held by another lease owner is left as it is.
            let n = c
                .execute(
                    "INSERT INTO mcp_agent_runs (id, status, state, updated_at, suspension, lease_owner, lease_until)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT(id) DO UPDATE SET status = excluded.status, state = excluded.state,
                       updated_at = excluded.updated_at, suspension = excluded.suspension,
                       lease_until = excluded.lease_until
                     WHERE mcp_agent_runs.lease_owner IS excluded.lease_owner",
                    rusqlite::params![id, status, state, now(), suspension, owner, until],
                )
                .map_err(|e| s.fail(e))?;
            if n == 0 {
                return Err(lease_lost(&id));
            }
            Ok(())
        }))
    }

    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        let id = id.to_owned();
        Box::pin(self.blocking(move |s, c| {
            one_run(
                s,
                c,
                "SELECT id, status, suspension, state, lease_owner, lease_until FROM mcp_agent_runs WHERE id = ?1",
                [&id],
            )
        }))
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        claim: Claim<'a>,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        let id = id.to_owned();
        let (status, suspension) = (claim.status(), claim.suspension().map(str::to_owned));
        let stale = claim.stale_before();
        let (owner, until) = (lease.owner.clone(), sql_int(lease.until));
        Box::pin(self.blocking(move |s, c| {
            one_run(
                s,
                c,
                "UPDATE mcp_agent_runs SET status = 'running', updated_at = ?2, lease_owner = ?5, lease_until = ?6
                 WHERE id = ?1 AND status = ?3 AND (?4 IS NULL OR suspension = ?4)
                   AND (?7 IS NULL OR lease_until IS NULL OR lease_until < ?7)
                 RETURNING id, status, suspension, state, lease_owner, lease_until",
                rusqlite::params![id, now(), status, suspension, owner, until, stale],
            )
        }))
    }

    fn renew<'a>(&'a self, id: &'a str, lease: &'a Lease) -> BoxFuture<'a, Result<bool>> {
        let id = id.to_owned();
        let (owner, until) = (lease.owner.clone(), sql_int(lease.until));
        Box::pin(self.blocking(move |s, c| {
            let n = c
                .execute(
                    "UPDATE mcp_agent_runs SET lease_until = ?3 WHERE id = ?1 AND lease_owner = ?2",
                    rusqlite::params![id, owner, until],
                )
                .map_err(|e| s.fail(e))?;
            if n > 0 {
                return Ok(true);
            }
            let kept: i64 = c
                .query_row(
                    "SELECT COUNT(*) FROM mcp_agent_runs WHERE id = ?1",
                    [&id],
                    |r| r.get(0),
                )
                .map_err(|e| s.fail(e))?;
            Ok(kept == 0)
        }))
    }

    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<RunPage>> {
        let status = filter.status.map(RunStatus::as_str);
        let before = filter.before.map(|b| b.min(i64::MAX as u64) as i64);
        let after = filter.after.map(|a| a.min(i64::MAX as u64) as i64);
        let cursor = filter.cursor.clone();
        let size = filter.page_size();
        Box::pin(self.blocking(move |s, c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT id, status, suspension, updated_at FROM mcp_agent_runs
                     WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR updated_at < ?2)
                       AND (?3 IS NULL OR updated_at >= ?3) AND (?4 IS NULL OR id > ?4)
                     ORDER BY id LIMIT ?5",
                )
                .map_err(|e| s.fail(e))?;
            let rows = stmt
                .query_map(
                    rusqlite::params![status, before, after, cursor, (size + 1) as i64],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, Option<String>>(2)?,
                            r.get::<_, i64>(3)?,
                        ))
                    },
                )
                .map_err(|e| s.fail(e))?;
            let mut runs = Vec::new();
            for row in rows {
                let (id, status, suspension, at) = row.map_err(|e| s.fail(e))?;
                let status = RunStatus::parse(&status)
                    .ok_or_else(|| Error::store(format!("unknown run status `{status}`")))?;
                runs.push(RunSummary::new(id, status, suspension, at.max(0) as u64));
            }
            Ok(page_of(runs, size))
        }))
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let id = id.to_owned();
        Box::pin(self.blocking(move |s, c| {
            c.execute("DELETE FROM mcp_agent_runs WHERE id = ?1", [&id])
                .map(|n| n > 0)
                .map_err(|e| s.fail(e))
        }))
    }

    fn prune(&self, secs: u64) -> BoxFuture<'_, Result<u64>> {
        let before = secs.min(i64::MAX as u64) as i64;
        Box::pin(self.blocking(move |s, c| {
            c.execute(
                "DELETE FROM mcp_agent_runs WHERE status IN ('finished', 'cancelled') AND updated_at < ?1",
                [before],
            )
            .map(|n| n as u64)
            .map_err(|e| s.fail(e))
        }))
    }

    fn save_allowance<'a>(
        &'a self,
        id: &'a str,
        allowance: &'a Value,
    ) -> BoxFuture<'a, Result<()>> {
        let (id, allowance) = (id.to_owned(), allowance.to_string());
        Box::pin(self.blocking(move |s, c| {
            c.execute(
                "INSERT INTO mcp_agent_allowances (id, allowance) VALUES (?1, ?2)
                 ON CONFLICT(id) DO UPDATE SET allowance = excluded.allowance",
                [&id, &allowance],
            )
            .map(|_| ())
            .map_err(|e| s.fail(e))
        }))
    }

    fn allowances(&self) -> BoxFuture<'_, Result<Vec<Value>>> {
        Box::pin(self.blocking(move |s, c| {
            let mut stmt = c
                .prepare_cached("SELECT allowance FROM mcp_agent_allowances ORDER BY id LIMIT ?1")
                .map_err(|e| s.fail(e))?;
            let rows = stmt
                .query_map([MAX_ALLOWANCES as i64], |r| r.get::<_, String>(0))
                .map_err(|e| s.fail(e))?;
            let mut out = Vec::new();
            for row in rows {
                let text = row.map_err(|e| s.fail(e))?;
                out.push(allowance_value(&text)?);
            }
            Ok(out)
        }))
    }

    fn delete_allowance<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let id = id.to_owned();
        Box::pin(self.blocking(move |s, c| {
            c.execute("DELETE FROM mcp_agent_allowances WHERE id = ?1", [&id])
                .map(|n| n > 0)
                .map_err(|e| s.fail(e))
        }))
    }
}

/// A stored allowance's JSON.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn allowance_value(text: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| Error::store(format!("a stored allowance cannot be read: {e}")))
}

/// A page of `runs` (in id order, at least one past `size` when more follow).
fn page_of(mut runs: Vec<RunSummary>, size: usize) -> RunPage {
    let next = (runs.len() > size).then(|| runs[size - 1].id.clone());
    runs.truncate(size);
    RunPage { runs, next }
}

/// The run a statement returns (id, status, suspension, state, lease owner, lease
/// end), if it returns one.
#[cfg(feature = "sqlite")]
fn one_run(
    s: &SqliteRunStore,
    c: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Option<RunRecord>> {
    use rusqlite::OptionalExtension as _;
    c.query_row(sql, params, |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        ))
    })
    .optional()
    .map_err(|e| s.fail(e))?
    .map(record)
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease(owner: &str) -> Lease {
        Lease {
            owner: owner.into(),
            until: u64::MAX / 2,
        }
    }

    async fn claims_once(store: &dyn RunStore) {
        let run = RunRecord {
            id: "r1".into(),
            status: RunStatus::Suspended,
            suspension: Some("s1".into()),
            state: json!({"n": 1}),
            lease: None,
        };
        store.save(&run).await.unwrap();
        // Another suspension of the same run, or a retry, takes nothing.
        assert!(store
            .claim("r1", Claim::Suspended("s0"), &lease("x"))
            .await
            .unwrap()
            .is_none());
        assert!(store
            .claim("r1", Claim::Failed, &lease("x"))
            .await
            .unwrap()
            .is_none());
        let first = store
            .claim("r1", Claim::Suspended("s1"), &lease("x"))
            .await
            .unwrap();
        let second = store
            .claim("r1", Claim::Suspended("s1"), &lease("x"))
            .await
            .unwrap();
        let first = first.unwrap();
        assert_eq!(first.state, json!({"n": 1}));
        assert_eq!(first.suspension.as_deref(), Some("s1"));
        assert!(second.is_none());
        assert_eq!(
            store.load("r1").await.unwrap().unwrap().status,
            RunStatus::Running
        );
        assert!(store
            .claim("unknown", Claim::Suspended("s1"), &lease("x"))
            .await
            .unwrap()
            .is_none());
        assert!(store.load("unknown").await.unwrap().is_none());
        // A failed run is taken once by a retry.
        store
            .save(&RunRecord {
                id: "r1".into(),
                status: RunStatus::Failed,
                suspension: None,
                state: json!({"n": 2}),
                lease: first.lease.clone(),
            })
            .await
            .unwrap();
        assert!(store
            .claim("r1", Claim::Failed, &lease("x"))
            .await
            .unwrap()
            .is_some());
        assert!(store
            .claim("r1", Claim::Failed, &lease("x"))
            .await
            .unwrap()
            .is_none());
    }

    #[tokio::test]
    async fn memory_claims_once() {
        claims_once(&MemoryRunStore::default()).await;
    }

    #[tokio::test]
    async fn the_memory_store_is_bounded() {
        let store = MemoryRunStore::with_capacity(2);
        let run = |id: &str, status| RunRecord {
            id: id.into(),
            status,
            suspension: None,
            state: json!({}),
            lease: None,
        };
        store.save(&run("a", RunStatus::Suspended)).await.unwrap();
        store.save(&run("b", RunStatus::Suspended)).await.unwrap();
        // Full of runs that still wait: a new one is refused, the old ones stay.
        let e = store
            .save(&run("c", RunStatus::Suspended))
            .await
            .unwrap_err();
        assert!(e.is_store() && e.to_string().contains("full"), "{e}");
        // Saving a kept run is never refused.
        store.save(&run("a", RunStatus::Finished)).await.unwrap();
        // An ended run makes room.
        store.save(&run("c", RunStatus::Suspended)).await.unwrap();
        assert!(store.load("a").await.unwrap().is_none());
        assert!(store.load("b").await.unwrap().is_some());
        let page = store.list(&RunFilter::new()).await.unwrap();
        assert_eq!(page.runs.len(), 2);
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_claims_once_even_when_many_try_at_once() {
        let dir = std::env::temp_dir().join(format!("mcp-agent-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = SqliteRunStore::open(dir.join("runs.sqlite3")).unwrap();
        claims_once(&store).await;
        // Twenty claims at once on another suspended run: exactly one wins.
        store
            .save(&RunRecord {
                id: "r2".into(),
                status: RunStatus::Suspended,
                suspension: Some("s".into()),
                state: json!({}),
                lease: None,
            })
            .await
            .unwrap();
        let tries: Vec<_> = (0..20)
            .map(|_| {
                let s = SqliteRunStore::open(dir.join("runs.sqlite3")).unwrap();
                tokio::spawn(async move {
                    s.claim("r2", Claim::Suspended("s"), &lease("x"))
                        .await
                        .unwrap()
                        .is_some()
                })
            })
            .collect();
        let mut won = 0;
        for t in tries {
            won += usize::from(t.await.unwrap());
        }
        assert_eq!(won, 1);
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Runs kept in PostgreSQL (table `mcp_agent_runs`, created when missing), for
/// applications on many machines: a run suspended on one is resumed on another. Claims
/// are single `UPDATE … WHERE status = 'suspended' RETURNING …` statements, so a
/// decision applies once across every instance. TLS for anything but loopback.
#[cfg(feature = "postgres")]
#[derive(Clone, Debug)]
pub struct PostgresRunStore {
    pool: std::sync::Arc<mcp_runtime::__private::PgPool>,
}

#[cfg(feature = "postgres")]
impl PostgresRunStore {
    /// Connects (`postgres://user:password@host/db`) and creates the table when missing.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = mcp_runtime::__private::PgPool::new(url).map_err(pg)?;
        pool.create_once(
            "mcp_agent_runs",
            "CREATE TABLE IF NOT EXISTS mcp_agent_runs (
                 id text PRIMARY KEY,
                 status text NOT NULL,
                 state text NOT NULL,
                 updated_at timestamptz NOT NULL DEFAULT now()
             );
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS suspension text;
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS lease_owner text;
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS lease_until bigint;
             CREATE TABLE IF NOT EXISTS mcp_agent_allowances (
                 id text PRIMARY KEY,
                 allowance text NOT NULL
             );",
        )
        .await
        .map_err(pg)?;
        Ok(PostgresRunStore {
            pool: std::sync::Arc::new(pool),
        })
    }

    /// One run, from a query returning `id, status, suspension, state, lease_owner,
    /// lease_until`.
    async fn query_opt(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn mcp_runtime::__private::tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Option<RunRecord>> {
        let client = self.pool.client().await.map_err(pg)?;
        let row = client
            .query_opt(sql, params)
            .await
            .map_err(|e| pg(mcp_runtime::__private::PgPool::error(what, e)))?;
        row.map(|r| record((r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5))))
            .transpose()
    }
}

#[cfg(feature = "postgres")]
fn pg(e: mcp_runtime::Error) -> Error {
    Error::store(e.to_string())
}

#[cfg(feature = "postgres")]
impl RunStore for PostgresRunStore {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let client = self.pool.client().await.map_err(pg)?;
            let state = run.state.to_string();
            let (owner, until) = lease_columns(&run.lease);
            // Fenced: a row held by another lease owner is left as it is.
            let n = client
                .execute(
                    "INSERT INTO mcp_agent_runs (id, status, state, suspension, lease_owner, lease_until)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state,
                       suspension = EXCLUDED.suspension, lease_until = EXCLUDED.lease_until,
                       updated_at = now()
                     WHERE mcp_agent_runs.lease_owner IS NOT DISTINCT FROM EXCLUDED.lease_owner",
                    &[&run.id, &run.status.as_str(), &state, &run.suspension, &owner, &until],
                )
                .await
                .map_err(|e| pg(mcp_runtime::__private::PgPool::error("saving a run", e)))?;
            if n == 0 {
                return Err(lease_lost(&run.id));
            }
            Ok(())
        })
    }

    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        Box::pin(async move {
            self.query_opt(
                "reading a run",
                "SELECT id, status, suspension, state, lease_owner, lease_until FROM mcp_agent_runs WHERE id = $1",
                &[&id],
            )
            .await
        })
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        claim: Claim<'a>,
        lease: &'a Lease,
    ) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        Box::pin(async move {
            let (status, suspension) = (claim.status(), claim.suspension());
            let stale = claim.stale_before();
            let until = sql_int(lease.until);
            self.query_opt(
                "claiming a run",
                "UPDATE mcp_agent_runs SET status = 'running', updated_at = now(),
                   lease_owner = $4, lease_until = $5
                 WHERE id = $1 AND status = $2 AND ($3::text IS NULL OR suspension = $3)
                   AND ($6::bigint IS NULL OR lease_until IS NULL OR lease_until < $6)
                 RETURNING id, status, suspension, state, lease_owner, lease_until",
                &[&id, &status, &suspension, &lease.owner, &until, &stale],
            )
            .await
        })
    }

    fn renew<'a>(&'a self, id: &'a str, lease: &'a Lease) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let until = sql_int(lease.until);
            let client = self.pool.client().await.map_err(pg)?;
            let row = client
                .query_one(
                    "WITH renewed AS (
                       UPDATE mcp_agent_runs SET lease_until = $3
                       WHERE id = $1 AND lease_owner = $2 RETURNING id)
                     SELECT (SELECT count(*) FROM renewed),
                            (SELECT count(*) FROM mcp_agent_runs WHERE id = $1)",
                    &[&id, &lease.owner, &until],
                )
                .await
                .map_err(|e| pg(mcp_runtime::__private::PgPool::error("renewing a lease", e)))?;
            let (renewed, kept): (i64, i64) = (row.get(0), row.get(1));
            Ok(renewed > 0 || kept == 0)
        })
    }

    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<RunPage>> {
        Box::pin(async move {
            let status = filter.status.map(RunStatus::as_str);
            let before = filter.before.map(|b| b.min(i64::MAX as u64) as i64);
            let after = filter.after.map(|a| a.min(i64::MAX as u64) as i64);
            let size = filter.page_size();
            let client = self.pool.client().await.map_err(pg)?;
            let rows = client
                .query(
                    "SELECT id, status, suspension, extract(epoch FROM updated_at)::bigint
                     FROM mcp_agent_runs
                     WHERE ($1::text IS NULL OR status = $1)
                       AND ($2::bigint IS NULL OR updated_at < to_timestamp($2::bigint))
                       AND ($3::bigint IS NULL OR updated_at >= to_timestamp($3::bigint))
                       AND ($4::text IS NULL OR id > $4)
                     ORDER BY id LIMIT $5",
                    &[
                        &status,
                        &before,
                        &after,
                        &filter.cursor,
                        &((size + 1) as i64),
                    ],
                )
                .await
                .map_err(|e| pg(mcp_runtime::__private::PgPool::error("listing runs", e)))?;
            let mut runs = Vec::new();
            for r in rows {
                let status: String = r.get(1);
                let status = RunStatus::parse(&status)
                    .ok_or_else(|| Error::store(format!("unknown run status `{status}`")))?;
                let at: i64 = r.get(3);
                runs.push(RunSummary::new(
                    r.get(0),
                    status,
                    r.get(2),
                    at.max(0) as u64,
                ));
            }
            Ok(page_of(runs, size))
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let client = self.pool.client().await.map_err(pg)?;
            client
                .execute("DELETE FROM mcp_agent_runs WHERE id = $1", &[&id])
                .await
                .map(|n| n > 0)
                .map_err(|e| pg(mcp_runtime::__private::PgPool::error("deleting a run", e)))
        })
    }

    fn prune(&self, secs: u64) -> BoxFuture<'_, Result<u64>> {
        Box::pin(async move {
            let before = secs.min(i64::MAX as u64) as i64;
            let client = self.pool.client().await.map_err(pg)?;
            client
                .execute(
                    "DELETE FROM mcp_agent_runs WHERE status IN ('finished', 'cancelled')
                     AND updated_at < to_timestamp($1::bigint)",
                    &[&before],
                )
                .await
                .map_err(|e| pg(mcp_runtime::__private::PgPool::error("pruning runs", e)))
        })
    }

    fn save_allowance<'a>(
        &'a self,
        id: &'a str,
        allowance: &'a Value,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let client = self.pool.client().await.map_err(pg)?;
            client
                .execute(
                    "INSERT INTO mcp_agent_allowances (id, allowance) VALUES ($1, $2)
                     ON CONFLICT (id) DO UPDATE SET allowance = EXCLUDED.allowance",
                    &[&id, &allowance.to_string()],
                )
                .await
                .map(|_| ())
                .map_err(|e| {
                    pg(mcp_runtime::__private::PgPool::error(
                        "saving an allowance",
                        e,
                    ))
                })
        })
    }

    fn allowances(&self) -> BoxFuture<'_, Result<Vec<Value>>> {
        Box::pin(async move {
            let client = self.pool.client().await.map_err(pg)?;
            let rows = client
                .query(
                    "SELECT allowance FROM mcp_agent_allowances ORDER BY id LIMIT $1",
                    &[&(MAX_ALLOWANCES as i64)],
                )
                .await
                .map_err(|e| {
                    pg(mcp_runtime::__private::PgPool::error(
                        "reading allowances",
                        e,
                    ))
                })?;
            rows.iter()
                .map(|r| allowance_value(r.get::<_, &str>(0)))
                .collect()
        })
    }

    fn delete_allowance<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let client = self.pool.client().await.map_err(pg)?;
            client
                .execute("DELETE FROM mcp_agent_allowances WHERE id = $1", &[&id])
                .await
                .map(|n| n > 0)
                .map_err(|e| {
                    pg(mcp_runtime::__private::PgPool::error(
                        "deleting an allowance",
                        e,
                    ))
                })
        })
    }
}
