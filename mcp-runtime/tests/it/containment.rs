//! What a stdio server gets and keeps: it dies with the client process (even one
//! killed with SIGKILL), it sees only the environment it is given, and a model never
//! sees two tools under one name.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_runtime::{declared::ToolShape, Client, Mcp, StdioConfig};
use serde_json::{json, Value};

use crate::support;

/// Alive and not a zombie.
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-it-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if !s.trim().is_empty() {
                return s.trim().to_owned();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The client process of [`a_sigkilled_client_leaves_no_server`], which starts this
/// test binary again to run it: it starts a server that ignores the end of its input
/// and SIGTERM, calls its tool that never answers, and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the client process of a_sigkilled_client_leaves_no_server, which runs it"]
async fn orphan_client_process() {
    let pidfile = std::env::var("MCP_TEST_ORPHAN_PIDFILE")
        .expect("run by a_sigkilled_client_leaves_no_server, which sets MCP_TEST_ORPHAN_PIDFILE");
    let mut argv = support::hostile_argv(&["stdio", "ignore-eof", &pidfile]);
    if std::env::var("MCP_TEST_ORPHAN_LAUNCHER").is_ok() {
        // A launcher that stays (like npx): the server is a grandchild.
        let mut launched = vec![
            "/bin/sh".into(),
            "-c".into(),
            "\"$@\"; exit 0".into(),
            "launcher".into(),
        ];
        launched.extend(argv);
        argv = launched;
    }
    let client = Client::builder()
        .stdio(StdioConfig::from_argv(argv).unwrap())
        .unwrap();
    let never = client.call("slow", json!({})).await;
    panic!("the slow tool answered: {never:?}");
}

#[test]
fn a_sigkilled_client_leaves_no_server() {
    support::peers();
    for launcher in [false, true] {
        let dir = scratch(if launcher {
            "orphan-launcher"
        } else {
            "orphan"
        });
        let pidfile = dir.join("server.pid");
        let mut client = std::process::Command::new(std::env::current_exe().unwrap());
        client
            .args([
                "containment::orphan_client_process",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env("MCP_TEST_ORPHAN_PIDFILE", &pidfile)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if launcher {
            client.env("MCP_TEST_ORPHAN_LAUNCHER", "1");
        }
        let mut client = client.spawn().unwrap();
        let server: u32 = wait_for_file(&pidfile).parse().unwrap();
        assert!(running(server));
        // The server is up and serving; the client is killed with no chance to clean up.
        std::thread::sleep(Duration::from_millis(500));
        client.kill().unwrap();
        client.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while running(server) {
            if Instant::now() > deadline {
                // Do not leave it behind ourselves.
                unsafe { libc::kill(server as i32, libc::SIGKILL) };
                panic!(
                    "the server (pid {server}, launcher: {launcher}) outlived its SIGKILLed client"
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

async fn env_seen(config: StdioConfig) -> Value {
    let client = Client::builder().stdio(config).unwrap();
    let r = client.call("get-env", json!({})).await.unwrap();
    client.close().await.unwrap();
    serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("get-env: {e}: {}", r.text()))
}

#[tokio::test]
async fn servers_see_only_the_environment_they_are_given() {
    // This test runs in a process of its own (nextest): its environment is its own.
    std::env::set_var("MCP_TEST_CANARY_SECRET", "canary-7f3a9");
    std::env::set_var("MCP_TEST_WANTED", "wanted-value");
    // Opted in, the whole environment is passed (the positive control: the reader
    // sees the canary when it is there).
    let all = env_seen(support::everything().inherit_all_env()).await;
    assert_eq!(all["MCP_TEST_CANARY_SECRET"], "canary-7f3a9");
    // A variable can be held back from it.
    let removed = env_seen(
        support::everything()
            .inherit_all_env()
            .env_remove("MCP_TEST_CANARY_SECRET"),
    )
    .await;
    assert!(removed.get("MCP_TEST_CANARY_SECRET").is_none(), "{removed}");
    assert_eq!(removed["MCP_TEST_WANTED"], "wanted-value");
    // By default, a clean environment: the safe set, what is named, what is declared;
    // nothing else.
    let clean = env_seen(
        support::everything()
            .inherit_env("MCP_TEST_WANTED")
            .env("DECLARED", "declared-value"),
    )
    .await;
    let names: Vec<&str> = clean
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert!(clean.get("MCP_TEST_CANARY_SECRET").is_none(), "{names:?}");
    assert_eq!(clean["MCP_TEST_WANTED"], "wanted-value");
    assert_eq!(clean["DECLARED"], "declared-value");
    assert_eq!(clean["PATH"], std::env::var("PATH").unwrap());
    for name in &names {
        let allowed = mcp_runtime::transport::stdio::SAFE_ENV_VARS.contains(name)
            || ["MCP_TEST_WANTED", "DECLARED"].contains(name)
            // What node itself adds to its own process.
            || name.starts_with("npm_") || *name == "NODE" || *name == "INIT_CWD" || *name == "COLOR" || *name == "EDITOR" || *name == "PWD" || *name == "_" || *name == "SHLVL" || *name == "OLDPWD";
        assert!(
            allowed,
            "{name} reached a server started by default: {names:?}"
        );
    }
    // A declared server (`Mcp::builder`) too: the canary stays out unless named.
    let bin = support::everything_argv();
    let declared = mcp_runtime::Mcp::builder("everything")
        .command(bin.clone())
        .build()
        .unwrap();
    let seen = declared.call("get-env", json!({})).await.unwrap().text();
    declared.close().await.unwrap();
    assert!(!seen.contains("canary-7f3a9"), "{seen}");
    assert!(
        seen.contains("PATH"),
        "the reader sees the environment: {seen}"
    );
    let named = mcp_runtime::Mcp::builder("everything")
        .command(bin)
        .inherit_env(["MCP_TEST_CANARY_SECRET"])
        .build()
        .unwrap();
    let seen = named.call("get-env", json!({})).await.unwrap().text();
    named.close().await.unwrap();
    assert!(seen.contains("canary-7f3a9"), "named, it is passed: {seen}");
}

/// A tool of our own named like a server tool.
struct LocalEcho;

impl mcp_runtime::declared::LocalTool for LocalEcho {
    fn definition(&self) -> mcp_runtime::Tool {
        serde_json::from_value(json!({"name": "echo", "inputSchema": {"type": "object"}})).unwrap()
    }
    fn call<'a>(
        &'a self,
        _server: &'a Mcp,
        _arguments: Value,
    ) -> mcp_runtime::BoxFuture<'a, mcp_runtime::Result<mcp_runtime::CallToolResult>> {
        Box::pin(async { Ok(mcp_runtime::CallToolResult::default()) })
    }
}

#[tokio::test]
async fn two_tools_under_one_name_are_a_configuration_error_naming_both() {
    let argv: Vec<String> = std::iter::once(support::everything().program().to_owned())
        .chain(support::everything().arguments().iter().cloned())
        .collect();
    let ev = Mcp::builder("ev")
        .command(argv.clone())
        .local_tool(LocalEcho)
        .build()
        .unwrap();
    let e = ev.tools().await.unwrap_err();
    let text = e.to_string();
    assert!(e.is_config(), "{text}");
    assert!(
        text.contains("the local tool `echo`") && text.contains("ev's tool `echo`"),
        "{text}"
    );
    // The call never silently goes to one of them.
    assert!(ev.call("echo", json!({"message": "x"})).await.is_err());
    ev.close().await.unwrap();
    // A rename landing on another tool's name, the same.
    let ev = Mcp::builder("ev")
        .command(argv.clone())
        .tool(ToolShape::new("get-sum").rename("echo"))
        .build()
        .unwrap();
    let text = ev.tools().await.unwrap_err().to_string();
    assert!(text.contains("`get-sum` (shown as `echo`)"), "{text}");
    ev.close().await.unwrap();
    // A prefix solves it.
    let ev = Mcp::builder("ev")
        .command(argv)
        .prefix("ev")
        .local_tool(LocalEcho)
        .build()
        .unwrap();
    let names: Vec<String> = ev
        .tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.contains(&"echo".to_owned()) && names.contains(&"ev_echo".to_owned()));
    ev.close().await.unwrap();
}
