#![allow(clippy::unwrap_used)]
//! The `mcp` command against real servers: it never prints what a terminal would act
//! on from a server, and never hands its own credentials to a stdio server.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The pinned test peers (installed once; fails loudly when that is not possible).
fn peers() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("tests/peers/install.sh"))
        .output()
        .expect("bash is required to install the test peers");
    assert!(
        out.status.success(),
        "installing the test peers failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    repo_root().join(".peers")
}

fn mcp(args: &[&str], env: &[(&str, &str)]) -> Output {
    // Run from a scratch folder: no project snapshot applies.
    let dir = std::env::temp_dir().join(format!("mcp-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp"));
    cmd.args(args).current_dir(&dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn hostile(peers: &Path, mode: &str) -> Vec<String> {
    vec![
        peers.join("venv/bin/python").display().to_string(),
        repo_root()
            .join("tests/peers/hostile.py")
            .display()
            .to_string(),
        "stdio".into(),
        mode.into(),
    ]
}

fn terminal_safe(text: &str) {
    for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(!text.contains(c), "{c:?} reached the terminal: {text:?}");
    }
}

#[test]
fn server_text_is_printed_with_control_characters_escaped() {
    let peers = peers();
    let server = hostile(&peers, "evil-names");
    let mut args = vec!["tools", "evil", "--"];
    args.extend(server.iter().map(String::as_str));
    let out = mcp(&args, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    terminal_safe(&stdout);
    assert!(stdout.contains("\\u{1b}[31mred"), "{stdout}");
    assert!(stdout.contains("\\u{202e}desrever"), "{stdout}");
    // A tool result: JSON, with every control character escaped.
    let mut args = vec![
        "call",
        "evil",
        "echo",
        r#"{"message": "\u001b[2J\u202e"}"#,
        "--",
    ];
    args.extend(server.iter().map(String::as_str));
    let out = mcp(&args, &[]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    terminal_safe(&stdout);
    assert!(stdout.contains("\\u001b[2J\\u202e"), "{stdout}");
    let _: serde_json::Value = serde_json::from_str(&stdout).unwrap();
}

#[test]
fn the_cli_keeps_its_credentials_from_stdio_servers() {
    let peers = peers();
    let everything = peers
        .join("npm/node_modules/.bin/mcp-server-everything")
        .display()
        .to_string();
    let out = mcp(
        &["call", "srv", "get-env", "{}", "--", &everything, "stdio"],
        &[
            ("MCP_TOKEN_SRV", "canary-token-srv"),
            ("MCP_TOKEN_OTHER", "canary-token-other"),
            ("MCP_CREDENTIALS", "/nonexistent/canary-credentials.json"),
            ("MCP_TEST_UNRELATED", "still-passed"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("still-passed"),
        "get-env did not work: {stdout}"
    );
    assert!(
        !stdout.contains("canary"),
        "a credential reached the server: {stdout}"
    );
}
