use mcp_runtime::mcp;

#[mcp(url = "https://example.com/mcp", oauth(owner = user))]
pub struct Linear {
    user: String,
}

fn main() {}
