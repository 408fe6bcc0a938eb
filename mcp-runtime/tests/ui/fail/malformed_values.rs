use mcp_runtime::mcp;

// Values of the wrong shape say what was expected.
#[mcp(
    url = "https://example.com/mcp" "again",
    log_level = 5,
    requires_approval(if = 3),
)]
pub struct Linear;

fn main() {
    let _ = Linear::new();
}
