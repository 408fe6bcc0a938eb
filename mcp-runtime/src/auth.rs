//! OAuth for HTTP servers, as the MCP authorization spec describes: discovery
//! (Protected Resource Metadata, then authorization server metadata), client
//! registration (pre-registered, Client ID Metadata Document, Dynamic Client
//! Registration), the authorization code flow with PKCE (S256), `client_credentials`
//! (client secret or `private_key_jwt`), the JWT bearer grant (workload identity) and
//! the enterprise ID-JAG flow, DPoP-bound tokens, refresh, step-up and authorization
//! server migration.
//!
//! Attach it to an HTTP server with [`HttpConfig::oauth`](crate::HttpConfig::oauth).
//! Tokens, secrets and keys never appear in `Debug`, errors or logs.
//!
//! What goes where (docs/oauth.md has the threat model):
//! * Credentials are kept per owner, protected resource and issuer
//!   ([`CredentialKey`]): a token is only ever sent to the server it was issued for.
//! * A refresh token and a registered client's secret go only to the token endpoint of
//!   the authorization server that issued them, from that server's own metadata.
//! * The application's own secrets — a pre-registered client, a private key, a
//!   workload assertion, an identity provider's token — go only to the authorization
//!   servers named with [`OAuth::issuer`], or, without any, to the first one they were
//!   used with (remembered in the store).
//! * Every URL obeys one rule: `https://`, or `http://` to this machine.
//! * A person's authorization has its own deadline
//!   ([`OAuth::authorization_timeout`]), outside the requests' timeouts.

use std::fmt;
use std::sync::Mutex;

use serde_json::Value;

use crate::error::{Error, Result};

mod authorization;
mod authorizer;
mod jose;
#[cfg(feature = "postgres")]
mod postgres;
mod store;

pub use authorizer::{Authorizer, Callback, LoopbackAuthorizer};
use jose::dpop_proof;
#[cfg(feature = "postgres")]
#[doc(hidden)]
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use store::{CredentialKey, CredentialStore, Credentials, FileStore, MemoryStore, StoreLock};

mod config;
mod discovery;
mod grants;
mod primitives;
mod registration;
#[cfg(test)]
mod tests;

use authorization::{AuthorizationState, Token};
pub(crate) use authorization::{Challenged, ServerAuthorization};
pub use config::{Grant, IdentityProvider, OAuth};
pub(crate) use discovery::{
    canonical_resource, parse_www_authenticate, AuthHttp, Challenge, HttpReply,
};
use grants::token_from;

pub(crate) use mcp_runtime_core::lock;

impl ServerAuthorization {
    pub fn new(config: OAuth, resource: String) -> Self {
        ServerAuthorization {
            config,
            key_resource: canonical_resource(&resource),
            resource: resource.clone(),
            state: tokio::sync::Mutex::new(AuthorizationState::default()),
            current: Mutex::new(None),
            rs_nonce: Mutex::new(None),
            resource_param: Mutex::new(resource.clone()),
            redirect_override: Mutex::new(None),
            pending: Mutex::new(None),
        }
    }

    /// The `Authorization` (and `DPoP`) headers for a request, refreshing a token that
    /// is about to expire.
    pub async fn headers(
        &self,
        http: &dyn AuthHttp,
        method: &str,
        url: &str,
    ) -> Result<http::HeaderMap> {
        let token = lock(&self.current).clone();
        let token = match token {
            Some(t) if t.due() => self.refresh(http, Some(&t)).await?.or(Some(t)),
            other => other,
        };
        let Some(t) = token else {
            return Ok(http::HeaderMap::new());
        };
        self.token_headers(&t, method, url)
    }

    /// `Authorization` (and `DPoP`) for a token, marked sensitive so no `Debug` or log
    /// of the request shows them.
    fn token_headers(&self, t: &Token, method: &str, url: &str) -> Result<http::HeaderMap> {
        let value = |v: String| {
            let mut v = http::HeaderValue::try_from(v)
                .map_err(|_| Error::invalid_response("the token is not a valid header value"))?;
            v.set_sensitive(true);
            Ok::<_, Error>(v)
        };
        let mut h = http::HeaderMap::new();
        match &t.dpop {
            Some(key) => {
                let nonce = lock(&self.rs_nonce).clone();
                let proof = dpop_proof(key, method, url, Some(t.value.expose()), nonce.as_deref())?;
                h.insert(
                    http::header::AUTHORIZATION,
                    value(format!("DPoP {}", t.value.expose()))?,
                );
                h.insert("dpop", value(proof)?);
            }
            None => {
                h.insert(
                    http::header::AUTHORIZATION,
                    value(format!("Bearer {}", t.value.expose()))?,
                );
            }
        }
        Ok(h)
    }

    /// Handles a 401 or 403 from the MCP server: what to do next.
    pub async fn challenged(
        &self,
        http: &dyn AuthHttp,
        status: u16,
        headers: &http::HeaderMap,
    ) -> Result<Challenged> {
        let challenges: Vec<Challenge> = headers
            .get_all("www-authenticate")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(parse_www_authenticate)
            .collect();
        let param = |k: &str| challenges.iter().find_map(|c| c.params.get(k).cloned());
        // DPoP nonce from the resource server: retry with it.
        if param("error").as_deref() == Some("use_dpop_nonce") {
            if let Some(n) = headers.get("dpop-nonce").and_then(|v| v.to_str().ok()) {
                *lock(&self.rs_nonce) = Some(n.to_owned());
                return Ok(Challenged::Retry);
            }
        }
        let mut st = self.state.lock().await;
        if status == 403 {
            if param("error").as_deref() != Some("insufficient_scope") {
                return Ok(Challenged::No);
            }
            if st.step_ups >= self.config.max_step_ups {
                return Err(Error::http_status(
                    403,
                    "still insufficient scope after re-authorizing; giving up",
                ));
            }
            st.step_ups += 1;
        }
        let dpop_wanted = challenges
            .iter()
            .any(|c| c.scheme.eq_ignore_ascii_case("dpop"));
        // Discovery runs again on every challenge: the server may have moved to
        // another authorization server.
        let (prm, metadata) = self.discover(http, param("resource_metadata")).await?;
        if status == 401 {
            if let Some(stored) = self.load(&metadata.issuer).await? {
                let in_use = lock(&self.current).as_ref().map(|t| t.value.clone());
                // A stored token this process has not tried yet (an earlier run, or
                // `mcp login`), issued for this very server.
                if let Some(at) = &stored.access_token {
                    let candidate = token_from(&stored);
                    if !candidate.due() && in_use.as_ref() != Some(at) {
                        *lock(&self.current) = Some(candidate);
                        st.metadata = Some(metadata);
                        return Ok(Challenged::Retry);
                    }
                }
                // The token was refused: refresh it if we can, before asking anyone.
                if stored.refresh_token.is_some() {
                    st.metadata = Some(metadata.clone());
                    drop(st);
                    let stale = lock(&self.current).clone();
                    match self.refresh(http, stale.as_ref()).await {
                        Ok(Some(_)) => return Ok(Challenged::Retry),
                        // The refresh token was refused for good: authorize afresh.
                        Ok(None) => {}
                        // No answer (network, 5xx): the credentials stay; say so.
                        Err(e) if !e.is_unauthorized() => return Err(e),
                        Err(_) => {}
                    }
                    st = self.state.lock().await;
                }
            }
        }
        // Scopes: the challenge's, else the resource's, else none; a step-up adds.
        let mut scopes: Vec<String> = if let Some(s) = &self.config.scopes {
            s.clone()
        } else if let Some(s) = param("scope") {
            s.split_whitespace().map(str::to_owned).collect()
        } else if let Some(s) = prm
            .as_ref()
            .and_then(|p| p.get("scopes_supported"))
            .and_then(Value::as_array)
        {
            s.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        } else {
            Vec::new()
        };
        if status == 403 {
            for s in &st.scopes {
                if !scopes.contains(s) {
                    scopes.push(s.clone());
                }
            }
        }
        st.scopes = scopes.clone();
        let token = self.obtain(http, &metadata, &scopes, dpop_wanted).await?;
        st.metadata = Some(metadata);
        *lock(&self.current) = Some(token);
        Ok(Challenged::Authorized)
    }

    /// The key of the owner's credentials for this server from `issuer`.
    fn key(&self, issuer: &str) -> CredentialKey {
        CredentialKey::new(&self.config.owner, &self.key_resource, issuer)
    }

    async fn load(&self, issuer: &str) -> Result<Option<Credentials>> {
        self.config.store.load(&self.key(issuer)).await
    }

    /// The owner's credentials for this server from `issuer`, or empty ones to fill in.
    async fn stored(&self, issuer: &str) -> Result<Credentials> {
        Ok(self
            .load(issuer)
            .await?
            .unwrap_or_else(|| Credentials::new(issuer)))
    }

    fn resource_param(&self) -> String {
        lock(&self.resource_param).clone()
    }

    /// Whether the owner holds a token.
    pub fn authorized(&self) -> bool {
        lock(&self.current).is_some()
    }

    /// Forgets the owner's credentials for this server (and only those).
    pub async fn deauthorize(&self) -> Result<()> {
        *lock(&self.current) = None;
        self.config
            .store
            .forget(&self.config.owner, &self.key_resource)
            .await
    }
}

/// A server's authorization, for web applications that send the user to the
/// authorization server themselves (from [`Client::authorization`](crate::Client::authorization)).
pub struct Authorization<'a> {
    pub(crate) session: &'a ServerAuthorization,
    pub(crate) http: &'a dyn AuthHttp,
}

impl fmt::Debug for Authorization<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authorization")
            .field("resource", &self.session.resource)
            .finish()
    }
}

impl Authorization<'_> {
    /// The URL to send the user to; the authorization server redirects back to
    /// `redirect_uri` with the parameters [`complete`](Self::complete) takes.
    pub async fn url(&self, redirect_uri: &str) -> Result<String> {
        self.session
            .start_authorization(self.http, redirect_uri)
            .await
    }
    /// Finishes the authorization with the callback's parameters. Fails when they do
    /// not match the authorization [`url`](Self::url) started.
    pub async fn complete(&self, callback: Callback) -> Result<()> {
        self.session.finish_authorization(self.http, callback).await
    }
    /// Whether the owner holds a token for this server.
    pub fn is_authorized(&self) -> bool {
        self.session.authorized()
    }
    /// Forgets the owner's credentials for this server.
    pub async fn forget(&self) -> Result<()> {
        self.session.deauthorize().await
    }
}

/// What `crate::fuzzing` reaches: the challenges of a `WWW-Authenticate` header.
pub(crate) fn fuzz_www_authenticate(header: &str) -> Vec<(String, Vec<(String, String)>)> {
    discovery::parse_www_authenticate(header)
        .into_iter()
        .map(|c| (c.scheme, c.params.into_iter().collect()))
        .collect()
}

/// What `crate::fuzzing` reaches: an authorization server's metadata, read as
/// discovery reads it (its token endpoint, or why not).
pub(crate) fn fuzz_as_metadata(issuer: &str, body: &[u8]) -> std::result::Result<String, String> {
    let raw: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    discovery::metadata_from(issuer, raw)
        .map(|m| m.token_endpoint)
        .map_err(|e| e.to_string())
}

/// What `crate::fuzzing` reaches: RFC 9728 §3.3's check of a protected resource.
pub(crate) fn fuzz_resource_matches(resource: &str, server: &str, at_root: bool) -> bool {
    discovery::resource_matches(resource, server, at_root)
}
