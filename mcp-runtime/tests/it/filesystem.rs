//! server-filesystem over stdio: structured results, directory and environment.

use mcp_runtime::Client;
use serde_json::json;

use crate::support;

fn tempdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mcp-rt-fs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.canonicalize().unwrap()
}

#[tokio::test]
async fn reads_writes_and_lists_files() {
    let dir = tempdir("rw");
    std::fs::write(dir.join("hello.txt"), "hello, world\n").unwrap();
    let c = Client::builder()
        .stdio(
            support::filesystem(&dir)
                .directory(&dir)
                .env("MCP_TEST_MARKER", "1"),
        )
        .unwrap();
    let tools = c.tools().await.unwrap();
    assert_eq!(
        tools.len(),
        14,
        "{:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    let read = tools.iter().find(|t| t.name == "read_text_file").unwrap();
    assert!(read.output_schema.is_some());
    assert!(read.is_read_only());

    let path = dir.join("hello.txt").display().to_string();
    let r = c
        .call("read_text_file", json!({"path": path}))
        .await
        .unwrap();
    assert!(!r.is_error());
    assert_eq!(r.text(), "hello, world\n");
    assert_eq!(r.structured_content.unwrap()["content"], "hello, world\n");

    let new = dir.join("new.txt").display().to_string();
    let r = c
        .call("write_file", json!({"path": new, "content": "written"}))
        .await
        .unwrap();
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(
        std::fs::read_to_string(dir.join("new.txt")).unwrap(),
        "written"
    );

    let r = c
        .call("list_directory", json!({"path": dir.display().to_string()}))
        .await
        .unwrap();
    assert!(r.text().contains("hello.txt") && r.text().contains("new.txt"));

    // Outside the allowed directory: the tool fails, which is a value, not an Err.
    let r = c
        .call("read_text_file", json!({"path": "/etc/hostname"}))
        .await
        .unwrap();
    assert!(r.is_error(), "{}", r.text());
    c.close().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn env_is_merged_over_the_parent_environment() {
    // A real server that reports its environment: server-everything's get-env.
    let c = Client::builder()
        .stdio(support::everything().env("MCP_TEST_SECRETISH", "value-1"))
        .unwrap();
    let r = c.call("get-env", json!({})).await.unwrap();
    let text = r.text();
    assert!(
        text.contains("MCP_TEST_SECRETISH"),
        "extra variable missing"
    );
    assert!(
        text.contains("\"PATH\""),
        "the parent environment was replaced"
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn a_missing_program_says_what_to_fix() {
    let c = Client::builder()
        .stdio(mcp_runtime::StdioConfig::new("/nonexistent/mcp-server"))
        .unwrap();
    let e = c.tools().await.unwrap_err();
    assert!(e.is_transport(), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("/nonexistent/mcp-server") && msg.contains("PATH"),
        "{msg}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn server_stderr_goes_to_tracing_and_env_values_stay_out_of_logs() {
    let (captured, _guard) = support::capture(tracing::Level::TRACE);
    let dir = tempdir("stderr");
    let config = support::filesystem(&dir).env("MCP_TEST_TOKEN", "s3cr3t-value");
    assert!(!format!("{config:?}").contains("s3cr3t-value"));
    let c = Client::builder().stdio(config).unwrap();
    c.tools().await.unwrap();
    c.close().await.unwrap();
    let out = captured.text();
    let line = out
        .lines()
        .find(|l| l.contains("Secure MCP Filesystem Server running on stdio"))
        .unwrap_or_else(|| panic!("no stderr line in:\n{out}"));
    assert!(line.contains("mcp_runtime::stderr"), "{line}");
    assert!(!out.contains("s3cr3t-value"), "an env value was logged");
    let _ = std::fs::remove_dir_all(&dir);
}
