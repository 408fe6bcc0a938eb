use std::time::Duration;

use mcp_agent::mcp;

fn main() {
    let dir = String::from("/tmp");
    let _fs: Result<mcp_agent::runtime::Mcp, _> = mcp!(
        fs,
        command("npx", "-y", "@modelcontextprotocol/server-filesystem", dir.as_str()),
        env(LOG = "warn", HOME = dir, "WITH-DASH" = 1),
        inherit_env("LANG", "AWS_PROFILE"),
        directory = "/",
        prefix = "fs",
        only(read_file, "list-directory"),
        requires_approval(write_file),
        timeout = 30,
    );
    let _all = mcp!(sh, command("my-server"), inherit_all_env, requires_approval, defer);
    let user = String::from("ann");
    let team = String::from("blue");
    let _web = mcp!(
        web,
        url = "https://example.com/mcp",
        header("X-Org", "acme"),
        header("X-Team", move || team.clone()),      // read for every request
        header("Authorization", "ignored: bearer_token wins"),
        bearer_token = move || format!("token-of-{user}"),
        except(delete_everything),
        defer(search),
        timeout = Duration::from_millis(2500),
    );
    let _static = mcp!(web, url = "http://127.0.0.1:9/mcp", bearer_token = "static", timeout = 2.5);
}
