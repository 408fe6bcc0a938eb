//! MCP Apps: calls a tool that has a UI, and prints the UI resource its result comes
//! with — the HTML, and how a host must frame it (content security policy,
//! permissions). An application renders it in a sandboxed frame next to the result.
//!
//! ```sh
//! cargo run -p examples --example apps -- COMMAND… TOOL '{json arguments}'
//! # e.g. the project's test server (after `bash tests/peers/install.sh`):
//! cargo run -p examples --example apps -- .peers/venv/bin/python tests/peers/pyserver.py stdio show_chart '{"title":"Tides"}'
//! ```

use mcp_runtime::{model::MCP_APP_MIME_TYPE, Client, StdioConfig};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        return Err("usage: apps COMMAND… TOOL '{json arguments}'".into());
    }
    let arguments = serde_json::from_str(&args.pop().unwrap_or_default())?;
    let tool = args.pop().unwrap_or_default();
    let client = Client::builder()
        // Declaring MCP Apps tells servers this host renders their UIs.
        .extension(
            "io.modelcontextprotocol/ui",
            json!({"mimeTypes": [MCP_APP_MIME_TYPE]}),
        )
        .stdio(StdioConfig::from_argv(args)?)?;
    for t in client.tools().await? {
        let hidden = if t.is_app_only() {
            " (app only: never offered to a model)"
        } else {
            ""
        };
        println!("- {}{hidden}", t.name);
    }
    let result = client.call(&tool, arguments).await?;
    println!("result: {}", result.text());
    let Some(uri) = result.ui_resource.as_deref() else {
        println!("`{tool}` has no UI");
        return Ok(client.close().await?);
    };
    let app = client.read_ui(uri).await?;
    println!(
        "UI resource {} ({}), {} bytes of HTML",
        app.uri,
        app.mime_type,
        app.html.len()
    );
    println!("content security policy: {}", app.csp.unwrap_or_default());
    println!("permissions: {}", app.permissions.unwrap_or_default());
    println!("prefers a border: {:?}", app.prefers_border);
    client.close().await?;
    Ok(())
}
