use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp", timeout = "thirty")]
pub struct Linear;

fn main() {}
