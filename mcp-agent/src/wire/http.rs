//! The agent's HTTP client for model providers, on the toolkit's one HTTP stack
//! ([`mcp_runtime_core::http`]: hyper with rustls, pooled keep-alive connections, the loopback
//! rule checked when a name resolves): bounded answers, one deadline per answer,
//! secrets as sensitive headers.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mcp_runtime::Secret;
use serde_json::Value;

use crate::model::ModelError;
use crate::store::lock;

type Pool = mcp_runtime_core::http::Clients;

/// The largest answer read from a model server.
const MAX_ANSWER: usize = 32 * 1024 * 1024;

/// An answer: its status, its JSON (Null when it is not JSON), the raw bytes, and the
/// wait it asks for before a retry (`retry-after-ms`, else `Retry-After`).
pub(crate) struct Answer {
    pub status: u16,
    pub json: Value,
    pub raw: Bytes,
    pub retry_after: Option<Duration>,
}

impl Answer {
    /// The first 300 bytes, for an error message: `secrets` scrubbed (in any JSON
    /// spelling) before the cut, so none is left as a prefix.
    pub fn preview(&self, secrets: &[&str]) -> String {
        super::redact::preview(&self.raw, secrets, 300)
    }
}

#[derive(Clone)]
pub(crate) struct HttpClient {
    /// Replaced by a fresh one when a pooled connection turns out dead.
    pool: Arc<std::sync::Mutex<Arc<Pool>>>,
    timeout: Duration,
}

/// A pool of connections on the toolkit's one HTTP stack.
fn new_pool() -> Result<Pool, ModelError> {
    Pool::new(&mcp_runtime_core::http::PoolOptions::default()).map_err(other)
}

/// A whole event-stream body through the parser the model wires read streams with,
/// each event handed to `on` (the fuzz targets reach the wires' assembly this way).
pub(crate) fn replay_events(
    body: &[u8],
    on: &mut dyn FnMut(&str, &str) -> Result<(), ModelError>,
) -> Result<(), ModelError> {
    let mut parser = mcp_runtime_core::sse::Parser::new(MAX_ANSWER);
    let mut events = Vec::new();
    parser
        .push(body, &mut events)
        .map_err(|_| other(format!("an event is larger than {MAX_ANSWER} bytes")))?;
    parser.finish(&mut events);
    for e in events.drain(..) {
        on(&e.event, &e.data)?;
    }
    Ok(())
}

/// A failure of the model call (`ModelError::Other`).
pub(crate) fn other(detail: String) -> ModelError {
    ModelError::Other { detail }
}

/// The provider could not be reached, or did not answer in time
/// (`ModelError::Unavailable`: worth trying again).
fn unavailable(detail: String) -> ModelError {
    ModelError::unavailable(detail)
}

impl HttpClient {
    /// Checks `base_url` against the runtime's URL rule (https, or http to this
    /// machine) and builds the pool.
    pub fn new(base_url: &str) -> Result<Self, ModelError> {
        mcp_runtime_core::url_rule::check(base_url)
            .map_err(|e| other(format!("the model's base URL: {e}")))?;
        Self::pool()
    }

    /// The pool, for a base URL already checked.
    pub fn pool() -> Result<Self, ModelError> {
        Ok(HttpClient {
            pool: Arc::new(std::sync::Mutex::new(Arc::new(new_pool()?))),
            timeout: Duration::from_secs(300),
        })
    }

    /// Drops the pooled connections: the next request opens a new one.
    pub fn reset(&self) {
        if let Ok(pool) = new_pool() {
            *lock(&self.pool) = Arc::new(pool);
        }
    }

    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// POSTs JSON with these headers (secret ones marked sensitive).
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        secrets: &[(&str, &Secret)],
        body: &Value,
    ) -> Result<Answer, ModelError> {
        // One deadline for the whole answer: headers and body alike (a provider that
        // answers at once and then stalls mid-body is cut off too).
        let deadline = tokio::time::Instant::now() + self.timeout;
        let (origin, resp) = self.send(url, headers, secrets, body, deadline).await?;
        self.collect_by(&origin, resp, deadline).await
    }

    /// The whole answer, read before `deadline`.
    async fn collect_by(
        &self,
        origin: &str,
        resp: http::Response<hyper::body::Incoming>,
        deadline: tokio::time::Instant,
    ) -> Result<Answer, ModelError> {
        tokio::time::timeout_at(deadline, collect(origin, resp))
            .await
            .map_err(|_| {
                unavailable(format!(
                    "the answer from {origin} took longer than {:?}",
                    self.timeout
                ))
            })?
    }

    /// POSTs JSON and reads a server-sent event stream: `on(event, data)` for each
    /// event, in order, as it arrives. An answer that is not an event stream (an
    /// error) is returned whole instead.
    pub async fn post_events(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        secrets: &[(&str, &Secret)],
        body: &Value,
        on: &mut (dyn FnMut(&str, &str) -> Result<(), ModelError> + Send),
    ) -> Result<Option<Answer>, ModelError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let (origin, resp) = self.send(url, headers, secrets, body, deadline).await?;
        let is_stream = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !resp.status().is_success() || !is_stream {
            return self.collect_by(&origin, resp, deadline).await.map(Some);
        }
        let mut body = resp.into_body();
        let mut parser = mcp_runtime_core::sse::Parser::new(MAX_ANSWER);
        let mut events = Vec::new();
        let mut read = 0usize;
        let deadline = tokio::time::sleep_until(deadline);
        tokio::pin!(deadline);
        loop {
            let frame = tokio::select! {
                f = body.frame() => f,
                _ = &mut deadline => {
                    return Err(unavailable(format!("the answer from {origin} took longer than {:?}", self.timeout)));
                }
            };
            let Some(frame) = frame else { break };
            let frame = frame.map_err(|e| {
                unavailable(format!("reading the answer from {origin} failed: {e}"))
            })?;
            if let Ok(data) = frame.into_data() {
                read += data.len();
                if read > MAX_ANSWER {
                    return Err(other(format!(
                        "the answer from {origin} is larger than {MAX_ANSWER} bytes"
                    )));
                }
                parser.push(&data, &mut events).map_err(|_| {
                    other(format!(
                        "an event from {origin} is larger than {MAX_ANSWER} bytes"
                    ))
                })?;
                for e in events.drain(..) {
                    on(&e.event, &e.data)?;
                }
            }
        }
        parser.finish(&mut events);
        for e in events.drain(..) {
            on(&e.event, &e.data)?;
        }
        Ok(None)
    }

    async fn send(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        secrets: &[(&str, &Secret)],
        body: &Value,
        deadline: tokio::time::Instant,
    ) -> Result<(String, http::Response<hyper::body::Incoming>), ModelError> {
        let origin = mcp_runtime_core::url_rule::check(url)
            .map(|c| c.origin)
            .unwrap_or_else(|_| mcp_runtime_core::url_rule::redact(url));
        let body = Bytes::from(body.to_string());
        let request = || {
            let mut req = http::Request::post(url).header("content-type", "application/json");
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            for (k, v) in secrets {
                let mut v = http::HeaderValue::try_from(v.expose())
                    .map_err(|_| other(format!("the value of {k} is not a valid header value")))?;
                v.set_sensitive(true);
                req = req.header(*k, v);
            }
            req.body(Full::new(body.clone()))
                .map_err(|e| other(format!("cannot build the request: {e}")))
        };
        let mut retried = false;
        loop {
            let pool = lock(&self.pool).clone();
            let sent = tokio::time::timeout_at(deadline, pool.send(request()?))
                .await
                .map_err(|_| {
                    unavailable(format!("no answer from {origin} within {:?}", self.timeout))
                })?;
            match sent {
                Ok(resp) => return Ok((origin, resp)),
                // Once, on a fresh pool: a dead pooled connection is not the server.
                Err(e) if !retried && mcp_runtime_core::http::was_not_sent(&e) => {
                    tracing::debug!(%origin, error = %e, "a pooled connection was dead; trying once on a new one");
                    *lock(&self.pool) = Arc::new(new_pool()?);
                    retried = true;
                }
                Err(e) => return Err(unavailable(format!("cannot reach {origin}: {e}"))),
            }
        }
    }
}

async fn collect(
    origin: &str,
    resp: http::Response<hyper::body::Incoming>,
) -> Result<Answer, ModelError> {
    let status = resp.status().as_u16();
    let retry_after = super::retry_after::read(resp.headers(), super::retry_after::now_secs());
    let raw = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| {
            let detail = format!("reading the answer from {origin} failed: {e}");
            // Too large is the answer's fault: the same request gets it again.
            if e.is::<http_body_util::LengthLimitError>() {
                other(detail)
            } else {
                unavailable(detail)
            }
        })?
        .to_bytes();
    let json = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    Ok(Answer {
        status,
        json,
        raw,
        retry_after,
    })
}
