//! Typed per-tool methods generated from `.mcp/everything.json`.
use mcp_runtime::mcp;

#[mcp(
    command("npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"),
    only(echo, "get-sum", "get-structured-content", "get-env"),
    tool("get-sum", as = add, fixed_arguments(b = 1)),
)]
pub struct Everything;

#[allow(dead_code)]
async fn calls(ev: &Everything) -> mcp_runtime::Result<()> {
    let r: mcp_runtime::CallToolResult = ev.echo(everything_tools::Echo { message: "hi".into() }).await?;
    let _ = r.text();
    // `b` is fixed, so the typed arguments only have `a`.
    let _ = ev.add(everything_tools::Add { a: 2.0 }).await?;
    // A tool with an outputSchema returns its structured output typed.
    let weather: mcp_runtime::Typed<everything_tools::GetStructuredContentOutput> = ev
        .get_structured_content(everything_tools::GetStructuredContent { location: Default::default() })
        .await?;
    if let Some(w) = weather.output {
        let _: f64 = w.temperature;
    }
    // No arguments: no argument struct.
    let _ = ev.get_env().await?;
    // A typed call can be spawned (its future is `Send` and holds no borrow of the
    // arguments).
    let owned = ev.clone();
    let task = tokio::spawn(async move { owned.echo(everything_tools::Echo { message: "hi".into() }).await });
    let _ = task.await;
    Ok(())
}

/// A tool may take the name of one of the handle's methods: the handle is behind
/// `mcp()`, so the typed method and the handle's method never meet.
#[mcp(
    snapshot = "everything",
    command("npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"),
    only(echo, "get-sum"),
    tool(echo, as = close),
    tool("get-sum", as = tools),
)]
pub struct Shadowless;

#[allow(dead_code)]
async fn both(s: Shadowless) -> mcp_runtime::Result<()> {
    let _: mcp_runtime::CallToolResult = s.close(shadowless_tools::Close { message: "hi".into() }).await?;
    let _ = s.tools(shadowless_tools::Tools { a: 1.0, b: 2.0 }).await?;
    let listed: Vec<mcp_runtime::McpTool> = s.mcp().tools().await?;
    let _ = listed;
    s.mcp().close().await
}

fn main() {}
