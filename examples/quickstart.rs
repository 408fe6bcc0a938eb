//! Declares the reference MCP server "everything" once, starts it over stdio (npx),
//! lists its tools, calls one through its typed method and prints the result.
//!
//! Run with `cargo run -p examples --example quickstart` (needs Node.js and npx).
//! Set `RUST_LOG=debug` to watch the session.

use mcp_runtime::mcp;

/// The server, declared once. Its committed snapshot (`.mcp/everything.json`) gives it
/// one typed method per tool, checked at compile time.
#[mcp(command(
    "npx",
    "-y",
    "@modelcontextprotocol/server-everything@2026.8.31",
    "stdio"
))]
pub struct Everything;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();

    let everything = Everything::new();
    for tool in everything.mcp().tools().await? {
        println!("- {}: {}", tool.name, tool.description.unwrap_or_default());
    }
    let result = everything
        .echo(everything_tools::Echo {
            message: "hello from Rust".into(),
        })
        .await?;
    println!("echo says: {}", result.text());
    everything.mcp().close().await?;
    Ok(())
}
