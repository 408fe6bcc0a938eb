use mcp_agent::mcp;

fn main() {
    let dir = String::from("/tmp");
    let _fs: Result<mcp_agent::runtime::Mcp, _> = mcp!(
        fs,
        command = "npx",
        args = ["-y", "@modelcontextprotocol/server-filesystem", dir.as_str()],
        env = { "LOG" => "warn", "HOME" => dir },
        inherit_env = ["LANG", "AWS_PROFILE"],
        directory = "/",
    );
    let _all = mcp!(sh, command = "my-server", inherit_all_env = true);
    let user = String::from("ann");
    let _web = mcp!(
        web,
        url = "https://example.com/mcp",
        headers = { "X-Org" => "acme", "Authorization" => "ignored: token wins" },
        token = move || format!("token-of-{user}"),   // read for every request
    );
    let _static = mcp!(web, url = "http://127.0.0.1:9/mcp", token = "static");
}
