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

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::secret::Secret;
use crate::BoxFuture;

mod authorizer;
mod jose;
#[cfg(feature = "postgres")]
mod postgres;
mod store;

pub use authorizer::{Authorizer, Callback, LoopbackAuthorizer};
use jose::{client_assertion, dpop_proof, new_key, parse_dpop_key};
#[cfg(feature = "postgres")]
#[doc(hidden)]
pub use postgres::PgPool;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use store::{CredentialKey, CredentialStore, Credentials, FileStore, MemoryStore, StoreLock};

/// Where the application's own secrets are bound to an authorization server in the
/// store (owner `""`): `CredentialKey { resource: BINDING + what, issuer: "" }`.
const BINDING: &str = "urn:mcp-runtime:binding:";

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type SecretFn = Arc<dyn Fn() -> BoxFuture<'static, Result<Secret>> + Send + Sync>;

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn random(n: usize) -> String {
    let mut buf = vec![0u8; n];
    // getrandom only fails when the OS has no entropy source at all.
    let _ = getrandom::getrandom(&mut buf);
    b64url(&buf)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn sha256(data: &[u8]) -> Vec<u8> {
    use sha2::Digest as _;
    sha2::Sha256::digest(data).to_vec()
}

/// The grants a client can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Grant {
    /// A person authorizes in a browser (with PKCE): the default.
    #[default]
    AuthorizationCode,
    /// The application connects as itself, with its client secret or private key.
    ClientCredentials,
    /// A JWT the platform issued (a workload identity) is exchanged for a token.
    JwtBearer,
}

/// The enterprise identity provider of the ID-JAG flow. Its token endpoint is read
/// from its own metadata, discovered from its issuer.
#[derive(Clone)]
pub struct IdentityProvider {
    /// Its issuer (`https://acme.okta.com`).
    pub issuer: String,
    /// Your application's client id there.
    pub client_id: String,
    /// Your application's client secret there.
    pub client_secret: Secret,
    id_token: SecretFn,
}

impl fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .finish_non_exhaustive()
    }
}

impl IdentityProvider {
    /// An identity provider known by its issuer; `id_token` returns the signed-in
    /// user's ID token, read for every exchange.
    pub fn new<F, Fut>(
        issuer: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
        id_token: F,
    ) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Secret>> + Send + 'static,
    {
        IdentityProvider {
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret: Secret::new(client_secret.into()),
            id_token: Arc::new(move || Box::pin(id_token())),
        }
    }
}

/// How a client authorizes with an HTTP server.
#[derive(Clone)]
pub struct OAuth {
    pub(crate) owner: String,
    pub(crate) scopes: Option<Vec<String>>,
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<Secret>,
    pub(crate) private_key: Option<Secret>,
    pub(crate) grant: Grant,
    pub(crate) assertion: Option<SecretFn>,
    pub(crate) identity_provider: Option<IdentityProvider>,
    pub(crate) redirect_uri: String,
    pub(crate) client_metadata_url: Option<String>,
    pub(crate) client_name: String,
    pub(crate) store: Arc<dyn CredentialStore>,
    pub(crate) authorizer: Option<Arc<dyn Authorizer>>,
    pub(crate) max_step_ups: u32,
    pub(crate) signing_alg: String,
    pub(crate) issuers: Vec<String>,
    pub(crate) authorization_timeout: Duration,
}

impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth")
            .field("owner", &self.owner)
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("issuers", &self.issuers)
            .finish_non_exhaustive()
    }
}

impl Default for OAuth {
    fn default() -> Self {
        OAuth {
            owner: "default".into(),
            scopes: None,
            client_id: None,
            client_secret: None,
            private_key: None,
            grant: Grant::AuthorizationCode,
            assertion: None,
            identity_provider: None,
            redirect_uri: "http://127.0.0.1:8765/callback".into(),
            client_metadata_url: None,
            client_name: "mcp-runtime".into(),
            store: Arc::new(MemoryStore::default()),
            authorizer: None,
            max_step_ups: 2,
            signing_alg: "RS256".into(),
            issuers: Vec::new(),
            authorization_timeout: Duration::from_secs(600),
        }
    }
}

impl OAuth {
    /// The authorization code flow (with PKCE), discovering and registering as needed.
    pub fn new() -> Self {
        OAuth::default()
    }
    /// Whose credentials these are (usually a user id).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = owner.into();
        self
    }
    /// Scopes to ask for, instead of those the server asks for.
    pub fn scopes<I: IntoIterator<Item = S>, S: Into<String>>(mut self, scopes: I) -> Self {
        self.scopes = Some(scopes.into_iter().map(Into::into).collect());
        self
    }
    /// Authorizes only with this authorization server (its issuer, exactly); call it
    /// again to allow several. A server that names any other is refused before
    /// anything is sent there. Without it, the application's own secrets (a
    /// pre-registered client, a private key, an assertion) are bound to the first
    /// authorization server they are used with.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuers.push(issuer.into());
        self
    }
    /// How long a person may take to authorize (default 10 minutes). The requests
    /// waiting for it do not time out meanwhile.
    pub fn authorization_timeout(mut self, timeout: Duration) -> Self {
        self.authorization_timeout = timeout;
        self
    }
    /// A client you registered: its id and secret go only to the authorization server
    /// named with [`issuer`](Self::issuer), or else the first one it is used with.
    pub fn client(mut self, client_id: impl Into<String>, client_secret: Option<String>) -> Self {
        self.client_id = Some(client_id.into());
        self.client_secret = client_secret.map(Secret::new);
        self
    }
    /// A private key (PEM: P-256 for ES256, RSA for RS256/PS256) that signs a
    /// short-lived client assertion (`private_key_jwt`) in place of a client secret.
    pub fn private_key(mut self, pem: impl Into<String>) -> Self {
        self.private_key = Some(Secret::new(pem.into()));
        self
    }
    /// The algorithm for an RSA private key: `RS256` (default) or `PS256`. P-256 keys
    /// always sign ES256.
    pub fn signing_alg(mut self, alg: impl Into<String>) -> Self {
        self.signing_alg = alg.into();
        self
    }
    /// The grant.
    pub fn grant(mut self, grant: Grant) -> Self {
        self.grant = grant;
        self
    }
    /// The JWT for the JWT bearer grant, read afresh for every token request.
    pub fn assertion<F, Fut>(mut self, assertion: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Secret>> + Send + 'static,
    {
        self.assertion = Some(Arc::new(move || Box::pin(assertion())));
        self.grant = Grant::JwtBearer;
        self
    }
    /// The enterprise identity provider (ID-JAG flow).
    pub fn identity_provider(mut self, idp: IdentityProvider) -> Self {
        self.identity_provider = Some(idp);
        self.grant = Grant::JwtBearer;
        self
    }
    /// Where the authorization server redirects back to.
    pub fn redirect_uri(mut self, uri: impl Into<String>) -> Self {
        self.redirect_uri = uri.into();
        self
    }
    /// The URL of your Client ID Metadata Document, used as client id where the
    /// authorization server supports it.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }
    /// Where credentials are kept (default: in memory).
    pub fn store(mut self, store: impl CredentialStore) -> Self {
        self.store = Arc::new(store);
        self
    }
    /// Who takes a person through authorization when a server asks for it.
    pub fn authorizer(mut self, authorizer: impl Authorizer) -> Self {
        self.authorizer = Some(Arc::new(authorizer));
        self
    }
}

/// An HTTP exchange the OAuth flow needs (provided by the HTTP transport).
pub(crate) struct HttpReply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Value,
}

pub(crate) trait AuthHttp: Send + Sync {
    fn get<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<HttpReply>>;
    fn post_form<'a>(
        &'a self,
        url: &'a str,
        form: Vec<(String, String)>,
        headers: Vec<(String, String)>,
    ) -> BoxFuture<'a, Result<HttpReply>>;
}

/// A parsed `WWW-Authenticate` header.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Challenge {
    pub scheme: String,
    pub params: HashMap<String, String>,
}

pub(crate) fn parse_www_authenticate(header: &str) -> Vec<Challenge> {
    let mut out: Vec<Challenge> = Vec::new();
    let mut rest = header.trim();
    while !rest.is_empty() {
        // A token followed by a space starts a new challenge; `k=` starts a param.
        let token_end = rest.find([' ', '=', ',']).unwrap_or(rest.len());
        let token = &rest[..token_end];
        let after = &rest[token_end..];
        if let Some(after_eq) = after.strip_prefix('=') {
            let key = token.to_ascii_lowercase();
            let mut v = after_eq.trim_start();
            let value;
            if let Some(q) = v.strip_prefix('"') {
                let mut s = String::new();
                let mut chars = q.char_indices();
                let mut end = q.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, n)) = chars.next() {
                                s.push(n);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => s.push(c),
                    }
                }
                value = s;
                v = &q[end.min(q.len())..];
            } else {
                let e = v.find(',').unwrap_or(v.len());
                value = v[..e].trim().to_owned();
                v = &v[e..];
            }
            if let Some(c) = out.last_mut() {
                c.params.insert(key, value);
            }
            rest = v.trim_start_matches([',', ' ']);
        } else {
            if !token.is_empty() {
                out.push(Challenge {
                    scheme: token.to_owned(),
                    params: HashMap::new(),
                });
            }
            rest = after.trim_start_matches([',', ' ']);
        }
    }
    out
}

/// Authorization server metadata, as far as the flow needs it.
#[derive(Clone, Debug, Default)]
pub(crate) struct AsMetadata {
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub raw: Value,
}

impl AsMetadata {
    fn list(&self, key: &str) -> Vec<String> {
        self.raw
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
    fn flag(&self, key: &str) -> bool {
        self.raw.get(key).and_then(Value::as_bool).unwrap_or(false)
    }
}

fn origin_and_path(url: &str) -> (String, String) {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, ""),
            };
            let path = path.split(['?', '#']).next().unwrap_or("");
            (
                format!("{scheme}://{authority}"),
                path.trim_end_matches('/').to_owned(),
            )
        }
        None => (url.to_owned(), String::new()),
    }
}

/// The one URL rule ([`crate::url_rule`]): https, or http to this machine; no
/// userinfo; a real host.
fn check_url(url: &str, what: &str) -> Result<()> {
    crate::url_rule::check(url)
        .map(|_| ())
        .map_err(|e| Error::config(format!("the {what} is refused: {e}")))
}

/// The state of one server's authorization, shared by all its requests.
pub(crate) struct Session {
    pub config: OAuth,
    /// The server URL as configured.
    pub resource: String,
    /// The server URL in canonical form: the `resource` of every [`CredentialKey`].
    key_resource: String,
    state: tokio::sync::Mutex<State>,
    /// The token in use, read without waiting on the state lock.
    current: Mutex<Option<Token>>,
    rs_nonce: Mutex<Option<String>>,
    /// The resource identifier exactly as the protected resource metadata publishes
    /// it (the server URL when there is none): sent as `resource`.
    resource_param: Mutex<String>,
    /// A redirect URI given to `start_authorization` (web applications).
    redirect_override: Mutex<Option<String>>,
    /// The authorization `start_authorization` began, for `finish_authorization`.
    pending: Mutex<Option<PendingAuthorization>>,
}

struct PendingAuthorization {
    state: String,
    verifier: String,
    metadata: AsMetadata,
    client: Client,
    creds: Credentials,
    scopes: Vec<String>,
}

#[derive(Clone)]
pub(crate) struct Token {
    pub value: Secret,
    pub dpop: Option<Arc<p256::ecdsa::SigningKey>>,
    /// When to refresh it: before it expires by 30 s, or by half its lifetime when
    /// that is shorter, so a short-lived token is refreshed once per lifetime.
    pub refresh_at: Option<u64>,
}

impl Token {
    fn due(&self) -> bool {
        self.refresh_at.is_some_and(|r| now() >= r)
    }
}

/// When a token issued at `issued` (when known) and expiring at `expires` is due.
fn refresh_point(issued: Option<u64>, expires: Option<u64>) -> Option<u64> {
    let expires = expires?;
    let lifetime = issued.map_or(u64::MAX, |i| expires.saturating_sub(i));
    Some(expires.saturating_sub((lifetime / 2).min(30)))
}

/// How a token request failed.
enum TokenFailure {
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

/// What a challenge led to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Challenged {
    /// Nothing to do: the request fails.
    No,
    /// Retry with what changed (a DPoP nonce, a stored or refreshed token).
    Retry,
    /// Retry with a token just obtained from the authorization server.
    Authorized,
}

/// The server URL as credentials are keyed: scheme and host lowercase, no default
/// port, no query or fragment, no trailing slash.
pub(crate) fn canonical_resource(url: &str) -> String {
    let (origin, path) = origin_and_path(url);
    let mut origin = origin.to_ascii_lowercase();
    let default_port = if origin.starts_with("https://") {
        ":443"
    } else {
        ":80"
    };
    if origin.ends_with(default_port) {
        origin.truncate(origin.len() - default_port.len());
    }
    format!("{origin}{path}")
}

#[derive(Default)]
struct State {
    metadata: Option<AsMetadata>,
    scopes: Vec<String>,
    step_ups: u32,
}

impl Session {
    pub fn new(config: OAuth, resource: String) -> Self {
        Session {
            config,
            key_resource: canonical_resource(&resource),
            resource: resource.clone(),
            state: tokio::sync::Mutex::new(State::default()),
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
    ) -> Result<Vec<(String, String)>> {
        let token = lock(&self.current).clone();
        let token = match token {
            Some(t) if t.due() => self.refresh(http, Some(&t)).await?.or(Some(t)),
            other => other,
        };
        let Some(t) = token else {
            return Ok(Vec::new());
        };
        Ok(self.token_headers(&t, method, url))
    }

    fn token_headers(&self, t: &Token, method: &str, url: &str) -> Vec<(String, String)> {
        match &t.dpop {
            Some(key) => {
                let nonce = lock(&self.rs_nonce).clone();
                let proof = dpop_proof(key, method, url, Some(t.value.expose()), nonce.as_deref());
                vec![
                    ("authorization".into(), format!("DPoP {}", t.value.expose())),
                    ("dpop".into(), proof),
                ]
            }
            None => vec![(
                "authorization".into(),
                format!("Bearer {}", t.value.expose()),
            )],
        }
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

    /// Protected Resource Metadata, then the authorization server's metadata (or the
    /// 2025-03-26 fallbacks).
    async fn discover(
        &self,
        http: &dyn AuthHttp,
        resource_metadata: Option<String>,
    ) -> Result<(Option<Value>, AsMetadata)> {
        let prm = self.protected_resource(http, resource_metadata).await?;
        *lock(&self.resource_param) = prm
            .as_ref()
            .and_then(|p| p.get("resource"))
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| self.resource.clone());
        let metadata = match &prm {
            Some(prm) => {
                let named: Vec<&str> = prm
                    .get("authorization_servers")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                // With pinned issuers, the first named one that is pinned.
                let issuer = named
                    .iter()
                    .find(|i| self.pinned(i))
                    .or(named.first())
                    .ok_or_else(|| {
                        Error::invalid_response(
                            "the protected resource metadata names no authorization server",
                        )
                    })?
                    .to_string();
                self.allowed(&issuer)?;
                check_url(&issuer, "authorization server")?;
                self.as_metadata(http, &issuer).await?
            }
            None => self.legacy_metadata(http).await?,
        };
        Ok((prm, metadata))
    }

    /// Whether `issuer` is one the application pinned (any, when it pinned none).
    fn pinned(&self, issuer: &str) -> bool {
        let issuers = &self.config.issuers;
        issuers.is_empty() || issuers.iter().any(|i| i == issuer)
    }

    /// Refuses an authorization server the application did not pin.
    fn allowed(&self, issuer: &str) -> Result<()> {
        if self.pinned(issuer) {
            return Ok(());
        }
        Err(Error::config(format!(
            "{} names the authorization server {issuer}, which is not one this client may use ({}); refused before anything was sent to it",
            crate::url_rule::redact(&self.resource),
            self.config.issuers.join(", ")
        )))
    }

    /// Binds one of the application's own secrets (`what`) to `issuer`: with pinned
    /// issuers, the pin decides; otherwise the first authorization server it is used
    /// with, remembered in the store, is the only one it ever goes to.
    async fn bind(&self, what: &str, issuer: &str) -> Result<()> {
        if !self.config.issuers.is_empty() {
            return self.allowed(issuer);
        }
        let key = CredentialKey::new("", format!("{BINDING}{what}"), "");
        let store = &self.config.store;
        match store.load(&key).await? {
            Some(bound) if bound.issuer == issuer => Ok(()),
            Some(bound) => Err(Error::config(format!(
                "{what} is bound to the authorization server {}, where it was first used; {issuer}, named by {}, does not get it (pin the authorization servers with OAuth::issuer)",
                bound.issuer,
                crate::url_rule::redact(&self.resource)
            ))),
            None => store.save(&key, &Credentials::new(issuer)).await,
        }
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

    fn redirect_uri(&self) -> String {
        lock(&self.redirect_override)
            .clone()
            .unwrap_or_else(|| self.config.redirect_uri.clone())
    }

    /// Starts an authorization for a web application: the URL to send the user to.
    /// The authorization server redirects back to `redirect_uri`; pass what it sends
    /// to `finish_authorization`.
    pub async fn start_authorization(
        &self,
        http: &dyn AuthHttp,
        redirect_uri: &str,
    ) -> Result<String> {
        *lock(&self.redirect_override) = Some(redirect_uri.to_owned());
        let (prm, m) = self.discover(http, None).await?;
        if !m
            .list("code_challenge_methods_supported")
            .iter()
            .any(|x| x == "S256")
        {
            return Err(Error::unsupported(format!(
                "the authorization server {} does not advertise PKCE with S256; refusing to authorize",
                m.issuer
            )));
        }
        let supported = prm
            .as_ref()
            .and_then(|p| p.get("scopes_supported"))
            .and_then(Value::as_array)
            .map(|s| {
                s.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            });
        let scopes: Vec<String> = self.config.scopes.clone().or(supported).unwrap_or_default();
        let mut creds = self.stored(&m.issuer).await?;
        let client = self.client_for(http, &m, &mut creds).await?;
        let verifier = random(32);
        let state = random(16);
        let url = self.authorization_url(&m, &client.client_id, &state, &verifier, &scopes)?;
        *lock(&self.pending) = Some(PendingAuthorization {
            state,
            verifier,
            metadata: m,
            client,
            creds,
            scopes,
        });
        Ok(url)
    }

    /// Finishes what `start_authorization` started, with the callback's parameters.
    pub async fn finish_authorization(
        &self,
        http: &dyn AuthHttp,
        callback: Callback,
    ) -> Result<()> {
        let p = lock(&self.pending).take().ok_or_else(|| {
            Error::config("no authorization is in progress: call authorization_url first")
        })?;
        check_callback(&p.metadata, &callback, &p.state)?;
        let code = callback
            .code
            .ok_or_else(|| Error::invalid_response("the authorization server returned no code"))?;
        let form = vec![
            ("grant_type".to_owned(), "authorization_code".to_owned()),
            ("code".into(), code),
            ("redirect_uri".into(), self.redirect_uri()),
            ("code_verifier".into(), p.verifier),
            ("resource".into(), self.resource_param()),
        ];
        let body = self
            .token_request(http, &p.metadata, &p.client, form, None)
            .await?;
        let mut creds = p.creds;
        let token = self.store_token(&mut creds, body, None).await?;
        let mut st = self.state.lock().await;
        st.metadata = Some(p.metadata);
        st.scopes = p.scopes;
        *lock(&self.current) = Some(token);
        Ok(())
    }

    async fn protected_resource(
        &self,
        http: &dyn AuthHttp,
        from_header: Option<String>,
    ) -> Result<Option<Value>> {
        let (origin, path) = origin_and_path(&self.resource);
        let mut urls = Vec::new();
        if let Some(u) = from_header {
            urls.push(u);
        } else {
            if !path.is_empty() {
                urls.push(format!(
                    "{origin}/.well-known/oauth-protected-resource{path}"
                ));
            }
            urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
        }
        for url in urls {
            check_url(&url, "protected resource metadata URL")?;
            let r = http.get(&url).await?;
            if r.status == 200 && r.body.is_object() {
                let resource = r
                    .body
                    .get("resource")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                // RFC 9728 §3.3: the resource must be this server, identically (or,
                // from the origin's own document, the origin).
                let at_root = url.ends_with("/.well-known/oauth-protected-resource");
                if !resource_matches(resource, &self.resource, at_root) {
                    return Err(Error::config(format!(
                        "the server's protected resource metadata is for `{}`, not for {}; refusing to authorize",
                        crate::url_rule::redact(resource),
                        crate::url_rule::redact(&self.resource)
                    )));
                }
                return Ok(Some(r.body));
            }
        }
        Ok(None)
    }

    async fn as_metadata(&self, http: &dyn AuthHttp, issuer: &str) -> Result<AsMetadata> {
        let (origin, path) = origin_and_path(issuer);
        let urls = if path.is_empty() {
            vec![
                format!("{origin}/.well-known/oauth-authorization-server"),
                format!("{origin}/.well-known/openid-configuration"),
            ]
        } else {
            vec![
                format!("{origin}/.well-known/oauth-authorization-server{path}"),
                format!("{origin}/.well-known/openid-configuration{path}"),
                format!("{origin}{path}/.well-known/openid-configuration"),
            ]
        };
        for url in urls {
            let r = http.get(&url).await?;
            if r.status != 200 || !r.body.is_object() {
                continue;
            }
            let got = r
                .body
                .get("issuer")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if got != issuer {
                return Err(Error::invalid_response(format!(
                    "the authorization server metadata at {url} names issuer `{got}`, not `{issuer}`; refused"
                )));
            }
            return metadata_from(issuer, r.body);
        }
        Err(Error::invalid_response(format!(
            "no authorization server metadata found for {issuer}"
        )))
    }

    /// 2025-03-26 servers: metadata at the MCP server's origin, else default endpoints.
    async fn legacy_metadata(&self, http: &dyn AuthHttp) -> Result<AsMetadata> {
        let (origin, _) = origin_and_path(&self.resource);
        let r = http
            .get(&format!("{origin}/.well-known/oauth-authorization-server"))
            .await?;
        if r.status == 200 && r.body.is_object() {
            // Found at the MCP server's own origin, so it may only speak for that origin.
            let issuer = r
                .body
                .get("issuer")
                .and_then(Value::as_str)
                .unwrap_or(&origin)
                .to_owned();
            if issuer != origin {
                return Err(Error::invalid_response(format!(
                    "the authorization server metadata at {origin} names issuer `{}`; without protected resource metadata only the server's own origin can be its authorization server; refused",
                    crate::url_rule::redact(&issuer)
                )));
            }
            self.allowed(&issuer)?;
            return metadata_from(&issuer, r.body);
        }
        self.allowed(&origin)?;
        Ok(AsMetadata {
            issuer: origin.clone(),
            authorization_endpoint: Some(format!("{origin}/authorize")),
            token_endpoint: format!("{origin}/token"),
            registration_endpoint: Some(format!("{origin}/register")),
            raw: json!({"code_challenge_methods_supported": ["S256"]}),
        })
    }

    async fn obtain(
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
                    let key = new_key();
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
                let verifier = random(32);
                let state = random(16);
                let url =
                    self.authorization_url(m, &client.client_id, &state, &verifier, scopes)?;
                // A person takes their time: the request's own timeouts wait, this
                // deadline does not.
                let cb = {
                    let _held = crate::hold::hold_request();
                    let t = cfg.authorization_timeout;
                    tokio::time::timeout(t, authorizer.authorize(url))
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

    async fn store_token(
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

    fn authorization_url(
        &self,
        m: &AsMetadata,
        client_id: &str,
        state: &str,
        verifier: &str,
        scopes: &[String],
    ) -> Result<String> {
        let endpoint = m.authorization_endpoint.clone().ok_or_else(|| {
            Error::invalid_response("the authorization server has no authorization_endpoint")
        })?;
        check_url(&endpoint, "authorization endpoint")?;
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", &self.redirect_uri())
            .append_pair("code_challenge", &b64url(&sha256(verifier.as_bytes())))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", state)
            .append_pair("resource", &self.resource_param());
        let mut scopes: Vec<String> = scopes.to_vec();
        if m.list("scopes_supported")
            .iter()
            .any(|s| s == "offline_access")
            && !scopes.iter().any(|s| s == "offline_access")
        {
            scopes.push("offline_access".into());
        }
        if !scopes.is_empty() {
            q.append_pair("scope", &scopes.join(" "));
        }
        let sep = if endpoint.contains('?') { '&' } else { '?' };
        Ok(format!("{endpoint}{sep}{}", q.finish()))
    }

    /// The client id (and how to authenticate) to use with this authorization server.
    async fn client_for(
        &self,
        http: &dyn AuthHttp,
        m: &AsMetadata,
        creds: &mut Credentials,
    ) -> Result<Client> {
        let cfg = &self.config;
        let supported = m.list("token_endpoint_auth_methods_supported");
        let pick = |secret: bool, key: bool| -> String {
            let ok = |x: &str| supported.is_empty() || supported.iter().any(|s| s == x);
            if key && ok("private_key_jwt") {
                "private_key_jwt".into()
            } else if secret && ok("client_secret_basic") {
                "client_secret_basic".into()
            } else if secret && ok("client_secret_post") {
                "client_secret_post".into()
            } else {
                "none".into()
            }
        };
        // The application's own client goes only to the authorization server it is
        // pinned or bound to: never a dynamic registration in its place.
        if let Some(id) = &cfg.client_id {
            self.bind(&format!("the client `{id}`"), &m.issuer).await?;
            creds.client_id = Some(id.clone());
            creds.client_secret = cfg.client_secret.clone();
            return Ok(Client {
                method: pick(cfg.client_secret.is_some(), cfg.private_key.is_some()),
                client_id: id.clone(),
                secret: cfg.client_secret.clone(),
            });
        }
        // A client registered earlier, kept with this issuer's credentials, is used
        // only with that issuer.
        if let Some(id) = &creds.client_id {
            return Ok(Client {
                method: pick(creds.client_secret.is_some(), false),
                client_id: id.clone(),
                secret: creds.client_secret.clone(),
            });
        }
        if let Some(url) = &cfg.client_metadata_url {
            if m.flag("client_id_metadata_document_supported") {
                creds.client_id = Some(url.clone());
                return Ok(Client {
                    method: "none".into(),
                    client_id: url.clone(),
                    secret: None,
                });
            }
        }
        let endpoint = m.registration_endpoint.clone().ok_or_else(|| {
            Error::config(format!(
                "the authorization server {} offers no registration; configure a client id for it",
                m.issuer
            ))
        })?;
        check_url(&endpoint, "registration endpoint")?;
        let grant_types = match cfg.grant {
            Grant::AuthorizationCode => json!(["authorization_code", "refresh_token"]),
            Grant::ClientCredentials => json!(["client_credentials"]),
            Grant::JwtBearer => json!(["urn:ietf:params:oauth:grant-type:jwt-bearer"]),
        };
        let wants_secret =
            supported.is_empty() || supported.iter().any(|s| s.starts_with("client_secret"));
        let method = if wants_secret {
            pick(true, false)
        } else {
            "none".into()
        };
        let body = json!({
            "client_name": cfg.client_name,
            "redirect_uris": [self.redirect_uri()],
            "grant_types": grant_types,
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": "native",
        });
        let r = http
            .post_form(
                &endpoint,
                vec![("__json".into(), body.to_string())],
                Vec::new(),
            )
            .await?;
        if !(200..300).contains(&r.status) {
            return Err(Error::http_status(
                r.status,
                format!("client registration at {} failed", m.issuer),
            ));
        }
        let id = r
            .body
            .get("client_id")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::invalid_response("the registration response has no client_id"))?;
        let secret = r
            .body
            .get("client_secret")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let method = r
            .body
            .get("token_endpoint_auth_method")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| pick(secret.is_some(), false));
        creds.client_id = Some(id.to_owned());
        creds.client_secret = secret.clone().map(Secret::new);
        // Kept at once: an authorization that fails next must not lead to another
        // registration on the next attempt.
        cfg.store.save(&self.key(&m.issuer), creds).await?;
        Ok(Client {
            method,
            client_id: id.to_owned(),
            secret: secret.map(Secret::new),
        })
    }

    async fn token_request(
        &self,
        http: &dyn AuthHttp,
        m: &AsMetadata,
        client: &Client,
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
                    dpop_proof(key, "POST", &m.token_endpoint, None, nonce.as_deref()),
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
    async fn id_jag(
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
    async fn refresh(&self, http: &dyn AuthHttp, stale: Option<&Token>) -> Result<Option<Token>> {
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

struct Client {
    method: String,
    client_id: String,
    secret: Option<Secret>,
}

fn token_from(c: &Credentials) -> Token {
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

fn metadata_from(issuer: &str, raw: Value) -> Result<AsMetadata> {
    let token_endpoint = raw
        .get("token_endpoint")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            Error::invalid_response(format!("the metadata of {issuer} has no token_endpoint"))
        })?
        .to_owned();
    Ok(AsMetadata {
        issuer: issuer.to_owned(),
        authorization_endpoint: raw
            .get("authorization_endpoint")
            .and_then(Value::as_str)
            .map(str::to_owned),
        registration_endpoint: raw
            .get("registration_endpoint")
            .and_then(Value::as_str)
            .map(str::to_owned),
        token_endpoint,
        raw,
    })
}

/// RFC 9728 §3.3: the resource in the metadata is this server — identical (scheme and
/// host case, a default port and a trailing slash aside) — or, for the document at the
/// origin's own well-known location, the origin.
fn resource_matches(resource: &str, server: &str, at_root: bool) -> bool {
    if resource.is_empty() {
        return false;
    }
    let resource = canonical_resource(resource);
    let server = canonical_resource(server);
    resource == server || at_root && resource == canonical_resource(&origin_and_path(&server).0)
}

fn check_callback(m: &AsMetadata, cb: &Callback, state: &str) -> Result<()> {
    // RFC 9207: plain string comparison, before anything else.
    let advertised = m.flag("authorization_response_iss_parameter_supported");
    match (&cb.iss, advertised) {
        (Some(iss), _) if iss != &m.issuer => {
            return Err(Error::invalid_response(format!(
                "the redirect's iss `{iss}` is not the authorization server `{}`; refused",
                m.issuer
            )))
        }
        (None, true) => {
            return Err(Error::invalid_response(
                "the authorization server promised an iss parameter and sent none; refused",
            ))
        }
        _ => {}
    }
    if cb.state.as_deref() != Some(state) {
        return Err(Error::invalid_response(
            "the redirect's state does not match the authorization request; refused",
        ));
    }
    if let Some(e) = &cb.error {
        return Err(Error::http_status(
            401,
            format!("authorization was refused: {e}"),
        ));
    }
    Ok(())
}

/// A server's authorization, for web applications that send the user to the
/// authorization server themselves (from [`Client::authorization`](crate::Client::authorization)).
pub struct Authorization<'a> {
    pub(crate) session: &'a Session,
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

#[cfg(test)]
mod tests {
    use super::*;

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
    ) -> (Arc<Session>, Arc<MemoryStore>, Arc<FakeAs>, CredentialKey) {
        let store = Arc::new(MemoryStore::default());
        let oauth = OAuth {
            store: store.clone(),
            ..OAuth::new()
        };
        let session = Arc::new(Session::new(oauth, "http://localhost:1/mcp".into()));
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
            assert_eq!(h[0].1, "Bearer at-1");
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
        let ec = new_key().to_pkcs8_pem(Default::default()).unwrap();
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
}
