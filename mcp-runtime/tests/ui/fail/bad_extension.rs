use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp", extension("audit", level = "full"), extension(app))]
pub struct Linear;

fn main() {}
