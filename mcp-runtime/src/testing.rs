//! Test support: a scripted transport, so protocol paths (negotiation, input rounds,
//! pagination, cache, tasks) are tested without spawning a peer. Real servers are
//! tested in `tests/it`.
//!
//! A script sees each request (and how many came before it) and says what happens:
//! an answer, an error, silence, or an answer after a while.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::client::{Client, ClientBuilder};
use crate::error::Result;
use crate::jsonrpc::{ErrorObject, Notification, Request, Response};
use crate::transport::{RequestContext, Transport};
use crate::BoxFuture;

use mcp_runtime_core::lock;

type Script = dyn Fn(&Request, usize) -> Step + Send + Sync;

pub(crate) enum Step {
    Reply(Value),
    Fail(i64, Value),
    Hang,
    /// Answers after a while (a slow server).
    Late(Duration, Box<Step>),
}

pub(crate) struct Scripted {
    pub(crate) script: Box<Script>,
    pub(crate) seen: Arc<Mutex<Vec<Request>>>,
    /// What reached the transport, in order: each request's method, and `close`.
    pub(crate) log: Arc<Mutex<Vec<String>>>,
    /// Whether it mirrors arguments into `Mcp-Param-*` headers (as HTTP does).
    pub(crate) mirrors: bool,
    /// The headers the session computed for each request, in order.
    pub(crate) headers: SeenHeaders,
    /// Whether it answers every request (as HTTP does) rather than being a message
    /// stream (as stdio is).
    pub(crate) answers_every: bool,
}

impl Transport for Scripted {
    fn request(&self, request: Request, cx: RequestContext) -> BoxFuture<'_, Result<Response>> {
        lock(&self.headers).push(cx.headers.clone());
        let n = {
            let mut seen = lock(&self.seen);
            seen.push(request.clone());
            seen.len() - 1
        };
        lock(&self.log).push(request.method.clone());
        let mut step = (self.script)(&request, n);
        Box::pin(async move {
            while let Step::Late(after, next) = step {
                tokio::time::sleep(after).await;
                step = *next;
            }
            match step {
                Step::Reply(v) => Ok(Response {
                    id: request.id,
                    outcome: Ok(v),
                }),
                Step::Fail(code, data) => Ok(Response {
                    id: request.id,
                    outcome: Err(ErrorObject {
                        code,
                        message: "scripted".into(),
                        data: Some(data),
                    }),
                }),
                Step::Hang | Step::Late(..) => std::future::pending().await,
            }
        })
    }
    fn notify<'a>(&'a self, _n: Notification, _v: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn cancel<'a>(&'a self, _n: Notification, _v: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn close(&self) -> BoxFuture<'_, Result<()>> {
        lock(&self.log).push("close".into());
        Box::pin(async { Ok(()) })
    }
    fn mirrors_param_headers(&self) -> bool {
        self.mirrors
    }
    fn answers_every_request(&self) -> bool {
        self.answers_every
    }
}

pub(crate) fn scripted(
    builder: ClientBuilder,
    script: impl Fn(&Request, usize) -> Step + Send + Sync + 'static,
) -> (Client, Arc<Mutex<Vec<Request>>>) {
    let (client, (seen, _)) = scripted_log(builder, script);
    (client, seen)
}

/// What a scripted transport saw: each request, and its log of methods and closes.
type Seen = (Arc<Mutex<Vec<Request>>>, Arc<Mutex<Vec<String>>>);

/// [`scripted`], with the transport's log: each request's method and each `close`.
pub(crate) fn scripted_log(
    builder: ClientBuilder,
    script: impl Fn(&Request, usize) -> Step + Send + Sync + 'static,
) -> (Client, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::new(Mutex::new(Vec::new()));
    let t = Scripted {
        script: Box::new(script),
        seen: seen.clone(),
        log: log.clone(),
        mirrors: false,
        headers: Arc::default(),
        answers_every: false,
    };
    (builder.build(t).unwrap(), (seen, log))
}

/// The headers a scripted transport saw, per request.
pub(crate) type SeenHeaders = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// [`scripted_log`] over a transport that mirrors arguments into headers (as HTTP
/// does), with the headers the session computed for each request.
pub(crate) fn scripted_mirroring(
    builder: ClientBuilder,
    script: impl Fn(&Request, usize) -> Step + Send + Sync + 'static,
) -> (Client, Arc<Mutex<Vec<String>>>, SeenHeaders) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let headers: SeenHeaders = Arc::default();
    let t = Scripted {
        script: Box::new(script),
        seen: Arc::default(),
        log: log.clone(),
        mirrors: true,
        headers: headers.clone(),
        answers_every: false,
    };
    (builder.build(t).unwrap(), log, headers)
}

pub(crate) fn discover_ok() -> Value {
    json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
           "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "9"}}})
}
