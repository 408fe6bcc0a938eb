//! A run's transcript and large values: a save appends entries (and keeps each blob
//! once), a load gives the transcript `from..to` whole with every blob, a new segment
//! lets the store forget what came before it, a claim reads as a load does, and delete
//! and prune forget them with the run.

use mcp_agent::{Blob, Claim, RunRecord, RunStatus, Transcript};
use serde_json::{json, Value};

use super::{lease, now_secs, run, suspended, Backend};

fn entries(range: std::ops::Range<u64>) -> Vec<Value> {
    range
        .map(|n| json!({"n": n, "text": "ünïcode \u{1F600}"}))
        .collect()
}

/// Saves append; a load (from any handle) gives every entry `from..to` in order with
/// every blob; an entry saved again under its number replaces it; a blob saved twice
/// is kept once, as first saved.
pub(crate) async fn a_transcript_is_appended(backend: &Backend) {
    let store = backend.open().await;
    // Any text, a NUL included (PostgreSQL's `text` cannot hold one).
    let big = format!("{}\u{0}{}", "b".repeat(50_000), "ü".repeat(25_000));
    store
        .save(&RunRecord {
            transcript: Transcript::new(0, 2, entries(0..2)),
            blobs: vec![Blob::new("sha256:one".into(), big.clone())],
            ..run("r", RunStatus::Running, json!({"v": 1}))
        })
        .await
        .unwrap();
    for (to, new) in [(3, entries(2..3)), (5, entries(3..5))] {
        store
            .save(&RunRecord {
                transcript: Transcript::new(0, to, new),
                blobs: vec![Blob::new("sha256:one".into(), "not again".into())],
                first: false,
                ..run("r", RunStatus::Running, json!({"v": to}))
            })
            .await
            .unwrap();
    }
    let other = backend.open().await;
    let kept = other.load("r").await.unwrap().unwrap();
    assert_eq!(kept.state, json!({"v": 5}));
    assert_eq!(kept.transcript, Transcript::new(0, 5, entries(0..5)));
    assert_eq!(
        kept.blobs,
        vec![Blob::new("sha256:one".into(), big.clone())]
    );
    // A save with no new entry leaves the transcript as it is; one that saves an
    // entry again (a run put back) replaces it.
    store
        .save(&RunRecord {
            transcript: Transcript::new(0, 5, vec![json!("replaced")]),
            first: false,
            ..run("r", RunStatus::Running, json!({"v": 6}))
        })
        .await
        .unwrap();
    let kept = other.load("r").await.unwrap().unwrap();
    assert_eq!(kept.transcript.entries.len(), 5);
    assert_eq!(kept.transcript.entries[4], json!("replaced"));
    assert_eq!(kept.transcript.entries[..4], entries(0..4)[..]);
    // A shorter transcript (its state saved with fewer entries) reads only those.
    store
        .save(&RunRecord {
            transcript: Transcript::new(0, 3, Vec::new()),
            first: false,
            ..run("r", RunStatus::Running, json!({"v": 7}))
        })
        .await
        .unwrap();
    let kept = other.load("r").await.unwrap().unwrap();
    assert_eq!(kept.transcript, Transcript::new(0, 3, entries(0..3)));
    // Another run's transcript and blobs are its own.
    store
        .save(&RunRecord {
            transcript: Transcript::new(0, 1, vec![json!("s")]),
            blobs: vec![Blob::new("sha256:two".into(), "2".into())],
            ..run("s", RunStatus::Running, json!({}))
        })
        .await
        .unwrap();
    let s = other.load("s").await.unwrap().unwrap();
    assert_eq!(s.transcript.entries, vec![json!("s")]);
    assert_eq!(s.blobs, vec![Blob::new("sha256:two".into(), "2".into())]);
    let r = other.load("r").await.unwrap().unwrap();
    assert_eq!(r.blobs, vec![Blob::new("sha256:one".into(), big)]);
}

/// A save that starts a new segment (after a compaction) is read from its `from` and
/// keeps only the blobs it carries; a claim returns the transcript and blobs as a load
/// does; delete and prune forget them with the run.
pub(crate) async fn a_new_segment_replaces_the_old_and_goes_with_the_run(backend: &Backend) {
    let store = backend.open().await;
    store
        .save(&RunRecord {
            transcript: Transcript::new(0, 3, entries(0..3)),
            blobs: vec![Blob::new("sha256:a".into(), "a".into())],
            ..suspended("r", "s-1", json!({}))
        })
        .await
        .unwrap();
    store
        .save(&RunRecord {
            transcript: Transcript::new(3, 5, entries(10..12)),
            blobs: vec![Blob::new("sha256:b".into(), "b\u{0}".into())],
            first: false,
            ..suspended("r", "s-1", json!({"compacted": true}))
        })
        .await
        .unwrap();
    let claimed = store
        .claim("r", Claim::Suspended("s-1"), &lease("me"))
        .await
        .unwrap()
        .expect("claimed");
    assert_eq!(claimed.transcript, Transcript::new(3, 5, entries(10..12)));
    // The new segment carried the blobs the run still refers to: the others are gone.
    assert_eq!(
        claimed.blobs,
        vec![Blob::new("sha256:b".into(), "b\u{0}".into())]
    );
    assert_eq!(claimed.state, json!({"compacted": true}));
    // Deleted with the run: a new run of the same id starts empty.
    assert!(store.delete("r").await.unwrap());
    store
        .save(&run("r", RunStatus::Finished, json!({})))
        .await
        .unwrap();
    let kept = store.load("r").await.unwrap().unwrap();
    assert_eq!(kept.transcript, Transcript::default());
    assert!(kept.blobs.is_empty());
    // Pruned with the run.
    store
        .save(&RunRecord {
            transcript: Transcript::new(0, 1, vec![json!("x")]),
            blobs: vec![Blob::new("sha256:x".into(), "x".into())],
            ..run("p", RunStatus::Finished, json!({}))
        })
        .await
        .unwrap();
    assert!(store.prune(now_secs() + 2).await.unwrap() >= 1);
    store
        .save(&run("p", RunStatus::Finished, json!({})))
        .await
        .unwrap();
    let kept = store.load("p").await.unwrap().unwrap();
    assert_eq!(kept.transcript, Transcript::default());
    assert!(kept.blobs.is_empty());
}
