//! Credentials shared by processes: twenty processes refreshing one expiring token in
//! a real PostgreSQL exactly once, and processes sharing one credential file — against
//! the real authorization server of `oauth`.

use std::process::Stdio;
use std::sync::Arc;

use mcp_runtime::auth::{
    CredentialKey, CredentialStore, Credentials, FileStore, MemoryStore, OAuth, PostgresStore,
};
use mcp_runtime::{Client, HttpConfig};
use serde_json::{json, Value};

use crate::oauth::*;
use crate::support;

/// The client process of [`twenty_processes_refresh_an_expiring_token_once`], which
/// starts this test binary again twenty times to run it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a client process of twenty_processes_refresh_an_expiring_token_once, which runs it"]
async fn postgres_client_process() {
    let db = std::env::var("MCP_TEST_PG_URL").expect("set by the test that runs this");
    let url = std::env::var("MCP_TEST_MCP_URL").expect("set by the test that runs this");
    let store = PostgresStore::connect(&db).await.unwrap();
    let oauth = OAuth::new()
        .client("code-client", Some("code-client-secret".into()))
        .store(store)
        .authorizer(nobody);
    let c = Client::builder()
        .http(HttpConfig::new(&url).oauth(oauth))
        .unwrap();
    let who = call_whoami(&c).await.unwrap();
    assert_eq!(who["sub"], "test-user", "{who}");
}

/// Twenty instances of an application on a real PostgreSQL store see the same token
/// expire at once: it is refreshed exactly once, every instance gets through, and the
/// grant survives (a refresh token used twice would make the server revoke it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_processes_refresh_an_expiring_token_once() {
    let (_, jwks) = p256_key();
    let peers = start(&jwks);
    let pg = support::Postgres::start();
    let store: Arc<dyn CredentialStore> = Arc::new(PostgresStore::connect(&pg.url).await.unwrap());
    let c = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(code_client(store.clone())))
        .unwrap();
    call_whoami(&c).await.unwrap();
    c.close().await.unwrap();
    expire(store.as_ref(), &peers.key("default")).await;
    let children: Vec<_> = (0..20)
        .map(|_| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "oauth_shared::postgres_client_process",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                ])
                .env("MCP_TEST_PG_URL", &pg.url)
                .env("MCP_TEST_MCP_URL", &peers.mcp_url)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "an instance failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stats = peers.stats();
    assert_eq!(stats["refreshes"], 1, "{stats}");
    assert_eq!(stats["revocations"], 0, "{stats}");
    // The grant is alive: the next expiry refreshes again.
    expire(store.as_ref(), &peers.key("default")).await;
    let c = Client::builder()
        .http(HttpConfig::new(&peers.mcp_url).oauth(code_client(store.clone()).authorizer(nobody)))
        .unwrap();
    assert_eq!(call_whoami(&c).await.unwrap()["sub"], "test-user");
    assert_eq!(peers.stats()["refreshes"], 2);
}

/// A writer process of [`four_processes_share_one_credential_file`].
#[tokio::test]
#[ignore = "a writer process of four_processes_share_one_credential_file, which runs it"]
async fn file_store_writer_process() {
    let path = std::env::var("MCP_TEST_STORE").expect("set by the test that runs this");
    let me = std::env::var("MCP_TEST_WRITER").expect("set by the test that runs this");
    let store = FileStore::new(path);
    for i in 0..100 {
        let key = CredentialKey::new(format!("{me}-{i}"), "https://a.example/mcp", "https://as");
        let creds = Credentials::new("https://as");
        store.save(&key, &creds).await.unwrap();
    }
}

/// Four processes saving 100 credentials each into one file: all 400 are there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_share_one_credential_file() {
    let dir = std::env::temp_dir().join(format!("mcp-filestore-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("credentials.json");
    let children: Vec<_> = (0..4)
        .map(|n| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "oauth_shared::file_store_writer_process",
                    "--exact",
                    "--ignored",
                ])
                .env("MCP_TEST_STORE", &path)
                .env("MCP_TEST_WRITER", format!("w{n}"))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let store = FileStore::new(&path);
    for n in 0..4 {
        for i in 0..100 {
            let key =
                CredentialKey::new(format!("w{n}-{i}"), "https://a.example/mcp", "https://as");
            assert!(
                store.load(&key).await.unwrap().is_some(),
                "w{n}-{i} was lost"
            );
        }
    }
    let content: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(content["credentials"].as_array().unwrap().len(), 400);
    let _ = std::fs::remove_dir_all(dir);
}

/// A declared server's OAuth by hand (an application that shows the person the URL
/// itself): `authorization_url`, `authorize`, `is_authorized`, `deauthorize`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_server_is_authorized_by_hand() {
    let (_, jwks) = p256_key();
    let peers = start(&jwks);
    let store: Arc<dyn CredentialStore> = Arc::new(MemoryStore::default());
    let oauth = OAuth::new()
        .client("code-client", Some("code-client-secret".into()))
        .redirect_uri("http://127.0.0.1:8765/callback")
        .store(store)
        .authorizer(nobody);
    let m = mcp_runtime::Mcp::builder("guarded")
        .url(&peers.mcp_url)
        .oauth(oauth)
        .build()
        .unwrap();
    assert!(!m.is_authorized());
    let url = m
        .authorization_url("http://127.0.0.1:8765/callback")
        .await
        .unwrap();
    let callback = follow_to_callback(url).await;
    // A callback that does not belong to this authorization is refused, and ends it:
    // the person starts again.
    let forged = callback.replace("state=", "state=x");
    assert!(m.authorize(&forged).await.is_err());
    assert!(m.authorize(&callback).await.is_err());
    let url = m
        .authorization_url("http://127.0.0.1:8765/callback")
        .await
        .unwrap();
    let callback = follow_to_callback(url).await;
    m.authorize(&callback).await.unwrap();
    assert!(m.is_authorized());
    let who = whoami(&m.call("whoami", json!({})).await.unwrap().text());
    assert_eq!(who["sub"], "test-user", "{who}");
    m.deauthorize().await.unwrap();
    assert!(!m.is_authorized());
    // Forgotten: the next call needs a person, and nobody is there.
    assert!(m.call("whoami", json!({})).await.is_err());
    m.close().await.unwrap();
}
