use super::authorization::AsMetadata;
use super::*;
use std::sync::Arc;

use serde_json::{json, Value};

use super::discovery::HttpReply;
use super::jose::{client_assertion, new_key};
use super::primitives::{now, random};
use crate::error::Result;
use crate::{BoxFuture, Secret};
use base64::Engine as _;
use discovery::resource_matches;
use grants::refresh_point;

thread_local! {
    /// Makes this thread's random draws fail (the OS has no entropy source).
    pub(super) static RANDOM_FAILS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A failed random draw is an error everywhere a random value is made — `state`,
/// PKCE verifiers, `jti`s, DPoP keys, file names — never zeros, never a loop.
#[test]
fn a_failed_random_draw_fails_closed() {
    assert_eq!(random(16).unwrap().len(), 22);
    assert!(new_key().is_ok());
    RANDOM_FAILS.with(|f| f.set(true));
    let e = random(16).unwrap_err();
    assert!(e.is_config() && e.to_string().contains("random"), "{e}");
    assert!(new_key().is_err(), "an error, not a loop");
    let key = p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).unwrap();
    assert!(jose::dpop_proof(&key, "GET", "https://as.example/t", None, None).is_err());
    // PS256 draws its salt and blinding while signing: the signature is dropped.
    RANDOM_FAILS.with(|f| f.set(false));
    let rsa_key = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 1024).unwrap();
    let sign = || jose::rsa_jws(rsa_key.clone(), "PS256", json!({"alg": "PS256"}), json!({}));
    assert!(sign().is_ok());
    RANDOM_FAILS.with(|f| f.set(true));
    let e = sign().unwrap_err();
    assert!(e.to_string().contains("random"), "{e}");
    RANDOM_FAILS.with(|f| f.set(false));
    assert!(random(16).is_ok());
}

#[test]
fn parses_challenges() {
    let c = parse_www_authenticate(
        r#"Bearer resource_metadata="https://x/.well-known/oauth-protected-resource", scope="a b", error="insufficient_scope", DPoP algs="ES256""#,
    );
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].scheme, "Bearer");
    assert_eq!(c[0].params["scope"], "a b");
    assert_eq!(c[0].params["error"], "insufficient_scope");
    assert_eq!(c[1].scheme, "DPoP");
    assert_eq!(c[1].params["algs"], "ES256");
    let c = parse_www_authenticate(
        r#"Bearer error="invalid_token", error_description="a \"quoted\" word""#,
    );
    assert_eq!(c[0].params["error_description"], "a \"quoted\" word");
    // Found by the `www_authenticate` fuzz target: a parameter with no name is dropped.
    let c = parse_www_authenticate(r#"DPoPal"sg =ES256", Bearer"#);
    assert!(c.iter().all(|c| !c.params.contains_key("")), "{c:?}");
    assert_eq!(c.last().map(|c| c.scheme.as_str()), Some("Bearer"));
}

#[test]
fn resources_must_be_this_server() {
    let server = "http://localhost:3000/mcp";
    assert!(resource_matches("http://localhost:3000/mcp", server, false));
    assert!(resource_matches(
        "HTTP://LocalHost:3000/mcp/",
        server,
        false
    ));
    // A parent path or the origin is not this server …
    assert!(!resource_matches("http://localhost:3000", server, false));
    assert!(!resource_matches("http://localhost:3000/", server, false));
    // … except in the origin's own document.
    assert!(resource_matches("http://localhost:3000", server, true));
    assert!(!resource_matches(
        "https://evil.example.com/mcp",
        server,
        true
    ));
    assert!(!resource_matches(
        "http://localhost:3000/other",
        server,
        true
    ));
    assert!(!resource_matches(
        "http://localhost:3000/mcp/sub",
        server,
        false
    ));
    assert!(!resource_matches("", server, true));
    assert_eq!(
        canonical_resource("HTTPS://Example.COM:443/mcp/?q=1#f"),
        "https://example.com/mcp"
    );
    assert_eq!(canonical_resource("http://h:80/"), "http://h");
    assert_eq!(canonical_resource("http://h:8080/x"), "http://h:8080/x");
}

#[test]
fn short_lived_tokens_are_refreshed_once_per_half_life() {
    // One hour: 30 s before it expires.
    assert_eq!(refresh_point(Some(1000), Some(4600)), Some(4570));
    // Ten seconds: after five.
    assert_eq!(refresh_point(Some(1000), Some(1010)), Some(1005));
    // Unknown issue time: 30 s before.
    assert_eq!(refresh_point(None, Some(4600)), Some(4570));
    assert_eq!(refresh_point(Some(1), None), None);
}

/// Counts token requests; answers each after a pause, with a new rotating pair.
struct FakeAs {
    token_requests: std::sync::atomic::AtomicUsize,
    lifetime: u64,
}

impl AuthHttp for FakeAs {
    fn get<'a>(&'a self, _url: &'a str) -> BoxFuture<'a, Result<HttpReply>> {
        Box::pin(async {
            Ok(HttpReply {
                status: 404,
                headers: http::HeaderMap::new(),
                body: Value::Null,
            })
        })
    }
    fn post_form<'a>(
        &'a self,
        _url: &'a str,
        form: Vec<(String, String)>,
        _h: Vec<(String, String)>,
    ) -> BoxFuture<'a, Result<HttpReply>> {
        Box::pin(async move {
            let n = self
                .token_requests
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            assert!(
                form.iter()
                    .any(|(k, v)| k == "refresh_token" && v == &format!("rt-{n}")),
                "a rotated refresh token is never reused"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            Ok(HttpReply {
                status: 200,
                headers: http::HeaderMap::new(),
                body: json!({"access_token": format!("at-{}", n + 1), "refresh_token": format!("rt-{}", n + 1), "expires_in": self.lifetime, "token_type": "Bearer"}),
            })
        })
    }
}

/// A session whose stored token (from `issuer`) is due, and the fake AS.
async fn due_session(
    lifetime: u64,
) -> (
    Arc<ServerAuthorization>,
    Arc<MemoryStore>,
    Arc<FakeAs>,
    CredentialKey,
) {
    let store = Arc::new(MemoryStore::default());
    let oauth = OAuth {
        store: store.clone(),
        ..OAuth::new()
    };
    let session = Arc::new(ServerAuthorization::new(
        oauth,
        "http://localhost:1/mcp".into(),
    ));
    let issuer = "http://localhost:2".to_owned();
    let key = session.key(&issuer);
    let creds = Credentials {
        client_id: Some("c".into()),
        access_token: Some(Secret::new("at-0")),
        refresh_token: Some(Secret::new("rt-0")),
        expires_at: Some(now()),
        ..Credentials::new(&issuer)
    };
    store.save(&key, &creds).await.unwrap();
    session.state.lock().await.metadata = Some(AsMetadata {
        issuer: issuer.clone(),
        token_endpoint: "http://localhost:2/token".into(),
        ..Default::default()
    });
    *lock(&session.current) = Some(token_from(&creds));
    let fake = Arc::new(FakeAs {
        token_requests: Default::default(),
        lifetime,
    });
    (session, store, fake, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_during_expiry_refresh_once() {
    let (session, store, fake, key) = due_session(3600).await;
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let (s, f) = (session.clone(), fake.clone());
        tasks.push(tokio::spawn(async move {
            s.headers(f.as_ref(), "POST", "http://localhost:1/mcp")
                .await
                .unwrap()
        }));
    }
    for t in tasks {
        let h = t.await.unwrap();
        assert_eq!(h["authorization"], "Bearer at-1");
        assert!(h["authorization"].is_sensitive());
    }
    assert_eq!(
        fake.token_requests
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    let saved = store.load(&key).await.unwrap().unwrap();
    assert_eq!(
        saved.refresh_token.as_ref().map(Secret::expose),
        Some("rt-1")
    );
}

/// A token that lives 20 s is refreshed once, not on every request.
#[tokio::test]
async fn a_short_lived_token_is_not_refreshed_on_every_request() {
    let (session, _store, fake, _key) = due_session(20).await;
    for _ in 0..50 {
        session
            .headers(fake.as_ref(), "POST", "http://localhost:1/mcp")
            .await
            .unwrap();
    }
    assert_eq!(
        fake.token_requests
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

#[test]
fn client_assertions_sign_with_p256_and_rsa_keys() {
    use p256::pkcs8::EncodePrivateKey as _;
    let ec = new_key().unwrap().to_pkcs8_pem(Default::default()).unwrap();
    let jwt = client_assertion(&ec, "c", "https://as", "RS256").unwrap();
    let header: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(jwt.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["alg"], "ES256");
    // RSA: sign, then verify with the public key.
    let key = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 2048).unwrap();
    let pem = key.to_pkcs8_pem(Default::default()).unwrap();
    for alg in ["RS256", "PS256"] {
        let jwt = client_assertion(&pem, "c", "https://as", alg).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(parts[2])
            .unwrap();
        let input = format!("{}.{}", parts[0], parts[1]);
        use rsa::signature::Verifier as _;
        let public = key.to_public_key();
        if alg == "RS256" {
            let vk = rsa::pkcs1v15::VerifyingKey::<sha2::Sha256>::new(public);
            vk.verify(
                input.as_bytes(),
                &rsa::pkcs1v15::Signature::try_from(sig.as_slice()).unwrap(),
            )
            .unwrap();
        } else {
            let vk = rsa::pss::VerifyingKey::<sha2::Sha256>::new(public);
            vk.verify(
                input.as_bytes(),
                &rsa::pss::Signature::try_from(sig.as_slice()).unwrap(),
            )
            .unwrap();
        }
    }
    assert!(client_assertion("not a key", "c", "a", "RS256")
        .unwrap_err()
        .is_config());
}

#[test]
fn secrets_stay_out_of_debug() {
    let c = Credentials {
        access_token: Some("at-secret".into()),
        refresh_token: Some("rt-secret".into()),
        client_secret: Some("cs-secret".into()),
        dpop_key: Some("key-secret".into()),
        ..Default::default()
    };
    let d = format!("{c:?}");
    for s in ["at-secret", "rt-secret", "cs-secret", "key-secret"] {
        assert!(!d.contains(s), "{d}");
    }
    let idp = IdentityProvider::new("https://idp", "id", "idp-secret", || async {
        Ok(Secret::new("id-token-secret"))
    });
    assert!(!format!("{idp:?}").contains("idp-secret"));
    let cb = Callback::from_url("/callback?code=code-secret&state=s");
    assert!(!format!("{cb:?}").contains("code-secret"));
}
