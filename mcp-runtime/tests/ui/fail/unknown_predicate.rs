use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp", requires_approval(if = destrutive))]
pub struct Linear;

fn main() {}
