//! The era is decided by what a server says, never by a clock while it is merely slow:
//! real servers of each era, started late (a delay wrapper over stdio, a proxy that
//! accepts at once and reaches the server once it listens over HTTP), in Auto and in
//! forced modes. Each case prints how long detection took.

use std::time::{Duration, Instant};

use mcp_runtime::{Client, Era, HttpConfig, ProtocolMode, StdioConfig};

use crate::support::{self, HttpServer, SlowProxy};

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
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"));
    client.close().await.unwrap();
}

/// A server of the handshake era that ignores `server/discover` altogether (it never
/// answers it) still works: the probe time passes, initialize is answered.
#[tokio::test]
async fn a_server_that_never_answers_discover_still_works() {
    let client = Client::builder()
        .probe_timeout(Duration::from_millis(500))
        .stdio(support::hostile(&["stdio", "silent-discover"]))
        .unwrap();
    let d = client.connect().await.unwrap();
    assert_eq!(d.era, Era::Legacy);
    let r = client
        .call_tool("echo", serde_json::json!({"message": "hi"}))
        .await
        .unwrap();
    assert!(r.text().contains("hi"), "{}", r.text());
    client.close().await.unwrap();
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
    assert!(c
        .list_tools()
        .await
        .unwrap()
        .iter()
        .any(|t| t.name == "echo"));
}
