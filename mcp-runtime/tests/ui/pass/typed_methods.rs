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
    Ok(())
}

fn main() {}
