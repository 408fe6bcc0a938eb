//! Hot-path measurements (not a timed test): run with
//! `cargo bench -p mcp-runtime --bench hot_path` after `bash tests/peers/install.sh`.
//!
//! 1. Sequential and concurrent `tools/call echo` over stdio against server-everything,
//!    next to a raw pipe (one JSON line written, one read, no session) to the same
//!    server: the client's own overhead per call.
//! 2. Parsing one large message (1 MB and 10 MB) from bytes: stays linear.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp_runtime::jsonrpc::Message;
use mcp_runtime::{Client, StdioConfig};
use serde_json::json;

fn everything() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    root.join(".peers/npm/node_modules/.bin/mcp-server-everything")
        .display()
        .to_string()
}

fn raw_pipe(calls: usize) -> Duration {
    let mut child = Command::new(everything())
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run bash tests/peers/install.sh first");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let send = |v: serde_json::Value, stdin: &mut std::process::ChildStdin| {
        let mut s = v.to_string();
        s.push('\n');
        stdin.write_all(s.as_bytes()).expect("write");
    };
    send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}),
        &mut stdin,
    );
    out.read_line(&mut line).expect("read");
    send(
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        &mut stdin,
    );
    let start = Instant::now();
    let mut done = 0;
    while done < calls {
        send(
            json!({"jsonrpc":"2.0","id":done + 1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}),
            &mut stdin,
        );
        loop {
            line.clear();
            out.read_line(&mut line).expect("read");
            if line.contains("\"result\"") {
                break;
            }
        }
        done += 1;
    }
    let t = start.elapsed();
    drop(stdin);
    let _ = child.wait();
    t
}

#[tokio::main]
async fn main() {
    let calls = 2000;
    let raw = raw_pipe(calls);
    println!(
        "raw pipe, sequential:        {:>8.1} µs/call",
        raw.as_secs_f64() * 1e6 / calls as f64
    );

    let c = Client::builder()
        .stdio(StdioConfig::new(everything()).arg("stdio"))
        .expect("client");
    c.connect().await.expect("connect");
    let start = Instant::now();
    for _ in 0..calls {
        c.call("echo", json!({"message": "hi"}))
            .await
            .expect("call");
    }
    let seq = start.elapsed();
    println!(
        "mcp-runtime, sequential:     {:>8.1} µs/call",
        seq.as_secs_f64() * 1e6 / calls as f64
    );

    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..calls / 16 {
                c.call("echo", json!({"message": "hi"}))
                    .await
                    .expect("call");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let conc = start.elapsed();
    println!(
        "mcp-runtime, 16 in flight:   {:>8.1} µs/call",
        conc.as_secs_f64() * 1e6 / calls as f64
    );
    c.close().await.expect("close");

    for mb in [1usize, 10] {
        let text = "x".repeat(mb * 1024 * 1024);
        let line = serde_json::to_vec(
            &json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text": text}]}}),
        )
        .expect("json");
        let start = Instant::now();
        let rounds = 20;
        for _ in 0..rounds {
            let m = Message::parse(&line).expect("parse");
            std::hint::black_box(m);
        }
        let t = start.elapsed() / rounds;
        println!(
            "parse a {mb:>2} MB message:       {:>8.2} ms ({:.0} MB/s)",
            t.as_secs_f64() * 1e3,
            mb as f64 / t.as_secs_f64()
        );
    }
}
