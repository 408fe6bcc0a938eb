use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp", prefix = "a", prefix = "b")]
pub struct Linear;

fn main() {}
