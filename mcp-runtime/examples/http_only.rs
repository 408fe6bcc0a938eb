//! A declared HTTP server in a build with only the `http` and `macros` features (no
//! child processes): CI checks that this compiles.
//!
//! `cargo run -p mcp-runtime --no-default-features --features http,macros --example http_only`

use mcp_runtime::mcp;

/// A server that is never reached here: declaring it is the point.
#[mcp(url = "https://mcp.example.com/mcp")]
pub struct Remote;

fn main() {
    let remote = Remote::new();
    println!("declared `{}`", remote.mcp().name());
}
