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

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::secret::Secret;
use crate::transport::BoxFuture;

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

/// What the authorization server redirected back with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Callback {
    /// `code`.
    pub code: Option<String>,
    /// `state`.
    pub state: Option<String>,
    /// `iss` (RFC 9207).
    pub iss: Option<String>,
    /// `error`.
    pub error: Option<String>,
}

impl Callback {
    /// Reads the query of a redirect URL (or a bare query string).
    pub fn from_url(url: &str) -> Self {
        let query = url.split_once('?').map(|(_, q)| q).unwrap_or(url);
        let query = query.split('#').next().unwrap_or("");
        let mut c = Callback::default();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match &*k {
                "code" => c.code = Some(v.into_owned()),
                "state" => c.state = Some(v.into_owned()),
                "iss" => c.iss = Some(v.into_owned()),
                "error" => c.error = Some(v.into_owned()),
                _ => {}
            }
        }
        c
    }
}

/// Takes a person through authorization: given the URL to open, returns what the
/// authorization server redirected back with. A command-line tool opens a browser and
/// listens on a loopback redirect; a test fetches the URL without following redirects.
pub trait Authorizer: Send + Sync + 'static {
    /// Opens `url` and waits for the redirect.
    fn authorize(&self, url: String) -> BoxFuture<'static, Result<Callback>>;
}

impl<F, Fut> Authorizer for F
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Callback>> + Send + 'static,
{
    fn authorize(&self, url: String) -> BoxFuture<'static, Result<Callback>> {
        Box::pin(self(url))
    }
}

/// Tokens and registration kept for one owner and one authorization server.
#[derive(Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Credentials {
    /// The authorization server's issuer.
    pub issuer: String,
    /// The client id registered with it.
    pub client_id: Option<String>,
    /// The client secret registered with it.
    pub client_secret: Option<String>,
    /// The access token.
    pub access_token: Option<String>,
    /// `Bearer` or `DPoP`.
    pub token_type: Option<String>,
    /// The refresh token.
    pub refresh_token: Option<String>,
    /// When the access token expires (seconds since the epoch).
    pub expires_at: Option<u64>,
    /// The scopes granted.
    pub scope: Option<String>,
    /// The DPoP key (PKCS#8 PEM) the tokens are bound to.
    pub dpop_key: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "access_token",
                &self.access_token.as_ref().map(|_| "[redacted]"),
            )
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "[redacted]"),
            )
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// Where credentials are kept, keyed by owner and issuer.
pub trait CredentialStore: Send + Sync + 'static {
    /// The credentials of `owner` with `issuer`.
    fn load(&self, owner: &str, issuer: &str) -> Option<Credentials>;
    /// Keeps them.
    fn save(&self, owner: &str, credentials: &Credentials) -> Result<()>;
    /// Forgets everything of `owner`.
    fn forget(&self, owner: &str) -> Result<()>;
}

impl<T: CredentialStore> CredentialStore for Arc<T> {
    fn load(&self, owner: &str, issuer: &str) -> Option<Credentials> {
        (**self).load(owner, issuer)
    }
    fn save(&self, owner: &str, credentials: &Credentials) -> Result<()> {
        (**self).save(owner, credentials)
    }
    fn forget(&self, owner: &str) -> Result<()> {
        (**self).forget(owner)
    }
}

/// Credentials kept in memory for the life of the process.
#[derive(Default)]
pub struct MemoryStore {
    map: Mutex<HashMap<(String, String), Credentials>>,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MemoryStore")
    }
}

impl CredentialStore for MemoryStore {
    fn load(&self, owner: &str, issuer: &str) -> Option<Credentials> {
        lock(&self.map)
            .get(&(owner.to_owned(), issuer.to_owned()))
            .cloned()
    }
    fn save(&self, owner: &str, c: &Credentials) -> Result<()> {
        lock(&self.map).insert((owner.to_owned(), c.issuer.clone()), c.clone());
        Ok(())
    }
    fn forget(&self, owner: &str) -> Result<()> {
        lock(&self.map).retain(|(o, _), _| o != owner);
        Ok(())
    }
}

/// Credentials kept in a JSON file (mode 0600, written atomically).
#[derive(Debug)]
pub struct FileStore {
    path: std::path::PathBuf,
    lock: Mutex<()>,
}

impl FileStore {
    /// A store in this file (created when first written).
    pub fn new(path: impl Into<std::path::PathBuf>) -> Self {
        FileStore {
            path: path.into(),
            lock: Mutex::new(()),
        }
    }

    fn read(&self) -> HashMap<String, Credentials> {
        std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    fn write(&self, all: &HashMap<String, Credentials>) -> Result<()> {
        use std::io::Write as _;
        #[cfg(unix)]
        use std::os::unix::fs::OpenOptionsExt as _;
        let text = serde_json::to_vec_pretty(all)
            .map_err(|e| Error::config(format!("cannot encode credentials: {e}")))?;
        let tmp = self
            .path
            .with_extension(format!("tmp{}", std::process::id()));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        opts.mode(0o600);
        let mut f = opts
            .open(&tmp)
            .map_err(|e| Error::config(format!("cannot write {}: {e}", tmp.display())))?;
        f.write_all(&text)
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::config(format!("cannot write {}: {e}", tmp.display())))?;
        std::fs::rename(&tmp, &self.path)
            .map_err(|e| Error::config(format!("cannot write {}: {e}", self.path.display())))
    }
}

impl CredentialStore for FileStore {
    fn load(&self, owner: &str, issuer: &str) -> Option<Credentials> {
        let _g = lock(&self.lock);
        self.read().remove(&format!("{owner} {issuer}"))
    }
    fn save(&self, owner: &str, c: &Credentials) -> Result<()> {
        let _g = lock(&self.lock);
        let mut all = self.read();
        all.insert(format!("{owner} {}", c.issuer), c.clone());
        self.write(&all)
    }
    fn forget(&self, owner: &str) -> Result<()> {
        let _g = lock(&self.lock);
        let mut all = self.read();
        all.retain(|k, _| !k.starts_with(&format!("{owner} ")));
        self.write(&all)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type SecretFn = Arc<dyn Fn() -> BoxFuture<'static, Result<Secret>> + Send + Sync>;

/// The enterprise identity provider of the ID-JAG flow.
#[derive(Clone)]
#[allow(missing_debug_implementations)]
pub struct IdentityProvider {
    /// Its token endpoint.
    pub token_endpoint: String,
    /// Your application's client id there.
    pub client_id: String,
    /// Your application's client secret there.
    pub client_secret: Secret,
    id_token: SecretFn,
}

impl IdentityProvider {
    /// An identity provider; `id_token` returns the signed-in user's ID token, read
    /// for every exchange.
    pub fn new<F, Fut>(
        token_endpoint: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
        id_token: F,
    ) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Secret>> + Send + 'static,
    {
        IdentityProvider {
            token_endpoint: token_endpoint.into(),
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
}

impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth")
            .field("owner", &self.owner)
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
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
    /// A client you registered (sent only to the authorization server it is first used with).
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

fn check_url(url: &str, what: &str) -> Result<()> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("https://") {
        return Ok(());
    }
    if let Some(rest) = lower.strip_prefix("http://") {
        let host = rest.split(['/', ':', '?']).next().unwrap_or("");
        if host == "localhost" || host.starts_with("127.") || host == "[::1]" {
            return Ok(());
        }
    }
    Err(Error::config(format!(
        "the {what} is not an https:// URL (http:// only for loopback); refused"
    )))
}

/// The state of one server's authorization, shared by all its requests.
pub(crate) struct Session {
    pub config: OAuth,
    pub resource: String,
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
    pub expires_at: Option<u64>,
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
            Some(t) if t.expires_at.is_some_and(|e| e <= now() + 30) => {
                self.refresh(http, Some(&t)).await?.or(Some(t))
            }
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

    /// Handles a 401 or 403 from the MCP server. `Ok(true)`: new credentials, retry.
    pub async fn challenged(
        &self,
        http: &dyn AuthHttp,
        status: u16,
        headers: &http::HeaderMap,
    ) -> Result<bool> {
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
                return Ok(true);
            }
        }
        let mut st = self.state.lock().await;
        if status == 403 {
            if param("error").as_deref() != Some("insufficient_scope") {
                return Ok(false);
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
            let cfg = &self.config;
            if let Some(stored) = cfg.store.load(&cfg.owner, &metadata.issuer) {
                let in_use = lock(&self.current)
                    .as_ref()
                    .map(|t| t.value.expose().to_owned());
                // A stored token this process has not tried yet (an earlier run, or
                // `mcp login`).
                if let Some(at) = &stored.access_token {
                    let fresh = stored.expires_at.is_none_or(|e| e > now() + 30);
                    if fresh && in_use.as_deref() != Some(at.as_str()) {
                        *lock(&self.current) = Some(token_from(&stored));
                        st.metadata = Some(metadata);
                        return Ok(true);
                    }
                }
                // The token was refused: refresh it if we can, before asking anyone.
                if stored.refresh_token.is_some() {
                    st.metadata = Some(metadata.clone());
                    drop(st);
                    let stale = lock(&self.current).clone();
                    if let Ok(Some(_)) = self.refresh(http, stale.as_ref()).await {
                        return Ok(true);
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
        Ok(true)
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
                let issuer = prm
                    .get("authorization_servers")
                    .and_then(Value::as_array)
                    .and_then(|a| a.first())
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        Error::invalid_response(
                            "the protected resource metadata names no authorization server",
                        )
                    })?
                    .to_owned();
                check_url(&issuer, "authorization server")?;
                self.as_metadata(http, &issuer).await?
            }
            None => self.legacy_metadata(http).await?,
        };
        Ok((prm, metadata))
    }

    /// The owner's credentials with `issuer`, or empty ones to fill in.
    fn stored(&self, issuer: &str) -> Credentials {
        let cfg = &self.config;
        cfg.store
            .load(&cfg.owner, issuer)
            .unwrap_or_else(|| Credentials {
                issuer: issuer.to_owned(),
                ..Default::default()
            })
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
        let mut creds = self.stored(&m.issuer);
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
        let token = self.store_token(&mut creds, body, None)?;
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
                if !resource_matches(resource, &self.resource) {
                    return Err(Error::config(format!(
                        "the server's protected resource metadata is for `{resource}`, not for {}; refusing to authorize",
                        self.resource
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
            let issuer = r
                .body
                .get("issuer")
                .and_then(Value::as_str)
                .unwrap_or(&origin)
                .to_owned();
            return metadata_from(&issuer, r.body);
        }
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
        let mut creds = self.stored(&m.issuer);
        let dpop = if dpop_wanted || !m.list("dpop_signing_alg_values_supported").is_empty() {
            let key = match creds.dpop_key.as_deref().and_then(parse_dpop_key) {
                Some(k) => k,
                None => {
                    let key = new_key();
                    use p256::pkcs8::EncodePrivateKey as _;
                    creds.dpop_key = key
                        .to_pkcs8_pem(Default::default())
                        .ok()
                        .map(|p| p.to_string());
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
                        (Some(idp), _) => self.id_jag(http, idp, m).await?,
                        (None, Some(a)) => a().await?,
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
                let cb = authorizer.authorize(url).await?;
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
        self.store_token(&mut creds, reply, dpop)
    }

    fn store_token(
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
        creds.access_token = Some(access.clone());
        creds.token_type = body
            .get("token_type")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(r) = body.get("refresh_token").and_then(Value::as_str) {
            creds.refresh_token = Some(r.to_owned());
        }
        creds.expires_at = body
            .get("expires_in")
            .and_then(Value::as_u64)
            .map(|s| now() + s);
        creds.scope = body.get("scope").and_then(Value::as_str).map(str::to_owned);
        self.config.store.save(&self.config.owner, creds)?;
        let dpop = dpop.filter(|_| {
            creds
                .token_type
                .as_deref()
                .is_none_or(|t| t.eq_ignore_ascii_case("dpop"))
        });
        Ok(Token {
            value: Secret::new(access),
            dpop,
            expires_at: creds.expires_at,
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
        // A registered client is used only with the authorization server it was first
        // used with.
        if let Some(id) = &creds.client_id {
            let secret = creds.client_secret.clone().map(Secret::new);
            return Ok(Client {
                method: pick(secret.is_some(), cfg.private_key.is_some()),
                client_id: id.clone(),
                secret,
            });
        }
        if let Some(id) = &cfg.client_id {
            let bound = cfg
                .store
                .load(&format!("{}#preregistered", cfg.owner), "bound")
                .map(|c| c.issuer);
            if bound.as_deref().is_none_or(|b| b == m.issuer) {
                cfg.store.save(
                    &format!("{}#preregistered", cfg.owner),
                    &Credentials {
                        issuer: "bound".into(),
                        client_id: Some(m.issuer.clone()),
                        ..Default::default()
                    },
                )?;
                let _ = cfg.store.save(
                    &format!("{}#preregistered", cfg.owner),
                    &Credentials {
                        issuer: m.issuer.clone(),
                        ..Default::default()
                    },
                );
                creds.client_id = Some(id.clone());
                creds.client_secret = cfg.client_secret.as_ref().map(|s| s.expose().to_owned());
                return Ok(Client {
                    method: pick(cfg.client_secret.is_some(), cfg.private_key.is_some()),
                    client_id: id.clone(),
                    secret: cfg.client_secret.clone(),
                });
            }
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
        creds.client_secret = secret.clone();
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
    ) -> Result<Value> {
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
            return Err(Error::http_status(
                r.status,
                format!("the token request failed: {error} {desc}")
                    .trim()
                    .to_owned(),
            ));
        }
        Err(Error::http_status(
            400,
            "the token request failed after a DPoP nonce",
        ))
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
        check_url(&idp.token_endpoint, "identity provider token endpoint")?;
        let r = http
            .post_form(&idp.token_endpoint, form, Vec::new())
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

    /// Refreshes the token (single-flight: concurrent callers wait for one refresh).
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
        let Some(mut creds) = cfg.store.load(&cfg.owner, &m.issuer) else {
            return Ok(None);
        };
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
        let client = Client {
            method: "client_secret_basic".into(),
            client_id: creds.client_id.clone().unwrap_or_default(),
            secret: creds.client_secret.clone().map(Secret::new),
        };
        let client = if client.secret.is_none() {
            Client {
                method: "none".into(),
                ..client
            }
        } else {
            client
        };
        let form = vec![
            ("grant_type".to_owned(), "refresh_token".to_owned()),
            ("refresh_token".into(), refresh),
            ("resource".into(), self.resource_param()),
        ];
        let dpop = stale.and_then(|t| t.dpop.clone());
        match self
            .token_request(http, &m, &client, form, dpop.as_deref())
            .await
        {
            Ok(body) => {
                let t = self.store_token(&mut creds, body, dpop)?;
                *lock(&self.current) = Some(t.clone());
                Ok(Some(t))
            }
            Err(e) => {
                creds.access_token = None;
                creds.refresh_token = None;
                let _ = cfg.store.save(&cfg.owner, &creds);
                *lock(&self.current) = None;
                Err(Error::http_status(
                    401,
                    format!("refreshing the token failed ({e}); authorize again"),
                ))
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

    /// Forgets the owner's credentials.
    pub fn deauthorize(&self) -> Result<()> {
        *lock(&self.current) = None;
        self.config.store.forget(&self.config.owner)
    }
}

struct Client {
    method: String,
    client_id: String,
    secret: Option<Secret>,
}

/// A DPoP key kept with credentials (PKCS#8 PEM).
fn parse_dpop_key(pem: &str) -> Option<p256::ecdsa::SigningKey> {
    use p256::pkcs8::DecodePrivateKey as _;
    p256::ecdsa::SigningKey::from_pkcs8_pem(pem).ok()
}

fn token_from(c: &Credentials) -> Token {
    let dpop = c
        .dpop_key
        .as_deref()
        .filter(|_| {
            c.token_type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("dpop"))
        })
        .and_then(parse_dpop_key)
        .map(Arc::new);
    Token {
        value: Secret::new(c.access_token.clone().unwrap_or_default()),
        dpop,
        expires_at: c.expires_at,
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

/// The resource in the metadata must name this server: same origin, and the server's
/// path within the resource's.
fn resource_matches(resource: &str, server: &str) -> bool {
    let (ro, rp) = origin_and_path(resource);
    let (so, sp) = origin_and_path(server);
    ro.eq_ignore_ascii_case(&so) && (rp.is_empty() || sp == rp || sp.starts_with(&format!("{rp}/")))
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

fn new_key() -> p256::ecdsa::SigningKey {
    loop {
        let mut bytes = [0u8; 32];
        let _ = getrandom::getrandom(&mut bytes);
        if let Ok(k) = p256::ecdsa::SigningKey::from_slice(&bytes) {
            return k;
        }
    }
}

fn jws(key: &p256::ecdsa::SigningKey, header: Value, payload: Value) -> String {
    use p256::ecdsa::signature::Signer as _;
    let input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(payload.to_string().as_bytes())
    );
    let sig: p256::ecdsa::Signature = key.sign(input.as_bytes());
    format!("{input}.{}", b64url(&sig.to_bytes()))
}

fn public_jwk(key: &p256::ecdsa::SigningKey) -> Value {
    let point = key.verifying_key().to_encoded_point(false);
    json!({
        "kty": "EC",
        "crv": "P-256",
        "x": point.x().map(|x| b64url(x)).unwrap_or_default(),
        "y": point.y().map(|y| b64url(y)).unwrap_or_default(),
    })
}

/// A DPoP proof (RFC 9449) for one request.
fn dpop_proof(
    key: &p256::ecdsa::SigningKey,
    method: &str,
    url: &str,
    token: Option<&str>,
    nonce: Option<&str>,
) -> String {
    let htu = url.split(['?', '#']).next().unwrap_or(url);
    let mut payload = json!({"jti": random(16), "htm": method, "htu": htu, "iat": now()});
    if let Some(t) = token {
        payload["ath"] = Value::String(b64url(&sha256(t.as_bytes())));
    }
    if let Some(n) = nonce {
        payload["nonce"] = Value::String(n.to_owned());
    }
    jws(
        key,
        json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": public_jwk(key)}),
        payload,
    )
}

/// A `private_key_jwt` client assertion (RFC 7523), ES256.
fn client_assertion(pem: &str, client_id: &str, audience: &str, rsa_alg: &str) -> Result<String> {
    use p256::pkcs8::DecodePrivateKey as _;
    let iat = now();
    let claims = json!({"iss": client_id, "sub": client_id, "aud": audience, "iat": iat, "exp": iat + 300, "jti": random(16)});
    if let Ok(key) = p256::ecdsa::SigningKey::from_pkcs8_pem(pem) {
        return Ok(jws(&key, json!({"alg": "ES256", "typ": "JWT"}), claims));
    }
    let key = rsa::RsaPrivateKey::from_pkcs8_pem(pem)
        .or_else(|_| {
            use rsa::pkcs1::DecodeRsaPrivateKey as _;
            rsa::RsaPrivateKey::from_pkcs1_pem(pem)
        })
        .map_err(|_| {
            Error::config(
                "the private key is neither a P-256 (ES256) nor an RSA (RS256/PS256) key in PEM",
            )
        })?;
    rsa_jws(key, rsa_alg, json!({"alg": rsa_alg, "typ": "JWT"}), claims)
}

/// Signs a JWS with an RSA key: RS256 (PKCS#1 v1.5) or PS256 (PSS), SHA-256.
fn rsa_jws(key: rsa::RsaPrivateKey, alg: &str, header: Value, payload: Value) -> Result<String> {
    use rsa::signature::{RandomizedSigner as _, SignatureEncoding as _, Signer as _};
    let input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(payload.to_string().as_bytes())
    );
    let sig = match alg {
        "RS256" => rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new(key)
            .sign(input.as_bytes())
            .to_vec(),
        "PS256" => rsa::pss::BlindedSigningKey::<sha2::Sha256>::new(key)
            .sign_with_rng(&mut rand_core::OsRng, input.as_bytes())
            .to_vec(),
        other => {
            return Err(Error::config(format!(
                "unsupported signing algorithm `{other}`; use RS256 or PS256 with an RSA key"
            )))
        }
    };
    Ok(format!("{input}.{}", b64url(&sig)))
}

/// Authorization for command-line tools: listens on a loopback port for the redirect,
/// shows the URL (and opens it with a program of your choice, like `xdg-open`).
#[derive(Debug)]
pub struct LoopbackAuthorizer {
    listener: Mutex<Option<std::net::TcpListener>>,
    redirect_uri: String,
    opener: Option<String>,
}

impl LoopbackAuthorizer {
    /// Binds a free loopback port. Use [`redirect_uri`](Self::redirect_uri) as the
    /// OAuth redirect URI.
    pub fn bind() -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Error::transport(format!("cannot listen on a loopback port: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::transport(e.to_string()))?
            .port();
        Ok(LoopbackAuthorizer {
            listener: Mutex::new(Some(listener)),
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
            opener: None,
        })
    }

    /// Opens the URL with this program (for example `xdg-open` or `open`); the URL is
    /// printed in any case.
    pub fn open_with(mut self, program: impl Into<String>) -> Self {
        self.opener = Some(program.into());
        self
    }

    /// The redirect URI to register and send.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }
}

impl Authorizer for LoopbackAuthorizer {
    fn authorize(&self, url: String) -> BoxFuture<'static, Result<Callback>> {
        let listener = lock(&self.listener).take();
        let opener = self.opener.clone();
        Box::pin(async move {
            let listener = listener
                .ok_or_else(|| Error::config("this loopback authorizer was already used"))?;
            eprintln!("Open this URL to authorize:\n\n  {url}\n");
            if let Some(program) = opener {
                // Never through a shell: the URL is one argument.
                let _ = std::process::Command::new(program).arg(&url).spawn();
            }
            tokio::task::spawn_blocking(move || {
                use std::io::{BufRead as _, Write as _};
                loop {
                    let (stream, _) = listener.accept().map_err(|e| Error::transport(e.to_string()))?;
                    let mut reader = std::io::BufReader::new(&stream);
                    let mut line = String::new();
                    reader.read_line(&mut line).map_err(|e| Error::transport(e.to_string()))?;
                    let target = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                    let mut out = &stream;
                    if !target.starts_with("/callback") {
                        let _ = out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                        continue;
                    }
                    let body = "Authorized. You can close this window.";
                    let _ = write!(out, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
                    return Ok(Callback::from_url(&target));
                }
            })
            .await
            .map_err(|e| Error::transport(e.to_string()))?
        })
    }
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
    /// Forgets the owner's credentials.
    pub fn forget(&self) -> Result<()> {
        self.session.deauthorize()
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
    fn resources_match_by_origin_and_path() {
        assert!(resource_matches(
            "http://localhost:3000/mcp",
            "http://localhost:3000/mcp"
        ));
        assert!(resource_matches(
            "http://localhost:3000",
            "http://localhost:3000/mcp"
        ));
        assert!(!resource_matches(
            "https://evil.example.com/mcp",
            "http://localhost:3000/mcp"
        ));
        assert!(!resource_matches(
            "http://localhost:3000/other",
            "http://localhost:3000/mcp"
        ));
    }

    /// Counts token requests; answers each after a pause, with a new rotating pair.
    struct FakeAs {
        token_requests: std::sync::atomic::AtomicUsize,
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
                        .any(|(k, v)| k == "refresh_token" && v == "rt-0"),
                    "a rotated refresh token is never reused"
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                Ok(HttpReply {
                    status: 200,
                    headers: http::HeaderMap::new(),
                    body: json!({"access_token": format!("at-{}", n + 1), "refresh_token": format!("rt-{}", n + 1), "expires_in": 3600, "token_type": "Bearer"}),
                })
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_during_expiry_refresh_once() {
        let store = Arc::new(MemoryStore::default());
        let oauth = OAuth {
            store: store.clone(),
            ..OAuth::new()
        };
        let session = Arc::new(Session::new(oauth, "http://localhost:1/mcp".into()));
        let issuer = "http://localhost:2".to_owned();
        store
            .save(
                "default",
                &Credentials {
                    issuer: issuer.clone(),
                    client_id: Some("c".into()),
                    access_token: Some("at-0".into()),
                    refresh_token: Some("rt-0".into()),
                    expires_at: Some(now()),
                    ..Default::default()
                },
            )
            .unwrap();
        session.state.lock().await.metadata = Some(AsMetadata {
            issuer: issuer.clone(),
            token_endpoint: "http://localhost:2/token".into(),
            ..Default::default()
        });
        *lock(&session.current) = Some(Token {
            value: Secret::new("at-0"),
            dpop: None,
            expires_at: Some(now()),
        });
        let fake = Arc::new(FakeAs {
            token_requests: Default::default(),
        });
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
        let saved = store.load("default", &issuer).unwrap();
        assert_eq!(saved.refresh_token.as_deref(), Some("rt-1"));
    }

    #[test]
    fn the_file_store_is_private_and_atomic() {
        let dir = std::env::temp_dir().join(format!("mcp-auth-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("credentials.json");
        let store = FileStore::new(&path);
        let c = Credentials {
            issuer: "https://as".into(),
            access_token: Some("t".into()),
            ..Default::default()
        };
        store.save("ann", &c).unwrap();
        store
            .save(
                "bob",
                &Credentials {
                    issuer: "https://as".into(),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(store.load("ann", "https://as"), Some(c));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        store.forget("ann").unwrap();
        assert_eq!(store.load("ann", "https://as"), None);
        assert!(store.load("bob", "https://as").is_some());
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name() != "credentials.json")
            .collect();
        assert!(leftovers.is_empty(), "no temporary files left");
        let _ = std::fs::remove_dir_all(&dir);
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
            ..Default::default()
        };
        let d = format!("{c:?}");
        assert!(!d.contains("at-secret") && !d.contains("rt-secret"));
    }
}
