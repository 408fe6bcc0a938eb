//! [`HttpConfig`]: where the server is, headers and the bearer token (read per request),
//! OAuth, limits and timeouts.

use crate::error::Result;
use crate::transport::{BoxFuture, DEFAULT_MAX_MESSAGE_SIZE};
use crate::Secret;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub(super) type TokenFn = Arc<dyn Fn() -> BoxFuture<'static, Result<Option<Secret>>> + Send + Sync>;

pub(super) type HeaderFn = Arc<dyn Fn() -> Option<String> + Send + Sync>;

#[derive(Clone)]
pub(super) enum HeaderSource {
    Static(Secret),
    Dynamic(HeaderFn),
}

/// How to reach a Streamable HTTP (or HTTP+SSE) server.
#[derive(Clone)]
pub struct HttpConfig {
    pub(super) url: String,
    pub(super) headers: Vec<(String, HeaderSource)>,
    pub(super) bearer: Option<TokenFn>,
    pub(super) proxy: Option<String>,
    pub(super) request_timeout: Option<Duration>,
    pub(super) connect_timeout: Duration,
    #[cfg(feature = "oauth")]
    pub(super) oauth: Option<crate::auth::OAuth>,
    pub(super) max_message_size: usize,
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
            #[cfg(feature = "oauth")]
            oauth: None,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
        }
    }

    /// Authorizes with OAuth when the server asks (401): discovery, registration, the
    /// configured grant, refresh, step-up on `insufficient_scope`, DPoP.
    #[cfg(feature = "oauth")]
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

    /// What a configuration fingerprint covers of this config: the URL without
    /// userinfo or query, the HMAC-SHA-256 of its query under `key` (a query may
    /// carry a tenant or a key), each header's name with the HMAC-SHA-256 of its value under
    /// `key` (a computed header's name with a marker), and whether a bearer token is
    /// configured. Never a value, never the token.
    pub(crate) fn fingerprint(&self, key: &[u8]) -> serde_json::Value {
        let headers: Vec<serde_json::Value> = self
            .headers
            .iter()
            .map(|(name, source)| match source {
                HeaderSource::Static(v) => serde_json::json!({
                    "name": name,
                    "hmac": crate::digest::hmac_sha256_hex(key, v.expose().as_bytes()),
                }),
                HeaderSource::Dynamic(_) => serde_json::json!({"name": name, "computed": true}),
            })
            .collect();
        let query = self
            .url
            .split_once('?')
            .map(|(_, q)| q.split('#').next().unwrap_or(""))
            .map(|q| crate::digest::hmac_sha256_hex(key, q.as_bytes()));
        serde_json::json!({
            "kind": "http",
            "url": crate::url_rule::redact(&self.url),
            "query": query,
            "headers": headers,
            "bearer_token": self.bearer.is_some(),
        })
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
