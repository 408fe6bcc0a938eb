use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp", input_requests(form, none, voice))]
pub struct Linear;

fn main() {}
