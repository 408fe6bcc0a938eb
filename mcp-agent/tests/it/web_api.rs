//! The inbox's JSON API over plain HTTP: who sees which run, who may decide, stale
//! decisions, the event stream's `Last-Event-ID`, a run going on after the last
//! decision — the promises docs/agent.md ("An approval inbox in the browser") makes.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use mcp_agent::web::WebOptions;
use mcp_agent::{Agent, ChatCompletions, Mode, Principal, SqliteRunStore};
use serde_json::{json, Value};

use crate::browser::{post, raw, Served};
use crate::{filesystem, scratch, ModelServer};

fn get(port: u16, path: &str, who: &str) -> (u16, Value) {
    let (status, _, body) = raw(
        port,
        &format!("GET /inbox{path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\nx-user: {who}\r\n\r\n"),
    );
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// A request that changes something, as `who`, with `who`'s CSRF token.
fn send(port: u16, path: &str, who: &str, body: Value) -> (u16, Value) {
    let (_, session) = get(port, "/api/session", who);
    let path = format!("/inbox{path}");
    let token = session["csrf"].as_str().unwrap_or_default().to_owned();
    let headers = format!("x-user: {who}\r\nx-csrf-token: {token}\r\n");
    let (status, _, body) = post(port, &path, &headers, &body.to_string());
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// Waits until the run's detail (as `who` sees it) passes `done`.
async fn until(port: u16, run: &str, done: impl Fn(&Value) -> bool, what: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (_, d) = get(port, &format!("/api/runs/{run}"), "ann");
        if done(&d) {
            return d;
        }
        assert!(Instant::now() < deadline, "{what}: {d}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first `count` event ids of the run's stream, asked with `last`.
fn stream_ids(port: u16, run: &str, last: Option<u64>, count: usize) -> Vec<u64> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let last = last
        .map(|l| format!("last-event-id: {l}\r\n"))
        .unwrap_or_default();
    s.write_all(
        format!("GET /inbox/api/runs/{run}/events HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nx-user: ann\r\n{last}\r\n")
            .as_bytes(),
    )
    .unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    loop {
        let ids: Vec<u64> = text
            .lines()
            .filter_map(|l| l.strip_prefix("id: ").and_then(|n| n.trim().parse().ok()))
            .collect();
        if ids.len() >= count {
            assert!(
                text.to_ascii_lowercase()
                    .contains("content-type: text/event-stream"),
                "{text}"
            );
            return ids[..count].to_vec();
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended early: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_api_keeps_runs_to_their_people() {
    let dir = scratch("inbox-api");
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let files = files.canonicalize().unwrap();
    let target = files.join("x.txt").display().to_string();
    let model = ModelServer::scripted(
        &dir,
        json!([{
            "tool_calls": [{"name": "write_file", "arguments": {"path": target, "content": "X"}}],
            "after_tools": {"text": "written"}
        }]),
    );
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake").unwrap())
        .server(filesystem(&files))
        .store(SqliteRunStore::open(dir.join("runs.sqlite3")).unwrap())
        .mode(Mode::Approve)
        // The application's own rule: mallory may see the team's runs, not decide.
        .authorize(|ask| {
            let may = ask.principal.id != "mallory";
            async move { may }
        })
        .build()
        .unwrap();
    let options = WebOptions::new()
        .principal(|parts| {
            let who = parts.headers.get("x-user")?.to_str().ok()?;
            Some(Principal::new(who))
        })
        .tenants(|who| match who.id.as_str() {
            "carol" => vec![],
            _ => vec!["team".to_owned()],
        });
    let served = Served::start(&agent, options).await;
    let port = served.port;

    let (status, started) = send(
        port,
        "/api/runs",
        "ann",
        json!({"prompt": "write x", "tenant": "team", "labels": {"ticket": "42"}}),
    );
    assert_eq!(status, 201, "{started}");
    let run = started["run"].as_str().unwrap().to_owned();
    let d = until(port, &run, |d| d["status"] == "suspended", "the run waits").await;
    let decision = d["pending"][0]["decision"].as_str().unwrap().to_owned();
    assert_eq!(d["pending"][0]["tool"], "write_file");
    assert_eq!(d["pending"][0]["arguments"]["content"], "X");
    assert!(d["pending"][0]["description"]
        .as_str()
        .unwrap()
        .contains("file"));
    assert_eq!(d["started_by"]["id"], "ann");
    assert_eq!(d["labels"]["ticket"], "42");

    // Bob (same tenant) sees it in his inbox; carol (no tenant) does not see it at
    // all: not listed, 404 for the run, its events and a decision on it; she may not
    // list or start runs of a tenant that is not hers.
    let (_, listed) = get(port, "/api/runs?status=suspended", "bob");
    assert_eq!(listed["runs"][0]["run"], run.as_str(), "{listed}");
    assert_eq!(
        listed["runs"][0]["pending"][0]["decision"],
        decision.as_str()
    );
    let (_, listed) = get(port, "/api/runs", "carol");
    assert_eq!(listed["runs"], json!([]), "{listed}");
    assert_eq!(get(port, &format!("/api/runs/{run}"), "carol").0, 404);
    assert_eq!(
        get(port, &format!("/api/runs/{run}/events"), "carol").0,
        404
    );
    let approve = json!({"decision": decision, "kind": "approve"});
    assert_eq!(
        send(
            port,
            &format!("/api/runs/{run}/decisions"),
            "carol",
            approve.clone()
        )
        .0,
        404
    );
    assert_eq!(get(port, "/api/runs?tenant=team", "carol").0, 403);
    assert_eq!(
        send(
            port,
            "/api/runs",
            "carol",
            json!({"prompt": "p", "tenant": "team"})
        )
        .0,
        403
    );
    // Bad requests say what to fix.
    let (status, said) = send(
        port,
        &format!("/api/runs/{run}/decisions"),
        "ann",
        json!({"decision": decision, "kind": "maybe"}),
    );
    assert_eq!(status, 400);
    assert!(
        said["error"]
            .as_str()
            .unwrap()
            .contains("approve, deny, edit, always"),
        "{said}"
    );
    assert_eq!(get(port, "/api/runs?status=sleeping", "ann").0, 400);

    // The stream: from the first event, and after the one Last-Event-ID names.
    assert_eq!(stream_ids(port, &run, None, 3), [1, 2, 3]);
    assert_eq!(stream_ids(port, &run, Some(2), 1), [3]);

    // Mallory may see it but not decide (the agent's authorize callback): 403 and
    // nothing changed.
    let (status, said) = send(
        port,
        &format!("/api/runs/{run}/decisions"),
        "mallory",
        approve.clone(),
    );
    assert_eq!(status, 403, "{said}");
    assert_eq!(
        agent.pending(&run).await.unwrap().len(),
        1,
        "a refused decision changed nothing"
    );

    // Ann's decision is recorded; the same decision again is stale (409); the worker
    // continues the run.
    let (status, said) = send(
        port,
        &format!("/api/runs/{run}/decisions"),
        "ann",
        approve.clone(),
    );
    assert_eq!(status, 200, "{said}");
    let (status, said) = send(port, &format!("/api/runs/{run}/decisions"), "bob", approve);
    assert_eq!(status, 409, "{said}");
    let d = until(
        port,
        &run,
        |d| d["status"] == "finished",
        "the run finishes",
    )
    .await;
    assert_eq!(std::fs::read_to_string(files.join("x.txt")).unwrap(), "X");
    let decided: Vec<&Value> = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["event"] == "approval_decided")
        .collect();
    assert_eq!(decided.len(), 1, "{d}");
    assert_eq!(decided[0]["event"]["by"], "ann");
    let seqs: Vec<u64> = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let transcript = d["messages"].to_string();
    assert!(transcript.contains("written"), "{transcript}");
    let (_, listed) = get(port, "/api/runs?status=finished", "bob");
    assert_eq!(listed["runs"][0]["run"], run.as_str(), "{listed}");

    served.stop().await;
    agent.close().await.unwrap();
}
