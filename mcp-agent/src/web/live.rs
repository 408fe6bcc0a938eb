//! `GET api/runs/{run}/events`: a run's stored events as server-sent events, one per
//! event, `id:` its number; a reconnect with `Last-Event-ID` goes on after it.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_core::Stream;
use serde::Deserialize;
use serde_json::json;

use super::api::visible;
use super::shapes;
use super::state::Web;
use crate::agent::{Principal, RunEvents};

#[derive(Deserialize)]
pub(super) struct After {
    after: Option<u64>,
}

pub(super) async fn events(
    State(web): State<Web>,
    Extension(who): Extension<Principal>,
    Path(run): Path<String>,
    Query(q): Query<After>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = visible(&web, &who, &web.tenants_of(&who), &run).await {
        return r;
    }
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .or(q.after);
    let stream = Events {
        inner: web.agent.watch(&run, last),
        done: false,
    };
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A run's watch, as SSE events: `{"seq", "event"}` each; an error ends the stream
/// with one `failure` event.
struct Events {
    inner: RunEvents,
    done: bool,
}

impl Stream for Events {
    type Item = Result<SseEvent, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        loop {
            return match Pin::new(&mut this.inner).poll_next(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(None) => {
                    this.done = true;
                    Poll::Ready(None)
                }
                Poll::Ready(Some(Ok(e))) => {
                    // Streamed text is not kept (and a watch does not carry it).
                    let Some(seq) = e.seq else { continue };
                    let data = shapes::event(seq, &e.event).to_string();
                    Poll::Ready(Some(Ok(SseEvent::default().id(seq.to_string()).data(data))))
                }
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    let data = json!({ "error": e.to_string() }).to_string();
                    Poll::Ready(Some(Ok(SseEvent::default().event("failure").data(data))))
                }
            };
        }
    }
}
