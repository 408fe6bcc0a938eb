//! Streamable HTTP — the stateless 2026-07-28 wire and the legacy session wire
//! (2025-03-26 … 2025-11-25) — and the 2024-11-05 HTTP+SSE transport, on hyper with
//! rustls and pooled keep-alive connections (HTTP/1.1, or h2 where the server offers it).
//!
//! * `https://` always; plain `http://` only to loopback addresses, refused before any
//!   byte is sent otherwise.
//! * Headers and the bearer token are evaluated for every request, so a rotated token
//!   is used on the next request without reconnecting. Their values never appear in
//!   `Debug`, errors or logs.
//! * Redirects are not followed (credentials are never sent to another place): a 3xx
//!   is an error naming the new location's origin.
//! * 2026-07-28: every request is a POST with `MCP-Protocol-Version`, `Mcp-Method`,
//!   `Mcp-Name` and the `Mcp-Param-*` headers the session computed. Replies are JSON or
//!   SSE. Cancelling drops the response stream. A reply stream that breaks before the
//!   answer is re-issued on a new id only for requests the session marks idempotent
//!   (everything but `tools/call`): a tool call is never run twice behind your back.
//! * Legacy: `initialize` (capturing `Mcp-Session-Id`), `MCP-Protocol-Version` after it,
//!   server requests on reply streams answered by POST, a standalone GET stream for
//!   unrelated messages, resumption by GET with `Last-Event-ID` after the server's
//!   `retry:` delay, one transparent re-initialize on 404 (expired session), and DELETE
//!   on close.
//! * When `initialize` gets 400/404/405 without a JSON-RPC body, the 2024-11-05
//!   HTTP+SSE transport is tried: GET the URL, wait for the `endpoint` event, POST to it,
//!   read every answer from the event stream.
//! * The era detected is remembered per endpoint (origin and path) for the life of the
//!   process; when the remembered answer stops working, detection starts over.
//! * Every read is bounded by [`HttpConfig::max_message_size`] (64 MiB by default): a
//!   JSON body (refused from its `Content-Length` when that says too much), an event of
//!   a reply stream, of the standalone GET stream or of the 2024-11-05 stream. Past it
//!   the request fails with an error for which
//!   [`Error::is_too_large`](crate::Error::is_too_large) is true and the connection is
//!   dropped. Reconnecting event streams wait at least 250 ms whatever `retry:` says,
//!   and back off while reconnections bring nothing.
//! * `localhost` and names under `.localhost` count as loopback only when every address
//!   they resolve to is a loopback address; otherwise the connection is refused before
//!   anything is sent.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION};
use http::{HeaderMap, Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming as Body;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as Pool;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::sync::oneshot;

use super::sse;
use super::{BoxFuture, Incoming, RequestContext, Transport, DEFAULT_MAX_MESSAGE_SIZE};
use crate::error::{Error, Result};
use crate::jsonrpc::{Id, Message, Notification, Request, Response};
use crate::protocol::{Era, MODERN_VERSIONS};
use crate::secret::Secret;

type TokenFn = Arc<dyn Fn() -> BoxFuture<'static, Result<Option<Secret>>> + Send + Sync>;
type HeaderFn = Arc<dyn Fn() -> Option<String> + Send + Sync>;

#[derive(Clone)]
enum HeaderSource {
    Static(Secret),
    Dynamic(HeaderFn),
}

/// How to reach a Streamable HTTP (or HTTP+SSE) server.
#[derive(Clone)]
pub struct HttpConfig {
    url: String,
    headers: Vec<(String, HeaderSource)>,
    bearer: Option<TokenFn>,
    proxy: Option<String>,
    request_timeout: Option<Duration>,
    connect_timeout: Duration,
    oauth: Option<crate::auth::OAuth>,
    max_message_size: usize,
}

impl HttpConfig {
    /// The server's MCP endpoint. Plain `http://` is allowed only for loopback.
    pub fn new(url: impl Into<String>) -> Self {
        HttpConfig {
            url: url.into(),
            headers: Vec::new(),
            bearer: None,
            proxy: None,
            request_timeout: None,
            connect_timeout: Duration::from_secs(10),
            oauth: None,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
        }
    }

    /// Authorizes with OAuth when the server asks (401): discovery, registration, the
    /// configured grant, refresh, step-up on `insufficient_scope`, DPoP.
    pub fn oauth(mut self, oauth: crate::auth::OAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// A header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers
            .push((name.into(), HeaderSource::Static(Secret::new(value.into()))));
        self
    }

    /// A header computed for every request (`None` leaves it out).
    pub fn header_with(
        mut self,
        name: impl Into<String>,
        value: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.headers
            .push((name.into(), HeaderSource::Dynamic(Arc::new(value))));
        self
    }

    /// A fixed bearer token (`Authorization: Bearer …`).
    pub fn bearer_token(self, token: impl Into<String>) -> Self {
        let token = Secret::new(token.into());
        self.bearer_token_with(move || {
            let t = token.clone();
            async move { Ok(Some(t)) }
        })
    }

    /// A bearer token read for every request, so a token that rotates is picked up on
    /// the next request. `Ok(None)` sends no `Authorization`.
    pub fn bearer_token_with<F, Fut>(mut self, provider: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Option<Secret>>> + Send + 'static,
    {
        self.bearer = Some(Arc::new(move || Box::pin(provider())));
        self
    }

    /// An HTTP proxy (`http://host:port`) for `https://` servers, reached with CONNECT.
    /// Loopback servers are reached directly.
    pub fn proxy(mut self, proxy: impl Into<String>) -> Self {
        self.proxy = Some(proxy.into());
        self
    }

    /// How long to wait for the response headers of each request. The session's
    /// timeouts bound the whole request in any case.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// The largest message the server may send, in bytes (default
    /// [`DEFAULT_MAX_MESSAGE_SIZE`], 64 MiB): a JSON reply body or one event of an
    /// event stream. A larger one fails the request and drops the connection; nothing
    /// larger is ever held in memory.
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes.max(1024);
        self
    }

    /// How long to wait for a TCP connection (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpConfig")
            .field("url", &crate::url_rule::redact(&self.url))
            .field("headers", &names)
            .field("bearer", &self.bearer.as_ref().map(|_| "[redacted]"))
            .field("proxy", &self.proxy)
            .field("request_timeout", &self.request_timeout)
            .field("max_message_size", &self.max_message_size)
            .finish()
    }
}

type Req = http::Request<Full<Bytes>>;

type Connector = HttpConnector<CheckedResolver>;

enum Clients {
    Direct(Pool<HttpsConnector<Connector>, Full<Bytes>>),
    Proxied {
        direct: Pool<HttpsConnector<Connector>, Full<Bytes>>,
        tunnel: Box<Pool<HttpsConnector<Tunnel<Connector>>, Full<Bytes>>>,
    },
}

/// The system resolver, with one rule on top: `localhost` and names under
/// `.localhost` stand for this machine (RFC 6761), and plain `http://` is allowed to
/// them for that reason, so they must resolve to loopback addresses only. A resolver
/// that says otherwise is not believed: the connection is refused.
#[derive(Clone)]
struct CheckedResolver<R = GaiResolver>(R);

impl<R> tower_service::Service<Name> for CheckedResolver<R>
where
    R: tower_service::Service<Name, Error = std::io::Error>,
    R::Response: Iterator<Item = std::net::SocketAddr>,
    R::Future: Send + 'static,
{
    type Response = std::vec::IntoIter<std::net::SocketAddr>;
    type Error = std::io::Error;
    type Future = BoxFuture<'static, std::io::Result<Self::Response>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let host = name.as_str().to_owned();
        let resolving = self.0.call(name);
        Box::pin(async move {
            let addrs: Vec<std::net::SocketAddr> = resolving.await?.collect();
            check_localhost(&host, &addrs)?;
            Ok(addrs.into_iter())
        })
    }
}

use crate::url_rule::is_localhost_name;

/// Refuses a localhost name that resolved to anything but loopback addresses.
fn check_localhost(host: &str, addrs: &[std::net::SocketAddr]) -> std::io::Result<()> {
    if is_localhost_name(host) && (addrs.is_empty() || addrs.iter().any(|a| !a.ip().is_loopback()))
    {
        let found: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "`{host}` resolves to [{}], not to loopback addresses only; a localhost name must stand for this machine (refused before connecting)",
                found.join(", ")
            ),
        ));
    }
    Ok(())
}

impl Clients {
    fn send(&self, req: Req, loopback: bool) -> hyper_util::client::legacy::ResponseFuture {
        match self {
            Clients::Direct(c) => c.request(req),
            Clients::Proxied { direct, .. } if loopback => direct.request(req),
            Clients::Proxied { tunnel, .. } => tunnel.request(req),
        }
    }
}

/// What this process learned about an origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Detected {
    Modern,
    Streamable,
    Sse,
}

fn era_cache() -> &'static Mutex<HashMap<String, Detected>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Detected>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Pending = Mutex<HashMap<Id, oneshot::Sender<Result<Response>>>>;

/// A legacy Streamable HTTP session.
struct LegacySession {
    session_id: Option<String>,
    version: String,
    init_params: Value,
    get_stream: Option<tokio::task::AbortHandle>,
}

/// A 2024-11-05 HTTP+SSE session.
struct SseSession {
    post_url: Uri,
    pending: Arc<Pending>,
    dead: Arc<AtomicBool>,
    task: tokio::task::AbortHandle,
}

enum Mode {
    Fresh,
    Streamable(LegacySession),
    Sse(Arc<SseSession>),
}

/// The HTTP transport. Create it with [`HttpTransport::new`] or
/// [`ClientBuilder::http`](crate::ClientBuilder::http).
pub struct HttpTransport {
    inner: Arc<Shared>,
}

struct Shared {
    auth: Option<crate::auth::Session>,
    config: HttpConfig,
    url: Uri,
    origin: String,
    clients: Clients,
    mode: Mutex<Mode>,
    reinit: AtomicU64,
    get_stream: tokio::sync::watch::Sender<GetStream>,
}

impl fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTransport")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

fn tls<C>(conn: C) -> Result<HttpsConnector<C>> {
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(Arc::new(rustls::crypto::ring::default_provider()))
        .map_err(|e| Error::config(format!("TLS setup failed: {e}")))?
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(conn))
}

/// True for a loopback address, or a localhost name (which [`CheckedResolver`] then
/// holds to resolving to loopback addresses only).
fn is_loopback(host: &str) -> bool {
    crate::url_rule::is_loopback_host(host)
}

/// `scheme://host[:port]`: never userinfo.
fn origin_of(uri: &Uri) -> String {
    let host = uri.host().unwrap_or("");
    match uri.port_u16() {
        Some(p) => format!("{}://{host}:{p}", uri.scheme_str().unwrap_or("http")),
        None => format!("{}://{host}", uri.scheme_str().unwrap_or("http")),
    }
}

impl HttpTransport {
    /// Checks the URL and settings and builds the connection pool. Nothing is sent yet.
    pub fn new(config: HttpConfig) -> Result<Self> {
        crate::url_rule::check(&config.url).map_err(Error::config)?;
        let url: Uri = config.url.parse().map_err(|e| {
            Error::config(format!(
                "`{}` is not a valid URL: {e}",
                crate::url_rule::redact(&config.url)
            ))
        })?;
        for (name, _) in &config.headers {
            HeaderName::try_from(name.as_str())
                .map_err(|_| Error::config(format!("`{name}` is not a valid HTTP header name")))?;
        }
        let mut http = HttpConnector::new_with_resolver(CheckedResolver(GaiResolver::new()));
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(config.connect_timeout));
        let pool = || {
            Pool::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .clone()
        };
        let direct = pool().build(tls(http.clone())?);
        let clients = match &config.proxy {
            None => Clients::Direct(direct),
            Some(p) => {
                let proxy: Uri = p
                    .parse()
                    .map_err(|e| Error::config(format!("proxy `{p}` is not a valid URL: {e}")))?;
                if proxy.scheme_str() != Some("http") {
                    return Err(Error::config(format!(
                        "proxy `{p}` must be an http:// URL (CONNECT proxies)"
                    )));
                }
                let tunnel = Tunnel::new(proxy, http);
                Clients::Proxied {
                    direct,
                    tunnel: Box::new(pool().build(tls(tunnel)?)),
                }
            }
        };
        Ok(HttpTransport {
            inner: Arc::new(Shared {
                auth: config
                    .oauth
                    .clone()
                    .map(|o| crate::auth::Session::new(o, config.url.clone())),
                origin: origin_of(&url),
                url,
                clients,
                config,
                mode: Mutex::new(Mode::Fresh),
                reinit: AtomicU64::new(0),
                get_stream: tokio::sync::watch::Sender::new(GetStream::Starting),
            }),
        })
    }
}

/// How a reply (JSON body or event stream) ended.
enum Reply {
    Answer(Response),
    /// The event stream ended before the answer: the parser holds the last event id
    /// and `retry:` for resuming; `delivered` says whether any message came.
    Broken {
        parser: sse::Parser,
        delivered: bool,
    },
}

/// Whether the standalone GET stream of a legacy session is there, for `listen`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum GetStream {
    /// Not asked yet, or no answer yet.
    Starting,
    /// Open (or reconnecting).
    Open,
    /// The server offers none, or it failed for good: why.
    Unavailable(String),
}

impl Shared {
    /// What was detected at this endpoint before (keyed by origin and path).
    fn cached_era(&self) -> Option<Detected> {
        lock(era_cache()).get(&self.config.url).copied()
    }

    fn remember(&self, d: Detected) {
        lock(era_cache()).insert(self.config.url.clone(), d);
    }

    /// The headers of every request: content type, accept, the configured headers and
    /// the bearer token, evaluated now.
    async fn base_headers(&self, accept: &'static str) -> Result<HeaderMap> {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_static(accept));
        for (name, source) in &self.config.headers {
            let value = match source {
                HeaderSource::Static(v) => Some(v.expose().to_owned()),
                HeaderSource::Dynamic(f) => f(),
            };
            if let Some(v) = value {
                let name = HeaderName::try_from(name.as_str())
                    .map_err(|_| Error::config(format!("`{name}` is not a valid header name")))?;
                let mut v = HeaderValue::try_from(v).map_err(|_| {
                    Error::config(format!(
                        "the value of header `{name}` is not a valid header value"
                    ))
                })?;
                v.set_sensitive(true);
                h.insert(name, v);
            }
        }
        if let Some(provider) = &self.config.bearer {
            if let Some(token) = provider().await? {
                let mut v = HeaderValue::try_from(format!("Bearer {}", token.expose()))
                    .map_err(|_| Error::config("the bearer token is not a valid header value"))?;
                v.set_sensitive(true);
                h.insert(AUTHORIZATION, v);
            }
        }
        Ok(h)
    }

    /// Sends one request to the MCP server, with OAuth when configured: the token (and
    /// a DPoP proof) on every attempt; a 401, or a 403 for `insufficient_scope`,
    /// authorizes (again) and retries, a bounded number of times.
    async fn send(
        &self,
        method: Method,
        url: &Uri,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        retry_stale: bool,
    ) -> Result<http::Response<Body>> {
        let Some(auth) = &self.auth else {
            return self
                .send_plain(method, url, headers, body, retry_stale)
                .await;
        };
        let url_text = url.to_string();
        let mut attempt = 0;
        let mut authorized = false;
        loop {
            attempt += 1;
            let mut h = headers.clone();
            let auth_headers = auth
                .headers(self, method.as_str(), &url_text)
                .await
                .map_err(Error::in_authorization)?;
            for (k, v) in auth_headers {
                let mut v = HeaderValue::try_from(v).map_err(|_| {
                    Error::invalid_response("the token is not a valid header value")
                })?;
                v.set_sensitive(true);
                if let Ok(k) = HeaderName::try_from(k) {
                    h.insert(k, v);
                }
            }
            let resp = self
                .send_plain(method.clone(), url, h, body.clone(), retry_stale)
                .await?;
            let status = resp.status().as_u16();
            if !matches!(status, 401 | 403) || attempt > 4 {
                return Ok(resp);
            }
            let headers_seen = resp.headers().clone();
            self.drain(resp).await;
            let nonce_only = headers_seen.contains_key("dpop-nonce")
                && headers_seen
                    .get_all("www-authenticate")
                    .iter()
                    .any(|v| v.to_str().is_ok_and(|v| v.contains("use_dpop_nonce")));
            if status == 401 && authorized && !nonce_only {
                // A token just obtained is refused: asking again would only repeat it.
                return Err(status_error(
                    StatusCode::UNAUTHORIZED,
                    "the server refused the token it just authorized",
                )
                .in_authorization());
            }
            let next = auth
                .challenged(self, status, &headers_seen)
                .await
                .map_err(Error::in_authorization)?;
            match next {
                crate::auth::Challenged::No => {
                    return Err(status_error(
                        StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN),
                        "",
                    ))
                }
                crate::auth::Challenged::Retry => {}
                crate::auth::Challenged::Authorized => authorized = status == 401,
            }
        }
    }

    /// Sends one HTTP request, without OAuth. A request that fails because a pooled
    /// keep-alive connection turned out to be dead (the server restarted, or closed it
    /// as idle) is sent once more on a fresh connection when `retry_stale` says that is
    /// harmless.
    async fn send_plain(
        &self,
        method: Method,
        url: &Uri,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        retry_stale: bool,
    ) -> Result<http::Response<Body>> {
        let has_body = body.is_some();
        let body = Bytes::from(body.unwrap_or_default());
        let loopback = url.host().map(is_loopback).unwrap_or(false);
        let mut attempt = 0;
        let resp = loop {
            attempt += 1;
            let mut req = http::Request::builder()
                .method(method.clone())
                .uri(url.clone());
            if let Some(h) = req.headers_mut() {
                *h = headers.clone();
                if has_body && !h.contains_key(CONTENT_TYPE) {
                    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                }
            }
            let req = req
                .body(Full::new(body.clone()))
                .map_err(|e| Error::config(format!("cannot build the request: {e}")))?;
            let fut = self.clients.send(req, loopback);
            let resp = match self.config.request_timeout {
                Some(t) => tokio::time::timeout(t, fut).await.map_err(|_| {
                    Error::timeout_of("HTTP request", t, "HttpConfig::request_timeout")
                })?,
                None => fut.await,
            };
            match resp {
                Ok(r) => break r,
                Err(e) if retry_stale && attempt == 1 && stale_connection(&e) => {
                    tracing::debug!(origin = %self.origin, "a pooled connection was dead; sending again on a new one");
                }
                Err(e) => return Err(self.request_error(e)),
            }
        };
        if resp.status().is_redirection() {
            let to = resp
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| l.parse::<Uri>().ok())
                .map(|u| {
                    if u.authority().is_some() {
                        origin_of(&u)
                    } else {
                        self.origin.clone()
                    }
                })
                .unwrap_or_else(|| "elsewhere".to_owned());
            return Err(Error::http_status(
                resp.status().as_u16(),
                format!("redirected to {to}; redirects are not followed, update the server URL"),
            ));
        }
        Ok(resp)
    }

    fn request_error(&self, e: hyper_util::client::legacy::Error) -> Error {
        let detail = if e.is_connect() {
            format!("cannot connect to {}", self.origin)
        } else {
            format!("HTTP request to {} failed", self.origin)
        };
        let mut source: Option<&dyn std::error::Error> = std::error::Error::source(&e);
        let mut chain = String::new();
        while let Some(s) = source {
            chain.push_str(": ");
            chain.push_str(&s.to_string());
            source = s.source();
        }
        Error::transport(format!("{detail}{chain}")).with_source(e)
    }

    /// Reads one reply: a JSON body or an event stream, until the answer to `id`.
    /// Everything else the server sends goes to `incoming` (server requests are
    /// answered through `answer`).
    async fn read_reply(
        self: &Arc<Self>,
        resp: http::Response<Body>,
        id: &Id,
        incoming: &Incoming,
        answer: Option<&Answerer>,
    ) -> Result<Reply> {
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.starts_with("text/event-stream") && status.is_success() {
            return self
                .read_stream(resp.into_body(), Some(id), incoming, answer, self.parser())
                .await;
        }
        let body = self.read_body(resp, "reply body").await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(status_error(status, ""));
        }
        let messages = match Message::parse(&body) {
            Ok(m) => m,
            Err(e) if status.is_success() => {
                return Err(Error::invalid_response(format!(
                    "the reply is not JSON-RPC: {e}"
                )))
            }
            Err(_) => {
                return Err(status_error(
                    status,
                    &String::from_utf8_lossy(&body[..body.len().min(200)]),
                ))
            }
        };
        let mut found = None;
        for m in messages {
            match m {
                Ok(Message::Response(r)) if !status.is_success() => {
                    // An error status with a JSON-RPC error: the answer (the id may be
                    // missing when the server could not read the request).
                    found = Some(Response {
                        id: id.clone(),
                        outcome: r.outcome,
                    });
                }
                Ok(Message::Response(r)) if &r.id == id => found = Some(r),
                Ok(other) => self.dispatch(other, incoming, answer),
                Err(e) => {
                    tracing::warn!(origin = %self.origin, error = %e, "skipped a malformed message in a reply")
                }
            }
        }
        match found {
            Some(r) => Ok(Reply::Answer(r)),
            None if !status.is_success() => Err(status_error(status, "")),
            None => Err(Error::invalid_response(format!(
                "the reply has no answer to request {id}"
            ))),
        }
    }

    /// A parser for an event stream of this server, bounded by the message limit.
    fn parser(&self) -> sse::Parser {
        sse::Parser::new(self.config.max_message_size)
    }

    fn too_large(&self, what: &str) -> Error {
        Error::too_large(
            what,
            self.config.max_message_size,
            "HttpConfig::max_message_size",
        )
    }

    /// Reads a whole body, refusing one larger than the message limit (from its
    /// `Content-Length` when it declares one) without holding more of it.
    async fn read_body(&self, resp: http::Response<Body>, what: &str) -> Result<Bytes> {
        let limit = self.config.max_message_size;
        let declared = resp
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(self.too_large(&format!("{what} declared {} bytes", declared.unwrap_or(0))));
        }
        match http_body_util::Limited::new(resp.into_body(), limit)
            .collect()
            .await
        {
            Ok(c) => Ok(c.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(self.too_large(what)),
            Err(e) => Err(Error::transport(format!(
                "reading the {what} from {} failed: {e}",
                self.origin
            ))),
        }
    }

    /// Reads and drops a body nobody needs, up to the message limit (past it the
    /// connection is dropped rather than drained).
    async fn drain(&self, resp: http::Response<Body>) {
        let mut body = resp.into_body();
        let mut left = self.config.max_message_size;
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                match left.checked_sub(data.len()) {
                    Some(l) => left = l,
                    None => return,
                }
            }
        }
    }

    async fn read_stream(
        self: &Arc<Self>,
        mut body: Body,
        id: Option<&Id>,
        incoming: &Incoming,
        answer: Option<&Answerer>,
        mut p: sse::Parser,
    ) -> Result<Reply> {
        let mut delivered = false;
        let mut events = Vec::new();
        loop {
            let frame = match body.frame().await {
                None => break,
                Some(Ok(f)) => f,
                Some(Err(e)) => {
                    tracing::debug!(origin = %self.origin, error = %e, "event stream broke");
                    break;
                }
            };
            let Ok(chunk) = frame.into_data() else {
                continue;
            };
            if p.push(&chunk, &mut events).is_err() {
                return Err(self.too_large("event-stream event"));
            }
            for ev in events.drain(..) {
                if ev.data.is_empty() {
                    continue; // a priming event: only an id (and maybe retry)
                }
                delivered = true;
                let messages = match Message::parse(ev.data.as_bytes()) {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!(origin = %self.origin, error = %e, "skipped a malformed event");
                        continue;
                    }
                };
                for m in messages {
                    match m {
                        Ok(Message::Response(r)) if Some(&r.id) == id => {
                            return Ok(Reply::Answer(r))
                        }
                        Ok(other) => self.dispatch(other, incoming, answer),
                        Err(e) => {
                            tracing::warn!(origin = %self.origin, error = %e, "skipped a malformed message in an event")
                        }
                    }
                }
            }
        }
        Ok(Reply::Broken {
            parser: p,
            delivered,
        })
    }

    fn dispatch(self: &Arc<Self>, m: Message, incoming: &Incoming, answer: Option<&Answerer>) {
        match m {
            Message::Notification(n) => incoming.notification(n),
            Message::Request(req) => match answer {
                Some(a) => {
                    let a = a.clone();
                    let incoming = incoming.clone();
                    tokio::spawn(async move {
                        let resp = incoming.request(req).await;
                        if let Err(e) = a.send(Message::Response(resp)).await {
                            tracing::warn!(error = %e, "could not send the answer to a server request");
                        }
                    });
                }
                None => {
                    tracing::warn!(origin = %self.origin, method = %req.method, "ignored a server request on a stateless stream")
                }
            },
            Message::Response(r) => {
                tracing::debug!(origin = %self.origin, id = %r.id, "ignored a response to no pending request")
            }
        }
    }

    fn mcp_name(method: &str, params: &Value) -> Option<String> {
        let v = match method {
            "tools/call" | "prompts/get" => params.get("name"),
            "resources/read" => params.get("uri"),
            m if m.starts_with("tasks/") => params.get("taskId"),
            _ => None,
        }?;
        v.as_str().map(super::headers::encode)
    }

    /// 2026-07-28: one POST per request.
    async fn modern(self: &Arc<Self>, request: Request, cx: RequestContext) -> Result<Response> {
        let original = request.id.clone();
        let mut request = request;
        let mut attempt = 0u32;
        loop {
            let mut h = self
                .base_headers("application/json, text/event-stream")
                .await?;
            insert(&mut h, "mcp-protocol-version", &cx.version)?;
            insert(&mut h, "mcp-method", &request.method)?;
            if let Some(name) = Self::mcp_name(&request.method, &request.params) {
                insert(&mut h, "mcp-name", &name)?;
            }
            for (k, v) in &cx.headers {
                insert(&mut h, k, v)?;
            }
            let body = Message::Request(request.clone()).to_vec();
            let resp = self
                .send(Method::POST, &self.url, h, Some(body), cx.idempotent)
                .await?;
            match self.read_reply(resp, &request.id, &cx.incoming, None).await? {
                Reply::Answer(mut r) => {
                    if request.method == "server/discover" && r.outcome.is_ok() {
                        self.remember(Detected::Modern);
                    }
                    r.id = original;
                    return Ok(r);
                }
                Reply::Broken { .. } if cx.idempotent && attempt < 2 => {
                    attempt += 1;
                    request.id = Id::String(format!("{original}~retry{attempt}"));
                    tracing::debug!(origin = %self.origin, method = %request.method, "reply stream broke; re-issuing on a new id");
                }
                Reply::Broken { .. } => {
                    return Err(Error::closed(format!(
                        "the reply stream of `{}` broke before the answer; it is not re-sent because it may have run",
                        request.method
                    )))
                }
            }
        }
    }

    fn legacy_headers(
        h: &mut HeaderMap,
        session: Option<&str>,
        version: Option<&str>,
    ) -> Result<()> {
        if let Some(s) = session {
            insert(h, "mcp-session-id", s)?;
        }
        if let Some(v) = version {
            // 2025-03-26 servers do not know the header; later ones require it.
            if v >= "2025-06-18" {
                insert(h, "mcp-protocol-version", v)?;
            }
        }
        Ok(())
    }

    fn session_snapshot(&self) -> (Option<String>, Option<String>) {
        match &*lock(&self.mode) {
            Mode::Streamable(s) => (s.session_id.clone(), Some(s.version.clone())),
            _ => (None, None),
        }
    }

    /// Legacy `initialize`: Streamable HTTP first, then HTTP+SSE.
    async fn initialize(
        self: &Arc<Self>,
        request: Request,
        cx: RequestContext,
    ) -> Result<Response> {
        self.end_session(false).await;
        if self.cached_era() == Some(Detected::Sse) {
            match self.sse_initialize(request.clone(), cx.clone()).await {
                Ok(r) => return Ok(r),
                Err(e) => {
                    tracing::debug!(origin = %self.origin, error = %e, "HTTP+SSE worked here before but not now; trying Streamable HTTP")
                }
            }
        }
        let h = self
            .base_headers("application/json, text/event-stream")
            .await?;
        let body = Message::Request(request.clone()).to_vec();
        let resp = self
            .send(Method::POST, &self.url, h, Some(body), true)
            .await?;
        let status = resp.status();
        let session_id = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let answerer = Answerer {
            shared: self.clone(),
            target: AnswerTarget::Post {
                session: session_id.clone(),
                version: None,
            },
        };
        let reply = self
            .read_reply(resp, &request.id, &cx.incoming, Some(&answerer))
            .await;
        let r = match reply {
            Ok(Reply::Answer(r)) => r,
            Ok(Reply::Broken { .. }) => {
                return Err(Error::closed(
                    "the server closed the stream before answering initialize",
                ))
            }
            Err(e)
                if matches!(
                    status,
                    StatusCode::BAD_REQUEST
                        | StatusCode::NOT_FOUND
                        | StatusCode::METHOD_NOT_ALLOWED
                ) && e.is_http() =>
            {
                tracing::debug!(origin = %self.origin, %status, "initialize refused; trying the 2024-11-05 HTTP+SSE transport");
                return match self.sse_initialize(request, cx).await {
                    Ok(r) => Ok(r),
                    Err(sse_error) => {
                        tracing::debug!(origin = %self.origin, error = %sse_error, "HTTP+SSE failed too");
                        Err(e)
                    }
                };
            }
            Err(e) => return Err(e),
        };
        if let Ok(result) = &r.outcome {
            let version = result
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            self.remember(Detected::Streamable);
            let get_stream = self.clone().spawn_get_stream(
                cx.incoming.clone(),
                session_id.clone(),
                version.clone(),
            );
            *lock(&self.mode) = Mode::Streamable(LegacySession {
                session_id,
                version,
                init_params: request.params.clone(),
                get_stream: Some(get_stream),
            });
        }
        Ok(r)
    }

    /// The standalone GET stream of a legacy session: messages not tied to a request.
    /// Reopened when it ends (resuming after the last event id), never faster than the
    /// reconnect floor, backing off while reopening brings nothing. Its state is in
    /// `get_stream` for [`Transport::listen_ready`].
    fn spawn_get_stream(
        self: Arc<Self>,
        incoming: Incoming,
        session: Option<String>,
        version: String,
    ) -> tokio::task::AbortHandle {
        let shared = self;
        shared.get_stream.send_replace(GetStream::Starting);
        tokio::spawn(async move {
            let mut parser = shared.parser();
            let mut failures = 0u32;
            let mut fruitless = 0u32;
            let unavailable = |why: String| {
                tracing::debug!(origin = %shared.origin, %why, "no standalone event stream");
                shared.get_stream.send_replace(GetStream::Unavailable(why));
            };
            loop {
                let mut h = match shared.base_headers("text/event-stream").await {
                    Ok(h) => h,
                    Err(e) => return unavailable(e.to_string()),
                };
                if let Err(e) = Self::legacy_headers(&mut h, session.as_deref(), Some(&version)) {
                    return unavailable(e.to_string());
                }
                if let Some(id) = parser.last_id.clone() {
                    if let Err(e) = insert(&mut h, "last-event-id", &id) {
                        return unavailable(e.to_string());
                    }
                }
                let resp = match shared.send(Method::GET, &shared.url, h, None, true).await {
                    Ok(r) => r,
                    Err(e) => {
                        failures += 1;
                        if failures > 5 {
                            return unavailable(format!("opening it failed: {e}"));
                        }
                        tokio::time::sleep(sse::reconnect_delay(None, failures)).await;
                        continue;
                    }
                };
                if !resp.status().is_success() {
                    // 405: the server offers no such stream.
                    return unavailable(format!("GET answered HTTP {}", resp.status()));
                }
                failures = 0;
                shared.get_stream.send_replace(GetStream::Open);
                let answerer = Answerer {
                    shared: shared.clone(),
                    target: AnswerTarget::Post { session: session.clone(), version: Some(version.clone()) },
                };
                let read = shared
                    .read_stream(resp.into_body(), None, &incoming, Some(&answerer), parser.resume())
                    .await;
                match read {
                    Ok(Reply::Broken { parser: p, delivered }) => {
                        parser = p.resume();
                        fruitless = if delivered { 0 } else { fruitless + 1 };
                    }
                    Ok(Reply::Answer(_)) => fruitless = 0,
                    Err(e) => {
                        tracing::warn!(origin = %shared.origin, error = %e, "the standalone event stream was dropped");
                        fruitless += 1;
                    }
                }
                tokio::time::sleep(sse::reconnect_delay(parser.retry, fruitless)).await;
            }
        })
        .abort_handle()
    }

    /// Waits until the GET stream of a legacy session is open or known to be missing.
    async fn get_stream_ready(&self) -> Result<()> {
        let mut rx = self.get_stream.subscribe();
        let state = tokio::time::timeout(
            self.config.connect_timeout + Duration::from_secs(20),
            rx.wait_for(|s| *s != GetStream::Starting),
        )
        .await;
        let why = match state {
            Ok(Ok(s)) => match &*s {
                GetStream::Unavailable(why) => why.clone(),
                _ => return Ok(()),
            },
            Ok(Err(_)) => "the stream stopped".to_owned(),
            Err(_) => "the server did not answer the GET that opens it".to_owned(),
        };
        Err(Error::unsupported(format!(
            "{} sends nothing between requests: it offers no standalone event stream ({why}), so its changes cannot be heard",
            self.origin
        )))
    }

    /// A request in a legacy Streamable HTTP session.
    async fn legacy(self: &Arc<Self>, request: Request, cx: RequestContext) -> Result<Response> {
        let mut reinitialized = false;
        loop {
            let (session, version) = self.session_snapshot();
            let version = version.or_else(|| Some(cx.version.clone()));
            let mut h = self
                .base_headers("application/json, text/event-stream")
                .await?;
            Self::legacy_headers(&mut h, session.as_deref(), version.as_deref())?;
            let body = Message::Request(request.clone()).to_vec();
            let resp = self
                .send(Method::POST, &self.url, h, Some(body), cx.idempotent)
                .await?;
            if resp.status() == StatusCode::NOT_FOUND && session.is_some() && !reinitialized {
                // The session expired (or the server restarted): start a new one, once.
                reinitialized = true;
                self.reinitialize(&cx).await?;
                continue;
            }
            let answerer = Answerer {
                shared: self.clone(),
                target: AnswerTarget::Post {
                    session: session.clone(),
                    version: version.clone(),
                },
            };
            let mut reply = self
                .read_reply(resp, &request.id, &cx.incoming, Some(&answerer))
                .await?;
            let mut resumes = 0;
            loop {
                match reply {
                    Reply::Answer(r) => return Ok(r),
                    Reply::Broken { parser, delivered } if resumes < 10 && parser.last_id.is_some() => {
                        resumes += 1;
                        let last = parser.last_id.clone().unwrap_or_default();
                        // The server asked us to wait `retry` ms before reconnecting.
                        let fruitless = if delivered { 0 } else { resumes };
                        tokio::time::sleep(sse::reconnect_delay(parser.retry, fruitless)).await;
                        let mut h = self.base_headers("text/event-stream").await?;
                        Self::legacy_headers(&mut h, session.as_deref(), version.as_deref())?;
                        insert(&mut h, "last-event-id", &last)?;
                        let resp = self.send(Method::GET, &self.url, h, None, true).await?;
                        if !resp.status().is_success() {
                            return Err(status_error(resp.status(), "resuming the event stream failed"));
                        }
                        reply = self
                            .read_stream(resp.into_body(), Some(&request.id), &cx.incoming, Some(&answerer), parser.resume())
                            .await?;
                    }
                    Reply::Broken { .. } => {
                        return Err(Error::closed(format!(
                            "the server closed the reply stream of `{}` before answering, and it cannot be resumed",
                            request.method
                        )))
                    }
                }
            }
        }
    }

    async fn reinitialize(self: &Arc<Self>, cx: &RequestContext) -> Result<()> {
        let params = match &*lock(&self.mode) {
            Mode::Streamable(s) => s.init_params.clone(),
            _ => return Err(Error::closed("the session expired")),
        };
        let n = self.reinit.fetch_add(1, Ordering::Relaxed);
        let request = Request {
            id: Id::String(format!("reinitialize-{n}")),
            method: "initialize".into(),
            params,
        };
        tracing::debug!(origin = %self.origin, "session expired (404); initializing a new one");
        let r = self.initialize(request, cx.clone()).await?;
        if let Err(e) = r.outcome {
            return Err(Error::protocol(e.code, e.message, e.data));
        }
        let (session, version) = self.session_snapshot();
        let mut h = self
            .base_headers("application/json, text/event-stream")
            .await?;
        Self::legacy_headers(&mut h, session.as_deref(), version.as_deref())?;
        let n = Notification {
            method: "notifications/initialized".into(),
            params: None,
        };
        self.post_message(&self.url, h, &Message::Notification(n), true, "")
            .await
    }

    /// Opens the 2024-11-05 event stream and initializes through it.
    async fn sse_initialize(
        self: &Arc<Self>,
        request: Request,
        cx: RequestContext,
    ) -> Result<Response> {
        let h = self.base_headers("text/event-stream").await?;
        let resp = self.send(Method::GET, &self.url, h, None, true).await?;
        let ct = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if !resp.status().is_success() || !ct.starts_with("text/event-stream") {
            return Err(status_error(
                resp.status(),
                "the server offers neither Streamable HTTP nor HTTP+SSE at this URL",
            ));
        }
        let pending: Arc<Pending> = Arc::new(Mutex::new(HashMap::new()));
        let dead = Arc::new(AtomicBool::new(false));
        let (endpoint_tx, endpoint_rx) = oneshot::channel();
        let task = tokio::spawn(sse_reader(
            self.clone(),
            resp.into_body(),
            pending.clone(),
            dead.clone(),
            cx.incoming.clone(),
            endpoint_tx,
        ));
        let endpoint = match tokio::time::timeout(Duration::from_secs(10), endpoint_rx).await {
            Ok(Ok(e)) => e,
            _ => {
                task.abort();
                return Err(Error::invalid_response(
                    "the event stream sent no `endpoint` event",
                ));
            }
        };
        let post_url = resolve(&self.url, &endpoint)?;
        if origin_of(&post_url) != self.origin {
            task.abort();
            return Err(Error::invalid_response(format!(
                "the `endpoint` event points to another origin ({}); refused",
                origin_of(&post_url)
            )));
        }
        let session = Arc::new(SseSession {
            post_url,
            pending,
            dead,
            task: task.abort_handle(),
        });
        *lock(&self.mode) = Mode::Sse(session.clone());
        self.remember(Detected::Sse);
        self.sse_request(&session, request, true).await
    }

    async fn sse_post(
        &self,
        session: &SseSession,
        message: Message,
        retry_stale: bool,
    ) -> Result<()> {
        let h = self
            .base_headers("application/json, text/event-stream")
            .await?;
        self.post_message(&session.post_url, h, &message, retry_stale, "")
            .await
    }

    /// POSTs a message that expects no answer (a notification, or a response to a
    /// server request): drains the reply and checks its status.
    async fn post_message(
        &self,
        url: &Uri,
        headers: HeaderMap,
        message: &Message,
        retry_stale: bool,
        refused: &str,
    ) -> Result<()> {
        let resp = self
            .send(
                Method::POST,
                url,
                headers,
                Some(message.to_vec()),
                retry_stale,
            )
            .await?;
        let status = resp.status();
        self.drain(resp).await;
        if status.is_success() {
            Ok(())
        } else {
            Err(status_error(status, refused))
        }
    }

    async fn sse_request(
        &self,
        session: &SseSession,
        request: Request,
        idempotent: bool,
    ) -> Result<Response> {
        if session.dead.load(Ordering::Acquire) {
            return Err(Error::closed("the event stream closed"));
        }
        let (tx, rx) = oneshot::channel();
        lock(&session.pending).insert(request.id.clone(), tx);
        let guard = PendingGuard {
            pending: &session.pending,
            id: Some(request.id.clone()),
        };
        self.sse_post(session, Message::Request(request), idempotent)
            .await?;
        let out = rx
            .await
            .map_err(|_| Error::closed("the event stream closed"))?;
        drop(guard);
        out
    }

    async fn end_session(&self, delete: bool) {
        let mode = std::mem::replace(&mut *lock(&self.mode), Mode::Fresh);
        match mode {
            Mode::Fresh => {}
            Mode::Streamable(s) => {
                if let Some(h) = s.get_stream {
                    h.abort();
                }
                if let (true, Some(id)) = (delete, s.session_id) {
                    if let Ok(mut h) = self.base_headers("application/json").await {
                        if insert(&mut h, "mcp-session-id", &id).is_ok() {
                            // 405 means the server does not let clients end sessions.
                            if let Ok(resp) =
                                self.send(Method::DELETE, &self.url, h, None, true).await
                            {
                                self.drain(resp).await;
                            }
                        }
                    }
                }
            }
            Mode::Sse(s) => {
                s.task.abort();
                s.dead.store(true, Ordering::Release);
                let drained: Vec<_> = lock(&s.pending).drain().collect();
                for (_, tx) in drained {
                    let _ = tx.send(Err(Error::closed("the transport was closed")));
                }
            }
        }
    }
}

struct PendingGuard<'a> {
    pending: &'a Pending,
    id: Option<Id>,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            lock(self.pending).remove(&id);
        }
    }
}

async fn sse_reader(
    shared: Arc<Shared>,
    mut body: Body,
    pending: Arc<Pending>,
    dead: Arc<AtomicBool>,
    incoming: Incoming,
    endpoint: oneshot::Sender<String>,
) {
    let mut endpoint = Some(endpoint);
    let mut parser = shared.parser();
    let mut too_large = false;
    let mut events = Vec::new();
    let answerer = Answerer {
        shared: shared.clone(),
        target: AnswerTarget::Sse,
    };
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        if parser.push(&chunk, &mut events).is_err() {
            tracing::warn!(origin = %shared.origin, limit = shared.config.max_message_size, "an event of the HTTP+SSE stream is larger than the message limit; the stream was dropped");
            too_large = true;
            break;
        }
        for ev in events.drain(..) {
            if ev.event == "endpoint" {
                if let Some(tx) = endpoint.take() {
                    let _ = tx.send(ev.data);
                }
                continue;
            }
            if !(ev.event.is_empty() || ev.event == "message") || ev.data.is_empty() {
                continue;
            }
            let messages = match Message::parse(ev.data.as_bytes()) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(origin = %shared.origin, error = %e, "skipped a malformed event");
                    continue;
                }
            };
            for m in messages {
                match m {
                    Ok(Message::Response(r)) => {
                        let tx = lock(&pending).remove(&r.id);
                        match tx {
                            Some(tx) => {
                                let _ = tx.send(Ok(r));
                            }
                            None => {
                                tracing::debug!(id = %r.id, "ignored a response to no pending request")
                            }
                        }
                    }
                    Ok(other) => shared.dispatch(other, &incoming, Some(&answerer)),
                    Err(e) => tracing::warn!(error = %e, "skipped a malformed message"),
                }
            }
        }
    }
    incoming.disconnected();
    dead.store(true, Ordering::Release);
    {
        let mut mode = lock(&shared.mode);
        if matches!(&*mode, Mode::Sse(s) if Arc::ptr_eq(&s.pending, &pending)) {
            *mode = Mode::Fresh;
        }
    }
    let drained: Vec<_> = lock(&pending).drain().collect();
    for (_, tx) in drained {
        let e = if too_large {
            shared.too_large("HTTP+SSE event")
        } else {
            Error::closed("the server closed the event stream")
        };
        let _ = tx.send(Err(e));
    }
}

/// Where answers to server requests (and notifications) go in legacy modes.
#[derive(Clone)]
struct Answerer {
    shared: Arc<Shared>,
    target: AnswerTarget,
}

#[derive(Clone)]
enum AnswerTarget {
    Post {
        session: Option<String>,
        version: Option<String>,
    },
    Sse,
}

impl Answerer {
    async fn send(&self, message: Message) -> Result<()> {
        match &self.target {
            AnswerTarget::Post { session, version } => {
                let mut h = self
                    .shared
                    .base_headers("application/json, text/event-stream")
                    .await?;
                Shared::legacy_headers(&mut h, session.as_deref(), version.as_deref())?;
                self.shared
                    .post_message(&self.shared.url, h, &message, true, "")
                    .await
            }
            AnswerTarget::Sse => {
                let session = match &*lock(&self.shared.mode) {
                    Mode::Sse(s) => s.clone(),
                    _ => return Err(Error::closed("the event stream closed")),
                };
                self.shared.sse_post(&session, message, true).await
            }
        }
    }
}

impl crate::auth::AuthHttp for Shared {
    fn get<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<crate::auth::HttpReply>> {
        Box::pin(async move {
            let uri: Uri = url
                .parse()
                .map_err(|e| Error::invalid_response(format!("`{url}` is not a URL: {e}")))?;
            let mut h = HeaderMap::new();
            h.insert(ACCEPT, HeaderValue::from_static("application/json"));
            let resp = self.send_plain(Method::GET, &uri, h, None, true).await?;
            self.reply(resp).await
        })
    }

    fn post_form<'a>(
        &'a self,
        url: &'a str,
        form: Vec<(String, String)>,
        headers: Vec<(String, String)>,
    ) -> BoxFuture<'a, Result<crate::auth::HttpReply>> {
        Box::pin(async move {
            let uri: Uri = url
                .parse()
                .map_err(|e| Error::invalid_response(format!("`{url}` is not a URL: {e}")))?;
            let mut h = HeaderMap::new();
            h.insert(ACCEPT, HeaderValue::from_static("application/json"));
            let body = match form.iter().find(|(k, _)| k == "__json") {
                Some((_, json)) => json.clone().into_bytes(),
                None => {
                    h.insert(
                        CONTENT_TYPE,
                        HeaderValue::from_static("application/x-www-form-urlencoded"),
                    );
                    let mut s = form_urlencoded::Serializer::new(String::new());
                    for (k, v) in &form {
                        s.append_pair(k, v);
                    }
                    s.finish().into_bytes()
                }
            };
            for (k, v) in headers {
                let mut v = HeaderValue::try_from(v)
                    .map_err(|_| Error::config("an OAuth header value is not valid"))?;
                v.set_sensitive(true);
                if let Ok(k) = HeaderName::try_from(k) {
                    h.insert(k, v);
                }
            }
            let resp = self
                .send_plain(Method::POST, &uri, h, Some(body), false)
                .await?;
            self.reply(resp).await
        })
    }
}

impl Shared {
    /// An authorization server's reply, bounded like every other read.
    async fn reply(&self, resp: http::Response<Body>) -> Result<crate::auth::HttpReply> {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = self.read_body(resp, "OAuth reply").await?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(crate::auth::HttpReply {
            status,
            headers,
            body,
        })
    }
}

/// A request that failed on a pooled connection the server had already closed.
fn stale_connection(e: &hyper_util::client::legacy::Error) -> bool {
    if e.is_connect() {
        return false;
    }
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<hyper::Error>())
        .is_some_and(|h| h.is_incomplete_message() || h.is_canceled())
}

fn insert(h: &mut HeaderMap, name: &str, value: &str) -> Result<()> {
    let n = HeaderName::try_from(name)
        .map_err(|_| Error::config(format!("`{name}` is not a valid header name")))?;
    let v = HeaderValue::try_from(value)
        .map_err(|_| Error::config(format!("the value of `{name}` is not a valid header value")))?;
    h.insert(n, v);
    Ok(())
}

fn status_error(status: StatusCode, detail: &str) -> Error {
    Error::http_status(status.as_u16(), detail.trim().to_owned())
}

/// Resolves the `endpoint` event's URI against the event stream's URL.
fn resolve(base: &Uri, reference: &str) -> Result<Uri> {
    let reference = reference.trim();
    if let Ok(u) = reference.parse::<Uri>() {
        if u.scheme().is_some() {
            return Ok(u);
        }
    }
    let scheme = base.scheme_str().unwrap_or("http");
    let authority = base.authority().map(|a| a.as_str()).unwrap_or("");
    let path = if reference.starts_with('/') {
        reference.to_owned()
    } else {
        let base_path = base.path();
        let dir = &base_path[..base_path.rfind('/').map(|i| i + 1).unwrap_or(0)];
        format!("{dir}{reference}")
    };
    format!("{scheme}://{authority}{path}")
        .parse()
        .map_err(|e| {
            Error::invalid_response(format!("the `endpoint` event is not a valid URI: {e}"))
        })
}

impl Transport for HttpTransport {
    fn request(&self, request: Request, cx: RequestContext) -> BoxFuture<'_, Result<Response>> {
        let hold = cx.hold.clone();
        Box::pin(super::with_hold(hold, async move {
            let shared = &self.inner;
            if MODERN_VERSIONS.contains(&cx.version.as_str()) {
                return shared.modern(request, cx).await;
            }
            if request.method == "initialize" {
                return shared.initialize(request, cx).await;
            }
            let sse = match &*lock(&shared.mode) {
                Mode::Sse(s) => Some(s.clone()),
                _ => None,
            };
            match sse {
                Some(s) => shared.sse_request(&s, request, cx.idempotent).await,
                None => shared.legacy(request, cx).await,
            }
        }))
    }

    fn notify<'a>(&'a self, n: Notification, version: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let shared = &self.inner;
            let sse = match &*lock(&shared.mode) {
                Mode::Sse(s) => Some(s.clone()),
                _ => None,
            };
            if let Some(s) = sse {
                return shared.sse_post(&s, Message::Notification(n), true).await;
            }
            let mut h = shared
                .base_headers("application/json, text/event-stream")
                .await?;
            if MODERN_VERSIONS.contains(&version) {
                insert(&mut h, "mcp-protocol-version", version)?;
                insert(&mut h, "mcp-method", &n.method)?;
            } else {
                let (session, v) = shared.session_snapshot();
                Shared::legacy_headers(&mut h, session.as_deref(), v.as_deref().or(Some(version)))?;
            }
            shared
                .post_message(
                    &shared.url,
                    h,
                    &Message::Notification(n),
                    true,
                    "the server refused a notification",
                )
                .await
        })
    }

    fn cancel<'a>(&'a self, n: Notification, version: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if MODERN_VERSIONS.contains(&version) {
                // Dropping the request closed its stream: that is the cancellation.
                return Ok(());
            }
            // Legacy: a dropped stream is not a cancellation; say it.
            self.notify(n, version).await
        })
    }

    fn close(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            self.inner.end_session(true).await;
            Ok(())
        })
    }

    fn era_hint(&self) -> Option<Era> {
        match self.inner.cached_era()? {
            Detected::Modern => Some(Era::Modern),
            Detected::Streamable | Detected::Sse => Some(Era::Legacy),
        }
    }

    fn mirrors_param_headers(&self) -> bool {
        true
    }

    fn answers_every_request(&self) -> bool {
        true
    }

    fn listen_ready(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            match &*lock(&self.inner.mode) {
                Mode::Streamable(_) => {}
                // The 2024-11-05 stream carries everything; modern servers answer
                // `subscriptions/listen` on its own request.
                Mode::Sse(_) | Mode::Fresh => return Ok(()),
            }
            self.inner.get_stream_ready().await
        })
    }

    fn authorization(&self) -> Option<crate::auth::Authorization<'_>> {
        let session = self.inner.auth.as_ref()?;
        Some(crate::auth::Authorization {
            session,
            http: self.inner.as_ref(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn localhost_names_must_resolve_to_loopback_only() {
        use std::net::SocketAddr;
        use tower_service::Service;
        for name in [
            "localhost",
            "LOCALHOST",
            "app.localhost",
            "a.b.localhost.",
            "x.LocalHost",
        ] {
            assert!(is_localhost_name(name), "{name}");
        }
        for name in [
            "localhost.example.com",
            "evillocalhost",
            "localhost-x",
            "127.0.0.1",
        ] {
            assert!(!is_localhost_name(name), "{name}");
        }
        let lo: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let lo6: SocketAddr = "[::1]:80".parse().unwrap();
        let remote: SocketAddr = "192.0.2.7:80".parse().unwrap();
        assert!(check_localhost("app.localhost", &[lo, lo6]).is_ok());
        assert!(check_localhost("app.localhost", &[lo, remote]).is_err());
        assert!(check_localhost("app.localhost", &[]).is_err());
        // Other names may resolve anywhere (https is required for them anyway).
        assert!(check_localhost("example.com", &[remote]).is_ok());

        // Through the resolver the connector uses: a resolver that maps a localhost
        // name elsewhere is not believed. (Nothing connects: the resolver is called
        // directly.)
        #[derive(Clone)]
        struct Lying(Vec<SocketAddr>);
        impl tower_service::Service<Name> for Lying {
            type Response = std::vec::IntoIter<SocketAddr>;
            type Error = std::io::Error;
            type Future = std::future::Ready<std::io::Result<Self::Response>>;
            fn poll_ready(
                &mut self,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
            fn call(&mut self, _: Name) -> Self::Future {
                std::future::ready(Ok(self.0.clone().into_iter()))
            }
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let name = |n: &str| n.parse::<Name>().unwrap();
        let mut lying = CheckedResolver(Lying(vec![remote]));
        let e = rt.block_on(lying.call(name("evil.localhost"))).unwrap_err();
        assert!(e.to_string().contains("192.0.2.7"), "{e}");
        let mut honest = CheckedResolver(Lying(vec![lo]));
        let addrs: Vec<SocketAddr> = rt
            .block_on(honest.call(name("app.localhost")))
            .unwrap()
            .collect();
        assert_eq!(addrs, [lo]);
    }

    #[test]
    fn plain_http_only_for_loopback() {
        for ok in [
            "http://localhost:3000/mcp",
            "http://127.0.0.1/mcp",
            "http://[::1]:8080/",
            "https://example.com/mcp",
        ] {
            assert!(HttpTransport::new(HttpConfig::new(ok)).is_ok(), "{ok}");
        }
        for bad in [
            "http://example.com/mcp",
            "http://10.0.0.1/mcp",
            "ftp://example.com",
            "not a url",
        ] {
            let e = HttpTransport::new(HttpConfig::new(bad)).unwrap_err();
            assert!(e.is_config(), "{bad}: {e}");
        }
        let e = HttpTransport::new(HttpConfig::new("http://example.com/mcp")).unwrap_err();
        assert!(e.to_string().contains("https://example.com"), "{e}");
        // Userinfo is refused, and never shown.
        let e = HttpTransport::new(HttpConfig::new("https://user:PWSECRET@example.com/mcp"))
            .unwrap_err();
        assert!(!e.to_string().contains("PWSECRET"), "{e}");
        // A key in the query stays out of Debug.
        let c = HttpConfig::new("https://example.com/mcp?key=QSECRET");
        assert!(!format!("{c:?}").contains("QSECRET"), "{c:?}");
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let c = HttpConfig::new("https://example.com/mcp")
            .bearer_token("tok-123456")
            .header("X-Api-Key", "key-987654");
        let d = format!("{c:?}");
        assert!(
            !d.contains("tok-123456") && !d.contains("key-987654"),
            "{d}"
        );
        assert!(d.contains("X-Api-Key"));
    }

    #[test]
    fn endpoint_resolution() {
        let base: Uri = "http://127.0.0.1:3001/sse".parse().unwrap();
        assert_eq!(
            resolve(&base, "/message?sessionId=1").unwrap().to_string(),
            "http://127.0.0.1:3001/message?sessionId=1"
        );
        assert_eq!(
            resolve(&base, "message?x=1").unwrap().to_string(),
            "http://127.0.0.1:3001/message?x=1"
        );
        assert_eq!(
            resolve(&base, "http://127.0.0.1:3001/m")
                .unwrap()
                .to_string(),
            "http://127.0.0.1:3001/m"
        );
    }
}
