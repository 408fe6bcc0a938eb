//! PostgreSQL connections (feature `postgres`), shared by the stores that keep state
//! in a database: the runtime's credential store and the agent's run store.
//!
//! TLS (rustls, webpki roots, `sslmode=require` at least) for anything but a loopback
//! address, the name `localhost` or a Unix socket; `sslmode=disable` to anything else is
//! refused before connecting. Other names are not taken on trust, not even those under
//! `.localhost`: the driver resolves a name itself, with no check that it stays on this
//! machine.

use std::fmt;
use std::sync::{Arc, Mutex};

pub use tokio_postgres;
use tokio_postgres::config::{Host, SslMode};

/// A failure of the pool: a connection string that is wrong (`is_config`), or a
/// database operation that failed (with the driver's error as its source).
#[derive(Debug)]
pub struct PgError {
    detail: String,
    config: bool,
    source: Option<tokio_postgres::Error>,
}

impl PgError {
    fn config(detail: impl Into<String>) -> Self {
        PgError {
            detail: detail.into(),
            config: true,
            source: None,
        }
    }

    /// The connection string or the TLS setup is wrong: nothing was sent.
    pub fn is_config(&self) -> bool {
        self.config
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

fn pg_error(what: &str, e: tokio_postgres::Error) -> PgError {
    PgError {
        detail: format!("the database: {what} failed: {e}"),
        config: false,
        source: Some(e),
    }
}

use crate::rt::lock;

/// Connections to one PostgreSQL database: a shared one (opened again when it closes)
/// and dedicated ones on demand. TLS (rustls, webpki roots, `sslmode=require` at least)
/// for anything but a loopback address, `localhost` or a Unix socket.
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

/// A host that is this machine without asking a resolver: a loopback address, or the
/// name `localhost` itself. Not a name under `.localhost`: tokio-postgres resolves it
/// with the system resolver and connects to whatever it says.
fn literally_local(name: &str) -> bool {
    name.eq_ignore_ascii_case("localhost")
        || (!crate::url_rule::is_localhost_name(name) && crate::url_rule::is_loopback_host(name))
}

/// What a listening connection calls: with a notification's payload, and with `None`
/// once when the connection ended (no notification comes after it).
pub type OnNotify = Box<dyn Fn(Option<&str>) + Send + Sync>;

/// Runs a connection's I/O until it ends, handing its notifications to `on` (when
/// given) and telling it of the end.
fn drive<S, T>(mut connection: tokio_postgres::Connection<S, T>, on: Option<OnNotify>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                    if let Some(on) = &on {
                        on(Some(n.payload()));
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "database connection ended");
                    break;
                }
                None => break,
            }
        }
        if let Some(on) = &on {
            on(None);
        }
    });
}

/// How long a connection may take to open, unless the connection string says
/// (`connect_timeout`).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a connection may be idle before TCP keepalives probe it (then every
/// ten seconds, three times: a dropped connection is known within a minute),
/// unless the connection string says (`keepalives_idle`, …).
const KEEPALIVES_IDLE: std::time::Duration = std::time::Duration::from_secs(30);
/// The driver's own default idle time (two hours).
const DRIVER_KEEPALIVES_IDLE: std::time::Duration = std::time::Duration::from_secs(2 * 60 * 60);

impl PgPool {
    /// Reads the connection string (`postgres://…` or `host=… dbname=…`); connects
    /// on first use.
    pub fn new(url: &str) -> Result<Self, PgError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            PgError::config(format!(
                "the PostgreSQL connection string is not valid: {e}"
            ))
        })?;
        // Decided on the address actually connected to: a host's `hostaddr` when it
        // has one (the name is then only for TLS), else the host itself — local only
        // when it says so literally, as the driver resolves names without a check.
        let addrs = config.get_hostaddrs();
        let local = addrs.iter().all(|a| a.is_loopback())
            && config
                .get_hosts()
                .iter()
                .enumerate()
                .all(|(i, h)| match (addrs.get(i), h) {
                    (Some(a), _) => a.is_loopback(),
                    (None, Host::Tcp(name)) => literally_local(name),
                    #[cfg(unix)]
                    (None, Host::Unix(_)) => true,
                });
        if !local && config.get_ssl_mode() == SslMode::Disable {
            return Err(PgError::config(
                "the PostgreSQL connection string asks for sslmode=disable to a server that is not known to be on this machine (host or hostaddr; only a loopback address, `localhost` or a Unix socket is: a name such as `db.localhost` is resolved by the driver without a check); the password and the data could cross the network in clear: use TLS (sslmode=require, the default here), or a loopback hostaddr",
            ));
        }
        // A server that does not answer, or a connection the network dropped without
        // a word (the listening one waits for ever otherwise): bounded, unless the
        // connection string says otherwise.
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_keepalives() {
            if config.get_keepalives_idle() == DRIVER_KEEPALIVES_IDLE {
                config.keepalives_idle(KEEPALIVES_IDLE);
            }
            if config.get_keepalives_interval().is_none() {
                config.keepalives_interval(KEEPALIVES_IDLE / 3);
            }
            if config.get_keepalives_retries().is_none() {
                config.keepalives_retries(3);
            }
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
    pub async fn dedicated(&self) -> Result<tokio_postgres::Client, PgError> {
        self.connect(None).await
    }

    /// A new connection of its own that listens on `channel` (`LISTEN`; a name of
    /// lowercase ASCII letters, digits and `_`): every notification's payload is
    /// given to `on` as it arrives, and `on(None)` once when the connection ends (it
    /// is not opened again: open another). Keep the client: dropping it closes the
    /// connection.
    pub async fn listen(
        &self,
        channel: &str,
        on: OnNotify,
    ) -> Result<tokio_postgres::Client, PgError> {
        let plain = !channel.is_empty()
            && channel
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !plain {
            return Err(PgError::config(format!(
                "cannot listen on `{channel}`: a channel is named with lowercase ASCII letters, digits and `_`"
            )));
        }
        let client = self.connect(Some(on)).await?;
        client
            .batch_execute(&format!("LISTEN {channel}"))
            .await
            .map_err(|e| pg_error("listening", e))?;
        Ok(client)
    }

    async fn connect(&self, on: Option<OnNotify>) -> Result<tokio_postgres::Client, PgError> {
        if self.tls {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| PgError::config(format!("TLS setup failed: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
            let tls = tokio_postgres_rustls::MakeRustlsConnect::new(config);
            let (client, connection) = self.bounded(self.config.connect(tls)).await?;
            drive(connection, on);
            Ok(client)
        } else {
            let (client, connection) = self
                .bounded(self.config.connect(tokio_postgres::NoTls))
                .await?;
            drive(connection, on);
            Ok(client)
        }
    }

    /// A whole connection attempt — TCP, TLS and the startup exchange — within the
    /// connect timeout (the driver's own bounds only the TCP connect: a server that
    /// takes the connection and says nothing would hold it for ever).
    async fn bounded<T>(
        &self,
        connect: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, PgError> {
        let limit = self
            .config
            .get_connect_timeout()
            .copied()
            .unwrap_or(CONNECT_TIMEOUT);
        match tokio::time::timeout(limit, connect).await {
            Ok(done) => done.map_err(|e| pg_error("connecting", e)),
            Err(_) => Err(PgError {
                detail: format!(
                    "the database: connecting failed: no answer within {} s",
                    limit.as_secs_f32()
                ),
                config: false,
                source: None,
            }),
        }
    }

    /// The shared connection, opened again when it closed.
    pub async fn client(&self) -> Result<Arc<tokio_postgres::Client>, PgError> {
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
    pub async fn create_once(&self, name: &str, sql: &str) -> Result<(), PgError> {
        let client = self.client().await?;
        client
            .batch_execute(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('{name}', 0)); {sql} COMMIT;"
            ))
            .await
            .map_err(|e| pg_error("creating the tables", e))
    }

    /// The error of a failed database operation `what`.
    pub fn error(what: &str, e: tokio_postgres::Error) -> PgError {
        pg_error(what, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_bounded_unless_the_string_says() {
        let pool = PgPool::new("postgres://app@127.0.0.1:5432/runs").expect("a valid string");
        assert_eq!(pool.config.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        assert_eq!(pool.config.get_keepalives_idle(), KEEPALIVES_IDLE);
        assert_eq!(pool.config.get_keepalives_retries(), Some(3));
        let said =
            PgPool::new("postgres://app@127.0.0.1:5432/runs?connect_timeout=3&keepalives_idle=600")
                .expect("a valid string");
        assert_eq!(
            said.config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
        assert_eq!(
            said.config.get_keepalives_idle(),
            std::time::Duration::from_secs(600)
        );
    }

    /// A "server" that takes the connection and never says a word: connecting fails
    /// once the connect timeout passes, instead of waiting for ever.
    #[test]
    fn a_silent_server_is_given_up_on() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a loopback port");
            let port = silent.local_addr().expect("its address").port();
            let held = tokio::spawn(async move {
                let mut kept = Vec::new();
                while let Ok((socket, _)) = silent.accept().await {
                    kept.push(socket);
                }
            });
            let pool = PgPool::new(&format!(
                "postgres://app@127.0.0.1:{port}/runs?connect_timeout=1"
            ))
            .expect("a valid string");
            // Far beyond the one second asked for: only a connection that never gives
            // up reaches it.
            let tried = tokio::time::timeout(std::time::Duration::from_secs(120), pool.dedicated())
                .await
                .expect("connecting gave up by itself");
            assert!(tried.is_err(), "nothing to connect to");
            held.abort();
        });
    }

    #[test]
    fn tls_is_decided_on_the_address_connected_to() {
        let tls = |url: &str| PgPool::new(url).map(|p| p.tls);
        assert!(!tls("postgres://app:pw@localhost:5432/runs").expect("a valid string"));
        assert!(!tls("postgres://app:pw@127.0.0.1:5432/runs").expect("a valid string"));
        // A loopback name with a remote address: the address is what is connected to.
        assert!(
            tls("postgres://app:pw@localhost:5432/runs?hostaddr=192.0.2.7")
                .expect("a valid string")
        );
        assert!(
            tls("host=localhost hostaddr=192.0.2.7 user=app dbname=runs").expect("a valid string")
        );
        // A remote name with a loopback address stays on this machine.
        assert!(
            !tls("host=db.invalid hostaddr=127.0.0.1 user=app dbname=runs")
                .expect("a valid string")
        );
        // Several hosts: every one must be local.
        assert!(tls("host=localhost,db.invalid user=app dbname=runs").expect("a valid string"));
        // Asking for no TLS to a remote address is refused, naming why.
        let e = tls("postgres://app:pw@localhost:5432/runs?hostaddr=192.0.2.7&sslmode=disable")
            .expect_err("refused");
        assert!(
            e.is_config() && e.to_string().contains("sslmode=disable"),
            "{e}"
        );
        assert!(
            !tls("postgres://app:pw@localhost:5432/runs?sslmode=disable").expect("a valid string")
        );
        assert!(!tls("host=LOCALHOST,127.0.0.2,::1 user=app dbname=runs").expect("a valid string"));
        // A name under `.localhost` is not taken on trust: the driver resolves it
        // itself, without checking it stays on this machine. TLS, and sslmode=disable
        // refused.
        for url in [
            "postgres://app:pw@db.localhost:5432/runs",
            "host=a.b.localhost. user=app dbname=runs",
            "host=localhost,db.localhost user=app dbname=runs",
            "host=localhost. user=app dbname=runs",
        ] {
            assert!(tls(url).expect("a valid string"), "{url}");
            let e = tls(&format!(
                "{url}{}sslmode=disable",
                if url.contains("://") { "?" } else { " " }
            ))
            .expect_err("refused");
            assert!(
                e.is_config() && e.to_string().contains("not known to be on this machine"),
                "{url}: {e}"
            );
        }
        // With a loopback hostaddr, the name is only for TLS.
        assert!(
            !tls("host=db.localhost hostaddr=127.0.0.1 sslmode=disable user=app dbname=runs")
                .expect("a valid string")
        );
    }
}
