//! The configuration files users already keep their servers in: Claude Code's and
//! Cursor's `.mcp.json`, VS Code's `.vscode/mcp.json`, `--config FILE`; variables
//! expanded as those tools do; only files inside the project that no one else can
//! write; a snapshot taken from one keeps no secret.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mcp_test_support::{free_port, peers, HttpServer};

fn run_in(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp"))
        .args(args)
        .current_dir(cwd)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A project folder (it has `.git`) inside a scratch folder; both removed when dropped.
struct Tree {
    top: PathBuf,
    project: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let top = std::env::temp_dir().join(format!(
            "mcp-cli-config-{}-{}",
            std::process::id(),
            free_port()
        ));
        let project = top.join("project");
        std::fs::create_dir_all(project.join(".git")).unwrap();
        std::fs::create_dir_all(project.join("src/deep")).unwrap();
        for d in [&top, &project] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Tree { top, project }
    }

    fn write(&self, path: &Path, text: &str) {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.top);
    }
}

fn everything_entry() -> String {
    format!(
        r#"{{"mcpServers": {{"ev": {{"command": "{}", "args": ["stdio"],
            "env": {{"GREETING": "${{MCP_TEST_GREETING}}", "DEFAULTED": "${{MCP_TEST_UNSET:-fallback}}",
                     "WHERE": "${{workspaceFolder}}"}}}}}}}}"#,
        peers()
            .join("npm/node_modules/.bin/mcp-server-everything")
            .display()
    )
}

/// `.mcp.json` at the project root, used from a folder below it: `${VAR}` and
/// `${VAR:-default}` expanded into the server's environment, and nothing else of this
/// process's. A snapshot taken from it names the file, not the values.
#[test]
fn claude_code_config_with_variables_and_a_snapshot_that_keeps_no_secret() {
    let t = Tree::new();
    t.write(&t.project.join(".mcp.json"), &everything_entry());
    let cwd = t.project.join("src/deep");
    let env = [
        ("MCP_TEST_GREETING", "canary-greeting-value"),
        ("MCP_TEST_OTHER", "not-for-the-server"),
    ];
    let o = run_in(&cwd, &["call", "ev", "get-env", "--text"], &env);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("\"GREETING\": \"canary-greeting-value\""),
        "{out}"
    );
    assert!(out.contains("\"DEFAULTED\": \"fallback\""), "{out}");
    assert!(!out.contains("not-for-the-server"), "{out}");

    // `mcp snapshot ev` takes the server from the file; the snapshot says where.
    let o = run_in(&t.project, &["snapshot", "ev"], &env);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let snap = std::fs::read_to_string(t.project.join(".mcp/ev.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&snap).unwrap();
    assert_eq!(
        v["server"],
        serde_json::json!({"config": ".mcp.json"}),
        "{snap}"
    );
    assert!(!snap.contains("canary-greeting-value"), "{snap}");
    assert!(v["tools"].as_array().is_some_and(|t| !t.is_empty()));
    // Checking it reads the file again (and needs the variable again).
    let o = run_in(&cwd, &["snapshot", "--check"], &env);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("ev: up to date"), "{out}");

    // A variable that is not set and has no default: exit 2, naming it and the file.
    let o = run_in(&cwd, &["tools", "ev"], &[]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(".mcp.json: server `ev`, `env.GREETING`: uses ${MCP_TEST_GREETING}, but `MCP_TEST_GREETING` is not set"), "{err}");
}

/// VS Code's `.vscode/mcp.json`: an HTTP server whose URL and headers name
/// `${env:VAR}`; the headers reach the server.
#[test]
fn vscode_config_with_an_http_server_and_headers() {
    let t = Tree::new();
    let server = HttpServer::python(&["headers"]);
    t.write(
        &t.project.join(".vscode/mcp.json"),
        r#"{"inputs": [], "servers": {"py": {"type": "http",
            "url": "http://127.0.0.1:${env:MCP_TEST_PORT}/mcp",
            "headers": {"X-Team": "${env:MCP_TEST_TEAM}"}}}}"#,
    );
    let port = server.port.to_string();
    let env = [
        ("MCP_TEST_PORT", port.as_str()),
        ("MCP_TEST_TEAM", "team-canary"),
    ];
    let o = run_in(
        &t.project,
        &["call", "py", "request_headers", "--text"],
        &env,
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("team-canary"), "{out}");
    // --header adds to them.
    let o = run_in(
        &t.project,
        &[
            "call",
            "py",
            "request_headers",
            "--text",
            "--header",
            "X-Extra: more",
        ],
        &env,
    );
    assert!(text(&o).0.contains("more"), "{}", text(&o).1);
    // `mcp info` works the same way.
    let o = run_in(&t.project, &["info", "py", "--json"], &env);
    assert!(o.status.success(), "{}", text(&o).1);
}

/// A configuration file above the project root, or one others may write, is not
/// used (it could start any program); the same file where it may be is (the control).
#[test]
fn config_files_outside_the_project_or_writable_by_others_are_not_used() {
    let t = Tree::new();
    let marker = t.top.join("started");
    let planted = format!(
        r#"{{"mcpServers": {{"ev": {{"command": "sh", "args": ["-c", "touch {}"]}}}}}}"#,
        marker.display()
    );
    // Above the project root.
    t.write(&t.top.join(".mcp.json"), &planted);
    let o = run_in(&t.project, &["tools", "ev"], &[]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no server `ev`"), "{err}");
    assert!(
        !marker.exists(),
        "a command from above the project was started"
    );

    // Inside, but group-writable: skipped with a warning.
    let inside = t.project.join(".mcp.json");
    t.write(&inside, &everything_entry());
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o664)).unwrap();
    let env = [("MCP_TEST_GREETING", "x")];
    let o = run_in(&t.project, &["tools", "ev"], &env);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is not used: it is writable by its group"),
        "{err}"
    );
    // The control: the same file, only its owner may write it.
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = run_in(&t.project, &["tools", "ev"], &env);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.lines().any(|l| l.starts_with("echo\t")), "{out}");

    // --config names a file explicitly: used from anywhere, if it is safe; relative
    // to the current folder, which is also its `${workspaceFolder}`.
    let elsewhere = t.top.join("servers.json");
    t.write(&elsewhere, &everything_entry());
    let o = run_in(
        &t.top,
        &[
            "call",
            "ev",
            "get-env",
            "--text",
            "--config",
            "servers.json",
        ],
        &env,
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains(&format!("\"WHERE\": \"{}\"", t.top.display())),
        "{out}"
    );
    // A snapshot naming a configuration file outside the project is refused.
    t.write(
        &t.project.join(".mcp/evil.json"),
        r#"{"format": 1, "name": "evil", "server": {"config": "../.mcp.json"}, "tools": []}"#,
    );
    let o = run_in(&t.project, &["tools", "evil"], &env);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
    assert!(
        text(&o).1.contains("is outside the project root"),
        "{}",
        text(&o).1
    );
    // `mcp snapshot --url` adds one server: it needs its name.
    let o = run_in(
        &t.project,
        &["snapshot", "--url", "http://127.0.0.1:9/mcp"],
        &env,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
    assert!(
        text(&o).1.contains("name the server to add"),
        "{}",
        text(&o).1
    );
    // A typo names the nearest server.
    let o = run_in(&t.project, &["tools", "evv"], &env);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("did you mean `ev`?)"), "{}", text(&o).1);
    assert!(!marker.exists());
}
