use mcp_runtime::mcp;

// Settings of one kind of connection on another are errors, not silently dropped.
#[mcp(
    command("npx", "server"),
    header("X-Team", "core"),
    bearer_token = "secret",
    oauth(owner = "ann"),
)]
pub struct Local;

#[mcp(url = "https://example.com/mcp", directory = "/srv", env(API_KEY = "k"))]
pub struct Remote;

#[mcp(url = "https://example.com/mcp", inherit_env("LANG"), inherit_all_env)]
pub struct RemoteEnv;

fn main() {
    let _ = (Local::new(), Remote::new(), RemoteEnv::new());
}
