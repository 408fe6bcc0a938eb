//! Streamable HTTP replies (JSON or an SSE stream), the 2026-07-28 request, and answering
//! what a server asks on a reply stream.

use super::connect::{insert, status_error};
use super::sessions::{Pending, SessionHeaders};
use super::state::{Detected, Mode, Reply, Shared};
use crate::error::{Error, Result};
use crate::jsonrpc::{Id, Message, Request, Response};
use crate::transport::sse;
use crate::transport::{Incoming, RequestContext};
use http::header::CONTENT_TYPE;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming as Body;
use mcp_runtime_core::lock;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;

pub(super) struct PendingGuard<'a> {
    pub(super) pending: &'a Pending,
    pub(super) id: Option<Id>,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            lock(self.pending).remove(&id);
        }
    }
}

pub(super) async fn sse_reader(
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
pub(super) struct Answerer {
    pub(super) shared: Arc<Shared>,
    pub(super) target: AnswerTarget,
}

#[derive(Clone)]
pub(super) enum AnswerTarget {
    /// POSTed with the session's headers.
    Post(SessionHeaders),
    Sse,
}

impl Answerer {
    pub(super) async fn send(&self, message: Message) -> Result<()> {
        match &self.target {
            AnswerTarget::Post(session) => {
                let mut h = self
                    .shared
                    .base_headers("application/json, text/event-stream")
                    .await?;
                session.apply(&mut h);
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

impl Shared {
    /// Reads one reply: a JSON body or an event stream, until the answer to `id`.
    /// Everything else the server sends goes to `incoming` (server requests are
    /// answered through `answer`).
    pub(super) async fn read_reply(
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
        let gathered = self.read_message(resp, "reply body").await?;
        self.reply_of(status, gathered, id, incoming, answer)
    }

    /// [`read_reply`](Self::read_reply) for a body already read whole.
    pub(super) fn reply_of(
        self: &Arc<Self>,
        status: StatusCode,
        gathered: mcp_runtime_core::http::Gathered,
        id: &Id,
        incoming: &Incoming,
        answer: Option<&Answerer>,
    ) -> Result<Reply> {
        if gathered.gather.is_none() && gathered.body.iter().all(u8::is_ascii_whitespace) {
            return Err(status_error(status, ""));
        }
        // What an error status's body says, if it is not JSON-RPC.
        let preview =
            (!status.is_success()).then(|| gathered.body.slice(..gathered.body.len().min(200)));
        let messages = match gathered.parse() {
            Ok(m) => m,
            Err(e) if status.is_success() => {
                return Err(Error::invalid_response(format!(
                    "the reply is not JSON-RPC: {e}"
                )))
            }
            Err(_) => {
                return Err(status_error(
                    status,
                    &String::from_utf8_lossy(preview.as_deref().unwrap_or_default()),
                ))
            }
        };
        let mut found = None;
        for m in messages {
            match m {
                Ok(Message::Response(r)) if !status.is_success() => {
                    if r.outcome.is_ok() {
                        // An error status and a result: the server says both; which
                        // is true is unknown.
                        return Err(status_error(
                            status,
                            "with a result in its body; which of the two is true is unknown",
                        )
                        .with_outcome_unknown());
                    }
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
    pub(super) fn parser(&self) -> sse::Parser {
        sse::Parser::new(self.config.max_message_size)
    }

    pub(super) async fn read_stream(
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

    pub(super) fn dispatch(
        self: &Arc<Self>,
        m: Message,
        incoming: &Incoming,
        answer: Option<&Answerer>,
    ) {
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
                // A request waiting on another stream (its own broke): it is answered.
                let waiter = lock(&self.waiting).remove(&r.id);
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(r);
                    }
                    None => {
                        tracing::debug!(origin = %self.origin, id = %r.id, "ignored a response to no pending request")
                    }
                }
            }
        }
    }

    pub(super) fn mcp_name(method: &str, params: &Value) -> Option<String> {
        let v = match crate::protocol::Method::of(method) {
            Some(crate::protocol::Method::ToolsCall | crate::protocol::Method::PromptsGet) => {
                params.get("name")
            }
            Some(crate::protocol::Method::ResourcesRead) => params.get("uri"),
            _ if method.starts_with("tasks/") => params.get("taskId"),
            _ => None,
        }?;
        v.as_str().map(crate::transport::headers::encode)
    }

    /// 2026-07-28: one POST per request.
    pub(super) async fn modern(
        self: &Arc<Self>,
        request: Request,
        cx: RequestContext,
    ) -> Result<Response> {
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
            let body = request.to_vec();
            let resp = self
                .send(Method::POST, &self.url, h, Some(body), cx.idempotent)
                .await?;
            match self.read_reply(resp, &request.id, &cx.incoming, None).await? {
                Reply::Answer(mut r) => {
                    if request.method == crate::protocol::Method::ServerDiscover.as_str() && r.outcome.is_ok() {
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
}
