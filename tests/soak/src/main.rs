//! The soak run: a hundred clients, for minutes, against real peers, while the peers
//! are killed and restarted, tokens expire, lists change and calls are cancelled.
//!
//! `bash tests/soak.sh [minutes]` runs it (docs/reliability.md, "Soak run"). It
//! reports calls, errors by kind, p50/p99 latency, and this process's resident memory,
//! open descriptors, live tasks and child processes over time, and fails (exit 1)
//! when a call hung, a task panicked, descriptors, tasks or children outlived the
//! clients, a kind of client never got through after the peers' restarts, or (runs of
//! five minutes or more) memory kept growing after warm-up.

mod clients;
mod report;
mod stats;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clients::{
    client_of, lock, operate, start_everything, start_modern, start_oauth, stdio_everything, Kind,
    Op, Shared, REQUEST_TIMEOUT,
};
use crate::report::Report;
use crate::stats::{children, kind_of, sample, Rng, Tally};
use mcp_runtime::Client;
use mcp_test_support::{free_port, repo_root};
use serde_json::Value;

/// The longest any one operation may take before it counts as hung: far beyond every
/// timeout the clients set (30 s), so only a call that nothing would ever end reaches it.
const HUNG: Duration = Duration::from_secs(120);

#[derive(Debug)]
pub(crate) struct Args {
    pub(crate) seconds: u64,
    pub(crate) clients: usize,
    pub(crate) report: PathBuf,
}

pub(crate) fn args() -> Result<Args, String> {
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
