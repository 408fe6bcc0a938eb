//! The agent's HTTP client for model providers: hyper with rustls (ring, webpki
//! roots), pooled keep-alive connections, bounded answers, secrets as sensitive headers.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mcp_runtime::Secret;
use serde_json::Value;

use crate::model::ModelError;

type Pool = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// The largest answer read from a model server.
const MAX_ANSWER: usize = 32 * 1024 * 1024;

/// An answer: its status, its JSON (Null when it is not JSON), and the raw bytes.
pub(crate) struct Answer {
    pub status: u16,
    pub json: Value,
    pub raw: Bytes,
}

impl Answer {
    /// The first 300 bytes, for an error message.
    pub fn preview(&self) -> String {
        String::from_utf8_lossy(&self.raw[..self.raw.len().min(300)]).into_owned()
    }
}

/// Called with each piece of streamed text.
pub(crate) type TextFn = Arc<dyn Fn(&str) + Send + Sync>;

/// What every wire is configured with: where, which model, the key, streaming, and the
/// pooled client. The model is chosen by configuration only: there is no default.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<Secret>,
    pub stream: bool,
    pub on_text: Option<TextFn>,
    pub http: HttpClient,
}

impl Endpoint {
    /// `e` without any secret this endpoint sends (its API key) in its text.
    pub fn redact(&self, e: ModelError) -> ModelError {
        match &self.api_key {
            Some(k) => e.redacted(&[k.expose()]),
            None => e,
        }
    }

    /// Checks the URL (https, or http to this machine) and that a model is named.
    pub fn new(base_url: String, model: String) -> Result<Self, ModelError> {
        let base_url = base_url.trim_end_matches('/').to_owned();
        let http = HttpClient::new(&base_url)?;
        if model.trim().is_empty() {
            return Err(other(
                "no model id: name one (there is no default model)".into(),
            ));
        }
        Ok(Endpoint {
            base_url,
            model,
            api_key: None,
            stream: false,
            on_text: None,
            http,
        })
    }

    /// Streams answers and hands each piece of text to `f`.
    pub fn on_text(&mut self, f: impl Fn(&str) + Send + Sync + 'static) {
        self.stream = true;
        self.on_text = Some(Arc::new(f));
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field(
                "base_url",
                &mcp_runtime::__private::redact_url(&self.base_url),
            )
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("stream", &self.stream)
            .finish()
    }
}

#[derive(Clone)]
pub(crate) struct HttpClient {
    pool: Arc<Pool>,
    timeout: Duration,
}

fn other(detail: String) -> ModelError {
    ModelError::Other { detail }
}

impl HttpClient {
    /// Checks `base_url` against the runtime's URL rule (https, or http to this
    /// machine) and builds the pool.
    pub fn new(base_url: &str) -> Result<Self, ModelError> {
        mcp_runtime::__private::check_url(base_url)
            .map_err(|e| other(format!("the model's base URL: {e}")))?;
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(Arc::new(rustls::crypto::ring::default_provider()))
            .map_err(|e| other(format!("TLS setup failed: {e}")))?
            .https_or_http()
            .enable_all_versions()
            .build();
        let pool =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(https);
        Ok(HttpClient {
            pool: Arc::new(pool),
            timeout: Duration::from_secs(300),
        })
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
                other(format!(
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
        let mut parser = SseParser::default();
        let mut read = 0usize;
        let deadline = tokio::time::sleep_until(deadline);
        tokio::pin!(deadline);
        loop {
            let frame = tokio::select! {
                f = body.frame() => f,
                _ = &mut deadline => {
                    return Err(other(format!("the answer from {origin} took longer than {:?}", self.timeout)));
                }
            };
            let Some(frame) = frame else { break };
            let frame = frame
                .map_err(|e| other(format!("reading the answer from {origin} failed: {e}")))?;
            if let Ok(data) = frame.into_data() {
                read += data.len();
                if read > MAX_ANSWER {
                    return Err(other(format!(
                        "the answer from {origin} is larger than {MAX_ANSWER} bytes"
                    )));
                }
                parser.feed(&data, on)?;
            }
        }
        parser.finish(on)?;
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
        let origin = mcp_runtime::__private::check_url(url).unwrap_or_default();
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
        let req = req
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| other(format!("cannot build the request: {e}")))?;
        let resp = tokio::time::timeout_at(deadline, self.pool.request(req))
            .await
            .map_err(|_| other(format!("no answer from {origin} within {:?}", self.timeout)))?
            .map_err(|e| other(format!("cannot reach {origin}: {e}")))?;
        Ok((origin, resp))
    }
}

async fn collect(
    origin: &str,
    resp: http::Response<hyper::body::Incoming>,
) -> Result<Answer, ModelError> {
    let status = resp.status().as_u16();
    let raw = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| other(format!("reading the answer from {origin} failed: {e}")))?
        .to_bytes();
    let json = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    Ok(Answer { status, json, raw })
}

/// Server-sent events, fed in any chunks: each byte is looked at once.
#[derive(Default)]
pub(crate) struct SseParser {
    pending: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    pub fn feed(
        &mut self,
        bytes: &[u8],
        on: &mut (dyn FnMut(&str, &str) -> Result<(), ModelError> + Send),
    ) -> Result<(), ModelError> {
        let mut start = 0;
        for (i, b) in bytes.iter().enumerate() {
            if *b != b'\n' {
                continue;
            }
            if self.pending.is_empty() {
                self.line(&bytes[start..i], on)?;
            } else {
                let mut line = std::mem::take(&mut self.pending);
                line.extend_from_slice(&bytes[start..i]);
                self.line(&line, on)?;
            }
            start = i + 1;
        }
        self.pending.extend_from_slice(&bytes[start..]);
        Ok(())
    }

    pub fn finish(
        &mut self,
        on: &mut (dyn FnMut(&str, &str) -> Result<(), ModelError> + Send),
    ) -> Result<(), ModelError> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.line(&line, on)?;
        }
        self.line(b"", on)
    }

    fn line(
        &mut self,
        line: &[u8],
        on: &mut (dyn FnMut(&str, &str) -> Result<(), ModelError> + Send),
    ) -> Result<(), ModelError> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.has_data {
                on(&self.event, &self.data)?;
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return Ok(());
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text.as_ref(), ""),
        };
        match field {
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_parse_the_same() {
        let text = "event: a\ndata: {\"x\":1}\n\n: comment\r\ndata: one\r\ndata: two\r\n\r\ndata: [DONE]\n\n";
        for size in 1..text.len() {
            let mut seen = Vec::new();
            let mut on = |e: &str, d: &str| {
                seen.push((e.to_owned(), d.to_owned()));
                Ok(())
            };
            let mut p = SseParser::default();
            for chunk in text.as_bytes().chunks(size) {
                p.feed(chunk, &mut on).unwrap();
            }
            p.finish(&mut on).unwrap();
            assert_eq!(
                seen,
                [
                    ("a".to_owned(), "{\"x\":1}".to_owned()),
                    (String::new(), "one\ntwo".to_owned()),
                    (String::new(), "[DONE]".to_owned()),
                ],
                "chunks of {size}"
            );
        }
    }
}
