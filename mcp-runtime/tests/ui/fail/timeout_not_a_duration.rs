use mcp_runtime::mcp;

// An expression is taken as written; one that is not a `Duration` is reported at it.
#[mcp(url = "https://example.com/mcp", timeout = std::time::Instant::now())]
pub struct Linear;

fn main() {
    let _ = Linear::new();
}
