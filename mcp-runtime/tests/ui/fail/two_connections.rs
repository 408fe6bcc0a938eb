use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp", command("npx", "server"))]
pub struct Linear;

fn main() {}
