use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp")]
pub struct Linear(String);

fn main() {}
