//! The soak run: a hundred clients, for minutes, against real peers, while the peers
//! are killed and restarted, tokens expire, lists change and calls are cancelled.
//!
//! `bash tests/soak.sh [minutes]` runs it (docs/reliability.md, "Soak run"). It
//! reports calls, errors by kind, p50/p99 latency, and this process's resident memory,
//! open descriptors, live tasks and child processes over time, and fails (exit 1)
//! when a call hung, a task panicked, descriptors, tasks or children outlived the
//! clients, a kind of client never got through after the peers' restarts, or (runs of
//! five minutes or more) memory kept growing after warm-up.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_runtime::auth::{Grant, OAuth};
use mcp_runtime::{Client, Error, HttpConfig, StdioConfig};
use mcp_test_support::{free_port, peers, python, repo_root, HttpServer, OidcPeers};
use serde_json::{json, Value};

/// The longest any one operation may take before it counts as hung: far beyond every
/// timeout the clients set (30 s), so only a call that nothing would ever end reaches it.
const HUNG: Duration = Duration::from_secs(120);
/// The request timeout every client sets.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The lifetime of an access token the authorization server issues.
const TOKEN_TTL_SECONDS: u64 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// server-everything over stdio, a process per client (legacy era).
    StdioEverything,
    /// One server-everything over Streamable HTTP (legacy era).
    HttpEverything,
    /// One PyPI `mcp` server, 2026-07-28 only, stateless HTTP.
    HttpModern,
    /// The PyPI server behind the oidc-provider authorization server, with short-lived
    /// tokens (client credentials, private_key_jwt).
    OAuth,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::StdioEverything => "stdio everything",
            Kind::HttpEverything => "HTTP everything",
            Kind::HttpModern => "HTTP PyPI 2026-07-28",
            Kind::OAuth => "HTTP PyPI + OAuth",
        }
    }
}

/// A small, fast random source (xorshift); no cryptographic use.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A latency histogram of fixed size (5 % buckets from 1 µs): what a long run holds
/// does not grow with its length.
#[derive(Debug)]
struct Histogram {
    buckets: Vec<u64>,
}

impl Histogram {
    const BUCKETS: usize = 600;
    fn new() -> Histogram {
        Histogram {
            buckets: vec![0; Self::BUCKETS],
        }
    }
    fn record(&mut self, d: Duration) {
        let us = d.as_micros().max(1) as f64;
        let i = (us.ln() / 1.05f64.ln()) as usize;
        self.buckets[i.min(Self::BUCKETS - 1)] += 1;
    }
    fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
    fn quantile(&self, q: f64) -> Duration {
        let total = self.count();
        if total == 0 {
            return Duration::ZERO;
        }
        let want = ((total as f64) * q).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Duration::from_micros(1.05f64.powi(i as i32 + 1) as u64);
            }
        }
        Duration::MAX
    }
}

/// What the clients of one kind did.
#[derive(Debug)]
struct Tally {
    ok: u64,
    /// Calls cancelled or timed out on purpose (the operation asked for it).
    deliberate: u64,
    errors: BTreeMap<&'static str, (u64, String)>,
    hung: u64,
    latency: Histogram,
    /// Successes in the last quarter of the run.
    late_ok: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            ok: 0,
            deliberate: 0,
            errors: BTreeMap::new(),
            hung: 0,
            latency: Histogram::new(),
            late_ok: 0,
        }
    }
}

/// The kind of a clean error, for the report.
fn kind_of(e: &Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_cancelled() {
        "cancelled"
    } else if e.is_closed() {
        "closed (server gone)"
    } else if e.is_unauthorized() {
        "unauthorized"
    } else if e.is_http() {
        "HTTP status"
    } else if e.is_transport() {
        "transport (connect refused, reset)"
    } else if e.is_protocol() {
        "JSON-RPC error"
    } else if e.is_invalid_response() {
        "invalid response"
    } else if e.is_unsupported() {
        "unsupported"
    } else {
        "other"
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Duration,
    rss_kb: u64,
    fds: usize,
    tasks: usize,
    children: usize,
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// This process's children (pid, command line).
fn children() -> Vec<(i32, String)> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // pid (comm) state ppid ...: comm may hold spaces and parentheses.
        let after = stat.rsplit_once(')')?.1;
        let mut fields = after.split_whitespace();
        let state = fields.next()?;
        if fields.next()? != me {
            return None;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        Some((pid, format!("[{state}] {cmdline}")))
    })
    .collect()
}

fn sample(start: Instant) -> Sample {
    Sample {
        at: start.elapsed(),
        rss_kb: rss_kb(),
        fds: open_fds(),
        tasks: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        children: children().len(),
    }
}

/// The servers that run for the whole soak (restarted in place by the chaos task).
struct Shared {
    everything: Mutex<HttpServer>,
    modern: Mutex<HttpServer>,
}

fn start_everything(port: u16) -> HttpServer {
    HttpServer::everything_on("streamableHttp", port)
}

fn start_modern(port: u16) -> HttpServer {
    let mut cmd = Command::new(python());
    cmd.arg(repo_root().join("tests/peers/pyserver.py"))
        .args(["http", &port.to_string(), "stateless"])
        .env("PYSERVER_ERA", "modern")
        .env("PYSERVER_TOGGLE", "1");
    HttpServer::start(cmd, port)
}

/// The authorization server and the protected MCP server, and the private key of
/// the `cc-client`.
struct OAuthPeers {
    peers: OidcPeers,
    key_pem: String,
}

fn p256_key() -> (String, Value) {
    use base64::Engine as _;
    use p256::pkcs8::EncodePrivateKey as _;
    let key = p256::ecdsa::SigningKey::random(&mut rand_core::OsRng);
    let pem = key
        .to_pkcs8_pem(Default::default())
        .expect("a PEM key")
        .to_string();
    let point = key.verifying_key().to_encoded_point(false);
    let b = |x: Option<&p256::FieldBytes>| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(x.expect("a coordinate"))
    };
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": "cc1", "alg": "ES256", "use": "sig",
                     "x": b(point.x()), "y": b(point.y())});
    (pem, json!({"keys": [jwk]}))
}

fn start_oauth() -> OAuthPeers {
    let (key_pem, jwks) = p256_key();
    OAuthPeers {
        peers: OidcPeers::start(&jwks, Some(TOKEN_TTL_SECONDS)),
        key_pem,
    }
}

fn stdio_everything() -> StdioConfig {
    StdioConfig::new(
        peers()
            .join("npm/node_modules/.bin/mcp-server-everything")
            .display()
            .to_string(),
    )
    .arg("stdio")
    .name("everything")
}

fn client_of(kind: Kind, shared: &Shared, oauth: &OAuthPeers, changes: &Arc<AtomicU64>) -> Client {
    let heard = changes.clone();
    let builder = Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .after_change(move |_| {
            heard.fetch_add(1, Ordering::Relaxed);
        });
    let http = |url: String| HttpConfig::new(url);
    let built = match kind {
        Kind::StdioEverything => builder.stdio(stdio_everything()),
        Kind::HttpEverything => {
            let url = lock(&shared.everything).url("/mcp");
            builder.http(http(url))
        }
        Kind::HttpModern => {
            let url = lock(&shared.modern).url("/mcp");
            builder.http(http(url))
        }
        Kind::OAuth => builder.http(
            http(oauth.peers.mcp_url.clone()).oauth(
                OAuth::new()
                    .grant(Grant::ClientCredentials)
                    .client("cc-client", None)
                    .private_key(oauth.key_pem.clone()),
            ),
        ),
    };
    built.expect("a client")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What one operation was, for its outcome.
enum Op {
    /// A call or listing that should succeed.
    Plain,
    /// A call meant to be cut short (a timeout, a cancellation).
    Cut,
}

/// One operation of a client of `kind`.
async fn operate(client: &Client, kind: Kind, rng: &mut Rng) -> (Op, mcp_runtime::Result<()>) {
    let roll = rng.below(100);
    let plain = |r: mcp_runtime::Result<()>| (Op::Plain, r);
    match (kind, roll) {
        (_, 0..=14) => plain(client.tools().await.map(drop)),
        // A call cut short by its own timeout: the client cancels it at the server.
        (Kind::StdioEverything | Kind::HttpEverything, 15..=21) => (
            Op::Cut,
            client
                .call(
                    "trigger-long-running-operation",
                    json!({"duration": 5, "steps": 5}),
                )
                .timeout(Duration::from_millis(50 + rng.below(400)))
                .await
                .map(drop),
        ),
        (Kind::HttpModern, 15..=21) => (
            Op::Cut,
            client
                .call("sleep_forever", json!({}))
                .timeout(Duration::from_millis(50 + rng.below(400)))
                .await
                .map(drop),
        ),
        // A call cancelled by the caller's token.
        (Kind::StdioEverything | Kind::HttpEverything | Kind::HttpModern, 22..=26) => {
            let token = mcp_runtime::CancellationToken::new();
            let cancel = token.clone();
            let after = Duration::from_millis(rng.below(300));
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                cancel.cancel();
            });
            let tool = if kind == Kind::HttpModern {
                ("sleep_forever", json!({}))
            } else {
                (
                    "trigger-long-running-operation",
                    json!({"duration": 5, "steps": 5}),
                )
            };
            (
                Op::Cut,
                client.call(tool.0, tool.1).cancel_on(token).await.map(drop),
            )
        }
        // A list change: the server announces it on every client's listen stream,
        // and each client's cache drops its list.
        (Kind::HttpModern, 27..=31) => plain(client.call("toggle_tool", json!({})).await.map(drop)),
        (Kind::StdioEverything | Kind::HttpEverything, _) => plain(
            client
                .call("get-sum", json!({"a": rng.below(1000), "b": 2}))
                .await
                .and_then(expect_text("The sum of")),
        ),
        (Kind::HttpModern, _) => plain(
            client
                .call("echo", json!({"message": "soak"}))
                .await
                .and_then(expect_text("soak")),
        ),
        (Kind::OAuth, _) => plain(
            client
                .call("whoami", json!({}))
                .await
                .and_then(expect_text("cc-client")),
        ),
    }
}

fn expect_text(
    wanted: &'static str,
) -> impl FnOnce(mcp_runtime::CallToolResult) -> mcp_runtime::Result<()> {
    move |r| {
        if r.text().contains(wanted) && !r.is_error() {
            Ok(())
        } else {
            Err(Error::invalid_response(format!(
                "expected {wanted:?}, got {:?}",
                r.text()
            )))
        }
    }
}

#[derive(Debug)]
struct Args {
    seconds: u64,
    clients: usize,
    report: PathBuf,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 30,
        clients: 100,
        report: repo_root().join("target/soak"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => a.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--clients" => a.clients = value()?.parse().map_err(|e| format!("--clients: {e}"))?,
            "--report" => a.report = PathBuf::from(value()?),
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: mcp-soak [--seconds N] [--clients N] [--report DIR]"
                ))
            }
        }
    }
    if a.clients < 4 {
        return Err("--clients must be at least 4 (one of each kind)".into());
    }
    Ok(a)
}

/// The kinds of the clients: a fifth over stdio (a process each), the rest split
/// between the three HTTP servers.
fn kinds(clients: usize) -> Vec<Kind> {
    let stdio = (clients / 5).max(1);
    let oauth = (clients / 5).max(1);
    let rest = clients - stdio - oauth;
    let everything = rest / 2;
    let modern = rest - everything;
    std::iter::repeat_n(Kind::StdioEverything, stdio)
        .chain(std::iter::repeat_n(Kind::HttpEverything, everything))
        .chain(std::iter::repeat_n(Kind::HttpModern, modern))
        .chain(std::iter::repeat_n(Kind::OAuth, oauth))
        .collect()
}

fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let passed = runtime.block_on(soak(args));
    std::process::exit(if passed { 0 } else { 1 });
}

async fn soak(args: Args) -> bool {
    let panics = Arc::new(AtomicUsize::new(0));
    {
        let panics = panics.clone();
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            panics.fetch_add(1, Ordering::Relaxed);
            default(info);
        }));
    }
    println!("soak: starting the peers");
    let shared = Arc::new(
        tokio::task::spawn_blocking(|| Shared {
            everything: Mutex::new(start_everything(free_port())),
            modern: Mutex::new(start_modern(free_port())),
        })
        .await
        .expect("the peers started"),
    );
    let oauth = Arc::new(
        tokio::task::spawn_blocking(start_oauth)
            .await
            .expect("the OAuth peers started"),
    );
    // What a process holds once for all its stdio clients (the watchdog that stops
    // their servers should this process die, and its pipe) is there before the
    // baseline: one stdio client first.
    {
        let first = Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .stdio(stdio_everything())
            .expect("a stdio client");
        first
            .tools()
            .await
            .expect("server-everything over stdio answers");
        first.close().await.expect("a clean close");
    }
    let start = Instant::now();
    let baseline = sample(start);
    let run = Duration::from_secs(args.seconds);
    let deadline = start + run;
    let late = start + run * 3 / 4;
    println!(
        "soak: {} clients for {} s (baseline: {} KB resident, {} descriptors, {} tasks, {} children)",
        args.clients, args.seconds, baseline.rss_kb, baseline.fds, baseline.tasks, baseline.children
    );

    let samples = Arc::new(Mutex::new(vec![baseline]));
    let sampler = {
        let samples = samples.clone();
        let every = Duration::from_secs(if args.seconds >= 300 { 5 } else { 1 });
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                lock(&samples).push(sample(start));
            }
        })
    };

    let chaos_events = Arc::new(Mutex::new(BTreeMap::<&'static str, u64>::new()));
    let chaos = {
        let shared = shared.clone();
        let events = chaos_events.clone();
        tokio::spawn(async move {
            let mut rng = Rng::new(0xC4A05);
            // Nothing is killed in the last 10 s: every kind of client must get
            // through again after the last restart.
            let quiet = deadline
                .checked_sub(Duration::from_secs(10))
                .unwrap_or(start);
            loop {
                tokio::time::sleep(Duration::from_millis(3_000 + rng.below(4_000))).await;
                if Instant::now() >= quiet {
                    break;
                }
                let what = match rng.below(3) {
                    0 => {
                        let stdio: Vec<i32> = children()
                            .into_iter()
                            .filter(|(_, cmd)| {
                                cmd.contains("mcp-server-everything") && cmd.ends_with("stdio ")
                            })
                            .map(|(pid, _)| pid)
                            .collect();
                        if let Some(pid) = stdio.get(rng.below(stdio.len() as u64) as usize) {
                            // SAFETY: kill(2) has no memory-safety preconditions.
                            unsafe {
                                libc::kill(*pid, libc::SIGKILL);
                            }
                        }
                        "a stdio server killed"
                    }
                    1 => {
                        let shared = shared.clone();
                        let _ = tokio::task::spawn_blocking(move || {
                            let mut s = lock(&shared.everything);
                            let port = s.port;
                            s.stop();
                            *s = start_everything(port);
                        })
                        .await;
                        "server-everything (HTTP) killed and restarted"
                    }
                    _ => {
                        let shared = shared.clone();
                        let _ = tokio::task::spawn_blocking(move || {
                            let mut s = lock(&shared.modern);
                            let port = s.port;
                            s.stop();
                            *s = start_modern(port);
                        })
                        .await;
                        "the PyPI server (HTTP) killed and restarted"
                    }
                };
                *lock(&events).entry(what).or_default() += 1;
            }
        })
    };

    let tallies: Arc<Mutex<BTreeMap<Kind, Tally>>> = Arc::default();
    let operations = Arc::new(AtomicU64::new(0));
    let changes = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for (i, kind) in kinds(args.clients).into_iter().enumerate() {
        let client = client_of(kind, &shared, &oauth, &changes);
        let tallies = tallies.clone();
        let operations = operations.clone();
        workers.push(tokio::spawn(async move {
            let mut rng = Rng::new(i as u64 + 1);
            // Spread the starts over the first seconds.
            tokio::time::sleep(Duration::from_millis(rng.below(3_000))).await;
            // The 2026-07-28 server announces changes only to those who listen: these
            // clients keep a listen stream open (reopened after each restart).
            let mut listening = kind != Kind::HttpModern;
            while Instant::now() < deadline {
                if !listening {
                    listening = matches!(
                        tokio::time::timeout(HUNG, client.listen(&[])).await,
                        Ok(Ok(()))
                    );
                }
                let began = Instant::now();
                let outcome = tokio::time::timeout(HUNG, operate(&client, kind, &mut rng)).await;
                let took = began.elapsed();
                operations.fetch_add(1, Ordering::Relaxed);
                {
                    let mut tallies = lock(&tallies);
                    let t = tallies.entry(kind).or_insert_with(Tally::new);
                    match outcome {
                        Err(_) => t.hung += 1,
                        Ok((Op::Plain, Ok(()))) => {
                            t.ok += 1;
                            t.latency.record(took);
                            if Instant::now() >= late {
                                t.late_ok += 1;
                            }
                        }
                        Ok((Op::Cut, Ok(()))) => t.ok += 1,
                        Ok((Op::Cut, Err(e))) if e.is_timeout() || e.is_cancelled() => {
                            t.deliberate += 1
                        }
                        Ok((_, Err(e))) => {
                            let entry = t.errors.entry(kind_of(&e)).or_insert((0, String::new()));
                            entry.0 += 1;
                            if entry.1.is_empty() {
                                entry.1 = e.to_string().chars().take(160).collect();
                            }
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(10 + rng.below(40))).await;
            }
            let _ = client.close().await;
        }));
    }
    let mut joined_panics = 0;
    for w in workers {
        if w.await.is_err() {
            joined_panics += 1;
        }
    }
    let _ = chaos.await;
    // The clients are closed and dropped: what they held must be gone.
    let settle = Instant::now();
    let mut end = sample(start);
    while (end.fds > baseline.fds
        || end.tasks > baseline.tasks + 1
        || end.children > baseline.children)
        && settle.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
        end = sample(start);
    }
    sampler.abort();
    let tokens = token_count(oauth.peers.as_port).await;

    let samples = lock(&samples).clone();
    let tallies = std::mem::take(&mut *lock(&tallies));
    let events = lock(&chaos_events).clone();
    let report = Report {
        args: &args,
        run,
        elapsed: start.elapsed(),
        baseline,
        end,
        samples: &samples,
        tallies: &tallies,
        events: &events,
        tokens,
        changes: changes.load(Ordering::Relaxed),
        panics: panics.load(Ordering::Relaxed) + joined_panics,
    };
    let (text, passed) = report.render();
    println!("{text}");
    if let Err(e) = report.write(&args.report, &text) {
        eprintln!(
            "soak: could not write the report to {}: {e}",
            args.report.display()
        );
    }
    drop(oauth);
    passed
}

/// How many tokens the authorization server issued.
async fn token_count(port: u16) -> Option<u64> {
    tokio::task::spawn_blocking(move || {
        let text = mcp_test_support::http_get_text(port, "/_test/stats");
        serde_json::from_str::<Value>(&text).ok()?["tokens"].as_u64()
    })
    .await
    .ok()
    .flatten()
}

struct Report<'a> {
    args: &'a Args,
    /// How long the clients ran.
    run: Duration,
    /// How long until they had all finished and closed.
    elapsed: Duration,
    baseline: Sample,
    end: Sample,
    samples: &'a [Sample],
    tallies: &'a BTreeMap<Kind, Tally>,
    events: &'a BTreeMap<&'static str, u64>,
    tokens: Option<u64>,
    /// List changes the clients heard of (`after_change`).
    changes: u64,
    panics: usize,
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

impl Report<'_> {
    /// Resident memory (KB): the median of the run's second quarter, and of its last.
    fn rss_after_warmup(&self) -> (u64, u64) {
        let total = self.run.as_secs_f64();
        let within = |a: f64, b: f64| {
            self.samples
                .iter()
                .filter(|s| {
                    let t = s.at.as_secs_f64() / total;
                    t >= a && t < b && s.at <= self.run
                })
                .map(|s| s.rss_kb)
                .collect::<Vec<_>>()
        };
        (median(within(0.25, 0.5)), median(within(0.75, 1.01)))
    }

    fn render(&self) -> (String, bool) {
        let mut out = String::new();
        let mut failures: Vec<String> = Vec::new();
        let calls: u64 = self
            .tallies
            .values()
            .map(|t| t.ok + t.deliberate + t.hung + t.errors.values().map(|e| e.0).sum::<u64>())
            .sum();
        let _ = writeln!(
            out,
            "\n## Soak: {} clients, {:.0} s ({:.0} s until all had closed), {} operations ({:.0}/s)\n",
            self.args.clients,
            self.run.as_secs_f64(),
            self.elapsed.as_secs_f64(),
            calls,
            calls as f64 / self.run.as_secs_f64()
        );
        let _ = writeln!(out, "| clients | ok | cut short on purpose | errors | hung | p50 | p99 | ok in the last quarter |");
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- |");
        for (kind, t) in self.tallies {
            let errors: u64 = t.errors.values().map(|e| e.0).sum();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:.1} ms | {:.1} ms | {} |",
                kind.name(),
                t.ok,
                t.deliberate,
                errors,
                t.hung,
                t.latency.quantile(0.5).as_secs_f64() * 1e3,
                t.latency.quantile(0.99).as_secs_f64() * 1e3,
                t.late_ok
            );
            if t.hung > 0 {
                failures.push(format!("{}: {} operations hung", kind.name(), t.hung));
            }
            if t.late_ok == 0 {
                failures.push(format!(
                    "{}: no success in the last quarter of the run",
                    kind.name()
                ));
            }
        }
        let _ = writeln!(
            out,
            "\nErrors by kind (each a clean `mcp_runtime::Error`; first message):\n"
        );
        let _ = writeln!(out, "| clients | kind | count | first message |");
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for (kind, t) in self.tallies {
            for (what, (n, first)) in &t.errors {
                let _ = writeln!(
                    out,
                    "| {} | {what} | {n} | {} |",
                    kind.name(),
                    first.replace('|', "/")
                );
            }
        }
        let _ = writeln!(out, "\nChaos:\n");
        for (what, n) in self.events {
            let _ = writeln!(out, "* {what}: {n}");
        }
        let _ = writeln!(
            out,
            "* list changes heard by the clients (`after_change`): {}",
            self.changes
        );
        if let Some(tokens) = self.tokens {
            let _ = writeln!(
                out,
                "* access tokens issued (each lives {TOKEN_TTL_SECONDS} s): {tokens}"
            );
        }
        let (warm, last) = self.rss_after_warmup();
        let peak = self.samples.iter().map(|s| s.rss_kb).max().unwrap_or(0);
        let _ = writeln!(out, "\nThis process over time:\n");
        let _ = writeln!(
            out,
            "| | resident memory | open descriptors | live tasks | child processes |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
        let row = |out: &mut String, name: &str, s: &Sample| {
            let _ = writeln!(
                out,
                "| {name} | {:.1} MB | {} | {} | {} |",
                s.rss_kb as f64 / 1024.0,
                s.fds,
                s.tasks,
                s.children
            );
        };
        row(&mut out, "before the clients", &self.baseline);
        // The last sample at or before each point of the run.
        let at = |f: f64| {
            self.samples
                .iter()
                .rev()
                .find(|s| s.at.as_secs_f64() <= self.run.as_secs_f64() * f)
        };
        for (label, f) in [
            ("a quarter in", 0.25),
            ("half way", 0.5),
            ("three quarters in", 0.75),
            ("at the end of the calls", 1.0),
        ] {
            if let Some(s) = at(f) {
                row(
                    &mut out,
                    &format!("{label} ({:.0} s)", s.at.as_secs_f64()),
                    s,
                );
            }
        }
        row(&mut out, "after the clients closed", &self.end);
        let _ = writeln!(
            out,
            "\nResident memory: peak {:.1} MB; median {:.1} MB in the run's second quarter, {:.1} MB in its last.",
            peak as f64 / 1024.0,
            warm as f64 / 1024.0,
            last as f64 / 1024.0
        );
        if self.end.fds > self.baseline.fds {
            let open: Vec<String> = std::fs::read_dir("/proc/self/fd")
                .map(|d| {
                    d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                        .map(|p| p.display().to_string())
                        .collect()
                })
                .unwrap_or_default();
            failures.push(format!(
                "descriptors leaked: {} before the clients, {} after they closed: {open:?}",
                self.baseline.fds, self.end.fds
            ));
        }
        if self.end.tasks > self.baseline.tasks + 1 {
            failures.push(format!(
                "tasks leaked: {} before the clients, {} after they closed (the sampler is one)",
                self.baseline.tasks, self.end.tasks
            ));
        }
        if self.end.children > self.baseline.children {
            failures.push(format!(
                "child processes outlived their clients: {} before, {} after: {:?}",
                self.baseline.children,
                self.end.children,
                children()
            ));
        }
        if self.panics > 0 {
            failures.push(format!("{} panics", self.panics));
        }
        if self.args.seconds >= 300 && last > warm + warm / 4 {
            failures.push(format!(
                "resident memory grew after warm-up: {warm} KB → {last} KB"
            ));
        }
        if calls == 0 {
            failures.push("no operation ran".into());
        }
        if failures.is_empty() {
            let _ = writeln!(out, "\nPASS");
        } else {
            let _ = writeln!(out, "\nFAIL:");
            for f in &failures {
                let _ = writeln!(out, "* {f}");
            }
        }
        (out, failures.is_empty())
    }

    fn write(&self, dir: &Path, text: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("report.md"), text)?;
        let mut csv = String::from("seconds,rss_kb,fds,tasks,children\n");
        for s in self.samples {
            let _ = writeln!(
                csv,
                "{:.1},{},{},{},{}",
                s.at.as_secs_f64(),
                s.rss_kb,
                s.fds,
                s.tasks,
                s.children
            );
        }
        std::fs::write(dir.join("timeline.csv"), csv)
    }
}
