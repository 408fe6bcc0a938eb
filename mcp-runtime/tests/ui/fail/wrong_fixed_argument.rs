use mcp_runtime::mcp;

#[mcp(
    command("npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"),
    tool("get-sum", fixed_arguments(c = 1)),
)]
pub struct Everything;

fn main() {}
