use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp", requires_approval(echo, unless = destructive))]
pub struct Linear;

fn main() {
    let _ = Linear::new();
}
