//! A declared stdio server in a build with only the `stdio` and `macros` features
//! (no HTTP stack): CI checks that this compiles, so the smallest build users pick
//! keeps working.
//!
//! `cargo run -p mcp-runtime --no-default-features --features stdio,macros --example stdio_only`

use mcp_runtime::mcp;

/// A server that is never started here: declaring it is the point.
#[mcp(command("echo", "hello"))]
pub struct Echo;

fn main() {
    let echo = Echo::new();
    println!("declared `{}`", echo.mcp().name());
}
