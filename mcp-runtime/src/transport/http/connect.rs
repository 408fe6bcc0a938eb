//! Getting bytes to the server over the toolkit's one HTTP stack
//! ([`mcp_runtime_core::http`]: pooled hyper clients, TLS, proxy, the loopback rule checked at
//! resolve time, bounded reads): per-request headers, the OAuth bridge, stale
//! connections, redirects refused.

use super::config::HeaderSource;
use super::sessions::KNOWN;
use super::state::Shared;
use crate::error::{Error, Result};
#[cfg(feature = "oauth")]
use crate::transport::BoxFuture;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION};
use http::{HeaderMap, Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming as Body;
use mcp_runtime_core::http::ReadError;

/// `scheme://host[:port]`: never userinfo.
pub(super) fn origin_of(uri: &Uri) -> String {
    let host = uri.host().unwrap_or("");
    match uri.port_u16() {
        Some(p) => format!("{}://{host}:{p}", uri.scheme_str().unwrap_or("http")),
        None => format!("{}://{host}", uri.scheme_str().unwrap_or("http")),
    }
}

#[cfg(feature = "oauth")]
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

pub(super) fn insert(h: &mut HeaderMap, name: &str, value: &str) -> Result<()> {
    let n = match KNOWN.iter().find(|k| k.as_str() == name) {
        Some(known) => known.clone(),
        None => HeaderName::try_from(name)
            .map_err(|_| Error::config(format!("`{name}` is not a valid header name")))?,
    };
    let v = HeaderValue::try_from(value)
        .map_err(|_| Error::config(format!("the value of `{name}` is not a valid header value")))?;
    h.insert(n, v);
    Ok(())
}

pub(super) fn status_error(status: StatusCode, detail: &str) -> Error {
    Error::http_status(status.as_u16(), detail.trim().to_owned())
}

/// Resolves the `endpoint` event's URI against the event stream's URL.
pub(super) fn resolve(base: &Uri, reference: &str) -> Result<Uri> {
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

impl Shared {
    /// The headers of every request: content type, accept, the configured headers and
    /// the bearer token, evaluated now.
    pub(super) async fn base_headers(&self, accept: &'static str) -> Result<HeaderMap> {
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
    pub(super) async fn send(
        &self,
        method: Method,
        url: &Uri,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        retry_stale: bool,
    ) -> Result<http::Response<Body>> {
        #[cfg(feature = "oauth")]
        if let Some(auth) = &self.auth {
            return self
                .send_authorized(auth, method, url, headers, body, retry_stale)
                .await;
        }
        self.send_plain(method, url, headers, body, retry_stale)
            .await
    }

    #[cfg(feature = "oauth")]
    async fn send_authorized(
        &self,
        auth: &crate::auth::ServerAuthorization,
        method: Method,
        url: &Uri,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        retry_stale: bool,
    ) -> Result<http::Response<Body>> {
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
            for (k, v) in auth_headers.iter() {
                h.insert(k, v.clone());
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
    pub(super) async fn send_plain(
        &self,
        method: Method,
        url: &Uri,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        retry_stale: bool,
    ) -> Result<http::Response<Body>> {
        let has_body = body.is_some();
        let body = Bytes::from(body.unwrap_or_default());
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
            let fut = self.clients.send(req);
            let resp = match self.config.request_timeout {
                Some(t) => tokio::time::timeout(t, fut).await.map_err(|_| {
                    Error::timeout_of("HTTP request", t, "HttpConfig::request_timeout")
                })?,
                None => fut.await,
            };
            match resp {
                Ok(r) => break r,
                Err(e) if retry_stale && attempt == 1 && mcp_runtime_core::http::is_stale(&e) => {
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

    pub(super) fn request_error(&self, e: hyper_util::client::legacy::Error) -> Error {
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

    pub(super) fn too_large(&self, what: &str) -> Error {
        Error::too_large(
            what,
            self.config.max_message_size,
            "HttpConfig::max_message_size",
        )
    }

    /// Reads a whole body, refusing one larger than the message limit (from its
    /// `Content-Length` when it declares one) without holding more of it.
    #[cfg(feature = "oauth")]
    pub(super) async fn read_body(&self, resp: http::Response<Body>, what: &str) -> Result<Bytes> {
        mcp_runtime_core::http::read_limited(resp, self.config.max_message_size)
            .await
            .map_err(|e| self.read_error(e, what))
    }

    /// As [`read_body`](Self::read_body), for a body that is a JSON-RPC message: a long
    /// one is gathered as it arrives (`mcp_runtime_core::gather`), never held twice.
    pub(super) async fn read_message(
        &self,
        resp: http::Response<Body>,
        what: &str,
    ) -> Result<mcp_runtime_core::http::Gathered> {
        mcp_runtime_core::http::read_gathered(resp, self.config.max_message_size)
            .await
            .map_err(|e| self.read_error(e, what))
    }

    fn read_error(&self, e: ReadError, what: &str) -> Error {
        match e {
            ReadError::TooLarge {
                declared: Some(declared),
            } => self.too_large(&format!("{what} declared {declared} bytes")),
            ReadError::TooLarge { declared: None } => self.too_large(what),
            ReadError::Failed(e) => Error::transport(format!(
                "reading the {what} from {} failed: {e}",
                self.origin
            )),
        }
    }

    /// Reads and drops a body nobody needs, up to the message limit (past it the
    /// connection is dropped rather than drained).
    pub(super) async fn drain(&self, resp: http::Response<Body>) {
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
}
