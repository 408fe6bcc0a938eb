//! What the agent's tests share beyond `mcp-test-support` (peer locations, free ports,
//! process guards, the scripted model servers, a real PostgreSQL): the project's PyPI
//! server as an attached server, run stores, and one log and trace subscriber per test
//! process.

use std::path::{Path, PathBuf};
use std::process::Command;

use mcp_agent::{PostgresRunStore, RunStore, SqliteRunStore};
use mcp_runtime::Mcp;
pub(crate) use mcp_test_support::{
    free_port, peers, repo_root, Captured, HttpServer, Killed, ModelServer, Postgres,
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

pub(crate) fn filesystem(dir: &Path) -> Mcp {
    let bin = peers().join("npm/node_modules/.bin/mcp-server-filesystem");
    Mcp::builder("fs")
        .command([bin.display().to_string(), dir.display().to_string()])
        .env("FS_CANARY_SECRET", "ENV-CANARY-91c2")
        .build()
        .unwrap()
}

/// A deliberately misbehaving server (tests/peers/hostile.py) in stdio `mode`.
pub(crate) fn hostile(mode: &str) -> Mcp {
    Mcp::builder("hostile")
        .command([
            mcp_test_support::python().display().to_string(),
            crate::repo_root()
                .join("tests/peers/hostile.py")
                .display()
                .to_string(),
            "stdio".into(),
            mode.into(),
        ])
        .build()
        .unwrap()
}

/// The built-in wires, by the names the tests loop over.
pub(crate) const WIRES: [&str; 3] = ["chat", "messages", "responses"];

/// The scripted model behind `wire` (one of [`WIRES`]).
pub(crate) fn wire_model(wire: &str, scripted: &ModelServer) -> Box<dyn mcp_agent::Model> {
    match wire {
        "chat" => Box::new(mcp_agent::ChatCompletions::new(scripted.url(), "fake").unwrap()),
        "responses" => Box::new(mcp_agent::Responses::new(scripted.url(), "fake").unwrap()),
        "messages" => Box::new(mcp_agent::Messages::new(scripted.url(), "fake").unwrap()),
        other => panic!("no wire `{other}`"),
    }
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
