//! The SQLite store's statements: a save (the run's row fenced by its lease, its
//! ledger entries, transcript entries, blobs and events, in one transaction), a run
//! read with its transcript and blobs, and due runs claimed in one transaction.

use std::path::Path;

use super::contract::{already_in_ledger, deleted, lease_lost, sql_int, Lease, RunRecord};
use super::owner::Owner;
use super::rows::{record, with_log, Row, UNREADABLE_BACK_OFF_MS};
use crate::error::{Error, Result};

/// An error of the store in the file at `path`.
pub(super) fn fail(path: &Path, e: rusqlite::Error) -> Error {
    let detail = format!("the run store {}: {e}", path.display());
    Error::store_from(detail, e)
}

/// The columns of one save.
pub(super) struct SaveRow {
    pub(super) id: String,
    pub(super) status: &'static str,
    pub(super) state: String,
    pub(super) suspension: Option<String>,
    pub(super) owner: Option<String>,
    pub(super) until: Option<i64>,
    /// When a worker should take the run up (`RunRecord::due_at`).
    pub(super) due: Option<i64>,
    pub(super) first: bool,
    /// The owner columns (from the state).
    pub(super) columns: Owner,
    /// The ledger entries: kind, item, entry.
    pub(super) ledger: Vec<(&'static str, String, String)>,
    /// The transcript's bounds, the number of the first entry appended, the entries
    /// appended, and whether this save starts a new segment at `from`.
    pub(super) transcript: (i64, i64, i64, Vec<String>, bool),
    /// The blobs to keep (once): digest, data.
    pub(super) blobs: Vec<(String, String)>,
}

/// One save: the state (fenced by its lease) and its events, in one transaction.
pub(super) fn save(
    path: &Path,
    c: &rusqlite::Connection,
    r: &SaveRow,
    events: &[String],
) -> Result<()> {
    // The state and its events in one transaction, taken for writing at once
    // (a deferred one could fail to upgrade while another process writes).
    let tx = rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| fail(path, e))?;
    // Fenced: a row held by another lease owner is left as it is. Only the first
    // save inserts: a later one finds the run deleted, and leaves it deleted.
    let (input_tokens, output_tokens) = r.columns.tokens();
    let (from, to, first_entry, entries, segment) = &r.transcript;
    let params = rusqlite::params![
        r.id,
        r.status,
        r.state,
        now(),
        r.suspension,
        r.owner,
        r.until,
        r.columns.tenant,
        r.columns.started_by,
        r.columns.labels_json(),
        input_tokens,
        output_tokens,
        r.due,
        from,
        to
    ];
    let n = if r.first {
        tx.prepare_cached(
            "INSERT INTO mcp_agent_runs (id, status, state, updated_at, suspension, lease_owner, lease_until,
               tenant, started_by, labels, input_tokens, output_tokens, due_at, transcript_from,
               transcript_to)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
             ON CONFLICT(id) DO UPDATE SET status = excluded.status, state = excluded.state,
               updated_at = excluded.updated_at, suspension = excluded.suspension,
               lease_until = excluded.lease_until, tenant = excluded.tenant,
               started_by = excluded.started_by, labels = excluded.labels,
               input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
               due_at = excluded.due_at, transcript_from = excluded.transcript_from,
               transcript_to = excluded.transcript_to
             WHERE mcp_agent_runs.lease_owner IS excluded.lease_owner",
        )
        .and_then(|mut upsert| upsert.execute(params))
    } else {
        tx.prepare_cached(
            "UPDATE mcp_agent_runs SET status = ?2, state = ?3, updated_at = ?4, suspension = ?5,
               lease_until = ?7, tenant = ?8, started_by = ?9, labels = ?10, input_tokens = ?11,
               output_tokens = ?12, due_at = ?13, transcript_from = ?14, transcript_to = ?15
             WHERE id = ?1 AND lease_owner IS ?6",
        )
        .and_then(|mut update| update.execute(params))
    }
    .map_err(|e| fail(path, e))?;
    if n == 0 {
        let kept: i64 = tx
            .prepare_cached("SELECT COUNT(*) FROM mcp_agent_runs WHERE id = ?1")
            .and_then(|mut q| q.query_row([&r.id], |row| row.get(0)))
            .map_err(|e| fail(path, e))?;
        return Err(if kept == 0 {
            deleted(&r.id)
        } else {
            lease_lost(&r.id)
        });
    }
    if !r.ledger.is_empty() {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO mcp_agent_ledger (run_id, kind, item, entry, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(|e| fail(path, e))?;
        for (kind, item, entry) in &r.ledger {
            match insert.execute(rusqlite::params![r.id, kind, item, entry, now()]) {
                Ok(_) => {}
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    return Err(already_in_ledger(&r.id));
                }
                Err(e) => return Err(fail(path, e)),
            }
        }
    }
    if *segment {
        // A new segment: the old one's entries go, and the blobs it does not carry.
        tx.prepare_cached("DELETE FROM mcp_agent_transcripts WHERE run_id = ?1 AND n < ?2")
            .and_then(|mut d| d.execute(rusqlite::params![r.id, from]))
            .map_err(|e| fail(path, e))?;
        let carried = serde_json::to_string(&r.blobs.iter().map(|(d, _)| d).collect::<Vec<_>>())
            .map_err(|e| Error::store(format!("cannot encode the blobs' digests: {e}")))?;
        tx.prepare_cached(
            "DELETE FROM mcp_agent_blobs WHERE run_id = ?1
               AND digest NOT IN (SELECT value FROM json_each(?2))",
        )
        .and_then(|mut d| d.execute(rusqlite::params![r.id, carried]))
        .map_err(|e| fail(path, e))?;
    }
    if !entries.is_empty() {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO mcp_agent_transcripts (run_id, n, entry) VALUES (?1, ?2, ?3)
                 ON CONFLICT(run_id, n) DO UPDATE SET entry = excluded.entry",
            )
            .map_err(|e| fail(path, e))?;
        for (i, entry) in entries.iter().enumerate() {
            insert
                .execute(rusqlite::params![r.id, first_entry + i as i64, entry])
                .map_err(|e| fail(path, e))?;
        }
    }
    if !r.blobs.is_empty() {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO mcp_agent_blobs (run_id, digest, data) VALUES (?1, ?2, ?3)
                 ON CONFLICT(run_id, digest) DO NOTHING",
            )
            .map_err(|e| fail(path, e))?;
        for (digest, data) in &r.blobs {
            insert
                .execute(rusqlite::params![r.id, digest, data])
                .map_err(|e| fail(path, e))?;
        }
    }
    if !events.is_empty() {
        let last: i64 = tx
            // The last event's number by the key's order (a look-up, not a scan of
            // the run's events).
            .prepare_cached(
                "SELECT COALESCE((SELECT seq FROM mcp_agent_events WHERE run_id = ?1
                                  ORDER BY seq DESC LIMIT 1), 0)",
            )
            .and_then(|mut q| q.query_row([&r.id], |row| row.get(0)))
            .map_err(|e| fail(path, e))?;
        let mut insert = tx
            .prepare_cached("INSERT INTO mcp_agent_events (run_id, seq, event) VALUES (?1, ?2, ?3)")
            .map_err(|e| fail(path, e))?;
        for (i, event) in events.iter().enumerate() {
            insert
                .execute(rusqlite::params![r.id, last + 1 + i as i64, event])
                .map_err(|e| fail(path, e))?;
        }
    }
    tx.commit().map_err(|e| fail(path, e))
}

pub(super) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The columns a run is read from (see [`Row`]).
pub(super) const COLUMNS: &str =
    "id, status, suspension, state, lease_owner, lease_until, transcript_from, transcript_to";

/// `run` with its transcript (`from..to`) and blobs, read on `c`.
pub(super) fn full(path: &Path, c: &rusqlite::Connection, run: RunRecord) -> Result<RunRecord> {
    let (from, to) = (sql_int(run.transcript.from), sql_int(run.transcript.to));
    let entries = c
        .prepare_cached(
            "SELECT entry FROM mcp_agent_transcripts WHERE run_id = ?1 AND n >= ?2 AND n < ?3 ORDER BY n",
        )
        .and_then(|mut q| {
            q.query_map(rusqlite::params![run.id, from, to], |r| {
                r.get::<_, String>(0)
            })?
            .collect::<rusqlite::Result<Vec<String>>>()
        })
        .map_err(|e| fail(path, e))?;
    let blobs = c
        .prepare_cached("SELECT digest, data FROM mcp_agent_blobs WHERE run_id = ?1")
        .and_then(|mut q| {
            q.query_map([&run.id], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<Vec<(String, String)>>>()
        })
        .map_err(|e| fail(path, e))?;
    with_log(run, entries, blobs)
}

/// The columns of [`COLUMNS`], read from one row.
fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ))
}

/// The run a statement returns (its [`COLUMNS`]), if it returns one.
pub(super) fn one_run(
    path: &Path,
    c: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Option<RunRecord>> {
    use rusqlite::OptionalExtension as _;
    c.query_row(sql, params, row)
        .optional()
        .map_err(|e| fail(path, e))?
        .map(record)
        .transpose()
}

/// `claim_due` in one immediate transaction (the file's write lock is held from the
/// first read: no other process claims between the choice and the update).
pub(super) fn claim_due(
    path: &Path,
    c: &rusqlite::Connection,
    at: i64,
    owner: &str,
    until: i64,
    limit: i64,
) -> Result<Vec<RunRecord>> {
    let tx = rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| fail(path, e))?;
    let rows = tx
        .prepare_cached(
            // Each branch on an index of its own (one `WHERE … OR …` scans the
            // whole table, finished runs and all, under the write lock).
            "SELECT id, status, suspension, state, lease_owner, lease_until, transcript_from,
               transcript_to FROM mcp_agent_runs
             WHERE id IN (
               SELECT id FROM mcp_agent_runs WHERE due_at <= ?1 AND status IN ('suspended', 'failed')
               UNION ALL SELECT id FROM mcp_agent_runs WHERE status = 'running' AND lease_until IS NULL
               UNION ALL SELECT id FROM mcp_agent_runs WHERE status = 'running' AND lease_until < ?1)
             ORDER BY due_at LIMIT ?2",
        )
        .and_then(|mut q| {
            q.query_map(rusqlite::params![at, limit], row)?
            .collect::<rusqlite::Result<Vec<Row>>>()
        })
        .map_err(|e| fail(path, e))?;
    let mut claimed = Vec::with_capacity(rows.len());
    for row in rows {
        let id: String = row.0.clone();
        let mut run = match record(row).and_then(|r| full(path, &tx, r)) {
            Ok(run) => run,
            // A row that does not read is not this batch's end: it is left as it is,
            // not due (nor recoverable) for a minute, and the others go on.
            Err(e) => {
                tracing::warn!(run = %id, error = %e, "a due run cannot be read; it is left for a minute");
                let later = at.saturating_add(UNREADABLE_BACK_OFF_MS);
                tx.prepare_cached(
                    "UPDATE mcp_agent_runs SET due_at = ?2,
                       lease_until = CASE WHEN status = 'running' THEN ?2 ELSE lease_until END
                     WHERE id = ?1",
                )
                .and_then(|mut u| u.execute(rusqlite::params![id, later]))
                .map_err(|e| fail(path, e))?;
                continue;
            }
        };
        tx.prepare_cached(
            "UPDATE mcp_agent_runs SET status = 'running', updated_at = ?2, lease_owner = ?3, lease_until = ?4
             WHERE id = ?1",
        )
        .and_then(|mut u| u.execute(rusqlite::params![id, now(), owner, until]))
        .map_err(|e| fail(path, e))?;
        // Returned with the status it had before the claim (as `claim_due` says).
        run.lease = Some(Lease {
            owner: owner.to_owned(),
            until: until.max(0) as u64,
        });
        claimed.push(run);
    }
    tx.commit().map_err(|e| fail(path, e))?;
    Ok(claimed)
}
