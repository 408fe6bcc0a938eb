//! What the agent's tests share: peer locations, free ports, process guards, the
//! scripted model and the project's PyPI server, a real PostgreSQL, and one log and
//! trace subscriber per test process.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mcp_agent::{PostgresRunStore, RunStore, SqliteRunStore};
use mcp_runtime::Mcp;
pub(crate) use mcp_test_support::{
    free_port, peers, repo_root, Captured, HttpServer, Killed, Postgres,
};
use serde_json::{json, Value};

pub(crate) fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-agent-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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

/// The run store a test names: a PostgreSQL URL, else the SQLite file in `dir`.
pub(crate) async fn store_for(dir: &Path, store: &str) -> std::sync::Arc<dyn RunStore> {
    if store.starts_with("postgres://") {
        std::sync::Arc::new(PostgresRunStore::connect(store).await.unwrap())
    } else {
        std::sync::Arc::new(SqliteRunStore::open(dir.join("state/runs.sqlite3")).unwrap())
    }
}

/// The project's PyPI server over loopback HTTP (both eras), stopped when dropped.
pub(crate) struct PyServer {
    _server: HttpServer,
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
        let server = HttpServer::python_env(free_port(), flags, env);
        PyServer {
            port: server.port,
            _server: server,
        }
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
