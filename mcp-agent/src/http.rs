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
        let resp = tokio::time::timeout(self.timeout, self.pool.request(req))
            .await
            .map_err(|_| other(format!("no answer from {origin} within {:?}", self.timeout)))?
            .map_err(|e| other(format!("cannot reach {origin}: {e}")))?;
        let status = resp.status().as_u16();
        let raw = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| other(format!("reading the answer from {origin} failed: {e}")))?
            .to_bytes();
        let json = serde_json::from_slice(&raw).unwrap_or(Value::Null);
        Ok(Answer { status, json, raw })
    }
}
