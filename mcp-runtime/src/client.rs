//! The session: one client talking to one server, in whichever protocol era it speaks.

use std::future::Future;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::model::{
    self, Completion, CompletionRef, GetPromptResult, Prompt, ReadResourceResult, Resource,
    ResourceTemplate, Tool,
};

mod builder;
mod cache;
mod call;
mod change;
mod details;
mod exchange;
mod handle;
mod handshake;
mod inbox;
mod index;
mod listen;
mod negotiate;
mod options;
mod parts;
#[cfg(test)]
mod props;
#[cfg(feature = "skills")]
mod skills;
mod task_status;
mod tasks;
#[cfg(test)]
mod tests;

pub use crate::protocol::{Era, LATEST_PROTOCOL_VERSION, LEGACY_VERSIONS, MODERN_VERSIONS};
use crate::protocol::{Method, TASKS_EXTENSION};
pub use builder::ClientBuilder;
use cache::{ttl_of, typed_items};
pub use call::CallTool;
pub(crate) use index::ToolEntry;
use listen::{listen_legacy, listen_modern};
pub use options::RequestOptions;

pub use change::Change;
pub use details::{ProtocolMode, ServerDetails};
pub use handle::Client;
use handle::Inner;
use mcp_runtime_core::lock;
pub use task_status::{TaskState, TaskStatus};
pub use tasks::{Started, Task};

impl Client {
    /// Starts building a client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The name of the server, as configured.
    pub fn name(&self) -> &str {
        &self.inner.settings.name
    }

    /// Starts the session now (it otherwise starts on the first request) and returns
    /// what the server said about itself.
    pub async fn connect(&self) -> Result<Arc<ServerDetails>> {
        self.inner.ensure().await
    }

    /// What the server said about itself, if the session has started.
    pub fn server(&self) -> Option<Arc<ServerDetails>> {
        self.inner.session.details()
    }

    /// The server's instructions for using it (starts the session if needed).
    pub async fn instructions(&self) -> Result<Option<String>> {
        Ok(self.connect().await?.instructions.clone())
    }

    /// The version the server reports for itself (starts the session if needed).
    pub async fn version(&self) -> Result<Option<String>> {
        let d = self.connect().await?;
        Ok(Some(d.info.version.clone()).filter(|v| !v.is_empty()))
    }

    /// Every tool the server offers (all pages). Cached while the server's `ttlMs`
    /// allows, until the server says the list changed.
    ///
    /// Over HTTP, a tool whose `x-mcp-header` annotations are invalid is left out, with
    /// a warning: the server could not be called correctly with it.
    pub async fn tools(&self) -> Result<Vec<Tool>> {
        self.inner.list_tools().await
    }

    /// Calls a tool. `arguments` is a JSON object (or `Value::Null` for none). Await the
    /// result, or set options on it first (timeout, progress, cancellation).
    pub fn call(&self, name: impl Into<String>, arguments: Value) -> CallTool<'_> {
        CallTool {
            client: self,
            name: name.into(),
            arguments,
            options: RequestOptions::default(),
            known: None,
        }
    }

    /// Every prompt the server offers (all pages).
    pub async fn prompts(&self) -> Result<Vec<Prompt>> {
        let items = self
            .inner
            .list(Method::PromptsList.as_str(), "prompts")
            .await?;
        Ok(typed_items(&self.inner.settings.name, "prompt", &items))
    }

    /// Fills in a prompt with arguments and returns its messages.
    pub async fn prompt<I, K, V>(&self, name: &str, arguments: I) -> Result<GetPromptResult>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let args: Map<String, Value> = arguments
            .into_iter()
            .map(|(k, v)| (k.into(), Value::String(v.into())))
            .collect();
        let mut params = Map::new();
        params.insert("name".into(), name.into());
        if !args.is_empty() {
            params.insert("arguments".into(), Value::Object(args));
        }
        let v = self
            .inner
            .call(
                Method::PromptsGet.as_str(),
                params,
                &RequestOptions::default(),
            )
            .await?;
        model::from_value(Method::PromptsGet.as_str(), v)
    }

    /// Every resource the server lists (all pages).
    pub async fn resources(&self) -> Result<Vec<Resource>> {
        let items = self
            .inner
            .list(Method::ResourcesList.as_str(), "resources")
            .await?;
        Ok(typed_items(&self.inner.settings.name, "resource", &items))
    }

    /// Every resource template the server offers (all pages).
    pub async fn resource_templates(&self) -> Result<Vec<ResourceTemplate>> {
        let items = self
            .inner
            .list(Method::ResourceTemplatesList.as_str(), "resourceTemplates")
            .await?;
        Ok(typed_items(
            &self.inner.settings.name,
            "resource template",
            &items,
        ))
    }

    /// Reads a resource. Cached while the server's `ttlMs` allows, until the server
    /// says it changed.
    pub async fn resource(&self, uri: &str) -> Result<ReadResourceResult> {
        let key = format!("resources/read {uri}");
        if let Some(hit) = self.inner.lists.get(&key) {
            if let Some(v) = hit.first() {
                return model::from_value(Method::ResourcesRead.as_str(), v.clone());
            }
        }
        let generation = self.inner.lists.mark();
        let mut params = Map::new();
        params.insert("uri".into(), uri.into());
        let v = self
            .inner
            .call(
                Method::ResourcesRead.as_str(),
                params,
                &RequestOptions::default(),
            )
            .await?;
        let ttl = ttl_of(&v);
        if ttl > 0 {
            self.inner
                .lists
                .put(key, generation, ttl, Arc::new(vec![v.clone()]));
        }
        model::from_value(Method::ResourcesRead.as_str(), v)
    }

    /// Reads an MCP App (the UI resource a tool's results are shown with, see
    /// [`CallToolResult::ui_resource`](crate::CallToolResult::ui_resource)) in one call: its HTML and how to frame it.
    /// Fails when the resource holds no HTML.
    pub async fn read_ui(&self, uri: &str) -> Result<crate::model::UiResource> {
        let read = self.resource(uri).await?;
        crate::model::UiResource::from_read(uri, &read).ok_or_else(|| {
            Error::invalid_response(format!(
                "{uri} holds no HTML ({} expected)",
                crate::model::MCP_APP_MIME_TYPE
            ))
        })
    }

    /// Suggests values for an argument of a prompt or resource template.
    /// `context` holds the values of arguments already chosen.
    pub async fn complete(
        &self,
        reference: CompletionRef,
        argument: &str,
        value: &str,
        context: &[(&str, &str)],
    ) -> Result<Completion> {
        let mut params = Map::new();
        params.insert("ref".into(), reference.to_value());
        params.insert("argument".into(), json!({"name": argument, "value": value}));
        if !context.is_empty() {
            let args: Map<String, Value> = context
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
                .collect();
            params.insert("context".into(), json!({ "arguments": args }));
        }
        let mut v = self
            .inner
            .call(
                Method::CompletionComplete.as_str(),
                params,
                &RequestOptions::default(),
            )
            .await?;
        let c = v.get_mut("completion").map(Value::take).ok_or_else(|| {
            Error::invalid_response("completion/complete result has no `completion`")
        })?;
        model::from_value(Method::CompletionComplete.as_str(), c)
    }

    /// Sends any request and returns its raw result, with the session's `_meta`,
    /// timeouts, progress and multi-round input handled. For methods this crate has no
    /// typed call for.
    pub async fn request(
        &self,
        method: &str,
        params: Map<String, Value>,
        options: RequestOptions,
    ) -> Result<Value> {
        self.inner.call(method, params, &options).await
    }

    /// Pings the server (servers before 2026-07-28; newer ones have no `ping`, and get a
    /// `server/discover` instead).
    pub async fn ping(&self) -> Result<()> {
        let d = self.inner.ensure().await?;
        let method = match d.era {
            Era::Legacy => Method::Ping.as_str(),
            Era::Modern => Method::ServerDiscover.as_str(),
        };
        self.inner
            .call(method, Map::new(), &RequestOptions::default())
            .await
            .map(|_| ())
    }

    /// Listens for the server's changes until [`close`](Self::close) (or until the last
    /// clone of the client is dropped), so `on_change` callbacks run as changes happen
    /// and cached lists follow the server. `resources` are URIs whose content changes
    /// to hear about; a later call replaces them. Returns once the server confirmed.
    ///
    /// 2026-07-28 servers announce changes only on a `subscriptions/listen` stream,
    /// which this keeps open and reopens when it breaks (after a restart too); once it
    /// is back, `on_change` runs for everything listened to, since changes made
    /// meanwhile are lost. Older servers announce list changes on their own; for them
    /// this subscribes to the resources (`resources/subscribe`), again after a restart.
    ///
    /// Without resources, does nothing for a server that announces no changes. Fails
    /// when the server cannot be reached, does not send updates for a resource, or has
    /// no way to send anything between requests (an older HTTP server without a
    /// standalone event stream): an error for which `is_unsupported()` is true, never
    /// a silent success.
    pub async fn listen(&self, resources: &[&str]) -> Result<()> {
        self.listen_for(resources, &[]).await
    }

    /// [`listen`](Self::listen) to resources and to tasks (by id, see [`Task::id`]):
    /// each status change of a task reaches `on_change` as [`Change::Task`], and wakes
    /// whoever [`wait`](Task::wait)s for it. After a reconnect, every listened task is
    /// reported with its current status. 2026-07-28 servers push task statuses on the
    /// listen stream (with the tasks extension declared); for older servers the
    /// listener asks at each task's poll interval (and takes the statuses they push).
    pub async fn listen_for(&self, resources: &[&str], tasks: &[&str]) -> Result<()> {
        self.life.stop_listener();
        let details = self.inner.ensure().await?;
        let uris: Vec<String> = resources.iter().map(|s| (*s).to_owned()).collect();
        let task_ids: Vec<String> = tasks.iter().map(|s| (*s).to_owned()).collect();
        let caps = &details.capabilities;
        let announces = caps.tools_list_changed()
            || caps.prompts_list_changed()
            || caps.resources_list_changed();
        if uris.is_empty() && task_ids.is_empty() && !announces {
            return Ok(());
        }
        if !task_ids.is_empty() {
            let speaks_tasks = match details.era {
                Era::Modern => self.inner.declares(TASKS_EXTENSION),
                Era::Legacy => caps.0.get("tasks").is_some_and(Value::is_object),
            };
            if !speaks_tasks {
                return Err(Error::unsupported(format!(
                    "{} sends no task updates{}",
                    self.inner.settings.name,
                    if details.era == Era::Modern {
                        " (declare the tasks extension, io.modelcontextprotocol/tasks)"
                    } else {
                        ""
                    }
                )));
            }
        }
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let inner = self.inner.clone();
        let task = match details.era {
            Era::Modern => tokio::spawn(listen_modern(
                inner,
                uris.clone(),
                task_ids.clone(),
                ready_tx,
            )),
            Era::Legacy => {
                if !uris.is_empty() && !caps.resources_subscribe() {
                    return Err(Error::unsupported(format!(
                        "{} does not send updates for {}",
                        self.inner.settings.name,
                        uris.join(", ")
                    )));
                }
                // Changes reach older servers' clients only on a channel open between
                // requests (an HTTP server's standalone event stream): make sure there is one.
                if !uris.is_empty() || announces {
                    self.inner.transport.listen_ready().await?;
                }
                tokio::spawn(listen_legacy(
                    inner,
                    uris.clone(),
                    task_ids.clone(),
                    ready_tx,
                ))
            }
        };
        *lock(&self.life.listener) = Some(task.abort_handle());
        let agreed = match ready_rx.await {
            Ok(Ok(agreed)) => agreed,
            Ok(Err(e)) => {
                self.life.stop_listener();
                return Err(e);
            }
            Err(_) => {
                self.life.stop_listener();
                return Err(Error::closed(
                    "the listener stopped before the server confirmed",
                ));
            }
        };
        let confirmed: Vec<&str> = agreed
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let confirmed_tasks: Vec<&str> = agreed
            .get("taskIds")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let missing: Vec<&str> = uris
            .iter()
            .map(String::as_str)
            .filter(|u| !confirmed.contains(u))
            .chain(
                task_ids
                    .iter()
                    .map(String::as_str)
                    .filter(|t| !confirmed_tasks.contains(t)),
            )
            .collect();
        if !missing.is_empty() {
            self.life.stop_listener();
            return Err(Error::unsupported(format!(
                "{} does not send updates for {}",
                self.inner.settings.name,
                missing.join(", ")
            )));
        }
        Ok(())
    }

    /// Stops listening (see [`listen`](Self::listen)).
    pub fn stop_listening(&self) {
        self.life.stop_listener();
    }

    /// True while a [`listen`](Self::listen) of this client runs (a new `listen`
    /// replaces it).
    pub fn is_listening(&self) -> bool {
        lock(&self.life.listener)
            .as_ref()
            .is_some_and(|h| !h.is_finished())
    }

    /// The OAuth authorization of this server (HTTP servers configured with
    /// [`HttpConfig::oauth`](crate::HttpConfig::oauth)): for web applications that send
    /// the user to the authorization server themselves.
    #[cfg(feature = "oauth")]
    pub fn authorization(&self) -> Result<crate::auth::Authorization<'_>> {
        let http = self.inner.oauth.as_ref();
        http.and_then(|h| h.authorization()).ok_or_else(|| {
            Error::config(format!(
                "{} is not configured for OAuth",
                self.inner.settings.name
            ))
        })
    }

    /// Tells the session what a declaration's snapshot says of the server's tools
    /// (their header arguments, UI resources, task support), so a call on a fresh
    /// session needs no tool list first. The server's own list, once fetched, wins.
    #[cfg(any(feature = "stdio", feature = "http"))]
    pub(crate) fn know_tools(&self, tools: &[Tool]) {
        self.inner.tool_index.seed(
            &self.inner.settings.name,
            tools,
            self.inner.transport.mirrors_param_headers(),
        );
    }

    /// Closes the connection: stops a stdio server's process. The next request
    /// connects again.
    pub async fn close(&self) -> Result<()> {
        self.life.stop_listener();
        let _connecting = self.inner.session.connecting().await;
        self.inner.reset();
        self.inner.transport.close().await
    }
}

impl Inner {
    fn next_id(&self) -> i64 {
        self.session.next_id()
    }

    fn changed(&self, change: Change) {
        self.listeners.changed(&change);
    }
}

#[allow(dead_code)]
fn _assert_send(c: &Client) -> impl Future<Output = Result<Vec<Tool>>> + Send + '_ {
    c.tools()
}
