use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp", tool(search, rename = find))]
pub struct Linear;

fn main() {}
