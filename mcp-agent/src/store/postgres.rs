//! Runs kept in PostgreSQL.

use mcp_runtime::BoxFuture;
use mcp_runtime_core::postgres::PgPool;
use serde_json::Value;

use super::contract::{
    already_in_ledger, deleted, lease_lost, page_limit, page_of, sql_int, Claim, Durability, Lease,
    LedgerEntry, RunFilter, RunPage, RunRecord, RunStatus, RunStore, EVENTS_MAX_WAIT,
    MAX_ALLOWANCES, MAX_EVENTS, MAX_LEDGER,
};
use super::owner::{labels_from, labels_json, Owner};
use super::postgres_rows::{col, columns, run_of};
use super::rows::{
    allowance_value, event_value, lease_columns, ledger_entry, log_entries, numbered_event,
    UNREADABLE_BACK_OFF_MS,
};
use crate::error::{Error, Result};

/// Runs kept in PostgreSQL (table `mcp_agent_runs`, created when missing), for
/// applications on many machines: a run suspended on one is resumed on another. Claims
/// are single `UPDATE … WHERE status = 'suspended' RETURNING …` statements, so a
/// decision applies once across every instance. TLS for anything but a loopback
/// address, `localhost` itself or a Unix socket.
///
/// A save that appends events sends `NOTIFY mcp_agent_events` with the run's id in
/// its transaction; each store listens on one connection of its own (opened when a
/// watcher first waits, shared by all its watchers), so a watcher in any process
/// learns of new events as they are kept, without polling.
#[cfg(feature = "postgres")]
#[derive(Clone, Debug)]
pub struct PostgresRunStore {
    pool: std::sync::Arc<PgPool>,
    listener: std::sync::Arc<Listener>,
    statements: std::sync::Arc<Statements>,
}

/// The statements prepared on the pool's connection (one round trip a statement, not
/// two, and the server plans each once), forgotten when the connection is opened
/// again (the connection is held weakly: its address is never another's meanwhile).
#[cfg(feature = "postgres")]
#[derive(Debug, Default)]
struct Statements(std::sync::Mutex<Prepared>);

#[cfg(feature = "postgres")]
type Client = mcp_runtime_core::postgres::tokio_postgres::Client;

#[cfg(feature = "postgres")]
type Prepared = (
    std::sync::Weak<Client>,
    std::collections::HashMap<String, mcp_runtime_core::postgres::tokio_postgres::Statement>,
);

/// The channel a save notifies and the listener listens on.
#[cfg(feature = "postgres")]
const CHANNEL: &str = "mcp_agent_events";

/// The payload of a save that made a run due now (a run id is hexadecimal: never
/// this).
#[cfg(feature = "postgres")]
const DUE: &str = "!due";

/// The store's listening connection, opened on the first wait and again after it
/// ended; what it hears goes to every waiter (the id of a run with new events; an
/// empty id when the connection ended, which wakes them all).
#[cfg(feature = "postgres")]
#[derive(Debug)]
struct Listener {
    heard: tokio::sync::broadcast::Sender<String>,
    client: tokio::sync::Mutex<Option<mcp_runtime_core::postgres::tokio_postgres::Client>>,
}

#[cfg(feature = "postgres")]
impl Listener {
    fn new() -> Listener {
        Listener {
            heard: tokio::sync::broadcast::Sender::new(1024),
            client: tokio::sync::Mutex::new(None),
        }
    }

    /// Listens (when the connection is not open, it opens it), and subscribes.
    async fn subscribe(&self, pool: &PgPool) -> Result<tokio::sync::broadcast::Receiver<String>> {
        let mut client = self.client.lock().await;
        let heard = self.heard.subscribe();
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            let tell = self.heard.clone();
            let on = Box::new(move |payload: Option<&str>| {
                let _ = tell.send(payload.unwrap_or_default().to_owned());
            });
            *client = Some(pool.listen(CHANNEL, on).await.map_err(pg)?);
        }
        Ok(heard)
    }
}

#[cfg(feature = "postgres")]
impl PostgresRunStore {
    /// The tables the store uses, as it creates them when missing. An application
    /// whose role may not create tables (or may only append to the ledger: see
    /// docs/agent.md, "The sent ledger") has them created with this by an owner.
    pub const SCHEMA: &'static str = "CREATE TABLE IF NOT EXISTS mcp_agent_runs (
                 id text PRIMARY KEY,
                 status text NOT NULL,
                 state text NOT NULL,
                 updated_at timestamptz NOT NULL DEFAULT now()
             );
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS suspension text;
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS lease_owner text;
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS lease_until bigint;
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS tenant text;
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS started_by text;
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS labels jsonb;
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS input_tokens bigint;
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS output_tokens bigint;
             CREATE INDEX IF NOT EXISTS mcp_agent_runs_tenant ON mcp_agent_runs (tenant, status, id);
             CREATE INDEX IF NOT EXISTS mcp_agent_runs_started_by ON mcp_agent_runs (started_by, status, id);
             CREATE INDEX IF NOT EXISTS mcp_agent_runs_labels ON mcp_agent_runs USING gin (labels);
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS due_at bigint;
             CREATE INDEX IF NOT EXISTS mcp_agent_runs_due ON mcp_agent_runs (due_at)
               WHERE due_at IS NOT NULL;
             CREATE INDEX IF NOT EXISTS mcp_agent_runs_running ON mcp_agent_runs (lease_until)
               WHERE status = 'running';
             CREATE TABLE IF NOT EXISTS mcp_agent_allowances (
                 id text PRIMARY KEY,
                 allowance text NOT NULL
             );
             CREATE TABLE IF NOT EXISTS mcp_agent_events (
                 run_id text NOT NULL,
                 seq bigint NOT NULL,
                 event text NOT NULL,
                 PRIMARY KEY (run_id, seq)
             );
             CREATE TABLE IF NOT EXISTS mcp_agent_ledger (
                 run_id text NOT NULL,
                 kind text NOT NULL,
                 item text NOT NULL,
                 entry text NOT NULL,
                 at timestamptz NOT NULL DEFAULT now(),
                 PRIMARY KEY (run_id, kind, item)
             );
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS transcript_from bigint;
             ALTER TABLE mcp_agent_runs ADD COLUMN IF NOT EXISTS transcript_to bigint;
             CREATE TABLE IF NOT EXISTS mcp_agent_transcripts (
                 run_id text NOT NULL,
                 n bigint NOT NULL,
                 entry text NOT NULL,
                 PRIMARY KEY (run_id, n)
             );
             CREATE TABLE IF NOT EXISTS mcp_agent_blobs (
                 run_id text NOT NULL,
                 digest text NOT NULL,
                 data bytea NOT NULL,
                 PRIMARY KEY (run_id, digest)
             );";

    /// Connects (`postgres://user:password@host/db`) and creates the tables when
    /// missing ([`SCHEMA`](Self::SCHEMA)); when they are all there, it creates
    /// nothing, so a role that may only use them (not create tables) works.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPool::new(url).map_err(pg)?;
        let ready = {
            let client = pool.client().await.map_err(pg)?;
            let row = client
                .query_one(
                    "SELECT to_regclass('mcp_agent_runs') IS NOT NULL
                        AND to_regclass('mcp_agent_allowances') IS NOT NULL
                        AND to_regclass('mcp_agent_events') IS NOT NULL
                        AND to_regclass('mcp_agent_ledger') IS NOT NULL
                        AND to_regclass('mcp_agent_transcripts') IS NOT NULL
                        AND to_regclass('mcp_agent_blobs') IS NOT NULL
                        AND EXISTS (SELECT 1 FROM information_schema.columns
                                    WHERE table_name = 'mcp_agent_runs' AND column_name = 'transcript_to')
                        AND EXISTS (SELECT 1 FROM information_schema.columns
                                    WHERE table_name = 'mcp_agent_runs' AND column_name = 'output_tokens')
                        AND EXISTS (SELECT 1 FROM information_schema.columns
                                    WHERE table_name = 'mcp_agent_runs' AND column_name = 'due_at')
                        AND to_regclass('mcp_agent_runs_running') IS NOT NULL",
                    &[],
                )
                .await
                .map_err(|e| pg(PgPool::error("looking for the tables", e)))?;
            col::<bool>(&row, 0)?
        };
        if !ready {
            pool.create_once("mcp_agent_runs", Self::SCHEMA)
                .await
                .map_err(pg)?;
        }
        Ok(PostgresRunStore {
            pool: std::sync::Arc::new(pool),
            listener: std::sync::Arc::new(Listener::new()),
            statements: Default::default(),
        })
    }

    /// The pool's connection, and `sql` prepared on it (once per connection).
    async fn prepared(
        &self,
        sql: &str,
    ) -> Result<(
        std::sync::Arc<Client>,
        mcp_runtime_core::postgres::tokio_postgres::Statement,
    )> {
        let client = self.pool.client().await.map_err(pg)?;
        {
            let mut kept = crate::store::lock(&self.statements.0);
            if !std::ptr::eq(kept.0.as_ptr(), std::sync::Arc::as_ptr(&client)) {
                *kept = (std::sync::Arc::downgrade(&client), Default::default());
            }
            if let Some(statement) = kept.1.get(sql) {
                return Ok((client, statement.clone()));
            }
        }
        let statement = client
            .prepare(sql)
            .await
            .map_err(|e| pg(PgPool::error("preparing a statement", e)))?;
        let mut kept = crate::store::lock(&self.statements.0);
        if std::ptr::eq(kept.0.as_ptr(), std::sync::Arc::as_ptr(&client)) {
            kept.1.insert(sql.to_owned(), statement.clone());
        }
        Ok((client, statement))
    }

    /// One run, from a query returning [`columns`].
    async fn query_opt(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn mcp_runtime_core::postgres::tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Option<RunRecord>> {
        let (client, statement) = self.prepared(sql).await?;
        let row = client
            .query_opt(&statement, params)
            .await
            .map_err(|e| pg(PgPool::error(what, e)))?;
        row.as_ref().map(|r| run_of(r, col(r, 1)?)).transpose()
    }
}

#[cfg(feature = "postgres")]
fn pg(e: mcp_runtime_core::postgres::PgError) -> Error {
    Error::store_from(e.to_string(), e)
}

#[cfg(feature = "postgres")]
impl RunStore for PostgresRunStore {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let state = run.state.to_string();
            let (owner, until) = lease_columns(&run.lease);
            let columns = Owner::of(&run.state);
            let labels = columns.labels_json();
            let (input_tokens, output_tokens) = columns.tokens();
            let due: Option<i64> = run.due_at().map(sql_int);
            let events: Vec<String> = run.events.iter().map(Value::to_string).collect();
            let (first_entry, log) = log_entries(&run.transcript);
            let (from, to) = (sql_int(run.transcript.from), sql_int(run.transcript.to));
            let segment = run.transcript.starts_segment();
            let digests: Vec<&str> = run.blobs.iter().map(|b| b.digest.as_str()).collect();
            // Bytes, not text: a value may hold a NUL, which PostgreSQL's text cannot.
            let data: Vec<&[u8]> = run.blobs.iter().map(|b| b.data.as_bytes()).collect();
            // A deferred save is committed without waiting for the disk (the
            // transaction's own setting): a crash of the database server's machine may
            // lose it, never a save before it.
            let deferred = run.durability == Durability::Deferred;
            let (mut kinds, mut items, mut entries) = (Vec::new(), Vec::new(), Vec::new());
            for e in &run.ledger {
                kinds.push(e.kind.as_str());
                items.push(e.item.clone());
                entries.push(
                    serde_json::to_string(e)
                        .map_err(|e| Error::store(format!("cannot encode a ledger entry: {e}")))?,
                );
            }
            // Only the first save inserts (a later one finds a deleted run deleted);
            // fenced: a row held by another lease owner is left as it is.
            let saved = if run.first {
                "INSERT INTO mcp_agent_runs (id, status, state, suspension, lease_owner, lease_until,
                   tenant, started_by, labels, input_tokens, output_tokens, due_at, transcript_from,
                   transcript_to)
                 VALUES ($1, $2, $3, $4, $5, $6, $11, $12, $13::text::jsonb, $14, $15, $16, $17, $18)
                 ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state,
                   suspension = EXCLUDED.suspension, lease_until = EXCLUDED.lease_until,
                   tenant = EXCLUDED.tenant, started_by = EXCLUDED.started_by,
                   labels = EXCLUDED.labels, input_tokens = EXCLUDED.input_tokens,
                   output_tokens = EXCLUDED.output_tokens, due_at = EXCLUDED.due_at, updated_at = now(),
                   transcript_from = EXCLUDED.transcript_from, transcript_to = EXCLUDED.transcript_to
                 WHERE mcp_agent_runs.lease_owner IS NOT DISTINCT FROM EXCLUDED.lease_owner
                 RETURNING id"
            } else {
                "UPDATE mcp_agent_runs SET status = $2, state = $3, suspension = $4,
                   lease_until = $6, tenant = $11, started_by = $12, labels = $13::text::jsonb,
                   input_tokens = $14, output_tokens = $15, due_at = $16::bigint, updated_at = now(),
                   transcript_from = $17, transcript_to = $18
                 WHERE id = $1 AND lease_owner IS NOT DISTINCT FROM $5::text
                 RETURNING id"
            };
            // One statement, so one transaction: the state and, only when it was
            // saved, its events after the last one kept and its ledger entries (one
            // the ledger holds already fails the whole statement; each a microsecond
            // after the one before it, so `ORDER BY at` reads them as appended).
            let sql = format!(
                "WITH saved AS ({saved}),
                 last AS (SELECT COALESCE((SELECT seq FROM mcp_agent_events WHERE run_id = $1
                                           ORDER BY seq DESC LIMIT 1), 0) AS seq),
                 appended AS (
                   INSERT INTO mcp_agent_events (run_id, seq, event)
                   SELECT saved.id, last.seq + e.n, e.event
                   FROM saved, last, unnest($7::text[]) WITH ORDINALITY AS e(event, n)
                   RETURNING 1),
                 ledgered AS (
                   INSERT INTO mcp_agent_ledger (run_id, kind, item, entry, at)
                   SELECT saved.id, l.kind, l.item, l.entry, now() + l.n * interval '1 microsecond'
                   FROM saved, unnest($8::text[], $9::text[], $10::text[])
                     WITH ORDINALITY AS l(kind, item, entry, n)
                   RETURNING 1),
                 dropped AS (
                   DELETE FROM mcp_agent_transcripts x USING saved
                   WHERE x.run_id = saved.id AND x.n < $17 AND $21::bool
                   RETURNING 1),
                 logged AS (
                   INSERT INTO mcp_agent_transcripts (run_id, n, entry)
                   SELECT saved.id, $19::bigint + t.n - 1, t.entry
                   FROM saved, unnest($20::text[]) WITH ORDINALITY AS t(entry, n)
                   ON CONFLICT (run_id, n) DO UPDATE SET entry = EXCLUDED.entry
                   RETURNING 1),
                 unblobbed AS (
                   DELETE FROM mcp_agent_blobs b USING saved
                   WHERE b.run_id = saved.id AND $21::bool AND NOT (b.digest = ANY($22::text[]))
                   RETURNING 1),
                 blobbed AS (
                   INSERT INTO mcp_agent_blobs (run_id, digest, data)
                   SELECT saved.id, b.digest, b.data
                   FROM saved, unnest($22::text[], $23::bytea[]) AS b(digest, data)
                   ON CONFLICT (run_id, digest) DO NOTHING
                   RETURNING 1),
                 relaxed AS (
                   SELECT set_config('synchronous_commit', 'off', true) WHERE $24::bool),
                 notified AS (
                   SELECT pg_notify('{CHANNEL}', saved.id) FROM saved
                   WHERE cardinality($7::text[]) > 0),
                 due_told AS (
                   SELECT pg_notify('{CHANNEL}', '{DUE}') FROM saved
                   WHERE $2::text IN ('suspended', 'failed')
                     AND $16::bigint <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                 SELECT (SELECT count(*) FROM saved), (SELECT count(*) FROM mcp_agent_runs WHERE id = $1),
                        (SELECT count(*) FROM appended), (SELECT count(*) FROM ledgered),
                        (SELECT count(*) FROM notified), (SELECT count(*) FROM due_told),
                        (SELECT count(*) FROM dropped), (SELECT count(*) FROM logged),
                        (SELECT count(*) FROM blobbed), (SELECT count(*) FROM relaxed),
                        (SELECT count(*) FROM unblobbed)"
            );
            let (client, statement) = self.prepared(&sql).await?;
            let row = client
                .query_one(
                    &statement,
                    &[
                        &run.id,
                        &run.status.as_str(),
                        &state,
                        &run.suspension,
                        &owner,
                        &until,
                        &events,
                        &kinds,
                        &items,
                        &entries,
                        &columns.tenant,
                        &columns.started_by,
                        &labels,
                        &input_tokens,
                        &output_tokens,
                        &due,
                        &from,
                        &to,
                        &first_entry,
                        &log,
                        &segment,
                        &digests,
                        &data,
                        &deferred,
                    ],
                )
                .await;
            let row = match row {
                Ok(row) => row,
                Err(e)
                    if e.code()
                        == Some(&mcp_runtime_core::postgres::tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
                        && !run.ledger.is_empty() =>
                {
                    return Err(already_in_ledger(&run.id));
                }
                Err(e) => return Err(pg(PgPool::error("saving a run", e))),
            };
            let (n, kept): (i64, i64) = (col(&row, 0)?, col(&row, 1)?);
            if n == 0 {
                return Err(if kept == 0 && !run.first {
                    deleted(&run.id)
                } else {
                    lease_lost(&run.id)
                });
            }
            Ok(())
        })
    }

    fn ledger<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LedgerEntry>>> {
        Box::pin(async move {
            let client = self.pool.client().await.map_err(pg)?;
            let rows = client
                .query(
                    "SELECT entry FROM mcp_agent_ledger WHERE run_id = $1 ORDER BY at, item LIMIT $2",
                    &[&id, &(MAX_LEDGER as i64)],
                )
                .await
                .map_err(|e| pg(PgPool::error("reading the ledger", e)))?;
            rows.iter().map(|r| ledger_entry(col(r, 0)?)).collect()
        })
    }

    fn events<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<Value>>> {
        Box::pin(async move {
            let client = self.pool.client().await.map_err(pg)?;
            let rows = client
                .query(
                    "SELECT event FROM mcp_agent_events WHERE run_id = $1 ORDER BY seq LIMIT $2",
                    &[&id, &(MAX_EVENTS as i64)],
                )
                .await
                .map_err(|e| pg(PgPool::error("reading events", e)))?;
            rows.iter().map(|r| event_value(col(r, 0)?)).collect()
        })
    }

    fn events_after<'a>(
        &'a self,
        id: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<(u64, Value)>>> {
        Box::pin(async move {
            let (after, limit) = (sql_int(after.unwrap_or(0)), page_limit(limit) as i64);
            let client = self.pool.client().await.map_err(pg)?;
            let rows = client
                .query(
                    "SELECT seq, event FROM mcp_agent_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                    &[&id, &after, &limit],
                )
                .await
                .map_err(|e| pg(PgPool::error("reading events", e)))?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                let seq: i64 = r
                    .try_get(0)
                    .map_err(|e| pg(PgPool::error("reading events", e)))?;
                let text: &str = r
                    .try_get(1)
                    .map_err(|e| pg(PgPool::error("reading events", e)))?;
                out.push(numbered_event(seq, text)?);
            }
            Ok(out)
        })
    }

    fn wait_due(&self, max: std::time::Duration) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let mut heard = self.listener.subscribe(&self.pool).await?;
            let until = tokio::time::Instant::now() + max;
            loop {
                match tokio::time::timeout_at(until, heard.recv()).await {
                    // A save of events that made nothing due: wait on.
                    Ok(Ok(what)) if what != DUE && !what.is_empty() => {}
                    // Due, the connection ended, heard too much to tell, or waited
                    // long enough: claim again.
                    _ => return Ok(()),
                }
            }
        })
    }

    fn wait_events<'a>(&'a self, id: &'a str, after: u64) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            // Subscribed (and listening) before looking: a save after the look is
            // heard.
            let mut heard = self.listener.subscribe(&self.pool).await?;
            let client = self.pool.client().await.map_err(pg)?;
            let row = client
                .query_one(
                    "SELECT COALESCE(MAX(seq), 0) FROM mcp_agent_events WHERE run_id = $1",
                    &[&id],
                )
                .await
                .map_err(|e| pg(PgPool::error("reading events", e)))?;
            let last: i64 = row
                .try_get(0)
                .map_err(|e| pg(PgPool::error("reading events", e)))?;
            if last > sql_int(after) {
                return Ok(());
            }
            let until = tokio::time::Instant::now() + EVENTS_MAX_WAIT;
            loop {
                match tokio::time::timeout_at(until, heard.recv()).await {
                    // Another run's events: wait on.
                    Ok(Ok(run)) if !run.is_empty() && run != id => {}
                    // This run's, the connection ended, heard too much to tell, or
                    // waited long enough: read again.
                    _ => return Ok(()),
                }
            }
        })
    }

    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>>> {
        Box::pin(async move {
            self.query_opt(
                "reading a run",
                &format!(
                    "SELECT {} FROM mcp_agent_runs WHERE id = $1",
                    columns("mcp_agent_runs")
                ),
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
                &format!(
                    "UPDATE mcp_agent_runs SET status = 'running', updated_at = now(),
                       lease_owner = $4, lease_until = $5
                     WHERE id = $1 AND status = $2 AND ($3::text IS NULL OR suspension = $3)
                       AND ($6::bigint IS NULL OR lease_until IS NULL OR lease_until < $6)
                     RETURNING {}",
                    columns("mcp_agent_runs")
                ),
                &[&id, &status, &suspension, &lease.owner, &until, &stale],
            )
            .await
        })
    }

    fn claim_due<'a>(
        &'a self,
        now: u64,
        lease: &'a Lease,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<RunRecord>>> {
        Box::pin(async move {
            let (at, until) = (sql_int(now), sql_int(lease.until));
            let limit = limit.min(1000) as i64;
            let client = self.pool.client().await.map_err(pg)?;
            // One statement: the rows chosen are locked (rows another claimer holds
            // are skipped, not waited for) and moved to running together; each is
            // returned with the status it had.
            let rows = client
                .query(
                    &format!(
                        "WITH picked AS (
                           SELECT id, status AS was FROM mcp_agent_runs
                           WHERE (status IN ('suspended', 'failed') AND due_at <= $1)
                              OR (status = 'running' AND (lease_until IS NULL OR lease_until < $1))
                           ORDER BY due_at NULLS FIRST LIMIT $4
                           FOR UPDATE SKIP LOCKED)
                         UPDATE mcp_agent_runs r SET status = 'running', updated_at = now(),
                           lease_owner = $2, lease_until = $3
                         FROM picked WHERE r.id = picked.id
                         RETURNING {}, picked.was",
                        columns("r")
                    ),
                    &[&at, &lease.owner, &until, &limit],
                )
                .await
                .map_err(|e| pg(PgPool::error("claiming due runs", e)))?;
            let mut claimed = Vec::with_capacity(rows.len());
            for r in &rows {
                let (id, was): (String, String) = match (col(r, 0), col(r, 11)) {
                    (Ok(id), Ok(was)) => (id, was),
                    (id, _) => {
                        // Not even its id reads: it stays claimed until the lease ends.
                        tracing::warn!(run = ?id.ok(), "a claimed row cannot be read");
                        continue;
                    }
                };
                let read = run_of(r, was.clone());
                match read {
                    Ok(run) => claimed.push(run),
                    // A row that does not read is not this batch's end: it is put back
                    // as it was, not due (nor recoverable) for a minute, and the others
                    // go on.
                    Err(e) => {
                        tracing::warn!(run = %id, error = %e, "a due run cannot be read; it is put back for a minute");
                        let later = at.saturating_add(UNREADABLE_BACK_OFF_MS);
                        let _ = client
                            .execute(
                                "UPDATE mcp_agent_runs SET status = $2, due_at = $3,
                                   lease_until = CASE WHEN $2 = 'running' THEN $3 ELSE lease_until END
                                 WHERE id = $1 AND lease_owner = $4",
                                &[&id, &was, &later, &lease.owner],
                            )
                            .await;
                    }
                }
            }
            Ok(claimed)
        })
    }

    fn renew<'a>(&'a self, id: &'a str, lease: &'a Lease) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let until = sql_int(lease.until);
            let (client, statement) = self
                .prepared(
                    "WITH renewed AS (
                       UPDATE mcp_agent_runs SET lease_until = $3
                       WHERE id = $1 AND lease_owner = $2 RETURNING id)
                     SELECT (SELECT count(*) FROM renewed),
                            (SELECT count(*) FROM mcp_agent_runs WHERE id = $1)",
                )
                .await?;
            let row = client
                .query_one(&statement, &[&id, &lease.owner, &until])
                .await
                .map_err(|e| pg(PgPool::error("renewing a lease", e)))?;
            let (renewed, kept): (i64, i64) = (col(&row, 0)?, col(&row, 1)?);
            Ok(renewed > 0 || kept == 0)
        })
    }

    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<RunPage>> {
        Box::pin(async move {
            let status = filter.status.map(RunStatus::as_str);
            let before = filter.before.map(|b| b.min(i64::MAX as u64) as i64);
            let after = filter.after.map(|a| a.min(i64::MAX as u64) as i64);
            let size = filter.page_size();
            let labels = (!filter.labels.is_empty()).then(|| labels_json(&filter.labels));
            let client = self.pool.client().await.map_err(pg)?;
            let rows = client
                .query(
                    "SELECT id, status, suspension, extract(epoch FROM updated_at)::bigint,
                       tenant, started_by, labels::text, input_tokens, output_tokens
                     FROM mcp_agent_runs
                     WHERE ($1::text IS NULL OR status = $1)
                       AND ($2::bigint IS NULL OR updated_at < to_timestamp($2::bigint))
                       AND ($3::bigint IS NULL OR updated_at >= to_timestamp($3::bigint))
                       AND ($4::text IS NULL OR id > $4)
                       AND ($6::text IS NULL OR tenant = $6)
                       AND ($7::text IS NULL OR started_by = $7)
                       AND ($8::text IS NULL OR labels @> $8::text::jsonb)
                     ORDER BY id LIMIT $5",
                    &[
                        &status,
                        &before,
                        &after,
                        &filter.cursor,
                        &((size + 1) as i64),
                        &filter.tenant,
                        &filter.started_by,
                        &labels,
                    ],
                )
                .await
                .map_err(|e| pg(PgPool::error("listing runs", e)))?;
            let mut runs = Vec::new();
            for r in &rows {
                let status: String = col(r, 1)?;
                let status = RunStatus::parse(&status)
                    .ok_or_else(|| Error::store(format!("unknown run status `{status}`")))?;
                let at: i64 = col(r, 3)?;
                let (input, output): (Option<i64>, Option<i64>) = (col(r, 7)?, col(r, 8)?);
                let owner = Owner {
                    tenant: col(r, 4)?,
                    started_by: col(r, 5)?,
                    labels: labels_from(col::<Option<&str>>(r, 6)?),
                    input_tokens: input.unwrap_or(0).max(0) as u64,
                    output_tokens: output.unwrap_or(0).max(0) as u64,
                };
                runs.push(owner.summary(col(r, 0)?, status, col(r, 2)?, at.max(0) as u64));
            }
            Ok(page_of(runs, size))
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let client = self.pool.client().await.map_err(pg)?;
            let row = client
                .query_one(
                    "WITH gone AS (DELETE FROM mcp_agent_runs WHERE id = $1 RETURNING id),
                     events AS (DELETE FROM mcp_agent_events WHERE run_id = $1 RETURNING 1),
                     log AS (DELETE FROM mcp_agent_transcripts WHERE run_id = $1 RETURNING 1),
                     blobs AS (DELETE FROM mcp_agent_blobs WHERE run_id = $1 RETURNING 1)
                     SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM events),
                            (SELECT count(*) FROM log), (SELECT count(*) FROM blobs)",
                    &[&id],
                )
                .await
                .map_err(|e| pg(PgPool::error("deleting a run", e)))?;
            Ok(col::<i64>(&row, 0)? > 0)
        })
    }

    fn prune(&self, secs: u64) -> BoxFuture<'_, Result<u64>> {
        Box::pin(async move {
            let before = secs.min(i64::MAX as u64) as i64;
            let client = self.pool.client().await.map_err(pg)?;
            let row = client
                .query_one(
                    "WITH gone AS (
                       DELETE FROM mcp_agent_runs WHERE status IN ('finished', 'cancelled')
                       AND updated_at < to_timestamp($1::bigint) RETURNING id),
                     events AS (
                       DELETE FROM mcp_agent_events WHERE run_id IN (SELECT id FROM gone) RETURNING 1),
                     log AS (
                       DELETE FROM mcp_agent_transcripts WHERE run_id IN (SELECT id FROM gone) RETURNING 1),
                     blobs AS (
                       DELETE FROM mcp_agent_blobs WHERE run_id IN (SELECT id FROM gone) RETURNING 1)
                     SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM events),
                            (SELECT count(*) FROM log), (SELECT count(*) FROM blobs)",
                    &[&before],
                )
                .await
                .map_err(|e| pg(PgPool::error("pruning runs", e)))?;
            Ok(col::<i64>(&row, 0)?.max(0) as u64)
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
                .map_err(|e| pg(PgPool::error("saving an allowance", e)))
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
                .map_err(|e| pg(PgPool::error("reading allowances", e)))?;
            rows.iter()
                .map(|r| allowance_value(col::<&str>(r, 0)?))
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
                .map_err(|e| pg(PgPool::error("deleting an allowance", e)))
        })
    }
}
