use mcp_agent::mcp;

fn main() {
    // An unknown key, with a did-you-mean.
    let _ = mcp!(fs, comand = "npx");
    // Keys that do not fit the transport.
    let _ = mcp!(fs, command = "npx", token = "t", headers = { "X" => "y" });
    let _ = mcp!(web, url = "https://example.com/mcp", args = ["x"], env = { "A" => "b" });
    // Both, or neither.
    let _ = mcp!(both, command = "npx", url = "https://example.com/mcp");
    let _ = mcp!(nothing, directory = "/tmp");
    // A map where a value goes, and plain http to another machine.
    let _ = mcp!(fs, command = { "a" => "b" });
    let _ = mcp!(web, url = "http://example.com/mcp");
    // The environment is for spawned servers; inheriting all of it is written out.
    let _ = mcp!(web, url = "https://example.com/mcp", inherit_env = ["LANG"]);
    let everything = true;
    let _ = mcp!(fs, command = "npx", inherit_all_env = everything);
}
