//! What the agent's tests share: peer locations, free ports, process guards, the
//! scripted model and the project's PyPI server, a real PostgreSQL, and one log and
//! trace subscriber per test process.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use mcp_agent::{PostgresRunStore, RunStore, SqliteRunStore};
use mcp_runtime::Mcp;
use serde_json::{json, Value};

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The pinned test peers (installed once; fails loudly when that is not possible).
pub(crate) fn peers() -> PathBuf {
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

pub(crate) fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-agent-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A free loopback port.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A peer process, killed when dropped.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs one of this binary's `#[ignore]`d helper tests as a process of its own with
/// `env`, and returns its `suspended run=…` line.
pub(crate) fn suspended_line(helper: &str, env: &[(&str, String)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([helper, "--exact", "--ignored", "--nocapture"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find(|l| l.starts_with("suspended run="))
        .unwrap_or_else(|| panic!("{stdout}"))
        .to_owned()
}

/// The run id and decision id of a `suspended run=… tool=… decision=…` line.
pub(crate) fn parse_suspended(line: &str) -> (String, String) {
    let field = |name: &str| {
        line.split(' ')
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {line}"))
            .to_owned()
    };
    (field("run="), field("decision="))
}

/// What a test process's subscriber writes.
#[derive(Clone, Default)]
pub(crate) struct Captured(pub(crate) std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Everything the test process logs (every level) and traces (an OpenTelemetry
/// pipeline into memory): one subscriber for the process, shared by the tests that
/// look at logs or spans (each finds its own by what it ran, so they may share a
/// process).
pub(crate) struct Observed {
    pub(crate) logs: Captured,
    pub(crate) spans: opentelemetry_sdk::trace::InMemorySpanExporter,
    pub(crate) provider: opentelemetry_sdk::trace::SdkTracerProvider,
}

pub(crate) fn observed() -> &'static Observed {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    static OBSERVED: std::sync::OnceLock<Observed> = std::sync::OnceLock::new();
    OBSERVED.get_or_init(|| {
        let logs = Captured::default();
        let spans = opentelemetry_sdk::trace::InMemorySpanExporter::default();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::TRACE)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(move || writer.clone())
                    .with_ansi(false),
            )
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("mcp-agent-tests")));
        tracing::subscriber::set_global_default(subscriber)
            .expect("the tests' process has no other subscriber");
        Observed {
            logs,
            spans,
            provider,
        }
    })
}

/// The scripted model, killed when dropped.
pub(crate) struct FakeModel {
    pub(crate) _child: Killed,
    pub(crate) port: u16,
}

impl FakeModel {
    pub(crate) fn start(dir: &Path, script: Value) -> FakeModel {
        let path = dir.join("script.json");
        std::fs::write(&path, script.to_string()).unwrap();
        let port = free_port();
        let mut child = Command::new(peers().join("venv/bin/python"))
            .arg(repo_root().join("tests/peers/fake_model.py"))
            .args([port.to_string(), path.display().to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("READY"), "the fake model did not start");
        FakeModel {
            _child: Killed(child),
            port,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub(crate) fn requests(&self) -> Vec<Value> {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET /_requests HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
        serde_json::from_str::<Vec<Value>>(body).unwrap()
    }
}

pub(crate) fn filesystem(dir: &Path) -> Mcp {
    let bin = peers().join("npm/node_modules/.bin/mcp-server-filesystem");
    Mcp::builder("fs")
        .command([bin.display().to_string(), dir.display().to_string()])
        .env("FS_CANARY_SECRET", "ENV-CANARY-91c2")
        .build()
        .unwrap()
}

pub(crate) fn offered(request: &Value) -> Vec<String> {
    request["body"]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A real PostgreSQL (tests/peers/postgres.sh), stopped when dropped.
pub(crate) struct Postgres {
    pub(crate) url: String,
    pub(crate) port: u16,
}

impl Postgres {
    pub(crate) fn start() -> Postgres {
        peers();
        let port = free_port();
        let out = Command::new("bash")
            .arg(repo_root().join("tests/peers/postgres.sh"))
            .args(["start", &port.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Postgres {
            url: String::from_utf8(out.stdout).unwrap().trim().to_owned(),
            port,
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo_root().join("tests/peers/postgres.sh"))
            .args(["stop", &self.port.to_string()])
            .output();
    }
}

/// The run store a test names: a PostgreSQL URL, else the SQLite file in `dir`.
pub(crate) async fn store_for(dir: &Path, store: &str) -> std::sync::Arc<dyn RunStore> {
    if store.starts_with("postgres://") {
        std::sync::Arc::new(PostgresRunStore::connect(store).await.unwrap())
    } else {
        std::sync::Arc::new(SqliteRunStore::open(dir.join("state/runs.sqlite3")).unwrap())
    }
}

/// The project's PyPI server over loopback HTTP (both eras), killed when dropped.
pub(crate) struct PyServer {
    pub(crate) _child: Killed,
    pub(crate) port: u16,
}

impl PyServer {
    pub(crate) fn start() -> PyServer {
        PyServer::start_with(&[])
    }

    /// With `pyserver.py`'s flags (`stateless`, `json`, `headers`).
    pub(crate) fn start_with(flags: &[&str]) -> PyServer {
        PyServer::start_env(flags, &[])
    }

    /// With flags and environment variables (`PYSERVER_SIGN_ONLY_STATE`, …).
    pub(crate) fn start_env(flags: &[&str], env: &[(&str, &str)]) -> PyServer {
        let port = free_port();
        let child = Command::new(peers().join("venv/bin/python"))
            .arg(repo_root().join("tests/peers/pyserver.py"))
            .args(["http", &port.to_string()])
            .args(flags)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = PyServer {
            _child: Killed(child),
            port,
        };
        // However slowly it starts: only a listening socket ends the wait.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "pyserver never listened on {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        server
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

pub(crate) fn python_server(url: &str) -> Mcp {
    Mcp::builder("py")
        .url(url)
        .extension("io.modelcontextprotocol/tasks", json!({}))
        .build()
        .unwrap()
}
