use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp", log_level = warn)]
pub struct Linear;

fn main() {}
