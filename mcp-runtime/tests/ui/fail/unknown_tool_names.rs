use mcp_runtime::mcp;

// Checked against the committed snapshot `.mcp/everything.json`: every wrong name is
// reported at once, each with the closest real one.
#[mcp(
    command("npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"),
    only(ecko, "get-sum"),
    except("get-tiny-imag"),
    tool("get-summ", as = add),
    requires_approval("toggle-simulated-loging"),
    defer(nothing_like_this),
)]
pub struct Everything;

fn main() {}
