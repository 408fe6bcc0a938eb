//! Credentials in PostgreSQL, for applications that run on many machines.

use std::fmt;
use std::sync::Arc;

use mcp_runtime_core::postgres::{tokio_postgres, PgError, PgPool};

use super::store::{CredentialKey, CredentialStore, Credentials, KeyLocks, StoreLock};
use crate::error::{Error, Result};
use crate::BoxFuture;

const TABLE: &str = "mcp_credentials";

/// Credentials in a PostgreSQL table (`mcp_credentials`, created when missing), shared
/// by every instance of an application, on as many machines as it runs on.
///
/// [`lock`](CredentialStore::lock) is a PostgreSQL advisory lock on the key, held on a
/// connection of its own: when many instances see a token expire at once, one
/// refreshes it and the others read the new one — none reuses a refresh token the
/// authorization server has rotated away (which would make it revoke the grant).
///
/// Connections to anything but a loopback address, the name `localhost` or a Unix
/// socket use TLS (rustls, the webpki roots), `sslmode=require` at least; a name under
/// `.localhost` is not taken for this machine (the driver resolves it without a check),
/// and `sslmode=disable` to one is refused before connecting. The credentials are kept as JSON
/// text: whoever can read the table can use them, so grant access to it accordingly.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Arc<PgPool>,
    locks: Arc<KeyLocks>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

fn pg_error(what: &str, e: tokio_postgres::Error) -> Error {
    pg(PgPool::error(what, e))
}

/// The runtime's error for a failure of the shared pool.
fn pg(e: PgError) -> Error {
    if e.is_config() {
        Error::config(e.to_string())
    } else {
        Error::transport(e.to_string()).with_source(e)
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host/db?…`, or
    /// `host=… dbname=…`) and creates the table when it is missing.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPool::new(url).map_err(pg)?;
        pool.create_once(
            TABLE,
            &format!(
                "CREATE TABLE IF NOT EXISTS {TABLE} (
                     owner text NOT NULL,
                     resource text NOT NULL,
                     issuer text NOT NULL,
                     credentials text NOT NULL,
                     updated_at timestamptz NOT NULL DEFAULT now(),
                     PRIMARY KEY (owner, resource, issuer)
                 );"
            ),
        )
        .await
        .map_err(pg)?;
        Ok(PostgresStore {
            pool: Arc::new(pool),
            locks: Arc::default(),
        })
    }
}

impl CredentialStore for PostgresStore {
    fn load<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<Option<Credentials>>> {
        Box::pin(async move {
            let client = self.pool.client().await.map_err(pg)?;
            let row = client
                .query_opt(
                    &format!(
                        "SELECT credentials FROM {TABLE} WHERE owner = $1 AND resource = $2 AND issuer = $3"
                    ),
                    &[&key.owner, &key.resource, &key.issuer],
                )
                .await
                .map_err(|e| pg_error("reading credentials", e))?;
            match row {
                None => Ok(None),
                Some(row) => {
                    let text: String = row.get(0);
                    serde_json::from_str(&text).map(Some).map_err(|e| {
                        Error::config(format!("stored credentials in {TABLE} cannot be read: {e}"))
                    })
                }
            }
        })
    }

    fn save<'a>(&'a self, key: &'a CredentialKey, c: &'a Credentials) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let text = serde_json::to_string(c)
                .map_err(|e| Error::config(format!("cannot encode credentials: {e}")))?;
            let client = self.pool.client().await.map_err(pg)?;
            client
                .execute(
                    &format!(
                        "INSERT INTO {TABLE} (owner, resource, issuer, credentials) VALUES ($1, $2, $3, $4)
                         ON CONFLICT (owner, resource, issuer)
                         DO UPDATE SET credentials = EXCLUDED.credentials, updated_at = now()"
                    ),
                    &[&key.owner, &key.resource, &key.issuer, &text],
                )
                .await
                .map_err(|e| pg_error("saving credentials", e))?;
            Ok(())
        })
    }

    fn forget<'a>(&'a self, owner: &'a str, resource: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let client = self.pool.client().await.map_err(pg)?;
            client
                .execute(
                    &format!("DELETE FROM {TABLE} WHERE owner = $1 AND resource = $2"),
                    &[&owner, &resource],
                )
                .await
                .map_err(|e| pg_error("forgetting credentials", e))?;
            Ok(())
        })
    }

    fn lock<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<StoreLock>> {
        Box::pin(async move {
            // Tasks of this process queue on the key; instances on the advisory lock,
            // taken on a connection of its own and released when it closes.
            let in_process = self.locks.lock(key).await;
            let client = self.pool.dedicated().await.map_err(pg)?;
            let name = format!(
                "{TABLE}\u{1f}{}\u{1f}{}\u{1f}{}",
                key.owner, key.resource, key.issuer
            );
            client
                .execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&name])
                .await
                .map_err(|e| pg_error("locking credentials", e))?;
            Ok(StoreLock::new((in_process, client)))
        })
    }
}
