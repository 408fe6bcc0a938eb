use mcp_runtime::mcp;

#[mcp(url = "http://mcp.example.com/mcp")]
pub struct Linear;

fn main() {}
