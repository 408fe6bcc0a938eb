//! A server that writes garbage between its messages: each bad message is logged and
//! skipped; nothing panics and no unrelated call hangs. The peer is a small stdio
//! server in Python's standard library that misbehaves on purpose (no real server
//! does so on demand).

use std::time::Duration;

use mcp_runtime::{client::Era, Client, StdioConfig};
use serde_json::json;

const SERVER: &str = r#"
import json, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
def raw(text):
    sys.stdout.write(text + "\n"); sys.stdout.flush()
raw("this server prints a banner on stdout")
for line in sys.stdin:
    msg = json.loads(line)
    mid = msg.get("id"); method = msg.get("method")
    if mid is None:
        continue
    if method == "server/discover":
        raw("{not json")
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
    elif method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-03-26",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "garbage", "version": "1"},
              "somethingNew": {"x": 1}}})
    elif method == "tools/list":
        raw('{"jsonrpc":"2.0","id":' + json.dumps(mid) + ',"result":')  # truncated
        raw("[]")
        raw("[1, 2]")
        raw('{"jsonrpc":"2.0"}')
        # A batch (2025-03-26 servers may send them): a notification, a bad element, the answer.
        send([{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}},
              {"nonsense": True},
              {"jsonrpc": "2.0", "id": mid, "result": {"tools": [
                  {"name": "ok", "inputSchema": {"type": "object"}, "futureField": 1},
                  {"description": "no name: skipped"}]}}])
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": 999999, "result": {}})  # answers nothing pending
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [
            {"type": "text", "text": "fine"}, {"type": "hologram", "data": 1}], "isError": False}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "nope"}})
"#;

#[tokio::test]
async fn malformed_messages_are_skipped() {
    let c = Client::builder()
        .timeout(Duration::from_secs(10))
        .stdio(StdioConfig::new("python3").args(["-c", SERVER]))
        .unwrap();
    let d = c.connect().await.unwrap();
    assert_eq!(d.era, Era::Legacy);
    assert_eq!(d.protocol_version, "2025-03-26");
    let tools = c.tools().await.unwrap();
    assert_eq!(
        tools.len(),
        1,
        "the nameless tool is skipped, the other kept"
    );
    assert_eq!(tools[0].extra["futureField"], json!(1));
    let r = c.call("ok", json!({})).await.unwrap();
    assert_eq!(r.text(), "fine");
    assert!(matches!(r.content[1], mcp_runtime::Content::Unknown(_)));
    c.close().await.unwrap();
}
