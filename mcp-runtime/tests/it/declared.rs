//! `#[mcp(...)]` against real servers: the settings, the handle, shaping and the typed
//! methods generated from the committed snapshots in `.mcp/`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mcp_runtime::{
    mcp, CallToolResult, Change, Content, InputRequest, InputResponse, Progress, Tool,
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
            mcp_runtime::InputKind::Form { schema } => {
                Some(InputResponse::accept(support::fill_form(schema)))
            }
            _ => None,
        }
    }
}

#[tokio::test]
async fn a_declared_server_is_an_object() {
    let ev = Everything::new(40, Arc::default(), Arc::default());
    assert_eq!(ev.name(), "everything");
    let tools = ev.tools().await.unwrap();
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
    let r = ev.call("add", json!({"a": 2})).await.unwrap();
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

    let p = ev.prompt("args-prompt", [("city", "Oslo")]).await.unwrap();
    assert!(!p.messages.is_empty());
    assert!(ev.prompts().await.unwrap().len() >= 3);
    assert!(ev.resources().await.unwrap().len() >= 7);
    let templates = ev.resource_templates().await.unwrap();
    let text = templates
        .iter()
        .find(|t| t.uri_template.contains("/text/"))
        .unwrap();
    let read = ev
        .resource_from_template(&text.uri_template, &[("resourceId", "5")])
        .await
        .unwrap();
    assert!(read.contents[0].text.as_deref().unwrap().contains('5'));
    assert!(ev.instructions().await.unwrap().is_some());
    assert_eq!(ev.version().await.unwrap().as_deref(), Some("2.0.0"));

    // Progress and input requests go to the instance's methods.
    let r = ev
        .call(
            "ev_trigger-long-running-operation",
            json!({"duration": 1, "steps": 2}),
        )
        .await
        .unwrap();
    assert!(r.text().contains("completed"));
    assert!(ev.progress.load(Ordering::SeqCst) >= 2);
    ev.close().await.unwrap();
}
