//! The clients of the soak run: the four kinds, the peers they talk to, and the
//! operations they repeat.

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::stats::Rng;
use mcp_runtime::auth::{Grant, OAuth};
use mcp_runtime::{Client, Error, HttpConfig, StdioConfig};
use mcp_test_support::{peers, python, repo_root, HttpServer, OidcPeers};
use serde_json::{json, Value};

/// The request timeout every client sets.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The lifetime of an access token the authorization server issues.
pub(crate) const TOKEN_TTL_SECONDS: u64 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// server-everything over stdio, a process per client (legacy era).
    StdioEverything,
    /// One server-everything over Streamable HTTP (legacy era).
    HttpEverything,
    /// One PyPI `mcp` server, 2026-07-28 only, stateless HTTP.
    HttpModern,
    /// The PyPI server behind the oidc-provider authorization server, with short-lived
    /// tokens (client credentials, private_key_jwt).
    OAuth,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::StdioEverything => "stdio everything",
            Kind::HttpEverything => "HTTP everything",
            Kind::HttpModern => "HTTP PyPI 2026-07-28",
            Kind::OAuth => "HTTP PyPI + OAuth",
        }
    }
}

/// The servers that run for the whole soak (restarted in place by the chaos task).
pub(crate) struct Shared {
    pub(crate) everything: Mutex<HttpServer>,
    pub(crate) modern: Mutex<HttpServer>,
}

pub(crate) fn start_everything(port: u16) -> HttpServer {
    HttpServer::everything_on("streamableHttp", port)
}

pub(crate) fn start_modern(port: u16) -> HttpServer {
    let mut cmd = Command::new(python());
    cmd.arg(repo_root().join("tests/peers/pyserver.py"))
        .args(["http", &port.to_string(), "stateless"])
        .env("PYSERVER_ERA", "modern")
        .env("PYSERVER_TOGGLE", "1");
    HttpServer::start(cmd, port)
}

/// The authorization server and the protected MCP server, and the private key of
/// the `cc-client`.
pub(crate) struct OAuthPeers {
    pub(crate) peers: OidcPeers,
    pub(crate) key_pem: String,
}

pub(crate) fn p256_key() -> (String, Value) {
    use base64::Engine as _;
    use p256::pkcs8::EncodePrivateKey as _;
    let key = p256::ecdsa::SigningKey::random(&mut rand_core::OsRng);
    let pem = key
        .to_pkcs8_pem(Default::default())
        .expect("a PEM key")
        .to_string();
    let point = key.verifying_key().to_encoded_point(false);
    let b = |x: Option<&p256::FieldBytes>| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(x.expect("a coordinate"))
    };
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "cc1", "alg": "ES256", "use": "sig",
                     "x": b(point.x()), "y": b(point.y())});
    (pem, json!({"keys": [jwk]}))
}

pub(crate) fn start_oauth() -> OAuthPeers {
    let (key_pem, jwks) = p256_key();
    OAuthPeers {
        peers: OidcPeers::start(&jwks, Some(TOKEN_TTL_SECONDS)),
        key_pem,
    }
}

pub(crate) fn stdio_everything() -> StdioConfig {
    StdioConfig::new(
        peers()
            .join("npm/node_modules/.bin/mcp-server-everything")
            .display()
            .to_string(),
    )
    .arg("stdio")
    .name("everything")
}

pub(crate) fn client_of(
    kind: Kind,
    shared: &Shared,
    oauth: &OAuthPeers,
    changes: &Arc<AtomicU64>,
) -> Client {
    let heard = changes.clone();
    let builder = Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .after_change(move |_| {
            heard.fetch_add(1, Ordering::Relaxed);
        });
    let http = |url: String| HttpConfig::new(url);
    let built = match kind {
        Kind::StdioEverything => builder.stdio(stdio_everything()),
        Kind::HttpEverything => {
            let url = lock(&shared.everything).url("/mcp");
            builder.http(http(url))
        }
        Kind::HttpModern => {
            let url = lock(&shared.modern).url("/mcp");
            builder.http(http(url))
        }
        Kind::OAuth => builder.http(
            http(oauth.peers.mcp_url.clone()).oauth(
                OAuth::new()
                    .grant(Grant::ClientCredentials)
                    .client("cc-client", None)
                    .private_key(oauth.key_pem.clone()),
            ),
        ),
    };
    built.expect("a client")
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What one operation was, for its outcome.
pub(crate) enum Op {
    /// A call or listing that should succeed.
    Plain,
    /// A call meant to be cut short (a timeout, a cancellation).
    Cut,
}

/// One operation of a client of `kind`.
pub(crate) async fn operate(
    client: &Client,
    kind: Kind,
    rng: &mut Rng,
) -> (Op, mcp_runtime::Result<()>) {
    let roll = rng.below(100);
    let plain = |r: mcp_runtime::Result<()>| (Op::Plain, r);
    match (kind, roll) {
        (_, 0..=14) => plain(client.tools().await.map(drop)),
        // A call cut short by its own timeout: the client cancels it at the server.
        (Kind::StdioEverything | Kind::HttpEverything, 15..=21) => (
            Op::Cut,
            client
                .call(
                    "trigger-long-running-operation",
                    json!({"duration": 5, "steps": 5}),
                )
                .timeout(Duration::from_millis(50 + rng.below(400)))
                .await
                .map(drop),
        ),
        (Kind::HttpModern, 15..=21) => (
            Op::Cut,
            client
                .call("sleep_forever", json!({}))
                .timeout(Duration::from_millis(50 + rng.below(400)))
                .await
                .map(drop),
        ),
        // A call cancelled by the caller's token.
        (Kind::StdioEverything | Kind::HttpEverything | Kind::HttpModern, 22..=26) => {
            let token = mcp_runtime::CancellationToken::new();
            let cancel = token.clone();
            let after = Duration::from_millis(rng.below(300));
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                cancel.cancel();
            });
            let tool = if kind == Kind::HttpModern {
                ("sleep_forever", json!({}))
            } else {
                (
                    "trigger-long-running-operation",
                    json!({"duration": 5, "steps": 5}),
                )
            };
            (
                Op::Cut,
                client.call(tool.0, tool.1).cancel_on(token).await.map(drop),
            )
        }
        // A list change: the server announces it on every client's listen stream,
        // and each client's cache drops its list.
        (Kind::HttpModern, 27..=31) => plain(client.call("toggle_tool", json!({})).await.map(drop)),
        (Kind::StdioEverything | Kind::HttpEverything, _) => plain(
            client
                .call("get-sum", json!({"a": rng.below(1000), "b": 2}))
                .await
                .and_then(expect_text("The sum of")),
        ),
        (Kind::HttpModern, _) => plain(
            client
                .call("echo", json!({"message": "soak"}))
                .await
                .and_then(expect_text("soak")),
        ),
        (Kind::OAuth, _) => plain(
            client
                .call("whoami", json!({}))
                .await
                .and_then(expect_text("cc-client")),
        ),
    }
}

pub(crate) fn expect_text(
    wanted: &'static str,
) -> impl FnOnce(mcp_runtime::CallToolResult) -> mcp_runtime::Result<()> {
    move |r| {
        if r.text().contains(wanted) && !r.is_error() {
            Ok(())
        } else {
            Err(Error::invalid_response(format!(
                "expected {wanted:?}, got {:?}",
                r.text()
            )))
        }
    }
}
