//! A server declared inline, without a struct (the seed's `RubyLLM.mcp`).
//!
//! Run with `cargo run -p examples --example inline` (needs Node.js and npx).

use mcp_runtime::{declared::ToolShape, Mcp};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let everything = Mcp::builder("everything")
        .command([
            "npx",
            "-y",
            "@modelcontextprotocol/server-everything@2026.8.31",
            "stdio",
        ])
        .only(["echo", "get-sum"])
        .tool(
            ToolShape::new("get-sum")
                .rename("add_ten")
                .description("Adds ten to a number")
                .fixed_argument("b", 10)
                .wrap(|mut result, args| async move {
                    result
                        .content
                        .push(mcp_runtime::Content::text(format!("(a was {})", args["a"])));
                    Ok(result)
                }),
        )
        .requires_approval(["echo"])
        .build()?;
    for tool in everything.tools().await? {
        println!("{} (approval: {})", tool.name, tool.requires_approval());
    }
    println!(
        "{}",
        everything.call("add_ten", json!({"a": 32})).await?.text()
    );
    everything.close().await?;
    Ok(())
}
