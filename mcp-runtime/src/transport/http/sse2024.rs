//! The 2024-11-05 HTTP+SSE transport: GET the event stream, POST to its `endpoint`, read
//! every answer from the stream.

use super::connect::{origin_of, resolve, status_error};
use super::sessions::{Pending, SseSession};
use super::state::{Detected, Mode, Shared};
use super::streamable::{sse_reader, PendingGuard};
use crate::error::{Error, Result};
use crate::jsonrpc::{Message, Request, Response};
use crate::transport::RequestContext;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, Method, Uri};
use mcp_runtime_core::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

impl Shared {
    /// Opens the 2024-11-05 event stream and initializes through it.
    pub(super) async fn sse_initialize(
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

    pub(super) async fn sse_post(
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
    pub(super) async fn post_message(
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

    pub(super) async fn sse_request(
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
}
