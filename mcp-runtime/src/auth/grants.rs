//! Getting and keeping tokens: every grant's token request (DPoP-bound when asked),
//! ID-JAG, refresh (one at a time), and storing what the server issued.

use super::authorization::{AsMetadata, RegisteredClient, ServerAuthorization, Token};
use super::config::{Grant, IdentityProvider};
use super::discovery::{check_url, AuthHttp};
use super::jose::{client_assertion, dpop_proof, new_key, parse_dpop_key};
use super::primitives::{now, random};
use super::registration::check_callback;
use super::store::{CredentialStore, Credentials};
use crate::error::{Error, Result};
use crate::Secret;
use base64::Engine as _;
use mcp_runtime_core::lock;
use serde_json::Value;
#[allow(unused_imports)]
use std::collections::HashMap;
use std::sync::Arc;

impl Token {
    pub(super) fn due(&self) -> bool {
        self.refresh_at.is_some_and(|r| now() >= r)
    }
}

/// When a token issued at `issued` (when known) and expiring at `expires` is due.
pub(super) fn refresh_point(issued: Option<u64>, expires: Option<u64>) -> Option<u64> {
    let expires = expires?;
    let lifetime = issued.map_or(u64::MAX, |i| expires.saturating_sub(i));
    Some(expires.saturating_sub((lifetime / 2).min(30)))
}

/// How a token request failed.
pub(super) enum TokenFailure {
    /// The authorization server answered with an OAuth error (`invalid_grant`, …).
    Refused { code: String, error: Error },
    /// No answer, or not an OAuth error (network, 5xx).
    Other(Error),
}

impl From<TokenFailure> for Error {
    fn from(f: TokenFailure) -> Error {
        match f {
            TokenFailure::Refused { error, .. } | TokenFailure::Other(error) => error,
        }
    }
}

impl From<Error> for TokenFailure {
    fn from(e: Error) -> TokenFailure {
        TokenFailure::Other(e)
    }
}

pub(super) fn token_from(c: &Credentials) -> Token {
    let dpop = c
        .dpop_key
        .as_ref()
        .filter(|_| {
            c.token_type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("dpop"))
        })
        .and_then(|k| parse_dpop_key(k.expose()))
        .map(Arc::new);
    Token {
        value: c.access_token.clone().unwrap_or_else(|| Secret::new("")),
        dpop,
        refresh_at: refresh_point(c.issued_at, c.expires_at),
    }
}

impl ServerAuthorization {
    pub(super) async fn obtain(
        &self,
        http: &dyn AuthHttp,
        m: &AsMetadata,
        scopes: &[String],
        dpop_wanted: bool,
    ) -> Result<Token> {
        let cfg = &self.config;
        let mut creds = self.stored(&m.issuer).await?;
        let dpop = if dpop_wanted || !m.list("dpop_signing_alg_values_supported").is_empty() {
            let key = match creds
                .dpop_key
                .as_ref()
                .and_then(|k| parse_dpop_key(k.expose()))
            {
                Some(k) => k,
                None => {
                    let key = new_key()?;
                    use p256::pkcs8::EncodePrivateKey as _;
                    creds.dpop_key = key
                        .to_pkcs8_pem(Default::default())
                        .ok()
                        .map(|p| Secret::new(p.to_string()));
                    key
                }
            };
            Some(Arc::new(key))
        } else {
            None
        };
        let client = self.client_for(http, m, &mut creds).await?;
        let mut form: Vec<(String, String)> = Vec::new();
        match cfg.grant {
            Grant::ClientCredentials => {
                form.push(("grant_type".into(), "client_credentials".into()));
            }
            Grant::JwtBearer => {
                let assertion =
                    match (&cfg.identity_provider, &cfg.assertion) {
                        (Some(idp), _) => {
                            self.bind("the identity provider's grant", &m.issuer)
                                .await?;
                            self.id_jag(http, idp, m).await?
                        }
                        (None, Some(a)) => {
                            self.bind("the workload assertion", &m.issuer).await?;
                            a().await?
                        }
                        (None, None) => return Err(Error::config(
                            "the JWT bearer grant needs an `assertion` or an `identity_provider`",
                        )),
                    };
                form.push((
                    "grant_type".into(),
                    "urn:ietf:params:oauth:grant-type:jwt-bearer".into(),
                ));
                form.push(("assertion".into(), assertion.expose().to_owned()));
            }
            Grant::AuthorizationCode => {
                let methods = m.list("code_challenge_methods_supported");
                if !methods.iter().any(|x| x == "S256") {
                    return Err(Error::unsupported(format!(
                        "the authorization server {} does not advertise PKCE with S256; refusing to authorize",
                        m.issuer
                    )));
                }
                let authorizer = cfg.authorizer.clone().ok_or_else(|| {
                    Error::http_status(401, "this server needs a person to authorize; set an authorizer (or use authorization_url/authorize)")
                })?;
                let verifier = random(32)?;
                let state = random(16)?;
                let url =
                    self.authorization_url(m, &client.client_id, &state, &verifier, scopes)?;
                // A person takes their time: the request's own timeouts wait, this
                // deadline does not.
                let cb = {
                    let _held = crate::hold::hold_request();
                    let t = cfg.authorization_timeout;
                    tokio::time::timeout(t, authorizer.authorize_with_state(url, &state))
                        .await
                        .map_err(|_| {
                            Error::timeout_of("authorization", t, "OAuth::authorization_timeout")
                        })??
                };
                check_callback(m, &cb, &state)?;
                let code = cb.code.ok_or_else(|| {
                    Error::invalid_response("the authorization server returned no code")
                })?;
                form.push(("grant_type".into(), "authorization_code".into()));
                form.push(("code".into(), code));
                form.push(("redirect_uri".into(), self.redirect_uri()));
                form.push(("code_verifier".into(), verifier));
            }
        }
        form.push(("resource".into(), self.resource_param()));
        if cfg.grant != Grant::AuthorizationCode && !scopes.is_empty() {
            form.push(("scope".into(), scopes.join(" ")));
        }
        let reply = self
            .token_request(http, m, &client, form, dpop.as_deref())
            .await?;
        self.store_token(&mut creds, reply, dpop).await
    }

    pub(super) async fn store_token(
        &self,
        creds: &mut Credentials,
        body: Value,
        dpop: Option<Arc<p256::ecdsa::SigningKey>>,
    ) -> Result<Token> {
        let access = body
            .get("access_token")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::invalid_response("the token response has no access_token"))?
            .to_owned();
        creds.access_token = Some(Secret::new(access.clone()));
        creds.token_type = body
            .get("token_type")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(r) = body.get("refresh_token").and_then(Value::as_str) {
            creds.refresh_token = Some(Secret::new(r));
        }
        let issued = now();
        creds.issued_at = Some(issued);
        creds.expires_at = body
            .get("expires_in")
            .and_then(Value::as_u64)
            .map(|s| issued + s);
        creds.scope = body.get("scope").and_then(Value::as_str).map(str::to_owned);
        self.config
            .store
            .save(&self.key(&creds.issuer), creds)
            .await?;
        let dpop = dpop.filter(|_| {
            creds
                .token_type
                .as_deref()
                .is_none_or(|t| t.eq_ignore_ascii_case("dpop"))
        });
        Ok(Token {
            value: Secret::new(access),
            dpop,
            refresh_at: refresh_point(creds.issued_at, creds.expires_at),
        })
    }

    pub(super) async fn token_request(
        &self,
        http: &dyn AuthHttp,
        m: &AsMetadata,
        client: &RegisteredClient,
        mut form: Vec<(String, String)>,
        dpop: Option<&p256::ecdsa::SigningKey>,
    ) -> std::result::Result<Value, TokenFailure> {
        check_url(&m.token_endpoint, "token endpoint")?;
        let mut headers = Vec::new();
        match client.method.as_str() {
            "client_secret_basic" => {
                let secret = client.secret.as_ref().map(Secret::expose).unwrap_or("");
                let enc =
                    |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                let basic = base64::engine::general_purpose::STANDARD.encode(format!(
                    "{}:{}",
                    enc(&client.client_id),
                    enc(secret)
                ));
                headers.push(("authorization".into(), format!("Basic {basic}")));
            }
            "client_secret_post" => {
                form.push(("client_id".into(), client.client_id.clone()));
                if let Some(s) = &client.secret {
                    form.push(("client_secret".into(), s.expose().to_owned()));
                }
            }
            "private_key_jwt" => {
                let pem = self
                    .config
                    .private_key
                    .as_ref()
                    .ok_or_else(|| Error::config("private_key_jwt needs a private key"))?;
                self.bind(
                    &format!("the private key of `{}`", client.client_id),
                    &m.issuer,
                )
                .await?;
                let assertion = client_assertion(
                    pem.expose(),
                    &client.client_id,
                    &m.issuer,
                    &self.config.signing_alg,
                )?;
                form.push(("client_id".into(), client.client_id.clone()));
                form.push((
                    "client_assertion_type".into(),
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
                ));
                form.push(("client_assertion".into(), assertion));
            }
            _ => form.push(("client_id".into(), client.client_id.clone())),
        }
        let mut nonce: Option<String> = None;
        for _ in 0..2 {
            let mut h = headers.clone();
            if let Some(key) = dpop {
                h.push((
                    "dpop".into(),
                    dpop_proof(key, "POST", &m.token_endpoint, None, nonce.as_deref())?,
                ));
            }
            let r = http.post_form(&m.token_endpoint, form.clone(), h).await?;
            if r.status == 200 {
                return Ok(r.body);
            }
            let error = r
                .body
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if error == "use_dpop_nonce" && nonce.is_none() {
                if let Some(n) = r.headers.get("dpop-nonce").and_then(|v| v.to_str().ok()) {
                    nonce = Some(n.to_owned());
                    continue;
                }
            }
            let desc = r
                .body
                .get("error_description")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let e = Error::http_status(
                r.status,
                crate::text::escape_controls(
                    format!("the token request failed: {error} {desc}").trim(),
                )
                .into_owned(),
            );
            return Err(if error.is_empty() || r.status >= 500 {
                TokenFailure::Other(e)
            } else {
                TokenFailure::Refused {
                    code: error.to_owned(),
                    error: e,
                }
            });
        }
        Err(TokenFailure::Other(Error::http_status(
            400,
            "the token request failed after a DPoP nonce",
        )))
    }

    /// RFC 8693 token exchange at the enterprise IdP for an ID-JAG.
    pub(super) async fn id_jag(
        &self,
        http: &dyn AuthHttp,
        idp: &IdentityProvider,
        m: &AsMetadata,
    ) -> Result<Secret> {
        let id_token = (idp.id_token)().await?;
        let form = vec![
            (
                "grant_type".to_owned(),
                "urn:ietf:params:oauth:grant-type:token-exchange".to_owned(),
            ),
            (
                "requested_token_type".into(),
                "urn:ietf:params:oauth:token-type:id-jag".into(),
            ),
            ("subject_token".into(), id_token.expose().to_owned()),
            (
                "subject_token_type".into(),
                "urn:ietf:params:oauth:token-type:id_token".into(),
            ),
            ("audience".into(), m.issuer.clone()),
            ("resource".into(), self.resource_param()),
            ("client_id".into(), idp.client_id.clone()),
        ];
        let mut form = form;
        if !idp.client_secret.expose().is_empty() {
            form.push((
                "client_secret".into(),
                idp.client_secret.expose().to_owned(),
            ));
        }
        // The identity provider's token endpoint, from its own metadata.
        check_url(&idp.issuer, "identity provider")?;
        let idp_metadata = self.as_metadata(http, &idp.issuer).await?;
        check_url(
            &idp_metadata.token_endpoint,
            "identity provider token endpoint",
        )?;
        let r = http
            .post_form(&idp_metadata.token_endpoint, form, Vec::new())
            .await?;
        if r.status != 200 {
            return Err(Error::http_status(
                r.status,
                "the identity provider refused the token exchange",
            ));
        }
        r.body
            .get("access_token")
            .and_then(Value::as_str)
            .map(Secret::new)
            .ok_or_else(|| Error::invalid_response("the token exchange returned no ID-JAG"))
    }

    /// Refreshes the token, once however many callers see it expire: callers of this
    /// client queue on its state; clients elsewhere (other processes, with a shared
    /// store) on the store's lock for this key, and whoever comes second finds the
    /// new token in the store instead of using a rotated-away refresh token.
    /// `Ok(None)`: nothing to refresh with (or the refresh token was refused for good,
    /// and forgotten): authorize afresh. An error that is no refusal (network, 5xx)
    /// leaves the credentials as they are.
    pub(super) async fn refresh(
        &self,
        http: &dyn AuthHttp,
        stale: Option<&Token>,
    ) -> Result<Option<Token>> {
        let st = self.state.lock().await;
        // Someone else refreshed while we waited.
        if let (Some(cur), Some(stale)) = (lock(&self.current).clone(), stale) {
            if cur.value != stale.value {
                return Ok(Some(cur));
            }
        }
        let Some(m) = st.metadata.clone() else {
            return Ok(None);
        };
        let cfg = &self.config;
        let key = self.key(&m.issuer);
        let _shared = cfg.store.lock(&key).await?;
        let Some(mut creds) = cfg.store.load(&key).await? else {
            return Ok(None);
        };
        // Another client sharing the store refreshed meanwhile: use its token.
        if let Some(at) = &creds.access_token {
            let stored = token_from(&creds);
            if stale.is_none_or(|s| &s.value != at) && !stored.due() {
                *lock(&self.current) = Some(stored.clone());
                return Ok(Some(stored));
            }
        }
        let Some(refresh) = creds.refresh_token.clone() else {
            if cfg.grant == Grant::AuthorizationCode {
                return Ok(None);
            }
            drop(st);
            // Client credentials and bearer grants just ask again.
            let scopes = self.state.lock().await.scopes.clone();
            let t = self
                .obtain(
                    http,
                    &m,
                    &scopes,
                    stale.and_then(|t| t.dpop.clone()).is_some(),
                )
                .await?;
            *lock(&self.current) = Some(t.clone());
            return Ok(Some(t));
        };
        let client = self.client_for(http, &m, &mut creds).await?;
        let form = vec![
            ("grant_type".to_owned(), "refresh_token".to_owned()),
            ("refresh_token".into(), refresh.expose().to_owned()),
            ("resource".into(), self.resource_param()),
        ];
        let dpop = stale.and_then(|t| t.dpop.clone()).or_else(|| {
            creds
                .dpop_key
                .as_ref()
                .and_then(|k| parse_dpop_key(k.expose()))
                .map(Arc::new)
                .filter(|_| {
                    creds
                        .token_type
                        .as_deref()
                        .is_some_and(|t| t.eq_ignore_ascii_case("dpop"))
                })
        });
        match self
            .token_request(http, &m, &client, form, dpop.as_deref())
            .await
        {
            Ok(body) => {
                let t = self.store_token(&mut creds, body, dpop).await?;
                *lock(&self.current) = Some(t.clone());
                Ok(Some(t))
            }
            // The refresh token is no good any more: forget the tokens (not the
            // registration) and authorize afresh.
            Err(TokenFailure::Refused { code, error }) if code == "invalid_grant" => {
                tracing::debug!(error = %error, "the refresh token was refused; authorizing afresh");
                creds.access_token = None;
                creds.refresh_token = None;
                cfg.store.save(&key, &creds).await?;
                *lock(&self.current) = None;
                Ok(None)
            }
            Err(f) => {
                let e = Error::from(f);
                Err(Error::transport(format!(
                    "refreshing the token failed ({e}); the credentials are kept, try again"
                ))
                .with_source(e))
            }
        }
    }
}
