//! A custom transport: the client talks to a server that lives in the same process,
//! through the four operations of `mcp_runtime::Transport`. A tunnel, a message queue or
//! a WebSocket plugs in the same way.
//!
//! Run with `cargo run -p examples --example custom_transport`.

use std::sync::Mutex;

use mcp_runtime::jsonrpc::{ErrorObject, Notification, Request, Response};
use mcp_runtime::{transport::RequestContext, BoxFuture, Client, Error, Result, Transport};
use serde_json::{json, Value};

/// A tiny in-process server speaking the stateless 2026-07-28 protocol.
#[derive(Default)]
struct InProcess {
    calls: Mutex<u64>,
}

impl InProcess {
    fn answer(&self, method: &str, params: &Value) -> std::result::Result<Value, ErrorObject> {
        match method {
            "server/discover" => Ok(json!({
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "in-process", "version": "1.0.0"}}
            })),
            "tools/list" => Ok(json!({
                "resultType": "complete",
                "tools": [{
                    "name": "count",
                    "description": "Counts the calls made so far.",
                    "inputSchema": {"type": "object", "additionalProperties": false}
                }]
            })),
            "tools/call" if params["name"] == "count" => {
                let mut calls = self
                    .calls
                    .lock()
                    .map_err(|_| ErrorObject::new(-32603, "poisoned"))?;
                *calls += 1;
                Ok(json!({
                    "resultType": "complete",
                    "content": [{"type": "text", "text": format!("call number {calls}")}]
                }))
            }
            "tools/call" => Err(ErrorObject::new(-32602, "unknown tool")),
            _ => Err(ErrorObject::new(-32601, "method not found")),
        }
    }
}

impl Transport for InProcess {
    fn request(&self, request: Request, _cx: RequestContext) -> BoxFuture<'_, Result<Response>> {
        Box::pin(async move {
            // A real transport would send `request` somewhere and await the answer; a
            // transport that cannot reach its server returns `Error::transport(..)`.
            if request.params.get("_meta").is_none() {
                return Err(Error::invalid_response(
                    "this server needs 2026-07-28 requests",
                ));
            }
            Ok(Response {
                outcome: self.answer(&request.method, &request.params),
                id: request.id,
            })
        })
    }

    fn notify<'a>(&'a self, _n: Notification, _version: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }

    fn cancel<'a>(&'a self, _n: Notification, _version: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }

    fn close(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

#[tokio::main]
async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let client = Client::builder()
        .name("in-process")
        .build(InProcess::default())?;
    let server = client.connect().await?;
    println!(
        "{} speaks {:?} {}",
        server.info.name, server.era, server.protocol_version
    );
    for tool in client.tools().await? {
        println!("- {}", tool.name);
    }
    for _ in 0..2 {
        println!("{}", client.call("count", Value::Null).await?.text());
    }
    match client.call("missing", json!({})).await {
        Err(err) if err.is_protocol() => println!("calling a missing tool: {err}"),
        other => return Err(format!("expected a protocol error, got {other:?}").into()),
    }
    Ok(())
}
