use mcp_agent::mcp;

fn main() {
    // An unknown key, with a did-you-mean.
    let _ = mcp!(fs, comand("npx"));
    // Keys that do not fit the transport.
    let _ = mcp!(fs, command("npx"), bearer_token = "t", header("X", "y"));
    let _ = mcp!(web, url = "https://example.com/mcp", env(A = "b"), directory = "/");
    // Both, or neither.
    let _ = mcp!(both, command("npx"), url = "https://example.com/mcp");
    let _ = mcp!(nothing, directory = "/tmp");
    // A key in the wrong form, and plain http to another machine.
    let _ = mcp!(fs, command = "npx");
    let _ = mcp!(fs, command("npx"), env("a"), only = "x", header("X"));
    let _ = mcp!(web, url = "http://example.com/mcp");
    // The keys of an earlier mcp!, each with what it is now.
    let _ = mcp!(fs, command("npx"), args = ["-y"]);
    let _ = mcp!(web, url = "https://example.com/mcp", headers = { "X" => "y" }, token = "t");
    // Inheriting the whole environment is written out, never computed.
    let everything = true;
    let _ = mcp!(fs, command("npx"), inherit_all_env = everything);
    // Given twice.
    let _ = mcp!(fs, command("npx"), prefix = "a", prefix = "b");
}
