use mcp_runtime::mcp;

#[mcp(
    command("npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"),
    tool(echo, as = mcp),
)]
pub struct Everything;

fn main() {}
