//! Shared test support: the real peers (installed by tests/peers/install.sh), and a
//! transport wrapper that records what the session sends.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use mcp_runtime::jsonrpc::{Notification, Request, Response};
use mcp_runtime::{
    transport::RequestContext, BoxFuture, Result, StdioConfig, StdioTransport, Transport,
};
pub use mcp_test_support::{
    free_port, http_get_text, peers, repo_root, Captured, HttpServer, Postgres,
};
use serde_json::Value;

pub fn everything() -> StdioConfig {
    StdioConfig::new(
        peers()
            .join("npm/node_modules/.bin/mcp-server-everything")
            .display()
            .to_string(),
    )
    .arg("stdio")
    .name("everything")
}

/// The argv of server-everything over stdio.
pub fn everything_argv() -> Vec<String> {
    vec![
        peers()
            .join("npm/node_modules/.bin/mcp-server-everything")
            .display()
            .to_string(),
        "stdio".to_owned(),
    ]
}

pub fn filesystem(dir: &Path) -> StdioConfig {
    StdioConfig::new(
        peers()
            .join("npm/node_modules/.bin/mcp-server-filesystem")
            .display()
            .to_string(),
    )
    .arg(dir.display().to_string())
    .name("filesystem")
}

/// The command line of the project's PyPI `mcp` server over stdio.
pub fn pyserver_argv() -> Vec<String> {
    vec![
        peers().join("venv/bin/python").display().to_string(),
        repo_root()
            .join("tests/peers/pyserver.py")
            .display()
            .to_string(),
        "stdio".into(),
    ]
}

pub fn pyserver() -> StdioConfig {
    StdioConfig::from_argv(pyserver_argv())
        .unwrap()
        .name("pyserver")
}

/// What the recording transport saw.
#[derive(Default, Debug)]
pub struct Log {
    pub requests: Vec<Request>,
    pub cancels: Vec<Notification>,
    pub notifications: Vec<Notification>,
}

/// A custom transport (the public trait) that tunnels through a real stdio transport
/// and records every message the session sends.
pub struct Recording {
    pub inner: Arc<StdioTransport>,
    pub log: Arc<Mutex<Log>>,
}

impl Recording {
    pub fn new(config: StdioConfig) -> (Self, Arc<Mutex<Log>>, Arc<StdioTransport>) {
        let inner = Arc::new(StdioTransport::new(config));
        let log = Arc::new(Mutex::new(Log::default()));
        (
            Recording {
                inner: inner.clone(),
                log: log.clone(),
            },
            log,
            inner,
        )
    }
}

impl Transport for Recording {
    fn request(&self, request: Request, cx: RequestContext) -> BoxFuture<'_, Result<Response>> {
        self.log.lock().unwrap().requests.push(request.clone());
        self.inner.request(request, cx)
    }
    fn notify<'a>(&'a self, n: Notification, version: &'a str) -> BoxFuture<'a, Result<()>> {
        self.log.lock().unwrap().notifications.push(n.clone());
        self.inner.notify(n, version)
    }
    fn cancel<'a>(&'a self, n: Notification, version: &'a str) -> BoxFuture<'a, Result<()>> {
        self.log.lock().unwrap().cancels.push(n.clone());
        self.inner.cancel(n, version)
    }
    fn close(&self) -> BoxFuture<'_, Result<()>> {
        self.inner.close()
    }
}

/// True while a process with this pid exists (a zombie counts: it was not reaped).
pub fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// `(pid, state, ppid, pgrp)` of every process, from /proc.
fn processes() -> Vec<(u32, String, u32, u32)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command (which is in parentheses and may contain spaces):
        // state ppid pgrp ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
        out.push((
            pid,
            f.first().copied().unwrap_or("?").to_owned(),
            num(1),
            num(2),
        ));
    }
    out
}

/// Processes (zombies included) in the process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.3 == pgid)
        .map(|p| p.0)
        .collect()
}

/// Children of this test process (zombies included), but the stdio watchdog, which
/// lives as long as the process.
pub fn my_children() -> Vec<(u32, String)> {
    let me = std::process::id();
    let watchdog = mcp_runtime::transport::watchdog::pid();
    processes()
        .into_iter()
        .filter(|p| p.2 == me && Some(p.0) != watchdog)
        .map(|p| (p.0, p.1))
        .collect()
}

/// Fills an elicitation form the way a person would: defaults where given, otherwise a
/// plausible value for each property's type and format.
pub fn fill_form(schema: &serde_json::Value) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let mut out = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            let value = if let Some(d) = p.get("default") {
                d.clone()
            } else if let Some(e) = p.get("enum").and_then(Value::as_array) {
                e.first().cloned().unwrap_or(Value::Null)
            } else if let Some(o) = p.get("oneOf").and_then(Value::as_array) {
                o.first()
                    .and_then(|c| c.get("const"))
                    .cloned()
                    .unwrap_or(Value::Null)
            } else {
                match (
                    p.get("type").and_then(Value::as_str),
                    p.get("format").and_then(Value::as_str),
                ) {
                    (Some("string"), Some("email")) => json!("ann@example.com"),
                    (Some("string"), Some("uri")) => json!("https://example.com"),
                    (Some("string"), Some("date")) => json!("2000-01-31"),
                    (Some("string"), Some("date-time")) => json!("2000-01-31T10:00:00Z"),
                    (Some("string"), _) => json!("Ann"),
                    (Some("integer"), _) => {
                        json!(p.get("minimum").and_then(Value::as_i64).unwrap_or(1))
                    }
                    (Some("number"), _) => {
                        json!(p.get("minimum").and_then(Value::as_f64).unwrap_or(1.5))
                    }
                    (Some("boolean"), _) => json!(true),
                    (Some("array"), _) => json!([]),
                    _ => Value::Null,
                }
            };
            if !value.is_null() {
                out.insert(name.clone(), value);
            }
        }
    }
    Value::Object(out)
}

/// Captures everything logged on this thread up to `level` until the guard drops.
pub fn capture(level: tracing::Level) -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let w = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || w.clone())
        .with_ansi(false)
        .with_max_level(level)
        .finish();
    (captured, tracing::subscriber::set_default(subscriber))
}

/// `argv` started only after `secs` seconds (a server slow to start): `sh` sleeps,
/// then becomes the server.
pub fn slow_start(secs: u32, argv: Vec<String>) -> Vec<String> {
    let mut out = vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        format!("sleep {secs}; exec \"$@\""),
        "slow-start".to_owned(),
    ];
    out.extend(argv);
    out
}

/// The command line of a deliberately misbehaving server (tests/peers/hostile.py).
pub fn hostile_argv(args: &[&str]) -> Vec<String> {
    let mut v = vec![
        peers().join("venv/bin/python").display().to_string(),
        repo_root()
            .join("tests/peers/hostile.py")
            .display()
            .to_string(),
    ];
    v.extend(args.iter().map(|a| (*a).to_owned()));
    v
}

pub fn hostile(args: &[&str]) -> StdioConfig {
    StdioConfig::from_argv(hostile_argv(args))
        .unwrap()
        .name("hostile")
}

/// The most memory this process has held (VmHWM), in MiB.
pub fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status");
    kib / 1024
}

/// A loopback port that accepts connections at once and forwards them to `backend`
/// as soon as something listens there: an HTTP server that is slow to start, as a
/// client sees it (a cold start behind a load balancer).
pub struct SlowProxy {
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl SlowProxy {
    pub async fn start(backend: u16) -> SlowProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
                    let mut server = loop {
                        match tokio::net::TcpStream::connect(("127.0.0.1", backend)).await {
                            Ok(s) => break s,
                            Err(_) if std::time::Instant::now() < deadline => {
                                tokio::time::sleep(std::time::Duration::from_millis(100)).await
                            }
                            Err(_) => return,
                        }
                    };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
            }
        });
        SlowProxy { port, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A loopback proxy to `backend` whose open connections can be cut at once (a network
/// failure, as a client sees it).
pub struct CutProxy {
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
    open: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl CutProxy {
    pub async fn start(backend: u16) -> CutProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let open: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let conns = open.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                let h = tokio::spawn(async move {
                    if let Ok(mut server) =
                        tokio::net::TcpStream::connect(("127.0.0.1", backend)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                conns.lock().unwrap().push(h.abort_handle());
            }
        });
        CutProxy { port, task, open }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Drops every connection open now.
    pub fn cut(&self) {
        for h in self.open.lock().unwrap().drain(..) {
            h.abort();
        }
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

/// The wire a wiretap recorded (tests/peers/wiretap.py): each entry's direction
/// (`>` to the server, `<` from it, `start` for a process start) and message.
pub type Wire = Vec<(String, Value)>;

pub fn wire_log(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-era-wire-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.jsonl"));
    let _ = std::fs::remove_file(&path);
    path
}

/// `argv` started `delay` seconds late behind a wiretap that records into `log`.
pub fn wiretap(log: &std::path::Path, delay: u32, argv: Vec<String>) -> Vec<String> {
    let mut v = vec![
        peers().join("venv/bin/python").display().to_string(),
        repo_root()
            .join("tests/peers/wiretap.py")
            .display()
            .to_string(),
        log.display().to_string(),
        delay.to_string(),
        "--".into(),
    ];
    v.extend(argv);
    v
}

pub fn read_wire(log: &std::path::Path) -> Wire {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            let dir = e["dir"].as_str().unwrap().to_owned();
            let msg = e
                .get("line")
                .and_then(Value::as_str)
                .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
                .unwrap_or(Value::Null);
            (dir, msg)
        })
        .collect()
}

/// What the client sent, in order: each message's method, and `start` where the
/// server process started.
pub fn sent(w: &Wire) -> Vec<String> {
    w.iter()
        .filter(|(d, _)| d != "<")
        .map(|(d, m)| match d.as_str() {
            "start" => "start".to_owned(),
            _ => m["method"].as_str().unwrap_or("(a response)").to_owned(),
        })
        .collect()
}

/// A deliberately misbehaving HTTP server (tests/peers/hostile.py), listening.
pub fn hostile_http(mode: &[&str]) -> HttpServer {
    let port = free_port();
    let mut args = vec!["http".to_owned(), port.to_string()];
    args.extend(mode.iter().map(|m| (*m).to_owned()));
    let argv = hostile_argv(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    HttpServer::start(cmd, port)
}
