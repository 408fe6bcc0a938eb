//! Listening for changes: the 2026-07-28 `subscriptions/listen` stream, the legacy
//! GET stream and subscriptions, and task status polling.

use super::change::{Change, ListenSlot};
use super::handle::Inner;
use super::options::RequestOptions;
use crate::error::{Error, Result};
use crate::jsonrpc::{Id, Request};
use crate::protocol::Era;
use crate::protocol::Method;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

pub(super) type Ready = tokio::sync::oneshot::Sender<Result<Value>>;

pub(super) const LISTEN_BACKOFF: Duration = Duration::from_secs(1);

/// A listen stream has no timeout of its own: it stays open until it ends.
pub(super) const LISTEN_FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

pub(super) struct ListenGuard<'a> {
    inner: &'a Inner,
    id: Id,
}

impl Drop for ListenGuard<'_> {
    fn drop(&mut self) {
        self.inner.listeners.close(&self.id);
    }
}

pub(super) async fn listen_modern(
    inner: Arc<Inner>,
    uris: Vec<String>,
    tasks: Vec<String>,
    ready: Ready,
) {
    let mut ready = Some(ready);
    loop {
        let outcome = listen_once(&inner, &uris, &tasks, &mut ready).await;
        if let Err(e) = outcome {
            match ready.take() {
                Some(r) => {
                    let _ = r.send(Err(e));
                    return;
                }
                None => {
                    tracing::debug!(server = %inner.settings.name, error = %e, "listen stream ended; reopening")
                }
            }
        }
        tokio::time::sleep(LISTEN_BACKOFF).await;
    }
}

/// One `subscriptions/listen` request, from acknowledgement to its end.
pub(super) async fn listen_once(
    inner: &Arc<Inner>,
    uris: &[String],
    tasks: &[String],
    ready: &mut Option<Ready>,
) -> Result<()> {
    let details = inner.ensure().await?;
    if details.era != Era::Modern {
        return Err(Error::unsupported(
            "the server no longer speaks the 2026-07-28 protocol",
        ));
    }
    let id = Id::Number(inner.next_id());
    let (ack_tx, ack_rx) = tokio::sync::oneshot::channel();
    let (end_tx, end_rx) = tokio::sync::oneshot::channel();
    inner.listeners.open(
        id.clone(),
        ListenSlot {
            ack: Some(ack_tx),
            ended: Some(end_tx),
        },
    );
    let _guard = ListenGuard {
        inner,
        id: id.clone(),
    };
    let mut filter = Map::new();
    for key in [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ] {
        filter.insert(key.into(), Value::Bool(true));
    }
    if !uris.is_empty() {
        filter.insert("resourceSubscriptions".into(), json!(uris));
    }
    if !tasks.is_empty() {
        filter.insert("taskIds".into(), json!(tasks));
    }
    let mut params = Map::new();
    params.insert(
        "_meta".into(),
        Value::Object(inner.modern_meta(&details.protocol_version, None)),
    );
    params.insert("notifications".into(), Value::Object(filter));
    let request = Request {
        id,
        method: Method::SubscriptionsListen.as_str().into(),
        params: Value::Object(params),
    };
    let opts = RequestOptions {
        timeout: Some(LISTEN_FOREVER),
        max_timeout: Some(LISTEN_FOREVER),
        ..Default::default()
    };
    let stream = inner.exchange(&details.protocol_version, request, &opts, None, true);
    tokio::pin!(stream);
    tokio::select! {
        agreed = ack_rx => {
            let agreed = agreed.unwrap_or(Value::Null);
            match ready.take() {
                Some(r) => {
                    let _ = r.send(Ok(agreed));
                }
                None => {
                    // Back after a break: whatever changed meanwhile was not heard.
                    inner.invalidate_all();
                    inner.changed(Change::Tools);
                    inner.changed(Change::Prompts);
                    inner.changed(Change::Resources);
                    for uri in uris {
                        inner.changed(Change::Resource(uri.clone()));
                    }
                    report_tasks(inner, tasks);
                }
            }
        }
        out = &mut stream => {
            out?;
            return Err(Error::invalid_response("the listen request ended before it was acknowledged"));
        }
    }
    tokio::select! {
        out = &mut stream => out.map(|_| ()),
        _ = end_rx => Ok(()),
    }
}

/// Reports the current status of each task (after a reconnect: changes made while
/// disconnected were not heard).
pub(super) fn report_tasks(inner: &Arc<Inner>, tasks: &[String]) {
    if tasks.is_empty() {
        return;
    }
    let (inner, tasks) = (inner.clone(), tasks.to_vec());
    tokio::spawn(async move {
        for id in tasks {
            match inner.get_task(&id).await {
                Ok((status, _)) => inner.report_task(status, true),
                Err(e) => {
                    tracing::debug!(server = %inner.settings.name, task = %id, error = %e, "could not read a listened task")
                }
            }
        }
    });
}

/// For servers that push no task statuses: asks at each task's poll interval, and
/// reports each change (of state or message) until the task ends.
pub(super) async fn poll_tasks(inner: &Arc<Inner>, tasks: &[String]) {
    let mut ended: Vec<&String> = Vec::new();
    let mut wait = Duration::from_secs(1);
    loop {
        let mut open = false;
        for id in tasks {
            if ended.contains(&id) {
                continue;
            }
            open = true;
            match inner.get_task(id).await {
                Ok((status, _)) => {
                    if let Some(p) = status.poll_interval {
                        wait = p.max(Duration::from_millis(100));
                    }
                    if status.state.is_terminal() {
                        ended.push(id);
                    }
                    inner.report_task(status, false);
                }
                Err(e) => {
                    tracing::debug!(server = %inner.settings.name, task = %id, error = %e, "could not read a listened task")
                }
            }
        }
        if !open {
            return std::future::pending().await;
        }
        tokio::time::sleep(wait).await;
    }
}

pub(super) async fn listen_legacy(
    inner: Arc<Inner>,
    uris: Vec<String>,
    tasks: Vec<String>,
    ready: Ready,
) {
    let mut ready = Some(ready);
    loop {
        // Register for the next reset before subscribing, so none is missed.
        let reset = inner.session.was_reset();
        tokio::pin!(reset);
        reset.as_mut().enable();
        let mut outcome = Ok(());
        for uri in &uris {
            let mut params = Map::new();
            params.insert("uri".into(), Value::String(uri.clone()));
            if let Err(e) = inner
                .call(
                    Method::ResourcesSubscribe.as_str(),
                    params,
                    &RequestOptions::default(),
                )
                .await
            {
                outcome = Err(e);
                break;
            }
        }
        match (outcome, ready.take()) {
            (Ok(()), Some(r)) => {
                let _ = r.send(Ok(
                    json!({ "resourceSubscriptions": uris, "taskIds": tasks }),
                ));
            }
            (Err(e), Some(r)) => {
                let _ = r.send(Err(e));
                return;
            }
            (Ok(()), None) => {
                for uri in &uris {
                    inner.changed(Change::Resource(uri.clone()));
                }
                report_tasks(&inner, &tasks);
            }
            (Err(e), None) => {
                tracing::debug!(server = %inner.settings.name, error = %e, "resubscribing failed; retrying");
                tokio::time::sleep(LISTEN_BACKOFF).await;
                continue;
            }
        }
        // Wait for the session to break (a restart), then subscribe again once the
        // next session is up. Meanwhile, ask about the tasks.
        tokio::select! {
            () = reset => {}
            () = poll_tasks(&inner, &tasks) => {}
        }
        loop {
            tokio::time::sleep(LISTEN_BACKOFF).await;
            if inner.ensure().await.is_ok() {
                break;
            }
        }
    }
}
