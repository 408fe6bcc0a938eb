use mcp_runtime::mcp;

#[mcp(command("npx", "server"), oauth(owner = user, grant = implicit))]
pub struct Local {
    user: String,
}

#[mcp(url = "https://example.com/mcp", oauth(ownr = user))]
pub struct Remote {
    user: String,
}

fn main() {}
