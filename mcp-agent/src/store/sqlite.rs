//! Runs kept in a SQLite file.

use std::sync::Mutex;

use mcp_runtime::BoxFuture;
use serde_json::Value;

use super::contract::{
    page_limit, page_of, sql_int, Claim, Durability, Lease, LedgerEntry, RunFilter, RunPage,
    RunRecord, RunStatus, RunStore, MAX_ALLOWANCES, MAX_EVENTS, MAX_LEDGER,
};
use super::owner::{labels_from, labels_json, Owner};
use super::rows::{
    allowance_value, event_value, lease_columns, ledger_entry, log_entries, numbered_event,
};
use super::sqlite_statements::{claim_due, fail, full, now, one_run, save, SaveRow, COLUMNS};
use crate::error::{Error, Result};
use mcp_runtime_core::lock;

mod files;

use files::{private_dir, private_file};

/// Runs kept in a SQLite file (created with its table when missing): no server, no
/// setup, and a run suspended by one process can be resumed by another. A watcher of
/// a run ([`Agent::watch`](crate::Agent::watch)) in another process learns of new
/// events by a bounded poll: it reads again every [`EVENTS_POLL`](crate::EVENTS_POLL)
/// (200 ms) while it waits (in the process that runs it, at once). Claims are
/// single `UPDATE … WHERE status = 'suspended'` statements, so a decision applies once
/// even with several processes on one file.
#[cfg(feature = "sqlite")]
#[derive(Clone)]
pub struct SqliteRunStore {
    path: std::path::PathBuf,
    /// One connection, reused (opened again after a failure).
    pub(super) conn: std::sync::Arc<Mutex<Option<rusqlite::Connection>>>,
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
    /// A store in this file. It holds prompts, tool arguments and results, so it is
    /// private to this user: a missing folder is created `0700`, the file (and the
    /// `-wal` and `-shm` files SQLite keeps beside it, which take the file's mode) is
    /// created `0600`, and an existing file that others may read or write is tightened
    /// to `0600` (or, when that cannot be done, refused with an error saying so).
    pub fn open(path: impl Into<std::path::PathBuf>) -> Result<Self> {
        let store = SqliteRunStore {
            path: path.into(),
            conn: std::sync::Arc::new(Mutex::new(None)),
        };
        if let Some(dir) = store.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            private_dir(dir)?;
        }
        private_file(&store.path)?;
        let c = store.connection()?;
        // Write-ahead logging: one fsync per flushed save (synchronous=FULL; a
        // deferred save is NORMAL), and readers in other processes do not block a
        // writer.
        c.execute_batch(
            "PRAGMA journal_mode = WAL;
                 CREATE TABLE IF NOT EXISTS mcp_agent_runs (
                 id TEXT PRIMARY KEY,
                 status TEXT NOT NULL,
                 state TEXT NOT NULL,
                 updated_at INTEGER NOT NULL,
                 suspension TEXT,
                 lease_owner TEXT,
                 lease_until INTEGER,
                 due_at INTEGER
             );
             CREATE TABLE IF NOT EXISTS mcp_agent_allowances (
                 id TEXT PRIMARY KEY,
                 allowance TEXT NOT NULL
             );
             CREATE TABLE IF NOT EXISTS mcp_agent_events (
                 run_id TEXT NOT NULL,
                 seq INTEGER NOT NULL,
                 event TEXT NOT NULL,
                 PRIMARY KEY (run_id, seq)
             );
             CREATE TABLE IF NOT EXISTS mcp_agent_transcripts (
                 run_id TEXT NOT NULL,
                 n INTEGER NOT NULL,
                 entry TEXT NOT NULL,
                 PRIMARY KEY (run_id, n)
             );
             CREATE TABLE IF NOT EXISTS mcp_agent_blobs (
                 run_id TEXT NOT NULL,
                 digest TEXT NOT NULL,
                 data TEXT NOT NULL,
                 PRIMARY KEY (run_id, digest)
             );
             CREATE TABLE IF NOT EXISTS mcp_agent_ledger (
                 run_id TEXT NOT NULL,
                 kind TEXT NOT NULL,
                 item TEXT NOT NULL,
                 entry TEXT NOT NULL,
                 at INTEGER NOT NULL,
                 PRIMARY KEY (run_id, kind, item)
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
    /// One made before runs had owners gains their columns, empty until the run's
    /// next save.
    fn migrate(&self, c: &rusqlite::Connection) -> Result<()> {
        for (column, kind) in [
            ("suspension", "TEXT"),
            ("lease_owner", "TEXT"),
            ("lease_until", "INTEGER"),
            ("tenant", "TEXT"),
            ("started_by", "TEXT"),
            ("labels", "TEXT"),
            ("input_tokens", "INTEGER"),
            ("output_tokens", "INTEGER"),
            ("due_at", "INTEGER"),
            ("transcript_from", "INTEGER"),
            ("transcript_to", "INTEGER"),
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
        // The inbox lists a tenant's (or a person's) waiting runs; workers find due ones.
        c.execute_batch(
            "CREATE INDEX IF NOT EXISTS mcp_agent_runs_tenant ON mcp_agent_runs (tenant, status, id);
             CREATE INDEX IF NOT EXISTS mcp_agent_runs_started_by ON mcp_agent_runs (started_by, status, id);
             CREATE INDEX IF NOT EXISTS mcp_agent_runs_due ON mcp_agent_runs (due_at) WHERE due_at IS NOT NULL;
             CREATE INDEX IF NOT EXISTS mcp_agent_runs_running ON mcp_agent_runs (lease_until) WHERE status = 'running';",
        )
        .map_err(|e| self.fail(e))
    }

    fn fail(&self, e: rusqlite::Error) -> Error {
        fail(&self.path, e)
    }

    fn connection(&self) -> Result<rusqlite::Connection> {
        let c = rusqlite::Connection::open(&self.path).map_err(|e| self.fail(e))?;
        // Other processes may hold the file a moment: wait for them.
        c.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(|e| self.fail(e))?;
        // What a save replaces (an answer kept only until its call was sent) is
        // overwritten with zeros in the file, not left in free space.
        c.execute_batch("PRAGMA secure_delete = ON;")
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

#[cfg(feature = "sqlite")]
impl RunStore for SqliteRunStore {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, Result<()>> {
        let (id, status, state) = (run.id.clone(), run.status.as_str(), run.state.to_string());
        let owner_columns = Owner::of(&run.state);
        let suspension = run.suspension.clone();
        let (owner, until) = lease_columns(&run.lease);
        let due = run.due_at().map(sql_int);
        let events: Vec<String> = run.events.iter().map(Value::to_string).collect();
        let deferred = run.durability == Durability::Deferred;
        let first = run.first;
        let (first_entry, entries) = log_entries(&run.transcript);
        let transcript = (
            sql_int(run.transcript.from),
            sql_int(run.transcript.to),
            first_entry,
            entries,
            run.transcript.starts_segment(),
        );
        let blobs: Vec<(String, String)> = run
            .blobs
            .iter()
            .map(|b| (b.digest.clone(), b.data.clone()))
            .collect();
        let mut ledger = Vec::with_capacity(run.ledger.len());
        for e in &run.ledger {
            let entry = serde_json::to_string(e)
                .map_err(|e| Error::store(format!("cannot encode a ledger entry: {e}")));
            match entry {
                Ok(entry) => ledger.push((e.kind.as_str(), e.item.clone(), entry)),
                Err(e) => return Box::pin(async move { Err(e) }),
            }
        }
        Box::pin(self.blocking(move |s, c| {
            let row = SaveRow {
                id,
                status,
                state,
                suspension,
                owner,
                until,
                due,
                first,
                columns: owner_columns,
                ledger,
                transcript,
                blobs,
            };
            if !deferred {
                return save(&s.path, c, &row, &events);
            }
            // A deferred save is not fsynced: in WAL mode with synchronous=NORMAL a
            // commit is in the log (a crash of this process keeps it) and reaches the
            // disk with the next fsynced commit or checkpoint. All else this
            // connection writes stays fsynced.
            let sync = |pragma: &str| {
                c.prepare_cached(pragma)
                    .and_then(|mut p| p.execute([]))
                    .map_err(|e| s.fail(e))
            };
            sync("PRAGMA synchronous = NORMAL")?;
            let saved = save(&s.path, c, &row, &events);
            sync("PRAGMA synchronous = FULL")?;
            saved
        }))
    }

    fn events<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<Value>>> {
        let id = id.to_owned();
        Box::pin(self.blocking(move |s, c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT event FROM mcp_agent_events WHERE run_id = ?1 ORDER BY seq LIMIT ?2",
                )
                .map_err(|e| s.fail(e))?;
            let rows = stmt
                .query_map(rusqlite::params![id, MAX_EVENTS as i64], |r| {
                    r.get::<_, String>(0)
                })
                .map_err(|e| s.fail(e))?;
            let mut out = Vec::new();
            for row in rows {
                out.push(event_value(&row.map_err(|e| s.fail(e))?)?);
            }
            Ok(out)
        }))
    }

    fn events_after<'a>(
        &'a self,
        id: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<(u64, Value)>>> {
        let (id, after, limit) = (
            id.to_owned(),
            sql_int(after.unwrap_or(0)),
            page_limit(limit),
        );
        Box::pin(self.blocking(move |s, c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT seq, event FROM mcp_agent_events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                )
                .map_err(|e| s.fail(e))?;
            let rows = stmt
                .query_map(rusqlite::params![id, after, limit as i64], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                })
                .map_err(|e| s.fail(e))?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, text) = row.map_err(|e| s.fail(e))?;
                out.push(numbered_event(seq, &text)?);
            }
            Ok(out)
        }))
    }

    fn ledger<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LedgerEntry>>> {
        let id = id.to_owned();
        Box::pin(self.blocking(move |s, c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT entry FROM mcp_agent_ledger WHERE run_id = ?1 ORDER BY rowid LIMIT ?2",
                )
                .map_err(|e| s.fail(e))?;
            let rows = stmt
                .query_map(rusqlite::params![id, MAX_LEDGER as i64], |r| {
                    r.get::<_, String>(0)
                })
                .map_err(|e| s.fail(e))?;
            let mut out = Vec::new();
            for row in rows {
                out.push(ledger_entry(&row.map_err(|e| s.fail(e))?)?);
            }
            Ok(out)
        }))
    }

    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        let id = id.to_owned();
        Box::pin(self.blocking(move |s, c| {
            // The row, its transcript and its blobs from one snapshot.
            let tx =
                rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Deferred)
                    .map_err(|e| s.fail(e))?;
            let run = one_run(
                &s.path,
                &tx,
                &format!("SELECT {COLUMNS} FROM mcp_agent_runs WHERE id = ?1"),
                [&id],
            )?;
            let run = run.map(|r| full(&s.path, &tx, r)).transpose()?;
            tx.commit().map_err(|e| s.fail(e))?;
            Ok(run)
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
            let tx =
                rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)
                    .map_err(|e| s.fail(e))?;
            let run = one_run(
                &s.path,
                &tx,
                &format!(
                    "UPDATE mcp_agent_runs SET status = 'running', updated_at = ?2, lease_owner = ?5, lease_until = ?6
                     WHERE id = ?1 AND status = ?3 AND (?4 IS NULL OR suspension = ?4)
                       AND (?7 IS NULL OR lease_until IS NULL OR lease_until < ?7)
                     RETURNING {COLUMNS}"
                ),
                rusqlite::params![id, now(), status, suspension, owner, until, stale],
            )?;
            let run = run.map(|r| full(&s.path, &tx, r)).transpose()?;
            tx.commit().map_err(|e| s.fail(e))?;
            Ok(run)
        }))
    }

    fn claim_due<'a>(
        &'a self,
        now: u64,
        lease: &'a Lease,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>>> {
        let (owner, until) = (lease.owner.clone(), sql_int(lease.until));
        let (at, limit) = (sql_int(now), limit.min(1000) as i64);
        Box::pin(self.blocking(move |s, c| claim_due(&s.path, c, at, &owner, until, limit)))
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
        let (tenant, started_by) = (filter.tenant.clone(), filter.started_by.clone());
        let labels = (!filter.labels.is_empty()).then(|| labels_json(&filter.labels));
        Box::pin(self.blocking(move |s, c| {
            // Every label asked for is among the run's (a column that is not JSON has
            // none).
            let mut stmt = c
                .prepare_cached(
                    "SELECT id, status, suspension, updated_at, tenant, started_by, labels,
                       input_tokens, output_tokens FROM mcp_agent_runs
                     WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR updated_at < ?2)
                       AND (?3 IS NULL OR updated_at >= ?3) AND (?4 IS NULL OR id > ?4)
                       AND (?6 IS NULL OR tenant = ?6) AND (?7 IS NULL OR started_by = ?7)
                       AND (?8 IS NULL OR NOT EXISTS (
                         SELECT 1 FROM json_each(?8) AS f WHERE NOT EXISTS (
                           SELECT 1 FROM json_each(CASE WHEN json_valid(labels) THEN labels ELSE '{}' END) AS l
                           WHERE l.key = f.key AND l.value = f.value)))
                     ORDER BY id LIMIT ?5",
                )
                .map_err(|e| s.fail(e))?;
            let rows = stmt
                .query_map(
                    rusqlite::params![
                        status,
                        before,
                        after,
                        cursor,
                        (size + 1) as i64,
                        tenant,
                        started_by,
                        labels
                    ],
                    |r| {
                        Ok((
                            (
                                r.get::<_, String>(0)?,
                                r.get::<_, String>(1)?,
                                r.get::<_, Option<String>>(2)?,
                                r.get::<_, i64>(3)?,
                            ),
                            (
                                r.get::<_, Option<String>>(4)?,
                                r.get::<_, Option<String>>(5)?,
                                r.get::<_, Option<String>>(6)?,
                                r.get::<_, Option<i64>>(7)?,
                                r.get::<_, Option<i64>>(8)?,
                            ),
                        ))
                    },
                )
                .map_err(|e| s.fail(e))?;
            let mut runs = Vec::new();
            for row in rows {
                let ((id, status, suspension, at), (tenant, started_by, labels, input, output)) =
                    row.map_err(|e| s.fail(e))?;
                let status = RunStatus::parse(&status)
                    .ok_or_else(|| Error::store(format!("unknown run status `{status}`")))?;
                let owner = Owner {
                    tenant,
                    started_by,
                    labels: labels_from(labels.as_deref()),
                    input_tokens: input.unwrap_or(0).max(0) as u64,
                    output_tokens: output.unwrap_or(0).max(0) as u64,
                };
                runs.push(owner.summary(id, status, suspension, at.max(0) as u64));
            }
            Ok(page_of(runs, size))
        }))
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let id = id.to_owned();
        Box::pin(self.blocking(move |s, c| {
            let tx =
                rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)
                    .map_err(|e| s.fail(e))?;
            for table in [
                "mcp_agent_events",
                "mcp_agent_transcripts",
                "mcp_agent_blobs",
            ] {
                tx.execute(&format!("DELETE FROM {table} WHERE run_id = ?1"), [&id])
                    .map_err(|e| s.fail(e))?;
            }
            let n = tx
                .execute("DELETE FROM mcp_agent_runs WHERE id = ?1", [&id])
                .map_err(|e| s.fail(e))?;
            tx.commit().map_err(|e| s.fail(e))?;
            Ok(n > 0)
        }))
    }

    fn prune(&self, secs: u64) -> BoxFuture<'_, Result<u64>> {
        let before = secs.min(i64::MAX as u64) as i64;
        Box::pin(self.blocking(move |s, c| {
            let tx = rusqlite::Transaction::new_unchecked(
                c,
                rusqlite::TransactionBehavior::Immediate,
            )
            .map_err(|e| s.fail(e))?;
            for table in ["mcp_agent_events", "mcp_agent_transcripts", "mcp_agent_blobs"] {
                tx.execute(
                    &format!(
                        "DELETE FROM {table} WHERE run_id IN (SELECT id FROM mcp_agent_runs
                           WHERE status IN ('finished', 'cancelled') AND updated_at < ?1)"
                    ),
                    [before],
                )
                .map_err(|e| s.fail(e))?;
            }
            let n = tx
                .execute(
                    "DELETE FROM mcp_agent_runs WHERE status IN ('finished', 'cancelled') AND updated_at < ?1",
                    [before],
                )
                .map_err(|e| s.fail(e))?;
            tx.commit().map_err(|e| s.fail(e))?;
            Ok(n as u64)
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
