//! How the PostgreSQL store's rows read: a column, checked; a run with its transcript
//! and blobs, and the columns that read them in the same statement.

use super::contract::RunRecord;
use super::rows::{record, with_log};
use crate::error::{Error, Result};

/// Column `i` of `row` as `T`; a column of another type (a table changed behind the
/// store's back) is the store's error, not a panic.
pub(super) fn col<'a, T>(
    row: &'a mcp_runtime_core::postgres::tokio_postgres::Row,
    i: usize,
) -> Result<T>
where
    T: mcp_runtime_core::postgres::tokio_postgres::types::FromSql<'a>,
{
    row.try_get(i)
        .map_err(|e| Error::store(format!("a stored row cannot be read (column {i}): {e}")))
}

/// The columns a run is read from, of the row `t` (the table or its alias): the row's
/// own, then its transcript `from..to` and its blobs, read by the same statement.
pub(super) fn columns(t: &str) -> String {
    format!(
        "{t}.id, {t}.status, {t}.suspension, {t}.state, {t}.lease_owner, {t}.lease_until,
         {t}.transcript_from, {t}.transcript_to,
         ARRAY(SELECT x.entry FROM mcp_agent_transcripts x WHERE x.run_id = {t}.id
               AND x.n >= {t}.transcript_from AND x.n < {t}.transcript_to ORDER BY x.n),
         ARRAY(SELECT b.digest FROM mcp_agent_blobs b WHERE b.run_id = {t}.id ORDER BY b.digest),
         ARRAY(SELECT b.data FROM mcp_agent_blobs b WHERE b.run_id = {t}.id ORDER BY b.digest)"
    )
}

/// A run from a row of [`columns`], with `status` for its status.
pub(super) fn run_of(
    r: &mcp_runtime_core::postgres::tokio_postgres::Row,
    status: String,
) -> Result<RunRecord> {
    let run = record((
        col(r, 0)?,
        status,
        col(r, 2)?,
        col(r, 3)?,
        col(r, 4)?,
        col(r, 5)?,
        col(r, 6)?,
        col(r, 7)?,
    ))?;
    let entries: Vec<&str> = col(r, 8)?;
    let (digests, data): (Vec<String>, Vec<Vec<u8>>) = (col(r, 9)?, col(r, 10)?);
    let mut blobs = Vec::with_capacity(digests.len());
    for (digest, bytes) in digests.into_iter().zip(data) {
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::store(format!("a stored blob ({digest}) is not UTF-8 text")))?;
        blobs.push((digest, text));
    }
    with_log(run, entries, blobs)
}
