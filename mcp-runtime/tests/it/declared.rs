//! `#[mcp(...)]` against real servers: the settings, the handle, shaping and the typed
//! methods generated from the committed snapshots in `.mcp/`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mcp_runtime::{
    mcp, model::Progress, CallToolResult, Change, Content, InputRequest, InputResponse, Tool,
};
use serde_json::{json, Value};

use crate::support;

fn everything_bin() -> String {
    support::peers()
        .join("npm/node_modules/.bin/mcp-server-everything")
        .display()
        .to_string()
}

/// server-everything over stdio, shaped.
#[mcp(
    transport = Self::local_server,
    prefix = "ev",
    except("get-tiny-image"),
    tool("get-sum", as = add, description = "Adds two numbers", fixed_arguments(b = Self::offset), wrap = Self::annotate),
    tool("echo", fixed_arguments(message = "fixed message")),
    requires_approval("get-sum"),
    requires_approval(if = Self::risky),
    defer("get-env"),
    after_change = Self::changed,
    after_progress = Self::progressed,
    before_input_request = Self::answer,
    log_level = warning,
    timeout = 30,
)]
pub struct Everything {
    offset: i64,
    changes: Arc<Mutex<Vec<Change>>>,
    progress: Arc<AtomicUsize>,
}

impl Everything {
    fn local_server(&self) -> mcp_runtime::StdioTransport {
        mcp_runtime::StdioTransport::new(
            mcp_runtime::StdioConfig::new(everything_bin()).arg("stdio"),
        )
    }
    fn offset(&self) -> i64 {
        self.offset
    }
    async fn annotate(
        &self,
        mut result: CallToolResult,
        args: Value,
    ) -> mcp_runtime::Result<CallToolResult> {
        result
            .content
            .push(Content::text(format!("(b was {})", args["b"])));
        Ok(result)
    }
    fn risky(&self, tool: &Tool) -> bool {
        tool.name.contains("long-running")
    }
    fn changed(&self, change: &Change) {
        self.changes.lock().unwrap().push(change.clone());
    }
    fn progressed(&self, _p: &Progress) {
        self.progress.fetch_add(1, Ordering::SeqCst);
    }
    async fn answer(&self, req: InputRequest) -> Option<InputResponse> {
        match &req.kind {
            mcp_runtime::input::InputKind::Form { schema } => {
                Some(InputResponse::accept(support::fill_form(schema)))
            }
            _ => None,
        }
    }
}

#[tokio::test]
async fn a_declared_server_is_an_object() {
    let ev = Everything::new(40, Arc::default(), Arc::default());
    assert_eq!(ev.mcp().name(), "everything");
    // The declaration, readable without connecting.
    let d = Everything::DECLARATION;
    assert_eq!(d.name, "everything");
    assert!(d.custom_transport && d.url.is_none() && d.command.is_empty());
    assert_eq!(d.prefix, Some("ev"));
    assert_eq!(d.except, ["get-tiny-image"]);
    assert_eq!(d.renames, [("get-sum", "add")]);
    assert_eq!(d.fixed_arguments, [("get-sum", "b"), ("echo", "message")]);
    assert_eq!(d.requires_approval, ["get-sum"]);
    assert!(d.approval_for_all && d.approval_predicates);
    assert_eq!(d.defer, Some(&["get-env"][..]));
    assert!(
        d.snapshot.is_some_and(|p| p.ends_with("everything.json")),
        "{d:?}"
    );
    let tools = ev.mcp().tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"add"),
        "renamed tools keep their name: {names:?}"
    );
    assert!(
        names.contains(&"ev_echo"),
        "others get the prefix: {names:?}"
    );
    let add = tools.iter().find(|t| t.name == "add").unwrap();
    assert_eq!(add.server_name.as_deref(), Some("get-sum"));
    assert_eq!(add.description.as_deref(), Some("Adds two numbers"));
    assert!(
        add.input_schema["properties"].get("b").is_none(),
        "fixed arguments are hidden"
    );
    assert!(add.requires_approval());
    let long = tools
        .iter()
        .find(|t| t.name == "ev_trigger-long-running-operation")
        .unwrap();
    assert!(long.requires_approval(), "predicate evaluated per call");
    assert!(!tools
        .iter()
        .find(|t| t.name == "ev_echo")
        .unwrap()
        .requires_approval());
    assert!(
        tools
            .iter()
            .find(|t| t.name == "ev_get-env")
            .unwrap()
            .deferred
    );

    // Rename + fixed argument + wrap, round trip through the server.
    let r = ev.mcp().call("add", json!({"a": 2})).await.unwrap();
    assert_eq!(r.text(), "The sum of 2 and 40 is 42.\n(b was 40)");
    // The typed method does the same.
    let r = ev.add(everything_tools::Add { a: 1.0 }).await.unwrap();
    assert!(
        r.text().starts_with("The sum of 1 and 40 is 41."),
        "{}",
        r.text()
    );
    // A fixed argument the model cannot override.
    let r = ev.ev_echo().await.unwrap();
    assert_eq!(r.text(), "Echo: fixed message");

    let p = ev
        .mcp()
        .prompt("args-prompt", [("city", "Oslo")])
        .await
        .unwrap();
    assert!(!p.messages.is_empty());
    assert!(ev.mcp().prompts().await.unwrap().len() >= 3);
    assert!(ev.mcp().resources().await.unwrap().len() >= 7);
    let templates = ev.mcp().resource_templates().await.unwrap();
    let text = templates
        .iter()
        .find(|t| t.uri_template.contains("/text/"))
        .unwrap();
    let read = ev
        .mcp()
        .resource_from_template(&text.uri_template, &[("resourceId", "5")])
        .await
        .unwrap();
    assert!(read.contents[0].text.as_deref().unwrap().contains('5'));
    assert!(ev.mcp().instructions().await.unwrap().is_some());
    assert_eq!(ev.mcp().version().await.unwrap().as_deref(), Some("2.0.0"));

    // Completion through the handle.
    let c = ev
        .mcp()
        .complete(
            mcp_runtime::model::CompletionRef::Prompt("completable-prompt".into()),
            "department",
            "M",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(c.values, ["Marketing"]);
    // server-everything announces its tool list after the handshake: the instance's
    // after_change method heard it.
    assert!(ev.changes.lock().unwrap().contains(&Change::Tools));
    // Listening (legacy server: list changes come anyway; resources are subscribed).
    ev.mcp()
        .listen(&["demo://resource/static/document/architecture.md"])
        .await
        .unwrap();

    // Progress and input requests go to the instance's methods.
    let r = ev
        .mcp()
        .call(
            "ev_trigger-long-running-operation",
            json!({"duration": 1, "steps": 2}),
        )
        .await
        .unwrap();
    assert!(r.text().contains("completed"));
    assert!(ev.progress.load(Ordering::SeqCst) >= 2);
    ev.mcp().close().await.unwrap();
}

/// The project's PyPI `mcp` server over HTTP, stateless 2026-07-28: headers and the
/// token come from the instance for every request; typed structured output.
#[mcp(
    url = "http://127.0.0.1:29417/mcp",
    snapshot = "pyserver",
    bearer_token = Self::token,
    header("X-Request-Count", Self::count),
    only(add, echo, ask_name, add_tool),
    input_requests(form),
    before_input_request = Self::no_answer,
    before_input_request = Self::ask_person,
    tool(MarkdownEcho),
    drift = error,
)]
pub struct Py {
    tokens: Arc<AtomicUsize>,
}

impl Py {
    fn token(&self) -> String {
        format!("token-{}", self.tokens.fetch_add(1, Ordering::SeqCst))
    }
    fn count(&self) -> usize {
        self.tokens.load(Ordering::SeqCst)
    }
    async fn no_answer(&self, _req: InputRequest) -> Option<InputResponse> {
        None
    }
    async fn ask_person(&self, _req: InputRequest) -> Option<InputResponse> {
        Some(InputResponse::accept(json!({"name": "Ada"})))
    }
}

/// A tool of our own that calls the server.
#[derive(Default)]
pub struct MarkdownEcho;

impl mcp_runtime::declared::LocalTool for MarkdownEcho {
    fn definition(&self) -> Tool {
        serde_json::from_value(json!({
            "name": "markdown_echo",
            "description": "Echoes the message in bold.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
        }))
        .unwrap()
    }
    fn call<'a>(
        &'a self,
        server: &'a mcp_runtime::Mcp,
        arguments: Value,
    ) -> mcp_runtime::BoxFuture<'a, mcp_runtime::Result<CallToolResult>> {
        Box::pin(async move {
            let echoed = server.call("echo", arguments).await?;
            Ok(CallToolResult {
                content: vec![Content::text(format!("**{}**", echoed.text()))],
                ..Default::default()
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_from_the_instance_typed_output_and_a_local_tool() {
    // The declaration's fixed port: no other test uses it, and it is below the
    // ephemeral range (32768-60999), so no free port another test picks is it.
    let _server = support::HttpServer::python_on(29417, &["stateless"]);
    let tokens = Arc::new(AtomicUsize::new(0));
    let py = Py::new(tokens.clone());
    assert_eq!(py.mcp().name(), "py");
    let names: Vec<String> = py
        .mcp()
        .tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names,
        ["echo", "add", "ask_name", "add_tool", "markdown_echo"]
    );

    // The token method runs for every request: no reconnect needed when it rotates.
    let before = tokens.load(Ordering::SeqCst);
    let typed = py.add(py_tools::Add { a: 1.5, b: 2.0 }).await.unwrap();
    assert_eq!(typed.output, Some(py_tools::AddOutput { sum: 3.5 }));
    py.echo(py_tools::Echo {
        message: "x".into(),
    })
    .await
    .unwrap();
    assert!(
        tokens.load(Ordering::SeqCst) >= before + 2,
        "one token per request"
    );

    // The first input callback declines to answer; the second answers.
    assert_eq!(py.ask_name().await.unwrap().text(), "Hello, Ada");
    // A tool of our own calling the server.
    let bold = py
        .mcp()
        .call("markdown_echo", json!({"message": "hi"}))
        .await
        .unwrap();
    assert_eq!(bold.text(), "**Echo: hi**");
    py.mcp().close().await.unwrap();
}

#[tokio::test]
async fn drift_from_the_snapshot_is_reported() {
    let mut snapshot: Value =
        serde_json::from_str(include_str!("../../../.mcp/pyserver.json")).unwrap();
    let tools = snapshot["tools"].as_array_mut().unwrap();
    tools.push(json!({"name": "retired_tool", "inputSchema": {"type": "object"}}));
    tools.iter_mut().find(|t| t["name"] == "echo").unwrap()["inputSchema"]["properties"]["extra"] =
        json!({"type": "string"});
    let strict = mcp_runtime::Mcp::builder("pyserver")
        .command(support::pyserver_argv())
        .snapshot(&snapshot.to_string())
        .drift(mcp_runtime::declared::DriftPolicy::Error)
        .build()
        .unwrap();
    let e = strict.tools().await.unwrap_err();
    let msg = e.to_string();
    assert!(
        e.is_config() && msg.contains("retired_tool") && msg.contains("`echo` changed"),
        "{msg}"
    );
    strict.close().await.unwrap();

    // A declaration naming a tool the server does not offer fails on first load.
    let wrong = mcp_runtime::Mcp::builder("pyserver")
        .command(support::pyserver_argv())
        .only(["ecko"])
        .build()
        .unwrap();
    let e = wrong.tools().await.unwrap_err();
    assert!(e.to_string().contains("did you mean `echo`"), "{e}");
    wrong.close().await.unwrap();

    // Without a snapshot, every run-time name error carries the same hint as the
    // compile-time check: fixed arguments, calls, starts.
    let wrong = mcp_runtime::Mcp::builder("pyserver")
        .command(support::pyserver_argv())
        .tool(mcp_runtime::declared::ToolShape::new("echo").fixed_argument("mesage", json!("hi")))
        .build()
        .unwrap();
    let e = wrong.tools().await.unwrap_err();
    assert!(e.to_string().contains("did you mean `message`"), "{e}");
    wrong.close().await.unwrap();
    let plain = mcp_runtime::Mcp::builder("pyserver")
        .command(support::pyserver_argv())
        .build()
        .unwrap();
    let e = plain.call("ecko", json!({})).await.unwrap_err();
    assert!(e.to_string().contains("did you mean `echo`"), "{e}");
    let e = plain.start("ecko", json!({})).await.unwrap_err();
    assert!(e.to_string().contains("did you mean `echo`"), "{e}");
    plain.close().await.unwrap();
}

/// server-filesystem through npx, with a working directory and environment.
#[mcp(
    command("npx", "-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "."),
    directory = "/tmp",
    env(MCP_FS_TEST = "1", MCP_FS_USER = Self::user),
    only(read_text_file, list_allowed_directories),
    tool(read_text_file, as = read),
    requires_approval(if = destructive),
)]
pub struct Files {
    user: String,
}

impl Files {
    fn user(&self) -> String {
        self.user.clone()
    }
}

#[tokio::test]
async fn filesystem_via_npx_with_typed_structured_output() {
    let files = Files::new("ann".into());
    let tools = files.mcp().tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["read", "list_allowed_directories"]);
    assert!(
        !tools[0].requires_approval(),
        "read-only tools are not destructive"
    );
    let dirs = files.list_allowed_directories().await.unwrap();
    let out = dirs.output.expect("structured output");
    assert!(out.content.contains("/tmp"), "{}", out.content);
    std::fs::write("/tmp/mcp-declared-test.txt", "typed").unwrap();
    let r = files
        .read(files_tools::Read {
            path: "/tmp/mcp-declared-test.txt".into(),
            head: None,
            tail: None,
        })
        .await
        .unwrap();
    assert_eq!(r.output.unwrap().content, "typed");
    files.mcp().close().await.unwrap();
}

/// server-everything through npx, with environment values from the instance.
#[mcp(
    command("npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"),
    snapshot = "everything",
    env(MCP_DECLARED_FIXED = "fixed-value", MCP_DECLARED_USER = Self::user),
    only("get-env", echo),
    input_requests(none),
)]
pub struct EverythingEnv {
    user: String,
}

impl EverythingEnv {
    fn user(&self) -> String {
        self.user.clone()
    }
}

#[tokio::test]
async fn environment_values_come_from_the_declaration_and_the_instance() {
    let ev = EverythingEnv::new("grace".into());
    let env = ev.get_env().await.unwrap().text();
    assert!(env.contains("fixed-value"), "literal env value");
    assert!(
        env.contains("grace"),
        "env value from the instance's method"
    );
    assert!(
        env.contains("\"PATH\""),
        "merged over the parent environment"
    );
    ev.mcp().close().await.unwrap();
}

/// A fixed loopback port (a declaration's `url` is a literal), below the ephemeral range
/// (32768-60999): no free port another test picks is it.
const HEADERS_PORT: u16 = 27213;

/// An HTTP server declared with headers (a literal and one from the instance), a
/// bearer token from the instance, and a timeout.
#[mcp(
    url = "http://127.0.0.1:27213/mcp",
    header("X-Team", "core"),
    header("X-User", Self::user),
    bearer_token = Self::token,
    timeout = 1,
    only(request_headers, slow),
)]
pub struct WithHeaders {
    user: String,
    token: String,
}

impl WithHeaders {
    fn user(&self) -> String {
        self.user.clone()
    }
    fn token(&self) -> String {
        self.token.clone()
    }
}

/// The same server, nothing declared but the URL: the context sets its limits.
#[mcp(url = "http://127.0.0.1:27213/mcp", only(slow))]
pub struct Bare;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_headers_token_timeout_and_context_reach_the_server() {
    let _server = support::HttpServer::python_on(HEADERS_PORT, &["headers"]);
    assert_eq!(
        WithHeaders::DECLARATION.url,
        Some("http://127.0.0.1:27213/mcp")
    );
    assert_eq!(
        WithHeaders::DECLARATION.only,
        Some(&["request_headers", "slow"][..])
    );
    assert_eq!(Bare::DECLARATION.snapshot, None);
    let h = WithHeaders::new("ann".into(), "tok-1".into());
    let r = h.mcp().call("request_headers", json!({})).await.unwrap();
    let seen: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(seen["x-team"], "core", "{seen}");
    assert_eq!(seen["x-user"], "ann", "{seen}");
    assert_eq!(seen["authorization"], "Bearer tok-1", "{seen}");
    // The declared timeout (1 s, no progress until the end): the call gives up.
    let e = h
        .mcp()
        .call("slow", json!({"seconds": 30, "steps": 1}))
        .await
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    h.mcp().close().await.unwrap();

    // `with_context`: a request timeout for a server that declares none.
    let b = Bare::with_context(
        mcp_runtime::declared::Context::new()
            .request_timeout(std::time::Duration::from_millis(300)),
    );
    let e = b
        .mcp()
        .call("slow", json!({"seconds": 30, "steps": 1}))
        .await
        .unwrap_err();
    assert!(
        e.is_timeout() && e.to_string().contains("HttpConfig::request_timeout"),
        "{e}"
    );
    b.mcp().close().await.unwrap();
}

/// server-everything (2025-11-25) behind a wiretap, declared with its snapshot.
#[mcp(transport = Self::tapped, snapshot = "everything", only(echo))]
pub struct TappedEverything {
    argv: Vec<String>,
}

impl TappedEverything {
    fn tapped(&self) -> mcp_runtime::StdioTransport {
        mcp_runtime::StdioTransport::new(
            mcp_runtime::StdioConfig::from_argv(self.argv.clone()).expect("an argv"),
        )
    }
}

/// The project's PyPI server (stateless 2026-07-28 over stdio) behind a wiretap.
#[mcp(transport = Self::tapped, snapshot = "pyserver", only(add))]
pub struct TappedPy {
    argv: Vec<String>,
}

impl TappedPy {
    fn tapped(&self) -> mcp_runtime::StdioTransport {
        mcp_runtime::StdioTransport::new(
            mcp_runtime::StdioConfig::from_argv(self.argv.clone()).expect("an argv"),
        )
    }
}

/// Resolve once, call many: a typed call on a fresh handle sends the call and the
/// handshake its era needs, and nothing else — no `tools/list` first, in either era;
/// a second call sends only itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_call_on_a_fresh_handle_sends_only_the_call_and_the_handshake() {
    // 2025-11-25: the probe, then the handshake, then the calls.
    let log = support::wire_log("typed-legacy");
    let ev = TappedEverything::new(support::wiretap(&log, 0, support::everything_argv()));
    let r = ev
        .echo(tapped_everything_tools::Echo {
            message: "once".into(),
        })
        .await
        .unwrap();
    assert!(r.text().contains("once"), "{}", r.text());
    ev.echo(tapped_everything_tools::Echo {
        message: "twice".into(),
    })
    .await
    .unwrap();
    ev.mcp().close().await.unwrap();
    let sent = support::sent(&support::read_wire(&log));
    // Positive control: the reader sees the calls it counts.
    assert_eq!(
        sent.iter().filter(|m| *m == "tools/call").count(),
        2,
        "{sent:?}"
    );
    assert_eq!(
        sent,
        [
            "start",
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call",
            "tools/call"
        ],
        "exactly the handshake and the calls"
    );

    // 2026-07-28: `server/discover` is the whole handshake.
    let log = support::wire_log("typed-modern");
    let py = TappedPy::new(support::wiretap(&log, 0, support::pyserver_argv()));
    let typed = py
        .add(tapped_py_tools::Add { a: 1.5, b: 2.0 })
        .await
        .unwrap();
    assert_eq!(typed.output, Some(tapped_py_tools::AddOutput { sum: 3.5 }));
    py.mcp().close().await.unwrap();
    let sent = support::sent(&support::read_wire(&log));
    assert_eq!(sent, ["start", "server/discover", "tools/call"], "{sent:?}");
}

/// What an approval binds to, through the public builder: a server's fingerprint
/// changes with an environment or header value (keyed, never in clear) and not with a
/// value computed per request; a real tool's definition digest changes with its title,
/// its output schema and the arguments its declaration fixes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_bind_to_configuration_values_and_tool_definitions() {
    use mcp_runtime::{declared::ToolShape, Mcp};

    // Environment values.
    let db = |url: &str| {
        Mcp::builder("everything")
            .command(support::everything_argv())
            .env("DATABASE_URL", url)
            .build()
            .unwrap()
    };
    let prod = db("postgres://db-prod.internal/app");
    assert_eq!(
        prod.config_fingerprint(),
        db("postgres://db-prod.internal/app").config_fingerprint()
    );
    assert_ne!(
        prod.config_fingerprint(),
        db("postgres://db-staging.internal/app").config_fingerprint()
    );
    assert_ne!(
        prod.config_fingerprint_keyed(b"key one"),
        prod.config_fingerprint_keyed(b"key two")
    );
    for shown in [
        prod.config_fingerprint(),
        prod.config_fingerprint_keyed(b"key one"),
        format!("{prod:?}"),
    ] {
        assert!(!shown.contains("db-prod"), "{shown}");
    }

    // Header values; a computed header and the bearer token count only as present.
    let crm = |tenant: &str, token: &str| {
        Mcp::builder("crm")
            .url("https://crm.example.com/mcp")
            .header("X-Tenant", tenant)
            .header_with("X-Request-Id", {
                let token = token.to_owned();
                move || Some(format!("req-{token}"))
            })
            .bearer_token(token)
            .build()
            .unwrap()
    };
    let acme = crm("acme", "tok-1");
    assert_eq!(
        acme.config_fingerprint(),
        crm("acme", "tok-2").config_fingerprint()
    );
    assert_ne!(
        acme.config_fingerprint(),
        crm("globex", "tok-1").config_fingerprint()
    );
    assert!(!format!("{acme:?} {}", acme.config_fingerprint()).contains("acme"));

    // Real tools: server-everything's `echo` with a fixed message, and
    // `get-structured-content` (a title and an output schema).
    let served = |message: &str| {
        Mcp::builder("everything")
            .command(support::everything_argv())
            .tool(ToolShape::new("echo").fixed_argument("message", message))
            .build()
            .unwrap()
    };
    let (a, a_again, b) = (served("hello"), served("hello"), served("goodbye"));
    let tool = |tools: &[mcp_runtime::McpTool], name: &str| {
        tools
            .iter()
            .find(|t| t.server_name.as_deref() == Some(name))
            .unwrap()
            .clone()
    };
    let (ta, ta_again, tb) = (
        a.tools().await.unwrap(),
        a_again.tools().await.unwrap(),
        b.tools().await.unwrap(),
    );
    let echo = tool(&ta, "echo");
    assert_eq!(
        echo.definition_digest(),
        tool(&ta_again, "echo").definition_digest()
    );
    assert_ne!(
        echo.definition_digest(),
        tool(&tb, "echo").definition_digest(),
        "another fixed value"
    );
    // The other tools are shaped alike on both: the same digests.
    let structured = tool(&ta, "get-structured-content");
    assert_eq!(
        structured.definition_digest(),
        tool(&tb, "get-structured-content").definition_digest()
    );
    let def = structured.definition.clone().unwrap();
    assert!(
        def.title.is_some() && def.output_schema.is_some(),
        "{def:?}"
    );
    let mut retitled = structured.clone();
    retitled.definition.as_mut().unwrap().title = Some("Delete Everything".into());
    assert_ne!(structured.definition_digest(), retitled.definition_digest());
    let mut reshaped = structured.clone();
    reshaped.definition.as_mut().unwrap().output_schema = Some(json!({"type": "object"}));
    assert_ne!(structured.definition_digest(), reshaped.definition_digest());
    for m in [a, a_again, b] {
        m.close().await.unwrap();
    }
}
