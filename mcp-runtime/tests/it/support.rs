//! Shared test support: the real peers (installed by tests/peers/install.sh), and a
//! transport wrapper that records what the session sends.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use mcp_runtime::jsonrpc::{Notification, Request, Response};
use mcp_runtime::{BoxFuture, RequestContext, Result, StdioConfig, StdioTransport, Transport};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Installs the pinned peers once per test process (the script is idempotent and takes
/// a lock), and fails loudly when that is not possible.
pub fn peers() -> PathBuf {
    static DONE: OnceLock<PathBuf> = OnceLock::new();
    DONE.get_or_init(|| {
        let root = repo_root();
        let script = root.join("tests/peers/install.sh");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}; bash is required", script.display()));
        assert!(
            out.status.success(),
            "installing the test peers failed (run `bash tests/peers/install.sh` and read its error; it needs npm and python3 with venv):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let peers = root.join(".peers");
        for bin in [
            "npm/node_modules/.bin/mcp-server-everything",
            "npm/node_modules/.bin/mcp-server-filesystem",
            "venv/bin/python",
        ] {
            assert!(
                peers.join(bin).exists(),
                "test peer {bin} is missing after install; run `bash tests/peers/install.sh`"
            );
        }
        peers
    })
    .clone()
}

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

/// Children of this test process (zombies included).
pub fn my_children() -> Vec<(u32, String)> {
    let me = std::process::id();
    processes()
        .into_iter()
        .filter(|p| p.2 == me)
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

/// A real MCP server listening on a loopback port, stopped when dropped.
pub struct HttpServer {
    child: std::process::Child,
    pub port: u16,
    stopped: bool,
}

impl HttpServer {
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn start(mut cmd: Command, port: u16) -> HttpServer {
        use std::os::unix::process::CommandExt;
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0);
        let child = cmd.spawn().expect("start the HTTP test server");
        let server = HttpServer {
            child,
            port,
            stopped: false,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the HTTP test server did not listen on {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        server
    }

    /// server-everything in `streamableHttp` (path /mcp) or `sse` (path /sse) mode.
    pub fn everything(mode: &str) -> HttpServer {
        let port = free_port();
        let mut cmd = Command::new(peers().join("npm/node_modules/.bin/mcp-server-everything"));
        cmd.arg(mode).env("PORT", port.to_string());
        HttpServer::start(cmd, port)
    }

    /// The project's PyPI `mcp` server over HTTP (path /mcp); `flags` from
    /// `stateless`, `json`.
    pub fn python(flags: &[&str]) -> HttpServer {
        Self::python_on(free_port(), flags)
    }

    pub fn python_on(port: u16, flags: &[&str]) -> HttpServer {
        let mut cmd = Command::new(peers().join("venv/bin/python"));
        cmd.arg(repo_root().join("tests/peers/pyserver.py"))
            .arg("http")
            .arg(port.to_string())
            .args(flags);
        HttpServer::start(cmd, port)
    }

    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        // The server runs in its own process group (pgid = its pid): stop all of it.
        // (Not `/usr/bin/kill -KILL -PGID`: procps reads `-PGID` as a signal there.)
        if let Ok(pgid) = libc::pid_t::try_from(self.child.id()) {
            if pgid > 1 {
                // SAFETY: kill(2) has no memory-safety preconditions.
                unsafe {
                    libc::kill(-pgid, libc::SIGKILL);
                }
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Collects what a `tracing` subscriber writes, to look for (or not find) log lines.
#[derive(Clone, Default)]
pub struct Captured(pub Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Captures everything logged on this thread up to `level` until the guard drops.
    pub fn install(level: tracing::Level) -> (Captured, tracing::subscriber::DefaultGuard) {
        let captured = Captured::default();
        let w = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || w.clone())
            .with_ansi(false)
            .with_max_level(level)
            .finish();
        (captured, tracing::subscriber::set_default(subscriber))
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}
