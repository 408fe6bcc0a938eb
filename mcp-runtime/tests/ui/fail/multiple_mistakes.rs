use mcp_runtime::mcp;

// Every mistake of the attribute is reported, each at its token, and nothing else:
// the struct still gets `new`, its handle and its typed methods (from the committed
// snapshot `.mcp/everything.json`), so code using them raises no follow-on error.
#[mcp(
    command("npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"),
    log_level = loud,
    drift = sometimes,
    tool(echo, renam = shout),
    timeout = "5",
    requires_approval(echo, unless = destructive),
)]
pub struct Everything;

async fn use_it() -> mcp_runtime::Result<()> {
    let e = Everything::new();
    let _ = e.mcp().name();
    let r = e
        .echo(everything_tools::Echo {
            message: "hi".into(),
        })
        .await?;
    println!("{}", r.text());
    Ok(())
}

fn main() {
    let _ = use_it;
}
