use mcp_runtime::mcp;

#[mcp(ulr = "https://example.com/mcp")]
pub struct Linear;

fn main() {}
