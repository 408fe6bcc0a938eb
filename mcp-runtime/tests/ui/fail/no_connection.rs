use mcp_runtime::mcp;

#[mcp(prefix = "linear")]
pub struct Linear;

fn main() {}
