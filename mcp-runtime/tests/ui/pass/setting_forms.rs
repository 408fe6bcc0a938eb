//! The other forms settings take: words as strings, timeouts as fractional seconds or
//! a `Duration`, approval predicates as closures.
use std::time::Duration;

use mcp_runtime::{mcp, Tool};

#[mcp(
    url = "https://mcp.example.com/mcp",
    log_level = "warning",
    drift = "ignore",
    timeout = 2.5,
    requires_approval(if = |tool: &Tool| tool.is_destructive()),
    requires_approval(create_issue, if = |tool| tool.name.starts_with("create")),
)]
pub struct Linear;

#[mcp(command("npx", "server"), timeout = Duration::from_millis(1500))]
pub struct Local;

fn main() {
    let _ = (Linear::new(), Local::new());
}
