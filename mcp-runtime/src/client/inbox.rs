//! What the server sends unasked: notifications and, before 2026-07-28, requests.

use super::change::Change;
use super::handle::Inner;
use super::parts::Settings;
use crate::jsonrpc::{ErrorObject, Id, Notification, Request, Response};
use crate::model::{LogMessage, Progress};
use crate::protocol::{code, Method};
use crate::transport::{BoxFuture, IncomingHandler};
use serde_json::Value;
use std::sync::Weak;

pub(super) struct Inbox {
    pub(super) inner: Weak<Inner>,
}

impl IncomingHandler for Inbox {
    fn notification(&self, n: Notification) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let params = n.params.unwrap_or(Value::Null);
        let method = Method::of(&n.method);
        match method {
            Some(Method::Progress) => {
                let token: Option<Id> = params
                    .get("progressToken")
                    .cloned()
                    .and_then(|t| serde_json::from_value(t).ok());
                let progress = Progress {
                    progress: params
                        .get("progress")
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0),
                    total: params.get("total").and_then(Value::as_f64),
                    message: params
                        .get("message")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                };
                if !token.is_some_and(|t| inner.progress.report(&t, &progress)) {
                    tracing::debug!(server = %inner.settings.name, "progress for no active request ignored")
                }
            }
            Some(Method::LogMessage) => log_message(&inner.settings, &params),
            Some(Method::ToolsListChanged) => {
                inner.invalidate("tools/");
                inner.tool_index.stale();
                inner.changed(Change::Tools);
            }
            Some(Method::PromptsListChanged) => {
                inner.invalidate("prompts/");
                inner.changed(Change::Prompts);
            }
            Some(Method::ResourcesListChanged) => {
                inner.invalidate(Method::ResourcesList.as_str());
                inner.invalidate("resources/templates/");
                inner.changed(Change::Resources);
            }
            Some(Method::ResourceUpdated) => {
                if let Some(uri) = params.get("uri").and_then(Value::as_str) {
                    inner.invalidate(&format!("resources/read {uri}"));
                    inner.changed(Change::Resource(uri.to_owned()));
                }
            }
            Some(Method::SubscriptionsAcknowledged) => {
                let id = subscription_id(&params);
                let notifications = params.get("notifications").cloned().unwrap_or(Value::Null);
                if !id.is_some_and(|id| inner.listeners.acknowledged(&id, notifications)) {
                    tracing::debug!(server = %inner.settings.name, "acknowledgement for no listen request ignored")
                }
            }
            // `notifications/tasks` is how drafts of the tasks extension named it.
            Some(Method::TaskStatus) => {
                inner.task_notified(&params);
            }
            None if n.method == "notifications/tasks" => {
                inner.task_notified(&params);
            }
            Some(Method::Cancelled) => {
                // A server ends a listen stream on stdio this way.
                let id: Option<Id> = params
                    .get("requestId")
                    .cloned()
                    .and_then(|i| serde_json::from_value(i).ok());
                if let Some(id) = id {
                    inner.listeners.ended(&id);
                }
            }
            _ => {
                tracing::debug!(server = %inner.settings.name, method = %n.method, "notification ignored")
            }
        }
    }

    fn request(&self, request: Request) -> BoxFuture<'static, Response> {
        let inner = self.inner.upgrade();
        Box::pin(async move {
            let outcome = match inner {
                Some(inner) => inner.answer_input(&request.method, request.params).await,
                None => Err(ErrorObject::new(code::INTERNAL_ERROR, "the client is gone")),
            };
            Response {
                id: request.id,
                outcome,
            }
        })
    }

    fn disconnected(&self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.reset();
        }
    }
}

pub(super) fn subscription_id(params: &Value) -> Option<Id> {
    params
        .get("_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/subscriptionId"))
        .cloned()
        .and_then(|i| serde_json::from_value(i).ok())
}

pub(super) fn log_message(settings: &Settings, params: &Value) {
    let server = settings.name.as_str();
    let level = params
        .get("level")
        .and_then(Value::as_str)
        .unwrap_or("info");
    let logger = params.get("logger").and_then(Value::as_str).unwrap_or("");
    let data = params.get("data").cloned().unwrap_or(Value::Null);
    let text = match &data {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    const T: &str = "mcp_runtime::server_log";
    match level {
        "debug" => tracing::debug!(target: T, server, logger, "{text}"),
        "info" | "notice" => tracing::info!(target: T, server, logger, level, "{text}"),
        "warning" => tracing::warn!(target: T, server, logger, "{text}"),
        _ => tracing::error!(target: T, server, logger, level, "{text}"),
    }
    if !settings.on_log.is_empty() {
        let message = LogMessage {
            level: params
                .get("level")
                .and_then(Value::as_str)
                .and_then(|l| l.parse().ok()),
            logger: params
                .get("logger")
                .and_then(Value::as_str)
                .map(str::to_owned),
            data,
        };
        for f in &settings.on_log {
            f(&message);
        }
    }
}
