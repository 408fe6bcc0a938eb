//! OAuth against a real authorization server: npm `oidc-provider` (pinned in
//! tests/peers/install.sh, configured in tests/peers/oidc/server.mjs) in front of an MCP
//! server on PyPI `mcp` that validates its tokens (tests/peers/oidc/protected_mcp.py),
//! next to deliberately hostile MCP servers and authorization servers
//! (tests/peers/oidc/hostile_oauth.py) that try to get credentials that are not theirs;
//! credential stores in memory, in a file shared by processes, and in a real PostgreSQL.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_runtime::auth::{
    Callback, CredentialKey, CredentialStore, Credentials, Grant, LoopbackAuthorizer, MemoryStore,
    OAuth,
};
use mcp_runtime::{Client, HttpConfig, Secret};
use serde_json::{json, Value};

use crate::support;

pub(super) use mcp_test_support::{wait_ready, OidcPeers as Peers};

/// The credential key of an owner at the protected MCP server.
pub(super) trait PeerKeys {
    fn key(&self, owner: &str) -> CredentialKey;
}

impl PeerKeys for Peers {
    fn key(&self, owner: &str) -> CredentialKey {
        CredentialKey::new(owner, &self.mcp_url, self.issuer())
    }
}

/// Starts the authorization server and the protected MCP server; `cc_jwks` is the
/// public key set of the `cc-client` (private_key_jwt).
pub(super) fn start(cc_jwks: &Value) -> Peers {
    Peers::start(cc_jwks, None)
}

/// A hostile peer (tests/peers/oidc/hostile_oauth.py); killed when dropped.
struct Hostile {
    child: Child,
    port: u16,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Hostile {
    fn start(mode: &str, issuer: Option<&str>) -> Hostile {
        let port = support::free_port();
        let mut cmd = Command::new(support::peers().join("venv/bin/python"));
        cmd.arg(support::repo_root().join("tests/peers/oidc/hostile_oauth.py"))
            .args([mode, &port.to_string()])
            .args(issuer)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("the venv python");
        wait_ready(&mut child, "the hostile peer");
        Hostile { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Everything it received, as one text to search.
    fn seen(&self) -> String {
        support::http_get_text(self.port, "/_seen")
    }

    /// POSTs to anything but the MCP endpoint (token, registration).
    fn posts(&self) -> usize {
        let seen: Value = serde_json::from_str(&self.seen()).unwrap();
        seen.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == "POST" && r["path"] != "/mcp")
            .count()
    }
}

/// A browser that follows redirects (plain GETs) until the redirect URI.
pub(super) async fn browser(url: String) -> mcp_runtime::Result<Callback> {
    Ok(Callback::from_url(&follow_to_callback(url).await))
}

/// Follows redirects (plain GETs) until the redirect URI, and returns it.
pub(super) async fn follow_to_callback(url: String) -> String {
    tokio::task::spawn_blocking(move || {
        let mut url = url;
        for _ in 0..10 {
            if url.starts_with("http://127.0.0.1:8765/callback") {
                return url;
            }
            let rest = url.strip_prefix("http://").expect("http");
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let mut s = std::net::TcpStream::connect(authority).unwrap();
            write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut response = String::new();
            let _ = s.read_to_string(&mut response);
            let location = response
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("location")
                        .then(|| v.trim().to_owned())
                })
                .unwrap_or_else(|| panic!("no redirect from {url}:\n{response}"));
            url = if location.starts_with('/') {
                format!("http://{authority}{location}")
            } else {
                location
            };
        }
        panic!("too many redirects");
    })
    .await
    .unwrap()
}

pub(super) async fn nobody(_url: String) -> mcp_runtime::Result<Callback> {
    Err(mcp_runtime::Error::transport("nobody is here to authorize"))
}

pub(super) fn code_client(store: Arc<dyn CredentialStore>) -> OAuth {
    OAuth::new()
        .client("code-client", Some("code-client-secret".into()))
        .redirect_uri("http://127.0.0.1:8765/callback")
        .store(store)
        .authorizer(browser)
}

pub(super) fn p256_key() -> (String, Value) {
    use p256::pkcs8::EncodePrivateKey as _;
    let key = p256::ecdsa::SigningKey::random(&mut rand_core::OsRng);
    let pem = key.to_pkcs8_pem(Default::default()).unwrap().to_string();
    let point = key.verifying_key().to_encoded_point(false);
    use base64::Engine as _;
    let b = |x: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(x);
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "cc1", "alg": "ES256", "use": "sig",
                     "x": b(point.x().unwrap()), "y": b(point.y().unwrap())});
    (pem, json!({"keys": [jwk]}))
}

pub(super) fn whoami(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!({"raw": text}))
}

pub(super) async fn call_whoami(c: &Client) -> mcp_runtime::Result<Value> {
    Ok(whoami(&c.call("whoami", json!({})).await?.text()))
}

/// Expires the stored token of `key` so the next request refreshes it.
pub(super) async fn expire(store: &dyn CredentialStore, key: &CredentialKey) -> Credentials {
    let mut creds = store.load(key).await.unwrap().expect("stored credentials");
    creds.expires_at = Some(0);
    creds.issued_at = None;
    store.save(key, &creds).await.unwrap();
    creds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_flow_dpop_refresh_rotation_and_single_flight() {
    let (_, jwks) = p256_key();
    let peers = start(&jwks);
    let store: Arc<dyn CredentialStore> = Arc::new(MemoryStore::default());
    let c = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(code_client(store.clone())))
        .unwrap();
    // 401 → discovery → authorization code + PKCE (headless browser) → token.
    let who = call_whoami(&c).await.unwrap();
    assert_eq!(who["sub"], "test-user", "{who}");
    assert_eq!(who["client_id"], "code-client");
    assert!(
        who["dpop_jkt"].is_string(),
        "the AS offers DPoP, so the token is bound: {who}"
    );
    c.close().await.unwrap();

    // A second client finds the stored token expired: it refreshes (rotation) instead
    // of asking anyone, once for 20 concurrent calls (the AS revokes the grant if a
    // refresh token is used twice).
    let first = expire(store.as_ref(), &peers.key("default")).await;
    let refusing = OAuth::new()
        .client("code-client", Some("code-client-secret".into()))
        .store(store.clone())
        .authorizer(|_url: String| async {
            panic!("must not ask anyone: a refresh token is there")
        });
    let c2 = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(refusing))
        .unwrap();
    let calls = (0..20).map(|_| {
        let c2 = c2.clone();
        tokio::spawn(async move { c2.call("whoami", json!({})).await })
    });
    for call in calls.collect::<Vec<_>>() {
        let r = call.await.unwrap().unwrap();
        assert_eq!(whoami(&r.text())["sub"], "test-user");
    }
    let after = store.load(&peers.key("default")).await.unwrap().unwrap();
    assert_ne!(
        after.refresh_token, first.refresh_token,
        "the refresh token rotated"
    );
    assert_eq!(peers.stats()["refreshes"], 1, "{}", peers.stats());
    c2.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_with_private_key_jwt() {
    let (pem, jwks) = p256_key();
    let peers = start(&jwks);
    let oauth = OAuth::new()
        .grant(Grant::ClientCredentials)
        .client("cc-client", None)
        .private_key(pem);
    let c = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(oauth))
        .unwrap();
    let who = call_whoami(&c).await.unwrap();
    assert_eq!(who["client_id"], "cc-client", "{who}");
    c.close().await.unwrap();
}

/// Alice's token for server A never reaches server M, whether M's metadata names A's
/// authorization server, or M has none and merely claims that issuer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_never_reaches_a_server_it_was_not_issued_for() {
    let (_, jwks) = p256_key();
    let peers = start(&jwks);
    let store: Arc<dyn CredentialStore> = Arc::new(MemoryStore::default());
    let alice = |o: OAuth| o.owner("alice");
    let a = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(alice(code_client(store.clone()))))
        .unwrap();
    assert_eq!(call_whoami(&a).await.unwrap()["sub"], "test-user");
    let token = store.load(&peers.key("alice")).await.unwrap().unwrap();
    let token = token.access_token.unwrap();
    for mode in ["mcp-prm", "mcp-claims"] {
        let m = Hostile::start(mode, Some(&peers.issuer()));
        let oauth = alice(code_client(store.clone())).authorizer(nobody);
        let c = Client::builder()
            .http(HttpConfig::new(m.url("/mcp")).oauth(oauth))
            .unwrap();
        let e = c.call("whoami", json!({})).await.unwrap_err();
        let seen = m.seen();
        assert!(
            !seen.contains(token.expose()),
            "{mode}: server M received server A's token ({e})"
        );
        assert!(
            !seen.contains("code-client-secret") && !seen.contains("/token"),
            "{mode}: {seen}"
        );
    }
    // A is still fine.
    assert_eq!(call_whoami(&a).await.unwrap()["sub"], "test-user");
}

/// A server without metadata whose fallback document claims the real issuer and points
/// the token endpoint at itself gets neither the refresh token nor the client secret,
/// and its refusal deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_tokens_never_reach_a_spoofed_token_endpoint() {
    let (_, jwks) = p256_key();
    let peers = start(&jwks);
    let store: Arc<dyn CredentialStore> = Arc::new(MemoryStore::default());
    let carol = || code_client(store.clone()).owner("carol");
    let a = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(carol()))
        .unwrap();
    call_whoami(&a).await.unwrap();
    a.close().await.unwrap();
    let before = expire(store.as_ref(), &peers.key("carol")).await;
    let spoof = Hostile::start("mcp-claims", Some(&peers.issuer()));
    let c = Client::builder()
        .http(HttpConfig::new(spoof.url("/mcp")).oauth(carol()))
        .unwrap();
    let e = c.call("whoami", json!({})).await.unwrap_err();
    assert!(e.to_string().contains("refused"), "{e}");
    let seen = spoof.seen();
    let refresh = before.refresh_token.clone().unwrap();
    assert!(
        !seen.contains(refresh.expose()),
        "the spoof got the refresh token"
    );
    assert_eq!(spoof.posts(), 0, "nothing was posted to the spoof: {seen}");
    // Carol's credentials are intact, and work.
    let now = store.load(&peers.key("carol")).await.unwrap().unwrap();
    assert_eq!(now.refresh_token, before.refresh_token);
    let a = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(carol().authorizer(nobody)))
        .unwrap();
    assert_eq!(call_whoami(&a).await.unwrap()["sub"], "test-user");
}

/// The application's own secrets — a pre-registered client's secret, a private key,
/// a workload assertion — go only to the authorization server they are bound to (the
/// first used, remembered in the store) or pinned to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_applications_secrets_go_only_to_their_authorization_server() {
    let (pem, jwks) = p256_key();
    let peers = start(&jwks);
    let store: Arc<dyn CredentialStore> = Arc::new(MemoryStore::default());
    // First use binds code-client to the real authorization server.
    let a = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(code_client(store.clone())))
        .unwrap();
    call_whoami(&a).await.unwrap();
    let evil_as = Hostile::start("as", None);
    let m = Hostile::start("mcp-prm", Some(&evil_as.url("")));
    let c = Client::builder()
        .http(HttpConfig::new(m.url("/mcp")).oauth(code_client(store.clone())))
        .unwrap();
    let e = c.call("whoami", json!({})).await.unwrap_err();
    assert!(e.is_config() && e.to_string().contains("bound"), "{e}");
    assert_eq!(evil_as.posts(), 0, "{}", evil_as.seen());
    // Pinned: the other authorization server is not even asked for its metadata.
    let evil_as2 = Hostile::start("as", None);
    let m2 = Hostile::start("mcp-prm", Some(&evil_as2.url("")));
    let pinned = code_client(Arc::new(MemoryStore::default())).issuer(peers.issuer());
    let c = Client::builder()
        .http(HttpConfig::new(m2.url("/mcp")).oauth(pinned))
        .unwrap();
    let e = c.call("whoami", json!({})).await.unwrap_err();
    assert!(e.to_string().contains("may use"), "{e}");
    assert_eq!(evil_as2.seen(), "[]");
    // A private key (private_key_jwt), first used with the real server.
    let cc = || {
        OAuth::new()
            .grant(Grant::ClientCredentials)
            .client("cc-client", None)
            .private_key(pem.clone())
            .store(store.clone())
            .owner("service")
    };
    let real = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(cc()))
        .unwrap();
    assert_eq!(call_whoami(&real).await.unwrap()["client_id"], "cc-client");
    let c = Client::builder()
        .http(HttpConfig::new(m.url("/mcp")).oauth(cc()))
        .unwrap();
    assert!(c.call("whoami", json!({})).await.is_err());
    assert!(
        !evil_as.seen().contains("client_assertion"),
        "{}",
        evil_as.seen()
    );
    // A workload assertion: bound to the first authorization server it went to (which
    // gets it: the negative control), never sent to a second one.
    let first_as = Hostile::start("as", None);
    let second_as = Hostile::start("as", None);
    let m_first = Hostile::start("mcp-prm", Some(&first_as.url("")));
    let m_second = Hostile::start("mcp-prm", Some(&second_as.url("")));
    let wif_store: Arc<dyn CredentialStore> = Arc::new(MemoryStore::default());
    let wif = || {
        OAuth::new()
            .client("wif-client", None)
            .store(wif_store.clone())
            .assertion(|| async { Ok(Secret::new("WORKLOAD-JWT-CANARY")) })
    };
    for m in [&m_first, &m_second] {
        let c = Client::builder()
            .http(HttpConfig::new(m.url("/mcp")).oauth(wif()))
            .unwrap();
        assert!(c.call("whoami", json!({})).await.is_err());
    }
    assert!(first_as.seen().contains("WORKLOAD-JWT-CANARY"));
    assert!(
        !second_as.seen().contains("WORKLOAD-JWT-CANARY"),
        "{}",
        second_as.seen()
    );
}

/// Forgetting is per owner and per server, and never unbinds the application's client:
/// authorizing again uses it, not a new dynamic registration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_is_per_owner_and_server_and_keeps_the_applications_client() {
    let (_, jwks) = p256_key();
    let peers = start(&jwks);
    let store: Arc<dyn CredentialStore> = Arc::new(MemoryStore::default());
    let client = |owner: &str| {
        Client::builder()
            .http(HttpConfig::new(&peers.mcp_url).oauth(code_client(store.clone()).owner(owner)))
            .unwrap()
    };
    let (alice, bob) = (client("alice"), client("bob"));
    call_whoami(&alice).await.unwrap();
    call_whoami(&bob).await.unwrap();
    alice.authorization().unwrap().forget().await.unwrap();
    assert!(!alice.authorization().unwrap().is_authorized());
    assert!(store.load(&peers.key("alice")).await.unwrap().is_none());
    assert!(store.load(&peers.key("bob")).await.unwrap().is_some());
    let alice = client("alice");
    assert_eq!(
        call_whoami(&alice).await.unwrap()["client_id"],
        "code-client"
    );
    assert_eq!(peers.stats()["registrations"], 0, "{}", peers.stats());
}

/// Endpoints that only look local (userinfo before the host, a name starting with
/// 127.) are refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookalike_endpoints_are_refused() {
    let evil_as = Hostile::start("as-lookalike", None);
    let m = Hostile::start("mcp-prm", Some(&evil_as.url("")));
    let oauth = OAuth::new()
        .grant(Grant::ClientCredentials)
        .client("c", Some("LOOKALIKE-SECRET".into()));
    let c = Client::builder()
        .http(HttpConfig::new(m.url("/mcp")).oauth(oauth))
        .unwrap();
    let e = c.call("whoami", json!({})).await.unwrap_err();
    assert!(e.is_config() && e.to_string().contains("refused"), "{e}");
    assert!(!e.to_string().contains("LOOKALIKE-SECRET"));
    assert_eq!(evil_as.posts(), 0);
}

/// An authorization that fails is reported once: one question to the person, one
/// dynamic registration (kept, and used again next time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_authorization_is_reported_once_and_registers_once() {
    let (_, jwks) = p256_key();
    let peers = start(&jwks);
    let store: Arc<dyn CredentialStore> = Arc::new(MemoryStore::default());
    let asked = Arc::new(AtomicUsize::new(0));
    let counting = {
        let asked = asked.clone();
        move |_url: String| {
            asked.fetch_add(1, Ordering::SeqCst);
            async {
                Err(mcp_runtime::Error::transport(
                    "the person closed the browser",
                ))
            }
        }
    };
    let dcr = || {
        OAuth::new()
            .redirect_uri("http://127.0.0.1:8765/callback")
            .store(store.clone())
    };
    let c = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(dcr().authorizer(counting)))
        .unwrap();
    let e = c.call("whoami", json!({})).await.unwrap_err();
    assert!(e.to_string().contains("closed the browser"), "{e}");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!(peers.stats()["registrations"], 1, "{}", peers.stats());
    let c = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(dcr().authorizer(browser)))
        .unwrap();
    assert_eq!(call_whoami(&c).await.unwrap()["sub"], "test-user");
    assert_eq!(peers.stats()["registrations"], 1, "registered again");
}

/// A person may take longer than any request timeout: the authorization has its own
/// deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_runs_under_its_own_deadline() {
    let (_, jwks) = p256_key();
    let peers = start(&jwks);
    let slow_person = |url: String| async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        browser(url).await
    };
    let oauth = code_client(Arc::new(MemoryStore::default())).authorizer(slow_person);
    let c = Client::builder()
        .timeout(Duration::from_secs(2))
        .http(HttpConfig::new(&peers.mcp_url).oauth(oauth))
        .unwrap();
    assert_eq!(call_whoami(&c).await.unwrap()["sub"], "test-user");
    // The authorization's own deadline, named in the error.
    let never = |_url: String| std::future::pending::<mcp_runtime::Result<Callback>>();
    let oauth = code_client(Arc::new(MemoryStore::default()))
        .authorizer(never)
        .authorization_timeout(Duration::from_secs(1));
    let c = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(oauth))
        .unwrap();
    let e = c.call("whoami", json!({})).await.unwrap_err();
    assert!(
        e.is_timeout() && e.to_string().contains("OAuth::authorization_timeout"),
        "{e}"
    );
}

/// The loopback authorizer serves every authorization of its client, accepts only the
/// redirect of the authorization in progress, and reads bounded requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loopback_authorizer_checks_state_and_bounds_what_it_reads() {
    use mcp_runtime::auth::Authorizer as _;
    let a = LoopbackAuthorizer::bind().unwrap();
    let port: u16 = a
        .redirect_uri()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/callback")
        .parse()
        .unwrap();
    let hit = move |request: Vec<u8>| {
        tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            let _ = s.write_all(&request);
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            out
        })
    };
    for round in 0..2 {
        let state = format!("state-{round}");
        let pending = tokio::spawn(a.authorize(format!(
            "https://as.example/authorize?client_id=x&state={state}"
        )));
        // Someone else's redirect: refused, and the authorizer keeps waiting.
        let other = hit(b"GET /callback?code=stolen&state=other HTTP/1.1\r\n\r\n".to_vec());
        assert!(other.await.unwrap().starts_with("HTTP/1.1 400"));
        // An endless request line: cut off, and the authorizer keeps waiting.
        let mut endless = b"GET /callback?x=".to_vec();
        endless.extend(std::iter::repeat_n(b'a', 100_000));
        let _ = hit(endless).await.unwrap();
        assert!(!pending.is_finished());
        let ok =
            hit(format!("GET /callback?code=good&state={state} HTTP/1.1\r\n\r\n").into_bytes());
        assert!(ok.await.unwrap().starts_with("HTTP/1.1 200"));
        let cb = pending.await.unwrap().unwrap();
        assert_eq!(cb.code.as_deref(), Some("good"));
    }
    // An authorization endpoint whose URL carries a `state` of its own: the redirect
    // awaited is the one with the client's state, given to it or (called with the URL
    // alone) the last in the URL, which the client appends.
    let url = "https://as.example/authorize?state=forged&client_id=x&state=mine".to_owned();
    // One authorization at a time: two in flight at once would race for the listener,
    // and the redirect below could end the other one.
    for given_state in [true, false] {
        let pending = if given_state {
            tokio::spawn(a.authorize_with_state(url.clone(), "mine"))
        } else {
            tokio::spawn(a.authorize(url.clone()))
        };
        let forged = hit(b"GET /callback?code=stolen&state=forged HTTP/1.1\r\n\r\n".to_vec());
        assert!(forged.await.unwrap().starts_with("HTTP/1.1 400"));
        let ok = hit(b"GET /callback?code=good&state=mine HTTP/1.1\r\n\r\n".to_vec());
        assert!(ok.await.unwrap().starts_with("HTTP/1.1 200"));
        let cb = pending.await.unwrap().unwrap();
        assert_eq!(cb.state.as_deref(), Some("mine"));
    }
}

/// Trace-level logs, errors and `Debug` output of a whole authorization (code flow with
/// DPoP, refresh) never show a token, a refresh token, a key, a client secret or a
/// secret in a URL.
#[test]
fn secrets_never_reach_logs_errors_or_debug() {
    let captured = support::Captured::default();
    let w = captured.clone();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_writer(move || w.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .finish(),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut shown = String::new();
    let creds = rt.block_on(async {
        let (_, jwks) = p256_key();
        let peers = start(&jwks);
        let store: Arc<dyn CredentialStore> = Arc::new(MemoryStore::default());
        let config = HttpConfig::new(&peers.mcp_url).oauth(code_client(store.clone()));
        shown.push_str(&format!("{config:?}"));
        let c = Client::builder().http(config).unwrap();
        call_whoami(&c).await.unwrap();
        expire(store.as_ref(), &peers.key("default")).await;
        let c = Client::builder()
            .http(HttpConfig::new(&peers.mcp_url).oauth(code_client(store.clone())))
            .unwrap();
        call_whoami(&c).await.unwrap();
        shown.push_str(&format!("{c:?}"));
        // A secret in the URL's query: not in Debug, not in the error.
        let url = format!(
            "http://127.0.0.1:{}/mcp?key=QUERY-CANARY",
            support::free_port()
        );
        let config = HttpConfig::new(&url).bearer_token("BEARER-CANARY");
        shown.push_str(&format!("{config:?}"));
        let c = Client::builder().http(config).unwrap();
        shown.push_str(&c.tools().await.unwrap_err().to_string());
        store.load(&peers.key("default")).await.unwrap().unwrap()
    });
    shown.push_str(&format!("{creds:?}"));
    let logs = captured.text();
    assert!(logs.len() > 1000, "trace logging was captured");
    let mut secrets: Vec<String> = vec![
        "code-client-secret".into(),
        "QUERY-CANARY".into(),
        "BEARER-CANARY".into(),
    ];
    for s in [&creds.access_token, &creds.refresh_token, &creds.dpop_key]
        .into_iter()
        .flatten()
    {
        secrets.push(s.expose().to_owned());
    }
    for secret in secrets {
        assert!(!logs.contains(&secret), "a secret reached the logs");
        assert!(
            !shown.contains(&secret),
            "a secret reached Debug or an error: {shown}"
        );
    }
}
