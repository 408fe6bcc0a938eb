//! The run store conformance suite: one set of tests of what [`RunStore`] promises —
//! transcripts appended and large values kept once, claims, leases and fencing, decisions, the sent ledger and integrity, allowances,
//! the event log (numbered, read after a number, waited for), list / filter / cursor paging, owner columns, prune, capacity — run against every
//! backend alike (memory, SQLite, PostgreSQL). A new backend is accepted when it
//! passes: give it a [`Backend`] constructor and one `store_suite!` line at the
//! bottom, then `cargo nextest run -p mcp-agent store_suite::<name>::`.
//!
//! Each behaviour is one generic `async fn(&Backend)` in a module of its own; the
//! `store_suite!` macro expands one `#[tokio::test]` per behaviour for a backend.

use std::future::Future;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use mcp_agent::runtime::BoxFuture;
use mcp_agent::{
    Lease, MemoryRunStore, PostgresRunStore, RunRecord, RunStatus, RunStore, SqliteRunStore,
};
use serde_json::Value;

use super::{scratch, Postgres};

mod appended;
mod claims;
mod due;
mod integrity;
mod kept;
mod leases;
mod limits;
mod listing;
mod numbered;
mod owners;

/// A backend under test: opens handles on one store's data — each call a new one, as
/// another process (or another machine) would open it; what one handle keeps, every
/// other sees. It keeps what the store needs alive (a folder, a database server).
pub(crate) struct Backend {
    open: Box<dyn Fn() -> BoxFuture<'static, Arc<dyn RunStore>> + Send + Sync>,
    _keep: Box<dyn std::any::Any + Send + Sync>,
}

impl Backend {
    /// A backend from a function that opens a handle on its data, and what must live
    /// as long as the data does.
    pub(crate) fn new<F, Fut>(open: F, keep: impl std::any::Any + Send + Sync) -> Backend
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Arc<dyn RunStore>> + Send + 'static,
    {
        Backend {
            open: Box::new(move || Box::pin(open())),
            _keep: Box::new(keep),
        }
    }

    /// A new handle on the store's data.
    pub(crate) async fn open(&self) -> Arc<dyn RunStore> {
        (self.open)().await
    }

    /// One [`MemoryRunStore`] (a process's handles share it).
    pub(crate) fn memory(_: &str) -> Backend {
        let store: Arc<dyn RunStore> = Arc::new(MemoryRunStore::default());
        Backend::new(move || std::future::ready(store.clone()), ())
    }

    /// A [`SqliteRunStore`] file of its own for the test `tag`; each handle a
    /// connection of its own.
    pub(crate) fn sqlite(tag: &str) -> Backend {
        let dir = scratch(&format!("suite-{tag}"));
        let path = dir.join("runs.sqlite3");
        let open = move || {
            let store: Arc<dyn RunStore> = Arc::new(SqliteRunStore::open(&path).unwrap());
            std::future::ready(store)
        };
        Backend::new(open, Scratch(dir))
    }

    /// A real PostgreSQL of its own; each handle a [`PostgresRunStore`] (a pool) of
    /// its own.
    pub(crate) fn postgres(_: &str) -> Backend {
        let pg = Postgres::start();
        let url = pg.url.clone();
        let open = move || {
            let url = url.clone();
            async move {
                let store: Arc<dyn RunStore> =
                    Arc::new(PostgresRunStore::connect(&url).await.unwrap());
                store
            }
        };
        Backend::new(open, pg)
    }
}

/// A scratch folder, removed when the backend goes.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The time now, in milliseconds since the epoch (what leases count in).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The time now, in seconds since the epoch (what `list` and `prune` count in).
pub(crate) fn now_secs() -> u64 {
    now_ms() / 1000
}

/// A lease of `owner` until `until` (milliseconds since the epoch).
pub(crate) fn held(owner: &str, until: u64) -> Lease {
    Lease {
        owner: owner.into(),
        until,
    }
}

/// A lease of `owner` that does not end during a test.
pub(crate) fn lease(owner: &str) -> Lease {
    held(owner, u64::MAX / 2)
}

/// The first save of run `id`: in `status`, with `state`, no lease, no events.
pub(crate) fn run(id: &str, status: RunStatus, state: Value) -> RunRecord {
    RunRecord {
        id: id.into(),
        status,
        suspension: None,
        state,
        lease: None,
        transcript: Default::default(),
        blobs: Vec::new(),
        events: Vec::new(),
        durability: Default::default(),
        ledger: Vec::new(),
        first: true,
    }
}

/// The first save of run `id`, suspended in `suspension`.
pub(crate) fn suspended(id: &str, suspension: &str, state: Value) -> RunRecord {
    RunRecord {
        suspension: Some(suspension.into()),
        ..run(id, RunStatus::Suspended, state)
    }
}

/// One `#[tokio::test]` per behaviour of the suite for one backend: `$name` is the
/// module the tests are in (`store_suite::$name::claims_once`, …), `$backend` a
/// function from the test's name to its [`Backend`] (a fresh store for each test).
macro_rules! store_suite {
    ($name:ident, $backend:expr) => {
        store_suite!(@tests $name, $backend,
            appended::a_transcript_is_appended,
            appended::a_new_segment_replaces_the_old_and_goes_with_the_run,
            claims::claims_once,
            claims::one_claimer_wins_among_many,
            claims::a_claim_takes_only_what_it_names,
            due::claim_due_takes_what_is_due,
            due::two_claimers_never_get_the_same_run,
            leases::leases_fence_and_end,
            leases::a_lease_is_renewed_only_by_its_owner,
            integrity::a_decision_is_kept_once_and_spent_once,
            integrity::the_ledger_is_append_only_and_outlives_the_run,
            integrity::a_deleted_run_stays_deleted,
            integrity::a_tampered_or_mixed_row_is_refused,
            kept::allowances_are_kept,
            kept::events_are_kept_in_order,
            kept::a_run_is_kept_as_saved,
            listing::list_filters_and_pages,
            listing::prune_forgets_only_runs_that_ended,
            owners::list_filters_by_owner,
            limits::events_and_the_ledger_are_capped,
            limits::allowances_are_capped,
            numbered::events_are_numbered_without_gaps,
            numbered::a_waiter_learns_of_new_events,
        );
    };
    (@tests $name:ident, $backend:expr, $($module:ident :: $behaviour:ident),* $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $behaviour() {
                    let backend = ($backend)(concat!(stringify!($name), "-", stringify!($behaviour)));
                    super::$module::$behaviour(&backend).await;
                }
            )*
        }
    };
}

store_suite!(memory, Backend::memory);
store_suite!(sqlite, Backend::sqlite);
store_suite!(postgres, Backend::postgres);
