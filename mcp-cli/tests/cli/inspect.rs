//! Every client method from the command line, against real servers: server-everything
//! over stdio and Streamable HTTP, and the PyPI server in each era. Output for people
//! (tables, text) and for scripts (`--json`), progress on stderr, Ctrl-C, listening,
//! tasks, exit codes, a server that dies early, completions.

use std::io::BufRead as _;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mcp_test_support::{free_port, peers, repo_root, HttpServer};
use serde_json::Value;

use super::mcp;

fn everything() -> String {
    peers()
        .join("npm/node_modules/.bin/mcp-server-everything")
        .display()
        .to_string()
}

fn python() -> String {
    peers().join("venv/bin/python").display().to_string()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// stdout of a command that must succeed.
fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        out(o),
        err(o)
    );
    out(o)
}

fn json(o: &Output) -> Value {
    let text = ok(o);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `mcp ARGS… TARGET…` (the target last: `-- COMMAND` must be).
fn run(args: &[&str], target: &[String]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(target.iter().map(String::as_str));
    mcp(&all, &[])
}

#[test]
fn every_command_against_server_everything_over_stdio_and_http() {
    let http = HttpServer::everything("streamableHttp");
    let targets = [
        vec!["--url".to_owned(), http.url("/mcp")],
        vec!["--".to_owned(), everything(), "stdio".to_owned()],
    ];
    for target in &targets {
        let info = json(&run(&["info", "ev", "--json"], target));
        assert_eq!(info["era"], "legacy", "{info}");
        assert!(
            info["protocolVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("20")),
            "{info}"
        );
        assert_eq!(
            info["serverInfo"]["name"], "mcp-servers/everything",
            "{info}"
        );
        assert!(info["capabilities"]["tools"].is_object(), "{info}");
        let text = ok(&run(&["info", "ev"], target));
        assert!(text.contains("mcp-servers/everything 2.0.0"), "{text}");
        assert!(text.contains("legacy era"), "{text}");
        assert!(text.contains("instructions:"), "{text}");

        let tools = ok(&run(&["tools", "ev"], target));
        assert!(tools.lines().any(|l| l.starts_with("echo\t")), "{tools}");
        let tools = json(&run(&["tools", "ev", "--json"], target));
        assert!(tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo"));

        let prompts = ok(&run(&["prompts", "ev"], target));
        assert!(
            prompts
                .lines()
                .any(|l| l.starts_with("args-prompt\tcity state?\t")),
            "{prompts}"
        );
        let prompt = ok(&run(&["prompt", "ev", "args-prompt", "city=Paris"], target));
        assert!(
            prompt.starts_with("user:\n") && prompt.contains("Paris"),
            "{prompt}"
        );
        let prompt = json(&run(
            &["prompt", "ev", "args-prompt", "city=Oslo", "--json"],
            target,
        ));
        assert_eq!(prompt["messages"][0]["role"], "user", "{prompt}");
        let missing = run(&["prompt", "ev", "args-prompts"], target);
        assert_eq!(missing.status.code(), Some(2), "{}", err(&missing));
        assert!(
            err(&missing).contains("did you mean `args-prompt`?"),
            "{}",
            err(&missing)
        );

        let resources = ok(&run(&["resources", "ev"], target));
        assert!(
            resources.contains("demo://resource/static/document/architecture.md\t"),
            "{resources}"
        );
        let templates = ok(&run(&["templates", "ev", "--json"], target));
        assert!(
            templates.contains("demo://resource/dynamic/text/{resourceId}"),
            "{templates}"
        );
        let read = ok(&run(
            &["read", "ev", "demo://resource/dynamic/text/3"],
            target,
        ));
        assert!(read.starts_with("Resource 3"), "{read}");
        let blob = json(&run(
            &["read", "ev", "demo://resource/dynamic/blob/3", "--json"],
            target,
        ));
        assert!(
            blob["contents"][0]["blob"]
                .as_str()
                .is_some_and(|b| !b.is_empty()),
            "{blob}"
        );
        let blob = ok(&run(
            &["read", "ev", "demo://resource/dynamic/blob/3"],
            target,
        ));
        assert!(blob.contains("bytes of"), "{blob}");

        let values = ok(&run(
            &[
                "complete",
                "ev",
                "--prompt",
                "completable-prompt",
                "department",
                "E",
            ],
            target,
        ));
        assert!(values.lines().any(|l| l == "Engineering"), "{values}");

        // Arguments as JSON, as --arg (JSON when it parses), or both.
        let result = json(&run(
            &["call", "ev", "echo", "--arg", "message=hi there"],
            target,
        ));
        assert!(
            result["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("hi there"),
            "{result}"
        );
        let text = ok(&run(
            &["call", "ev", "echo", r#"{"message": "plain"}"#, "--text"],
            target,
        ));
        assert!(
            text.contains("plain") && !text.trim_start().starts_with('{'),
            "{text}"
        );
        let sum = ok(&run(
            &[
                "call", "ev", "get-sum", "--arg", "a=2", "--arg", "b=3", "--text",
            ],
            target,
        ));
        assert!(sum.contains('5'), "{sum}");
        let typo = run(&["call", "ev", "ech", "--arg", "message=x"], target);
        assert_eq!(typo.status.code(), Some(2), "{}", err(&typo));
        assert!(
            err(&typo).contains("has no tool `ech`; did you mean `echo`?"),
            "{}",
            err(&typo)
        );
        let bad = run(&["call", "ev", "echo", "[1]"], target);
        assert_eq!(bad.status.code(), Some(2), "{}", err(&bad));

        // Progress on stderr, one line per notification when stderr is no terminal.
        let long = run(
            &[
                "call",
                "ev",
                "trigger-long-running-operation",
                "--arg",
                "duration=1",
                "--arg",
                "steps=2",
            ],
            target,
        );
        ok(&long);
        let progress: Vec<String> = err(&long)
            .lines()
            .filter(|l| l.starts_with("progress "))
            .map(str::to_owned)
            .collect();
        assert_eq!(progress, ["progress 1/2", "progress 2/2"], "{}", err(&long));
    }
}

/// A server without prompts or resources (server-filesystem): the lists are empty,
/// and stderr says why, rather than a protocol error.
#[test]
fn a_server_without_prompts_or_resources_says_so() {
    let dir = scratch();
    let fs = peers()
        .join("npm/node_modules/.bin/mcp-server-filesystem")
        .display()
        .to_string();
    let target = vec!["--".to_owned(), fs, dir.display().to_string()];
    // The control: it has tools.
    assert!(ok(&run(&["tools", "fs"], &target)).contains("read_text_file"));
    for (command, area) in [
        ("prompts", "prompts"),
        ("resources", "resources"),
        ("templates", "resources"),
    ] {
        let o = run(&[command, "fs"], &target);
        assert_eq!(ok(&o), "");
        assert!(
            err(&o).contains(&format!("fs offers no {area}")),
            "{}",
            err(&o)
        );
    }
    let prompts = json(&run(&["prompts", "fs", "--json"], &target));
    assert_eq!(prompts, serde_json::json!({"prompts": []}));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The PyPI server in each era, by `--protocol`: the era and version it negotiated,
/// progress with messages, logs, completions, a tool error's exit code.
#[test]
fn both_eras_of_the_pypi_server() {
    for (era, version) in [("modern", Some("2026-07-28")), ("legacy", None)] {
        let server = HttpServer::python_env(free_port(), &[], &[("PYSERVER_ERA", era)]);
        let target = vec![
            "--url".to_owned(),
            server.url("/mcp"),
            "--protocol".to_owned(),
            era.to_owned(),
        ];
        let info = json(&run(&["info", "py", "--json"], &target));
        assert_eq!(info["era"], era, "{info}");
        if let Some(v) = version {
            assert_eq!(info["protocolVersion"], v, "{info}");
        }
        assert_eq!(info["serverInfo"]["name"], "pyserver", "{info}");
        let slow = run(
            &[
                "call",
                "py",
                "slow",
                "--arg",
                "seconds=0.2",
                "--arg",
                "steps=2",
                "--text",
            ],
            &target,
        );
        assert_eq!(ok(&slow).trim(), "done");
        assert!(
            err(&slow).contains("progress 1/2: step 1/2\nprogress 2/2: step 2/2"),
            "{}",
            err(&slow)
        );
        let logged = run(
            &[
                "call",
                "py",
                "log",
                "--arg",
                "message=hello log",
                "--log-level",
                "debug",
            ],
            &target,
        );
        ok(&logged);
        assert!(
            err(&logged).contains("server warning [pyserver]: hello log"),
            "{}",
            err(&logged)
        );
        let failed = run(&["call", "py", "fail"], &target);
        assert_eq!(failed.status.code(), Some(1), "{}", err(&failed));
        assert_eq!(json_of(&failed)["isError"], true);
        assert!(ok(&run(&["prompts", "py"], &target)).starts_with("greet\tname\t"));
        assert!(ok(&run(&["read", "py", "py://readme"], &target)).contains("pyserver readme"));
        assert!(ok(&run(&["templates", "py"], &target)).contains("py://items/{id}\titem\t"));
        let names = ok(&run(
            &["complete", "py", "--prompt", "greet", "name", "a"],
            &target,
        ));
        assert_eq!(
            names.lines().collect::<Vec<_>>(),
            ["Ann", "Alice"],
            "{names}"
        );
    }
    // A legacy-only server asked for the modern era only: a protocol failure, exit 3.
    let legacy = HttpServer::python_env(free_port(), &[], &[("PYSERVER_ERA", "legacy")]);
    let refused = mcp(
        &[
            "info",
            "py",
            "--url",
            &legacy.url("/mcp"),
            "--protocol",
            "modern",
        ],
        &[],
    );
    assert_eq!(refused.status.code(), Some(3), "{}", err(&refused));
}

fn json_of(o: &Output) -> Value {
    serde_json::from_str(&out(o)).unwrap_or_else(|e| panic!("not JSON ({e}): {}", out(o)))
}

/// Lines a child writes, as they come.
fn lines_of(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing `what` (a generous bound: only a hang fails).
fn wait_line(rx: &mpsc::Receiver<String>, what: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(l) => {
                let done = l.contains(what);
                seen.push(l);
                if done {
                    return seen;
                }
            }
            Err(_) => panic!("no line with {what:?}; saw {seen:?}"),
        }
    }
}

fn interrupt(child: &std::process::Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn scratch() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mcp-cli-inspect-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Ctrl-C during a call: the server is sent `notifications/cancelled` for that very
/// request (seen on the wire between them), and the command exits 130.
#[test]
fn ctrl_c_cancels_the_call_and_the_server_is_told() {
    let dir = scratch();
    let wire = dir.join("wire.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp"))
        .args(["call", "py", "sleep_forever", "--", &python()])
        .arg(repo_root().join("tests/peers/wiretap.py"))
        .args([
            wire.display().to_string(),
            "0".into(),
            "--".into(),
            python(),
        ])
        .arg(repo_root().join("tests/peers/pyserver.py"))
        .arg("stdio")
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The call is on the wire before the interrupt (however slowly the server starts).
    let call_id = loop {
        let log = std::fs::read_to_string(&wire).unwrap_or_default();
        let id = log
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|e| {
                let line: Value = serde_json::from_str(e["line"].as_str()?).ok()?;
                (e["dir"] == ">" && line["method"] == "tools/call").then(|| line["id"].clone())
            });
        if let Some(id) = id {
            break id;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "mcp ended before calling"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    interrupt(&child);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", err(&o));
    assert!(err(&o).contains("interrupted"), "{}", err(&o));
    let log = std::fs::read_to_string(&wire).unwrap();
    let cancelled: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["dir"] == ">")
        .filter_map(|e| serde_json::from_str::<Value>(e["line"].as_str()?).ok())
        .filter(|m| m["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1, "{log}");
    assert_eq!(cancelled[0]["params"]["requestId"], call_id, "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a terminal, progress is a bar (indicatif), not lines: run under a
/// pseudo-terminal (Python's `pty`), with the line form as the control.
#[test]
fn progress_is_a_bar_on_a_terminal() {
    let dir = scratch();
    let args = [
        "call",
        "ev",
        "trigger-long-running-operation",
        "--arg",
        "duration=2",
        "--arg",
        "steps=4",
        "--text",
        "--",
    ];
    let spawn = "import os, pty, sys; sys.exit(os.waitstatus_to_exitcode(pty.spawn(sys.argv[1:])))";
    let o = Command::new(python())
        .args(["-c", spawn, env!("CARGO_BIN_EXE_mcp")])
        .args(args)
        .args([everything(), "stdio".into()])
        .env("TERM", "xterm")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let screen = out(&o);
    assert!(o.status.success(), "{screen}");
    assert!(
        screen.contains("Long running operation completed"),
        "{screen}"
    );
    // The bar: drawn with `=` and `>` between brackets, redrawn in place.
    assert!(
        screen.contains("[==") && screen.contains("4/4"),
        "{screen:?}"
    );
    assert!(!screen.contains("progress 1/4"), "{screen:?}");
    // The control: the same call, stderr a pipe, prints lines.
    let mut piped = vec![
        "call",
        "ev",
        "trigger-long-running-operation",
        "--arg",
        "duration=2",
        "--arg",
        "steps=4",
        "--text",
        "--",
    ];
    let ev = everything();
    piped.extend([ev.as_str(), "stdio"]);
    let lines = mcp(&piped, &[]);
    assert!(err(&lines).contains("progress 1/4"), "{}", err(&lines));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mcp listen` prints a change another client causes, until Ctrl-C (130).
#[test]
fn listen_prints_notifications_until_interrupted() {
    // `toggle_tool` adds or removes a tool and announces it, every time.
    let server = HttpServer::python_env(free_port(), &[], &[("PYSERVER_TOGGLE", "1")]);
    let url = server.url("/mcp");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp"))
        .args(["listen", "py", "--url", &url])
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    wait_line(&stderr, "listening to py");
    ok(&mcp(&["call", "py", "toggle_tool", "--url", &url], &[]));
    wait_line(&stdout, "tools changed");
    interrupt(&child);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    // --json: one protocol notification per line.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp"))
        .args(["listen", "py", "--url", &url, "--json"])
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    wait_line(&stderr, "listening to py");
    ok(&mcp(&["call", "py", "toggle_tool", "--url", &url], &[]));
    let line = wait_line(&stdout, "list_changed").pop().unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"method": "notifications/tools/list_changed"})
    );
    interrupt(&child);
    assert_eq!(child.wait().unwrap().code(), Some(130));
    // --timeout ends listening with 0.
    ok(&mcp(
        &["listen", "py", "--url", &url, "--timeout", "0.5"],
        &[],
    ));
}

/// A call run as a task (the legacy era's tasks), then the task listed and shown.
#[test]
fn tasks_are_run_listed_and_shown() {
    let server = HttpServer::python_env(free_port(), &[], &[("PYSERVER_ERA", "legacy")]);
    let url = server.url("/mcp");
    let o = mcp(
        &[
            "call",
            "py",
            "long_task",
            "--task",
            "--arg",
            "seconds=0.5",
            "--text",
            "--url",
            &url,
        ],
        &[],
    );
    assert!(ok(&o).contains("done"), "{}", out(&o));
    let started = err(&o);
    let id = started
        .lines()
        .find_map(|l| l.strip_prefix("task ")?.strip_suffix(" started"))
        .unwrap_or_else(|| panic!("no task started: {started}"))
        .to_owned();
    let list = ok(&mcp(&["tasks", "py", "--url", &url], &[]));
    assert!(
        list.lines()
            .any(|l| l.starts_with(&format!("{id}\tcompleted\t"))),
        "{list}"
    );
    let list = json(&mcp(&["tasks", "py", "--url", &url, "--json"], &[]));
    assert!(list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["taskId"] == id.as_str()));
    let one = ok(&mcp(&["tasks", "py", &id, "--url", &url], &[]));
    assert!(one.starts_with(&format!("task {id} completed")), "{one}");
    let waited = ok(&mcp(
        &["tasks", "py", &id, "--wait", "--text", "--url", &url],
        &[],
    ));
    assert!(waited.contains("done"), "{waited}");
}

/// A stdio server that exits at once: the error is exit 3 with its exit status and the
/// last lines it wrote to stderr (escaped).
#[test]
fn a_server_that_exits_early_shows_its_last_stderr_lines() {
    let script = "echo starting >&2; printf 'boom: API_KEY is not set \\033[2J\\n' >&2; exit 3";
    let o = mcp(&["tools", "broken", "--", "sh", "-c", script], &[]);
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains("exit status: 3"), "{e}");
    assert!(
        e.contains(
            "the last lines it wrote to stderr:\n    starting\n    boom: API_KEY is not set"
        ),
        "{e}"
    );
    assert!(!e.contains('\u{1b}'), "{e:?}");
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef mcp"),
        ("fish", "complete -c mcp"),
    ] {
        let script = ok(&mcp(&["completions", shell], &[]));
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(
            script.contains("listen") && script.contains("templates"),
            "{shell}"
        );
    }
    let o = mcp(&["completions", "tcsh"], &[]);
    assert_eq!(o.status.code(), Some(2));
    let o = mcp(&["nonsense"], &[]);
    assert_eq!(o.status.code(), Some(2));
}
