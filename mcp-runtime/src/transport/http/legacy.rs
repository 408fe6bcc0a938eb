//! The legacy session wire (2025-03-26 … 2025-11-25): `initialize` and its session id,
//! the standalone GET stream, re-initializing an expired session, DELETE on close.

use super::connect::{insert, status_error};
use super::sessions::{LegacySession, SessionHeaders};
use super::state::{Detected, GetStream, Mode, Reply, Shared};
use super::streamable::{AnswerTarget, Answerer};
use crate::error::{Error, Result};
use crate::jsonrpc::{Id, Message, Notification, Request, Response};
use crate::transport::sse;
use crate::transport::{Incoming, RequestContext};
use http::{Method, StatusCode};
use mcp_runtime_core::lock;
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

impl Shared {
    /// The headers of the legacy session, or (before one starts) of `version`.
    pub(super) fn session_headers(&self, version: &str) -> Result<SessionHeaders> {
        Ok(self.session_now(version)?.0)
    }

    /// The headers of the legacy session (or, when there is none, of `version`), and
    /// whether the session was lost and not replaced: none, though one was started
    /// and the transport was not closed since (an attempt to replace it failed, or one
    /// is under way). One lock of the mode on a request's path.
    fn session_now(&self, version: &str) -> Result<(SessionHeaders, bool)> {
        let mode = lock(&self.mode);
        match &*mode {
            Mode::Streamable(s) => Ok((s.headers.clone(), false)),
            Mode::Fresh => {
                let lost = lock(&self.last_init).is_some();
                drop(mode);
                Ok((SessionHeaders::new(None, Some(version))?, lost))
            }
            Mode::Sse(_) => Ok((SessionHeaders::new(None, Some(version))?, false)),
        }
    }

    /// Legacy `initialize`: Streamable HTTP first, then HTTP+SSE.
    pub(super) async fn initialize(
        self: &Arc<Self>,
        request: Request,
        cx: RequestContext,
    ) -> Result<Response> {
        self.end_session(false).await;
        *lock(&self.last_init) = Some(request.params.clone());
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
        let body = request.to_vec();
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
            target: AnswerTarget::Post(SessionHeaders::new(session_id.as_deref(), None)?),
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
            let headers = SessionHeaders::new(session_id.as_deref(), Some(&version))?;
            let get_stream = self
                .clone()
                .spawn_get_stream(cx.incoming.clone(), headers.clone());
            *lock(&self.mode) = Mode::Streamable(LegacySession {
                session_id,
                headers,
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
    pub(super) fn spawn_get_stream(
        self: Arc<Self>,
        incoming: Incoming,
        session: SessionHeaders,
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
                session.apply(&mut h);
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
                    target: AnswerTarget::Post(session.clone()),
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
    pub(super) async fn get_stream_ready(&self) -> Result<()> {
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
    pub(super) async fn legacy(
        self: &Arc<Self>,
        request: Request,
        cx: RequestContext,
    ) -> Result<Response> {
        // The response may come on another stream than the request's own (the
        // standalone GET stream, when its reply stream broke): whichever brings it.
        let (tx, rx) = tokio::sync::oneshot::channel();
        lock(&self.waiting).insert(request.id.clone(), tx);
        let id = request.id.clone();
        let _forget = Forget {
            shared: self.clone(),
            id: id.clone(),
        };
        tokio::select! {
            r = self.legacy_on_its_stream(request, cx) => r,
            Ok(r) = rx => Ok(r),
        }
    }

    async fn legacy_on_its_stream(
        self: &Arc<Self>,
        request: Request,
        cx: RequestContext,
    ) -> Result<Response> {
        let mut reinitialized = false;
        loop {
            let (session, lost) = self.session_now(&cx.version)?;
            if lost && !reinitialized {
                // A lost session is being replaced (wait for the new one), or an
                // attempt to replace it failed (the server was still down): replace it
                // now. Never send a request with no session.
                self.session_lost(&session, &cx).await?;
                reinitialized = true;
                continue;
            }
            let mut h = self
                .base_headers("application/json, text/event-stream")
                .await?;
            session.apply(&mut h);
            let body = request.to_vec();
            let resp = self
                .send(Method::POST, &self.url, h, Some(body), cx.idempotent)
                .await?;
            let answerer = Answerer {
                shared: self.clone(),
                target: AnswerTarget::Post(session.clone()),
            };
            let status = resp.status();
            let lost = session.session.is_some() && !reinitialized;
            let mut reply = if lost && status == StatusCode::NOT_FOUND {
                // The session expired (or the server restarted): start a new one, once.
                self.session_lost(&session, &cx).await?;
                reinitialized = true;
                continue;
            } else if lost && status == StatusCode::BAD_REQUEST {
                // What many servers answer a session they do not know (the TypeScript
                // SDK's "Bad Request: No valid session ID provided"), though the
                // specification says 404. But a 400 is not proof the request went
                // unread: a server may run it and then answer 400 naming the session.
                let gathered = self.read_message(resp, "reply body").await?;
                match refusal(&gathered.body, &request.id) {
                    // The SDK's own words: refused before it was read. A new session,
                    // and the request once more.
                    Refusal::Unread => {
                        self.session_lost(&session, &cx).await?;
                        reinitialized = true;
                        continue;
                    }
                    // It names the session, but proves nothing: sent again only when
                    // that is harmless.
                    Refusal::Session if cx.idempotent => {
                        self.session_lost(&session, &cx).await?;
                        reinitialized = true;
                        continue;
                    }
                    Refusal::Session => {
                        // Not sent again; the next request gets a new session.
                        if let Err(e) = self.session_lost(&session, &cx).await {
                            tracing::debug!(origin = %self.origin, error = %e, "could not start a new session; the next request tries again");
                        }
                        let said =
                            String::from_utf8_lossy(&gathered.body[..gathered.body.len().min(200)])
                                .into_owned();
                        return Err(status_error(
                            status,
                            &format!(
                                "{}; it names the session, but nothing shows `{}` was not run",
                                said.trim(),
                                request.method
                            ),
                        )
                        .with_outcome_unknown());
                    }
                    // An answer to this very request (the server read it), or a 400
                    // about something else: the request's answer.
                    Refusal::Answer => {
                        self.reply_of(status, gathered, &request.id, &cx.incoming, Some(&answerer))?
                    }
                }
            } else {
                self.read_reply(resp, &request.id, &cx.incoming, Some(&answerer))
                    .await?
            };
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
                        session.apply(&mut h);
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

    /// The server no longer knows the session `sent` named: start a new one, unless
    /// another request already did since (many requests learn it at once).
    async fn session_lost(
        self: &Arc<Self>,
        sent: &SessionHeaders,
        cx: &RequestContext,
    ) -> Result<()> {
        let _replacing = self.reinit_gate.lock().await;
        if self.session_headers(&cx.version)?.session != sent.session {
            return Ok(());
        }
        self.reinitialize(cx).await
    }

    pub(super) async fn reinitialize(self: &Arc<Self>, cx: &RequestContext) -> Result<()> {
        let params = match &*lock(&self.mode) {
            Mode::Streamable(s) => Some(s.init_params.clone()),
            Mode::Fresh => lock(&self.last_init).clone(),
            Mode::Sse(_) => None,
        };
        let Some(params) = params else {
            return Err(Error::closed("the session expired"));
        };
        let n = self.reinit.fetch_add(1, Ordering::Relaxed);
        let request = Request {
            id: Id::String(format!("reinitialize-{n}")),
            method: crate::protocol::Method::Initialize.as_str().into(),
            params,
        };
        tracing::debug!(origin = %self.origin, "session expired (404); initializing a new one");
        let r = self.initialize(request, cx.clone()).await?;
        if let Err(e) = r.outcome {
            return Err(Error::protocol(e.code, e.message, e.data));
        }
        let session = self.session_headers(&cx.version)?;
        let mut h = self
            .base_headers("application/json, text/event-stream")
            .await?;
        session.apply(&mut h);
        let n = Notification {
            method: crate::protocol::Method::Initialized.as_str().into(),
            params: None,
        };
        self.post_message(&self.url, h, &Message::Notification(n), true, "")
            .await
    }

    pub(super) async fn end_session(&self, delete: bool) {
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

/// Takes a legacy request off the waiting list when it ends, however it ends.
struct Forget {
    shared: Arc<Shared>,
    id: Id,
}

impl Drop for Forget {
    fn drop(&mut self) {
        lock(&self.shared.waiting).remove(&self.id);
    }
}

/// What a 400 to a request in a legacy session says about that request.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The TypeScript SDK's refusal of a session it does not know: a JSON-RPC error
    /// -32000 "Bad Request: No valid session ID provided" (or "Server not
    /// initialized", "Mcp-Session-Id header is required"), with no id, a null id, or
    /// (server-everything copies the body's) this request's id. Its session check
    /// comes before anything reads the request: proof it was not run.
    Unread,
    /// Anything else that speaks of the session in its first kilobyte: maybe a lost
    /// session, maybe a server that ran the request first. Proves nothing.
    Session,
    /// The answer: a JSON-RPC response to this request's id (the server read it), or a
    /// 400 that does not speak of the session.
    Answer,
}

/// The words the TypeScript SDK (and the servers built on its examples, such as
/// server-everything) answer a session it does not know with, before reading the
/// request; each may come with the SDK's "Bad Request: " before it.
const UNREAD: [&str; 3] = [
    "No valid session ID provided",
    "Server not initialized",
    "Mcp-Session-Id header is required",
];

/// Reads a 400's body (see [`Refusal`]).
pub(super) fn refusal(body: &[u8], id: &Id) -> Refusal {
    if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(body) {
        if m.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
            && (m.contains_key("error") || m.contains_key("result"))
        {
            let ours = m
                .get("id")
                .and_then(|v| serde_json::from_value::<Id>(v.clone()).ok())
                .is_some_and(|i| &i == id);
            let none = matches!(m.get("id"), None | Some(Value::Null));
            let error = m.get("error");
            let code = error.and_then(|e| e.get("code")).and_then(Value::as_i64);
            let message = error
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .map(|t| t.strip_prefix("Bad Request: ").unwrap_or(t));
            if (none || ours)
                && code == Some(-32000)
                && message.is_some_and(|t| UNREAD.contains(&t))
            {
                return Refusal::Unread;
            }
            if ours {
                return Refusal::Answer;
            }
        }
    }
    if speaks_of_session(body) {
        Refusal::Session
    } else {
        Refusal::Answer
    }
}

/// Whether an error body (its first kilobyte) speaks of the session.
fn speaks_of_session(body: &[u8]) -> bool {
    body[..body.len().min(1024)]
        .windows(b"session".len())
        .any(|w| w.eq_ignore_ascii_case(b"session"))
}
