//! A declared server used as an object: the runtime model behind `#[mcp(...)]` and
//! the inline [`Mcp::builder`].
//!
//! An [`Mcp`] knows how to reach its server and how to shape what a model sees of it:
//! which tools (`only`, `except`), under which names (`prefix`, renames), with which
//! arguments fixed, with which results wrapped, which need approval and which are
//! deferred, plus tools of your own. It connects on first use.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::client::{Client, ToolEntry};
use crate::error::{Error, Result};
use crate::model::{
    Completion, CompletionRef, GetPromptResult, Prompt, ReadResourceResult, Resource,
    ResourceTemplate, Tool,
};
use crate::transport::{BoxFuture, Transport};

mod builder;
mod callbacks;
pub(crate) mod calls;
mod connect;
mod declaration;
mod mcp;
mod shape;
mod template;
#[cfg(test)]
mod tests;
mod tool;
mod typed;

pub(crate) use crate::snapshot::did_you_mean;

use builder::check_unique;
pub use builder::McpBuilder;
use connect::Connect;
pub use connect::Context;
pub use declaration::Declaration;
pub use mcp::{LocalTool, Mcp};
use mcp::{ToolMap, WeakMcp};
pub use shape::{ArgValue, DriftPolicy, ToolShape};
pub use template::expand_template;
pub use tool::McpTool;
use tool::{Owner, Run, ServerCall, Target};
pub use typed::Typed;

use mcp_runtime_core::lock;

impl Mcp {
    /// Declares a server inline (without writing a struct).
    pub fn builder(name: impl Into<String>) -> McpBuilder {
        McpBuilder {
            name: name.into(),
            connect: Connect::Missing,
            directory: None,
            env: Vec::new(),
            headers: Vec::new(),
            bearer: None,
            timeout: None,
            log_level: None,
            input_kinds: None,
            extensions: Vec::new(),
            only: None,
            except: Vec::new(),
            prefix: None,
            shapes: Vec::new(),
            local: Vec::new(),
            approvals: Vec::new(),
            defer: None,
            after_change: Vec::new(),
            after_progress: Vec::new(),
            before_input: Vec::new(),
            context: Context::default(),
            snapshot: None,
            drift: DriftPolicy::Warn,
            oauth: None,
            oauth_with: None,
            max_message_size: None,
            inherit_env: Vec::new(),
            inherit_all_env: false,
            errors: Vec::new(),
        }
    }

    /// Declares the server `name` from a configuration file its users already keep:
    /// Claude Code's or Cursor's `.mcp.json` (`mcpServers`) or VS Code's
    /// `.vscode/mcp.json` (`servers`), with `${VAR}`, `${VAR:-default}`, `${env:VAR}`,
    /// `${workspaceFolder}` and `${userHome}` expanded from this process's environment
    /// (see [`crate::config`]). Returns the builder, so more can be set
    /// before [`build`](McpBuilder::build):
    ///
    /// ```no_run
    /// # fn main() -> mcp_runtime::Result<()> {
    /// let github = mcp_runtime::Mcp::from_config_file(".mcp.json", "github")?
    ///     .requires_approval(["create_issue"])
    ///     .build()?;
    /// println!("{} declared from .mcp.json", github.name());
    /// # Ok(()) }
    /// ```
    ///
    /// The file is used as given: an application that looks for one on its own should
    /// keep to its project and skip files others can write, as
    /// [`crate::config::locate`] does. A stdio server gets the variables of
    /// its `env` on top of the safe default set, nothing else of this process's
    /// environment. A file that cannot be read, or a server it lacks or describes
    /// wrongly (a variable that is not set, say) is an error for which
    /// [`Error::is_config`](crate::Error::is_config) is true, saying what to fix.
    pub fn from_config_file(path: impl AsRef<std::path::Path>, name: &str) -> Result<McpBuilder> {
        use mcp_runtime_core::config::{ConfigFile, ServerConfig};
        let server = ConfigFile::read(path.as_ref())
            .and_then(|f| f.server(name))
            .map_err(|e| Error::config(e.to_string()))?;
        Ok(match server {
            ServerConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut b = Mcp::builder(name).command(std::iter::once(command).chain(args));
                for (k, v) in env {
                    b = b.env(k, v);
                }
                if let Some(dir) = cwd {
                    b = b.directory(dir.display().to_string());
                }
                b
            }
            ServerConfig::Http { url, headers } => {
                let mut b = Mcp::builder(name).url(url);
                for (k, v) in headers {
                    b = b.header(k, v);
                }
                b
            }
            other => {
                return Err(Error::config(format!(
                    "server `{name}`: this version cannot start {other:?}"
                )))
            }
        })
    }

    /// The name that identifies this server (the snake_case of a declared struct).
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// A digest of which server this is and how it is started or reached (see
    /// [`crate::digest`]): [`config_fingerprint_keyed`](Self::config_fingerprint_keyed)
    /// with an empty key. Two configurations that start or reach a server differently —
    /// another program, argument, folder, URL, environment value or header value — have
    /// different fingerprints: an agent binds a person's approval to it.
    ///
    /// No value is in it in clear, but with an empty key anyone can compute the digest
    /// of a guess: a low-entropy environment or header value (a short tenant id, a
    /// database URL that follows a pattern) could be confirmed from a stored
    /// fingerprint. An application that stores fingerprints should key them
    /// ([`config_fingerprint_keyed`](Self::config_fingerprint_keyed)).
    pub fn config_fingerprint(&self) -> String {
        self.config_fingerprint_keyed(b"")
    }

    /// A digest of which server this is and how it is started or reached, with every
    /// environment and header value keyed by `key` (see [`crate::digest`]). It covers,
    /// for a stdio server, its program, arguments and working directory, the names of
    /// the variables it inherits and whether it inherits the whole environment, and for
    /// each variable set ([`env`](McpBuilder::env)) its name and the HMAC-SHA-256 of
    /// its value under `key`; for an HTTP server, its URL without userinfo or query,
    /// the HMAC-SHA-256 of its query (a query may carry a tenant or a key), each
    /// static header's name and the HMAC-SHA-256 of its value, and whether a bearer
    /// token is configured; for a custom transport, the server's name. A value
    /// computed at start or per request ([`env_with`](McpBuilder::env_with),
    /// [`header_with`](McpBuilder::header_with)) counts by its name only, and the
    /// bearer token never (it rotates; it is not part of which server this is).
    ///
    /// Never a value in clear; the same configuration and key give the same
    /// fingerprint in every process, and two keys give two fingerprints.
    pub fn config_fingerprint_keyed(&self, key: &[u8]) -> String {
        #[cfg(not(any(feature = "stdio", feature = "http")))]
        let _ = key;
        let described = match &self.spec.connect {
            #[cfg(feature = "stdio")]
            Connect::Stdio(c) => c.fingerprint(key),
            #[cfg(feature = "http")]
            Connect::Http(c) => c.fingerprint(key),
            Connect::Custom(_) => serde_json::json!({"kind": "custom", "name": self.spec.name}),
            Connect::Missing => serde_json::json!({"kind": "none"}),
        };
        crate::digest::sha256_json(&described)
    }

    /// The session underneath (connecting happens on its first request).
    pub fn client(&self) -> Result<&Client> {
        let made = self.client.get_or_init(|| {
            let builder = lock(&self.spec.client)
                .take()
                .ok_or("the client was already built")?;
            let built = match &self.spec.connect {
                #[cfg(feature = "stdio")]
                Connect::Stdio(c) => builder.stdio((**c).clone()),
                #[cfg(feature = "http")]
                Connect::Http(c) => {
                    #[allow(unused_mut)]
                    let mut c = c.as_ref().clone();
                    #[cfg(feature = "oauth")]
                    if let Some(make) = &self.spec.oauth_with {
                        if let Some(o) = make() {
                            c = c.oauth(o);
                        }
                    }
                    builder.http(c)
                }
                Connect::Custom(make) => make().and_then(|t| builder.build(BoxedTransport(t))),
                Connect::Missing => Err(Error::config("no url, command or transport")),
            };
            let built = built.map_err(|e| e.config_detail())?;
            if let Some(snapshot) = &self.spec.snapshot {
                built.know_tools(snapshot);
            }
            Ok(built)
        });
        made.as_ref().map_err(|e| Error::config(e.clone()))
    }

    /// The tools a model sees, shaped by `only`, `except`, `prefix` and the tool
    /// declarations, followed by your own tools. Fetched once; fetched again after the
    /// server says its list changed, or after a call fails because a tool is gone. Tools
    /// only an MCP App's UI may call are in the list, flagged
    /// [`app_only`](McpTool::app_only).
    ///
    /// Fails with a configuration error when a declaration names a tool the server does
    /// not offer.
    pub async fn tools(&self) -> Result<Vec<McpTool>> {
        Ok(self.tool_map().await?.list.to_vec())
    }

    /// The same tools as [`tools`](Self::tools), shared instead of copied: the same
    /// `Arc` is returned until the list changes (the server says so, or a call finds a
    /// tool gone), so [`Arc::ptr_eq`] with an earlier one tells whether anything
    /// changed without comparing the tools.
    pub async fn tool_list(&self) -> Result<Arc<[McpTool]>> {
        Ok(self.tool_map().await?.list.clone())
    }

    /// The shaped tools, listed once and kept until the server's tools change. Each
    /// is resolved here, once: its calls look nothing up.
    async fn tool_map(&self) -> Result<Arc<ToolMap>> {
        if let Some(t) = lock(&self.tools).clone() {
            return Ok(t);
        }
        let server_tools = self.client()?.tools().await?;
        self.check_declarations(&server_tools)?;
        self.check_drift(&server_tools)?;
        let list = self.shape(server_tools)?;
        // The names a model sees, then the server's where no model-facing name is the
        // same: one map, one lookup per call by name.
        let mut by_name = HashMap::with_capacity(list.len() * 2);
        for (i, t) in list.iter().enumerate() {
            by_name.insert(t.name.clone(), i);
        }
        for (i, t) in list.iter().enumerate() {
            if let Some(s) = &t.server_name {
                by_name.entry(s.clone()).or_insert(i);
            }
        }
        self.redeclare(&list);
        let map = Arc::new(ToolMap {
            list: list.into(),
            by_name,
        });
        *lock(&self.tools) = Some(map.clone());
        Ok(map)
    }

    /// The snapshot's tools the typed methods call, resolved again from the server's
    /// list (a tool the list does not have keeps what the snapshot said).
    fn redeclare(&self, list: &[McpTool]) {
        if self.spec.declared.is_empty() {
            return;
        }
        let live: HashMap<&str, &Arc<ServerCall>> = list
            .iter()
            .filter_map(|t| match &t.target.as_deref()?.run {
                Run::Server(c) => Some((c.name.as_str(), c)),
                Run::Local(_) => None,
            })
            .collect();
        for slot in &self.spec.declared {
            let mut slot = lock(slot);
            if let Some(c) = live.get(slot.name.as_str()) {
                *slot = Arc::clone(c);
            }
        }
    }

    fn downgrade(&self) -> WeakMcp {
        WeakMcp {
            spec: Arc::downgrade(&self.spec),
            client: Arc::downgrade(&self.client),
            tools: Arc::downgrade(&self.tools),
        }
    }

    fn check_declarations(&self, tools: &[Tool]) -> Result<()> {
        let spec = &self.spec;
        let offered: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let mut named: Vec<(&str, &str)> = Vec::new();
        for n in spec.only.iter().flatten() {
            named.push(("only", n));
        }
        for n in &spec.except {
            named.push(("except", n));
        }
        for s in &spec.shapes {
            named.push(("tool", &s.name));
        }
        for a in spec.approvals.iter() {
            for n in a.names.iter().flatten() {
                named.push(("requires_approval", n));
            }
        }
        for n in spec.defer.iter().flatten() {
            named.push(("defer", n));
        }
        let locals: Vec<String> = spec.local.iter().map(|l| l.definition().name).collect();
        let mut problems = Vec::new();
        for (setting, name) in named {
            if offered.contains(&name) || locals.iter().any(|l| l == name) {
                continue;
            }
            let hint = did_you_mean(name, offered.iter().copied())
                .map(|m| format!(" (did you mean `{m}`?)"))
                .unwrap_or_default();
            problems.push(format!(
                "`{setting}` names `{name}`, which {} does not offer{hint}",
                spec.name
            ));
        }
        for s in &spec.shapes {
            if let Some(tool) = tools.iter().find(|t| t.name == s.name) {
                for (k, _) in &s.fixed {
                    let known = tool
                        .input_schema
                        .get("properties")
                        .and_then(|p| p.get(k))
                        .is_some();
                    if !known {
                        let args = tool
                            .input_schema
                            .get("properties")
                            .and_then(Value::as_object)
                            .map(|p| p.keys().map(String::as_str).collect::<Vec<_>>())
                            .unwrap_or_default();
                        let hint = did_you_mean(k, args.iter().copied())
                            .map(|m| format!(" (did you mean `{m}`?)"))
                            .unwrap_or_default();
                        problems.push(format!(
                            "fixed argument `{k}` is not an argument of `{}`{hint}",
                            s.name
                        ));
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::config(problems.join("; ")))
        }
    }

    fn check_drift(&self, live: &[Tool]) -> Result<()> {
        let Some(snapshot) = &self.spec.snapshot else {
            return Ok(());
        };
        if self.spec.drift == DriftPolicy::Ignore {
            return Ok(());
        }
        let mut drift = Vec::new();
        for old in snapshot {
            match live.iter().find(|t| t.name == old.name) {
                None => drift.push(format!("tool `{}` was removed", old.name)),
                Some(new) if new.input_schema != old.input_schema => {
                    drift.push(format!("the arguments of `{}` changed", old.name))
                }
                Some(new) if new.output_schema != old.output_schema => {
                    drift.push(format!("the output of `{}` changed", old.name))
                }
                Some(_) => {}
            }
        }
        if drift.is_empty() {
            return Ok(());
        }
        let msg = format!(
            "{} differs from its snapshot: {}; refresh it with `mcp snapshot`",
            self.spec.name,
            drift.join(", ")
        );
        match self.spec.drift {
            DriftPolicy::Error => Err(Error::config(msg)),
            _ => {
                tracing::warn!(server = %self.spec.name, "{msg}");
                Ok(())
            }
        }
    }

    fn shape(&self, tools: Vec<Tool>) -> Result<Vec<McpTool>> {
        let spec = &self.spec;
        let owner: Arc<dyn Owner> = Arc::new(self.downgrade());
        let target = |run| {
            Some(Arc::new(Target {
                server: spec.name.clone(),
                owner: owner.clone(),
                run,
            }))
        };
        let mut out = Vec::new();
        for tool in tools {
            if spec.only.as_ref().is_some_and(|o| !o.contains(&tool.name))
                || spec.except.contains(&tool.name)
            {
                continue;
            }
            let shape = spec.shapes.iter().find(|s| s.name == tool.name);
            let name = self.model_name(&tool.name);
            let mut input_schema = tool.input_schema.clone();
            if let Some(shape) = shape {
                for (k, _) in &shape.fixed {
                    if let Some(props) = input_schema
                        .get_mut("properties")
                        .and_then(Value::as_object_mut)
                    {
                        props.shift_remove(k);
                    }
                    if let Some(req) = input_schema
                        .get_mut("required")
                        .and_then(Value::as_array_mut)
                    {
                        req.retain(|r| r.as_str() != Some(k));
                    }
                }
            }
            let deferred = spec
                .defer
                .as_ref()
                .is_some_and(|d| d.is_empty() || d.contains(&tool.name));
            let call = ServerCall::new(
                tool.name.clone(),
                shape,
                Some(ToolEntry::of_definition(&tool)),
            );
            out.push(McpTool {
                name,
                description: shape
                    .and_then(|s| s.description.clone())
                    .or_else(|| tool.description.clone()),
                input_schema,
                deferred,
                app_only: tool.is_app_only(),
                server_name: Some(tool.name.clone()),
                definition: Some(tool),
                approvals: spec.approvals.clone(),
                fixed: shape.and_then(ToolShape::fixed_description),
                target: target(Run::Server(Arc::new(call))),
            });
        }
        for (i, local) in spec.local.iter().enumerate() {
            let def = local.definition();
            let deferred = spec
                .defer
                .as_ref()
                .is_some_and(|d| d.is_empty() || d.contains(&def.name));
            out.push(McpTool {
                name: def.name.clone(),
                server_name: None,
                description: def.description.clone(),
                input_schema: def.input_schema.clone(),
                deferred,
                app_only: false,
                definition: Some(def),
                approvals: spec.approvals.clone(),
                fixed: None,
                target: target(Run::Local(i)),
            });
        }
        check_unique(&spec.name, &out)?;
        Ok(out)
    }

    /// The name a model sees for the server's tool `name`: its rename, or the
    /// prefixed name.
    fn model_name(&self, name: &str) -> String {
        let shape = self.spec.shapes.iter().find(|s| s.name == name);
        match (shape.and_then(|s| s.rename.clone()), &self.spec.prefix) {
            (Some(r), _) => r,
            (None, Some(p)) => format!("{p}_{name}"),
            (None, None) => name.to_owned(),
        }
    }

    /// The tool names a model will see, as far as the declaration alone tells —
    /// before connecting: those of its snapshot (shaped), or of its `only` list, with
    /// its own tools; `None` when only the server can tell. An agent checks them for
    /// collisions when it is built.
    pub fn declared_tool_names(&self) -> Option<Vec<String>> {
        let spec = &self.spec;
        let mut names: Vec<String> = match (&spec.snapshot, &spec.only) {
            (Some(snapshot), _) => {
                let mut tools = snapshot.clone();
                tools.retain(|t| {
                    spec.only.as_ref().is_none_or(|o| o.contains(&t.name))
                        && !spec.except.contains(&t.name)
                });
                tools.iter().map(|t| self.model_name(&t.name)).collect()
            }
            (None, Some(only)) => only
                .iter()
                .filter(|n| !spec.except.contains(n))
                .map(|n| self.model_name(n))
                .collect(),
            (None, None) => return None,
        };
        names.extend(spec.local.iter().map(|l| l.definition().name));
        Some(names)
    }

    /// The prompts the server offers.
    pub async fn prompts(&self) -> Result<Vec<Prompt>> {
        self.client()?.prompts().await
    }

    /// Fills in a prompt; its messages are ready for a chat.
    pub async fn prompt<I, K, V>(&self, name: &str, arguments: I) -> Result<GetPromptResult>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.client()?.prompt(name, arguments).await
    }

    /// The resources the server lists.
    pub async fn resources(&self) -> Result<Vec<Resource>> {
        self.client()?.resources().await
    }

    /// Reads a resource.
    pub async fn resource(&self, uri: &str) -> Result<ReadResourceResult> {
        let read = self.client()?.resource(uri).await?;
        if read.contents.is_empty() {
            return Err(Error::invalid_response(format!(
                "{} returned no content for {uri}",
                self.spec.name
            )));
        }
        Ok(read)
    }

    /// Reads a resource from a template (RFC 6570), filling in its variables.
    pub async fn resource_from_template(
        &self,
        template: &str,
        variables: &[(&str, &str)],
    ) -> Result<ReadResourceResult> {
        let uri = expand_template(template, variables)?;
        self.resource(&uri).await
    }

    /// The server's resource templates.
    pub async fn resource_templates(&self) -> Result<Vec<ResourceTemplate>> {
        self.client()?.resource_templates().await
    }

    /// Suggests values for an argument of a prompt or resource template.
    pub async fn complete(
        &self,
        reference: CompletionRef,
        argument: &str,
        value: &str,
        context: &[(&str, &str)],
    ) -> Result<Completion> {
        self.client()?
            .complete(reference, argument, value, context)
            .await
    }

    /// The server's instructions for using it, if any.
    pub async fn instructions(&self) -> Result<Option<String>> {
        self.client()?.instructions().await
    }

    /// The version the server reports for itself, if any.
    pub async fn version(&self) -> Result<Option<String>> {
        self.client()?.version().await
    }

    /// Listens for the server's changes (see [`Client::listen`]).
    pub async fn listen(&self, resources: &[&str]) -> Result<()> {
        self.client()?.listen(resources).await
    }

    /// Listens for changes of resources and of tasks' statuses (see
    /// [`Client::listen_for`]); task changes reach `after_change` as
    /// [`Change::Task`](crate::Change::Task).
    pub async fn listen_for(&self, resources: &[&str], tasks: &[&str]) -> Result<()> {
        self.client()?.listen_for(resources, tasks).await
    }

    /// The task with this id (see [`Client::task`]).
    pub fn task(&self, id: impl Into<String>) -> Result<crate::client::Task> {
        Ok(self.client()?.task(id))
    }

    /// The tools a model may be offered: [`tools`](Self::tools) without those only an
    /// MCP App's UI may call.
    pub async fn model_tools(&self) -> Result<Vec<McpTool>> {
        Ok(self
            .tools()
            .await?
            .into_iter()
            .filter(|t| !t.app_only)
            .collect())
    }

    /// Reads an MCP App's UI resource (see [`Client::read_ui`]).
    pub async fn read_ui(&self, uri: &str) -> Result<crate::model::UiResource> {
        self.client()?.read_ui(uri).await
    }

    /// The URL to send the user to so they can authorize this server (OAuth servers).
    /// The authorization server redirects back to `redirect_uri`; pass the callback's
    /// parameters to [`authorize`](Self::authorize).
    #[cfg(feature = "oauth")]
    pub async fn authorization_url(&self, redirect_uri: &str) -> Result<String> {
        self.client()?.authorization()?.url(redirect_uri).await
    }

    /// Completes an authorization with the callback's parameters (a redirect URL or
    /// its query). Fails when they do not match what `authorization_url` started.
    #[cfg(feature = "oauth")]
    pub async fn authorize(&self, callback: &str) -> Result<()> {
        self.client()?
            .authorization()?
            .complete(crate::auth::Callback::from_url(callback))
            .await
    }

    /// Whether the owner has authorized this server.
    #[cfg(feature = "oauth")]
    pub fn is_authorized(&self) -> bool {
        self.client()
            .ok()
            .and_then(|c| c.authorization().ok())
            .is_some_and(|a| a.is_authorized())
    }

    /// Forgets the owner's credentials for this server.
    #[cfg(feature = "oauth")]
    pub async fn deauthorize(&self) -> Result<()> {
        self.client()?.authorization()?.forget().await
    }

    /// Closes the connection (stops a stdio server); the next request reconnects.
    pub async fn close(&self) -> Result<()> {
        *lock(&self.tools) = None;
        match self.client.get() {
            Some(Ok(c)) => c.close().await,
            _ => Ok(()),
        }
    }
}

struct BoxedTransport(Box<dyn Transport>);

impl Transport for BoxedTransport {
    fn request(
        &self,
        r: crate::jsonrpc::Request,
        cx: crate::transport::RequestContext,
    ) -> BoxFuture<'_, Result<crate::jsonrpc::Response>> {
        self.0.request(r, cx)
    }
    fn notify<'a>(
        &'a self,
        n: crate::jsonrpc::Notification,
        v: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        self.0.notify(n, v)
    }
    fn cancel<'a>(
        &'a self,
        n: crate::jsonrpc::Notification,
        v: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        self.0.cancel(n, v)
    }
    fn close(&self) -> BoxFuture<'_, Result<()>> {
        self.0.close()
    }
    fn era_hint(&self) -> Option<crate::client::Era> {
        self.0.era_hint()
    }
    fn mirrors_param_headers(&self) -> bool {
        self.0.mirrors_param_headers()
    }
}
