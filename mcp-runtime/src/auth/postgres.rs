//! Credentials in PostgreSQL, for applications that run on many machines.

use std::fmt;
use std::sync::{Arc, Mutex};

use tokio_postgres::config::{Host, SslMode};

use super::lock;
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
/// Connections to anything but a loopback address or a Unix socket use TLS (rustls,
/// the webpki roots), `sslmode=require` at least. The credentials are kept as JSON
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
    Error::transport(format!("the database: {what} failed: {e}")).with_source(e)
}

/// Connections to one PostgreSQL database: a shared one (opened again when it closes)
/// and dedicated ones on demand. TLS (rustls, webpki roots, `sslmode=require` at least)
/// for anything but loopback or a Unix socket. Not public API: shared with the agent's
/// run store.
#[doc(hidden)]
pub struct PgPool {
    config: tokio_postgres::Config,
    tls: bool,
    client: Mutex<Option<Arc<tokio_postgres::Client>>>,
    connecting: tokio::sync::Mutex<()>,
}

impl fmt::Debug for PgPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The connection string may hold a password.
        f.debug_struct("PgPool")
            .field("hosts", &self.config.get_hosts())
            .field("dbname", &self.config.get_dbname())
            .field("tls", &self.tls)
            .finish()
    }
}

/// Runs a connection's I/O until it ends.
fn drive<C>(connection: C)
where
    C: std::future::Future<Output = std::result::Result<(), tokio_postgres::Error>>
        + Send
        + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "database connection ended");
        }
    });
}

impl PgPool {
    /// Reads the connection string (`postgres://…` or `host=… dbname=…`); connects
    /// on first use.
    pub fn new(url: &str) -> Result<Self> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            Error::config(format!(
                "the PostgreSQL connection string is not valid: {e}"
            ))
        })?;
        // Decided on the address actually connected to: a host's `hostaddr` when it
        // has one (the name is then only for TLS), else the host itself.
        let addrs = config.get_hostaddrs();
        let local = addrs.iter().all(|a| a.is_loopback())
            && config
                .get_hosts()
                .iter()
                .enumerate()
                .all(|(i, h)| match (addrs.get(i), h) {
                    (Some(a), _) => a.is_loopback(),
                    (None, Host::Tcp(name)) => crate::url_rule::is_loopback_host(name),
                    #[cfg(unix)]
                    (None, Host::Unix(_)) => true,
                });
        if !local && config.get_ssl_mode() == SslMode::Disable {
            return Err(Error::config(
                "the PostgreSQL connection string asks for sslmode=disable to a server that is not on this machine (host or hostaddr); the password and the data would cross the network in clear: use TLS (sslmode=require, the default here)",
            ));
        }
        let tls = !local || config.get_ssl_mode() == SslMode::Require;
        if tls && config.get_ssl_mode() != SslMode::Require {
            config.ssl_mode(SslMode::Require);
        }
        Ok(PgPool {
            config,
            tls,
            client: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
        })
    }

    /// A new connection of its own (its driver runs on a task of its own).
    pub async fn dedicated(&self) -> Result<tokio_postgres::Client> {
        if self.tls {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::config(format!("TLS setup failed: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
            let tls = tokio_postgres_rustls::MakeRustlsConnect::new(config);
            let (client, connection) = self
                .config
                .connect(tls)
                .await
                .map_err(|e| pg_error("connecting", e))?;
            drive(connection);
            Ok(client)
        } else {
            let (client, connection) = self
                .config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(|e| pg_error("connecting", e))?;
            drive(connection);
            Ok(client)
        }
    }

    /// The shared connection, opened again when it closed.
    pub async fn client(&self) -> Result<Arc<tokio_postgres::Client>> {
        if let Some(c) = lock(&self.client).as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let _one = self.connecting.lock().await;
        if let Some(c) = lock(&self.client).as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = Arc::new(self.dedicated().await?);
        *lock(&self.client) = Some(c.clone());
        Ok(c)
    }

    /// Runs `sql` (statements creating tables) once across every instance: under an
    /// advisory lock named `name`, in a transaction.
    pub async fn create_once(&self, name: &str, sql: &str) -> Result<()> {
        let client = self.client().await?;
        client
            .batch_execute(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('{name}', 0)); {sql} COMMIT;"
            ))
            .await
            .map_err(|e| pg_error("creating the tables", e))
    }

    /// The error of a failed database operation `what`.
    pub fn error(what: &str, e: tokio_postgres::Error) -> Error {
        pg_error(what, e)
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host/db?…`, or
    /// `host=… dbname=…`) and creates the table when it is missing.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPool::new(url)?;
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
        .await?;
        Ok(PostgresStore {
            pool: Arc::new(pool),
            locks: Arc::default(),
        })
    }
}

impl CredentialStore for PostgresStore {
    fn load<'a>(&'a self, key: &'a CredentialKey) -> BoxFuture<'a, Result<Option<Credentials>>> {
        Box::pin(async move {
            let client = self.pool.client().await?;
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
            let client = self.pool.client().await?;
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
            let client = self.pool.client().await?;
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
            let client = self.pool.dedicated().await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_is_decided_on_the_address_connected_to() {
        let tls = |url: &str| PgPool::new(url).map(|p| p.tls);
        assert!(!tls("postgres://app:pw@localhost:5432/runs").unwrap());
        assert!(!tls("postgres://app:pw@127.0.0.1:5432/runs").unwrap());
        // A loopback name with a remote address: the address is what is connected to.
        assert!(tls("postgres://app:pw@localhost:5432/runs?hostaddr=192.0.2.7").unwrap());
        assert!(tls("host=localhost hostaddr=192.0.2.7 user=app dbname=runs").unwrap());
        // A remote name with a loopback address stays on this machine.
        assert!(!tls("host=db.invalid hostaddr=127.0.0.1 user=app dbname=runs").unwrap());
        // Several hosts: every one must be local.
        assert!(tls("host=localhost,db.invalid user=app dbname=runs").unwrap());
        // Asking for no TLS to a remote address is refused, naming why.
        let e = tls("postgres://app:pw@localhost:5432/runs?hostaddr=192.0.2.7&sslmode=disable")
            .unwrap_err();
        assert!(
            e.is_config() && e.to_string().contains("sslmode=disable"),
            "{e}"
        );
        assert!(!tls("postgres://app:pw@localhost:5432/runs?sslmode=disable").unwrap());
    }
}
