//! Where runs are kept while they wait for a person: [`MemoryRunStore`] for one
//! process, [`SqliteRunStore`] (default feature `sqlite`) in a file, for runs resumed
//! by another process or after a restart.

mod appended;
mod contract;
mod memory;
mod owner;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_rows;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod rows;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_statements;
#[cfg(test)]
mod tests;

pub use memory::MemoryRunStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresRunStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteRunStore;

pub use appended::{Blob, Transcript};
pub(crate) use contract::{lease_lost, unix_now};
pub use contract::{
    Claim, Durability, Lease, LedgerEntry, LedgerKind, RunFilter, RunPage, RunRecord, RunStatus,
    RunStore, RunSummary, EVENTS_MAX_WAIT, EVENTS_POLL, MAX_EVENTS_PAGE,
};
pub(crate) use mcp_runtime_core::lock;
