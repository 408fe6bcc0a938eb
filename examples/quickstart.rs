//! Starts the reference MCP server "everything" over stdio, lists its tools, calls one
//! and prints the result.
//!
//! Run with `cargo run -p examples --example quickstart` (needs Node.js and npx).
//! Set `RUST_LOG=debug` to watch the session.

use mcp_runtime::{Client, StdioConfig};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();

    // An explicit path lets tests point at an installed copy; npx fetches it otherwise.
    let command = std::env::var("MCP_EVERYTHING_BIN").ok();
    let config = match command {
        Some(bin) => StdioConfig::new(bin),
        None => StdioConfig::new("npx")
            .args(["-y", "@modelcontextprotocol/server-everything@2026.8.31"]),
    };
    let everything = Client::builder().name("everything").stdio(config)?;

    let server = everything.connect().await?;
    println!(
        "connected to {} {} (protocol {})",
        server.info.name, server.info.version, server.protocol_version
    );
    for tool in everything.list_tools().await? {
        println!("- {}: {}", tool.name, tool.description.unwrap_or_default());
    }
    let result = everything
        .call_tool("echo", json!({"message": "hello from Rust"}))
        .await?;
    println!("echo says: {}", result.text());
    everything.close().await?;
    Ok(())
}
