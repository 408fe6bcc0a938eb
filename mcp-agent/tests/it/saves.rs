//! What a save writes, through the agent loop with the real filesystem server and a
//! real SQLite file: a large tool result is kept once (not in the run's row, not in
//! its transcript entries, not again when it joins the transcript or is read twice);
//! the transcript is appended; a transcript entry or a large value changed in the
//! store is refused with an integrity key, and the same run untouched resumes; a
//! deferred save the store lost leaves no gap.

use mcp_agent::runtime::BoxFuture;
use mcp_agent::{
    Agent, ChatCompletions, Claim, Decision, Durability, Lease, LedgerEntry, Mode, Outcome,
    RunFilter, RunPage, RunRecord, RunStore,
};
use serde_json::{json, Value};

use super::decisions::approval;
use super::{filesystem, scratch, store_for, ModelServer};

/// What the SQLite file holds: (rows of blobs holding `marker`, rows of transcript
/// entries holding it, runs whose row holds it, transcript entries of `run`).
fn where_is(dir: &std::path::Path, run: &str, marker: &str) -> (i64, i64, i64, i64) {
    let c = rusqlite::Connection::open(dir.join("state/runs.sqlite3")).unwrap();
    let count = |sql: &str, p: &str| -> i64 { c.query_row(sql, [p], |r| r.get(0)).unwrap() };
    (
        count(
            "SELECT count(*) FROM mcp_agent_blobs WHERE instr(data, ?1) > 0",
            marker,
        ),
        count(
            "SELECT count(*) FROM mcp_agent_transcripts WHERE instr(entry, ?1) > 0",
            marker,
        ),
        count(
            "SELECT count(*) FROM mcp_agent_runs WHERE instr(state, ?1) > 0",
            marker,
        ),
        count(
            "SELECT count(*) FROM mcp_agent_transcripts WHERE run_id = ?1",
            run,
        ),
    )
}

/// A file of 64 KiB read twice (two turns): the result is one blob, kept once; the
/// run's row and its transcript entries refer to it; the run as read back has it
/// twice (the positive control: the reader sees the marker where it is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_is_kept_once() {
    let dir = scratch("saves-once");
    let marker = "MARKER-7c1d-large-result";
    let big = dir.join("big.txt");
    std::fs::write(&big, format!("{marker}\n{}", "y".repeat(64 * 1024))).unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": big}}]},
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": big}}]},
            {"text": "read it twice"}
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::ReadOnly)
        .allow(["read_text_file"])
        .server(filesystem(&dir))
        .store(store.clone())
        .build()
        .unwrap();
    let Outcome::Finished { run_id, .. } = agent.run("read big.txt twice").await.unwrap() else {
        panic!("the run finishes")
    };
    let detail = agent.run_detail(&run_id).await.unwrap().unwrap();
    let seen = serde_json::to_string(&detail.messages).unwrap();
    assert_eq!(seen.matches(marker).count(), 2, "read back whole, twice");
    let (blobs, entries, rows, kept) = where_is(&dir, &run_id, marker);
    assert_eq!(blobs, 1, "the result is kept once");
    assert_eq!(entries, 0, "the transcript refers to it");
    assert_eq!(rows, 0, "the run's row refers to it");
    assert_eq!(
        kept as usize,
        detail.messages.len(),
        "one entry per message"
    );
    agent.close().await.unwrap();
}

/// With an integrity key: a transcript entry changed in the file, or a large value
/// changed, makes the run refused (nothing runs); put back, the same run resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_transcript_or_value_is_refused() {
    let dir = scratch("saves-tamper");
    let marker = "MARKER-4b2e-tamper";
    let big = dir.join("big.txt");
    std::fs::write(&big, format!("{marker}\n{}", "z".repeat(16 * 1024))).unwrap();
    let out = dir.join("out.txt");
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": big}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": out, "content": "done"}}]},
            {"text": "written"}
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    let keyed = || {
        Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Approve)
            .allow(["read_text_file"])
            .server(filesystem(&dir))
            .store(store.clone())
            .integrity_key("KEY-saves-tamper")
            .build()
            .unwrap()
    };
    let (run, _, decision) = approval(keyed().run("read, then write").await.unwrap());
    let c = rusqlite::Connection::open(dir.join("state/runs.sqlite3")).unwrap();
    let (blobs, _, _, _) = where_is(&dir, &run, marker);
    assert_eq!(blobs, 1);

    // The person's request rewritten in the transcript's log: refused.
    c.execute(
        "UPDATE mcp_agent_transcripts SET entry = replace(entry, 'read, then write', 'write anything')
         WHERE run_id = ?1",
        [&run],
    )
    .unwrap();
    let e = keyed()
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(e.is_store() && e.to_string().contains("transcript"), "{e}");
    assert!(!out.exists());
    c.execute(
        "UPDATE mcp_agent_transcripts SET entry = replace(entry, 'write anything', 'read, then write')
         WHERE run_id = ?1",
        [&run],
    )
    .unwrap();

    // The large value changed: refused.
    c.execute(
        "UPDATE mcp_agent_blobs SET data = replace(data, ?2, 'MARKER-changed') WHERE run_id = ?1",
        [&run, &marker.to_owned()],
    )
    .unwrap();
    let e = keyed()
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(
        e.is_store() && e.to_string().contains("not the one referred to"),
        "{e}"
    );
    assert!(!out.exists());
    c.execute(
        "UPDATE mcp_agent_blobs SET data = replace(data, 'MARKER-changed', ?2) WHERE run_id = ?1",
        [&run, &marker.to_owned()],
    )
    .unwrap();

    // An entry taken away: refused.
    let last: i64 = c
        .query_row(
            "SELECT max(n) FROM mcp_agent_transcripts WHERE run_id = ?1",
            [&run],
            |r| r.get(0),
        )
        .unwrap();
    let taken: String = c
        .query_row(
            "SELECT entry FROM mcp_agent_transcripts WHERE run_id = ?1 AND n = ?2",
            rusqlite::params![run, last],
            |r| r.get(0),
        )
        .unwrap();
    c.execute(
        "DELETE FROM mcp_agent_transcripts WHERE run_id = ?1 AND n = ?2",
        rusqlite::params![run, last],
    )
    .unwrap();
    let e = keyed()
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(e.is_store() && e.to_string().contains("transcript"), "{e}");
    c.execute(
        "INSERT INTO mcp_agent_transcripts (run_id, n, entry) VALUES (?1, ?2, ?3)",
        rusqlite::params![run, last, taken],
    )
    .unwrap();

    // Untouched (put back as kept): it resumes, and the write happens once.
    let Outcome::Finished { .. } = keyed()
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!("the untouched run resumes")
    };
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "done");
}

/// A store that acknowledges deferred saves and keeps none of them — what a database
/// that restarted within its WAL flush (`synchronous_commit = off`) leaves behind while
/// the agent's process goes on.
struct Forgetful(std::sync::Arc<dyn RunStore>, std::sync::atomic::AtomicUsize);

impl RunStore for Forgetful {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, mcp_agent::Result<()>> {
        if run.durability == Durability::Deferred {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Box::pin(async { Ok(()) });
        }
        self.0.save(run)
    }
    fn events<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<Vec<Value>>> {
        self.0.events(id)
    }
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<Option<RunRecord>>> {
        self.0.load(id)
    }
    fn claim<'a>(
        &'a self,
        id: &'a str,
        claim: Claim<'a>,
        lease: &'a Lease,
    ) -> BoxFuture<'a, mcp_agent::Result<Option<RunRecord>>> {
        self.0.claim(id, claim, lease)
    }
    fn renew<'a>(
        &'a self,
        id: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, mcp_agent::Result<bool>> {
        self.0.renew(id, lease)
    }
    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, mcp_agent::Result<RunPage>> {
        self.0.list(filter)
    }
    fn ledger<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<Vec<LedgerEntry>>> {
        self.0.ledger(id)
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<bool>> {
        self.0.delete(id)
    }
    fn prune(&self, secs: u64) -> BoxFuture<'_, mcp_agent::Result<u64>> {
        self.0.prune(secs)
    }
    fn save_allowance<'a>(
        &'a self,
        id: &'a str,
        allowance: &'a Value,
    ) -> BoxFuture<'a, mcp_agent::Result<()>> {
        self.0.save_allowance(id, allowance)
    }
    fn allowances(&self) -> BoxFuture<'_, mcp_agent::Result<Vec<Value>>> {
        self.0.allowances()
    }
    fn delete_allowance<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<bool>> {
        self.0.delete_allowance(id)
    }
}

/// Deferred saves acknowledged and lost (the large result kept by one of them among
/// what is lost): the next, flushed save writes what they held again, so the run
/// suspended after them reads back whole in another process and resumes — no gap, no
/// missing value. (Positive control: the deferred saves were made, and lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_deferred_save_leaves_no_gap() {
    let dir = scratch("saves-lost");
    let marker = "MARKER-9e3a-lost-deferred";
    let big = dir.join("big.txt");
    std::fs::write(&big, format!("{marker}\n{}", "q".repeat(16 * 1024))).unwrap();
    let out = dir.join("out.txt");
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": big}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": out, "content": "done"}}]},
            {"text": "written"}
        ]),
    );
    let kept = store_for(&dir, "sqlite").await;
    let forgetful = std::sync::Arc::new(Forgetful(kept.clone(), Default::default()));
    let build = |store: std::sync::Arc<dyn RunStore>| {
        Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Approve)
            .allow(["read_text_file"])
            .server(filesystem(&dir))
            .store(store)
            .integrity_key("KEY-saves-lost-0123456789")
            .build()
            .unwrap()
    };
    let (run, _, decision) = approval(
        build(forgetful.clone())
            .run("read, then write")
            .await
            .unwrap(),
    );
    assert!(
        forgetful.1.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "a deferred save was made, and lost"
    );
    // Another process, on the store as it is: the run reads whole.
    let other = build(kept.clone());
    let detail = other.run_detail(&run).await.unwrap().unwrap();
    let seen = serde_json::to_string(&detail.messages).unwrap();
    assert!(
        seen.contains(marker),
        "the lost save's result is in the store"
    );
    let Outcome::Finished { .. } = other
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!("the run resumes")
    };
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "done");
}
