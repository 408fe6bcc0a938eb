//! What a store keeps and gives back: a run as saved, its event log in order, the
//! standing allowances.

use mcp_agent::{Durability, RunRecord, RunStatus};
use serde_json::json;

use super::{held, lease, run, suspended, Backend};

/// Standing allowances are kept, replaced, listed (in id order) and forgotten by id;
/// every handle sees them.
pub(crate) async fn allowances_are_kept(backend: &Backend) {
    let store = backend.open().await;
    assert!(store.allowances().await.unwrap().is_empty());
    store
        .save_allowance("y", &json!({"id": "y"}))
        .await
        .unwrap();
    store
        .save_allowance("x", &json!({"id": "x", "n": 1}))
        .await
        .unwrap();
    store
        .save_allowance("x", &json!({"id": "x", "n": 2}))
        .await
        .unwrap();
    let other = backend.open().await;
    let all = other.allowances().await.unwrap();
    assert_eq!(all, [json!({"id": "x", "n": 2}), json!({"id": "y"})]);
    assert!(other.delete_allowance("x").await.unwrap());
    assert!(!store.delete_allowance("x").await.unwrap());
    assert_eq!(store.allowances().await.unwrap(), [json!({"id": "y"})]);
    assert!(store.delete_allowance("y").await.unwrap());
    assert!(store.allowances().await.unwrap().is_empty());
}

/// A run's events are appended in order, save after save and handle after handle;
/// each run has its own log; a load returns none; deleting the run forgets them.
pub(crate) async fn events_are_kept_in_order(backend: &Backend) {
    let store = backend.open().await;
    assert!(store.events("unknown").await.unwrap().is_empty());
    store
        .save(&RunRecord {
            events: (0..3).map(|n| json!({"n": n})).collect(),
            lease: Some(lease("a")),
            ..run("r", RunStatus::Running, json!({}))
        })
        .await
        .unwrap();
    // A save without events appends none.
    let next = RunRecord {
        lease: Some(lease("a")),
        first: false,
        ..run("r", RunStatus::Running, json!({"n": 1}))
    };
    store.save(&next).await.unwrap();
    let other = backend.open().await;
    for batch in [3..5, 5..6, 6..11] {
        other
            .save(&RunRecord {
                events: batch.map(|n| json!({"n": n})).collect(),
                durability: Durability::Deferred,
                ..next.clone()
            })
            .await
            .unwrap();
    }
    // Another run's events are its own.
    store
        .save(&RunRecord {
            events: vec![json!("other")],
            ..suspended("s", "s1", json!({}))
        })
        .await
        .unwrap();
    let expected: Vec<_> = (0..11).map(|n| json!({"n": n})).collect();
    assert_eq!(store.events("r").await.unwrap(), expected);
    assert_eq!(other.events("r").await.unwrap(), expected);
    assert_eq!(store.events("s").await.unwrap(), [json!("other")]);
    assert!(store.load("r").await.unwrap().unwrap().events.is_empty());
    // Any JSON is an event, kept as it was.
    let odd = json!({"text": "ünïcode \u{1F600} \"quoted\" \\ \n", "big": u64::MAX, "f": 1.5, "null": null});
    store
        .save(&RunRecord {
            events: vec![odd.clone()],
            ..next.clone()
        })
        .await
        .unwrap();
    assert_eq!(store.events("r").await.unwrap().last(), Some(&odd));
    assert!(store.delete("r").await.unwrap());
    assert!(store.events("r").await.unwrap().is_empty());
    assert_eq!(store.events("s").await.unwrap(), [json!("other")]);
}

/// A load gives the run as last saved — its status, suspension, state and lease,
/// any JSON — with no events nor ledger, flushed, not a first save; a save replaces
/// it; a deferred save is read back at once by another handle.
pub(crate) async fn a_run_is_kept_as_saved(backend: &Backend) {
    let store = backend.open().await;
    let state = json!({
        "text": "ünïcode \u{1F600} \"quoted\" \\ \n\t",
        "nested": {"list": [1, 2.5, -3, true, null], "empty": {}},
        "big": u64::MAX,
    });
    store
        .save(&RunRecord {
            events: vec![json!("e")],
            ..suspended("r", "s-1", state.clone())
        })
        .await
        .unwrap();
    let kept = store.load("r").await.unwrap().unwrap();
    assert_eq!(kept.id, "r");
    assert_eq!(kept.status, RunStatus::Suspended);
    assert_eq!(kept.suspension.as_deref(), Some("s-1"));
    assert_eq!(kept.state, state);
    assert_eq!(kept.lease, None);
    assert!(kept.events.is_empty() && kept.ledger.is_empty());
    assert_eq!(kept.durability, Durability::Flushed);
    assert!(!kept.first, "a load is not a first save");
    // Every status round-trips, and a save replaces what was kept.
    for status in [
        RunStatus::Running,
        RunStatus::Finished,
        RunStatus::Failed,
        RunStatus::Cancelled,
        RunStatus::Suspended,
    ] {
        let saved = RunRecord {
            durability: Durability::Deferred,
            first: false,
            ..run("r", status, json!({"status": format!("{status:?}")}))
        };
        store.save(&saved).await.unwrap();
        let other = backend.open().await;
        let kept = other.load("r").await.unwrap().unwrap();
        assert_eq!(kept.status, status);
        assert_eq!(kept.state, saved.state);
        assert_eq!(kept.suspension, None);
        assert_eq!(kept.lease, None);
        assert_eq!(kept.durability, Durability::Flushed, "a load is flushed");
        assert!(!kept.first);
    }
    // A lease is kept as saved.
    store
        .save(&RunRecord {
            lease: Some(held("a", 1_234_567)),
            ..run("leased", RunStatus::Running, json!({}))
        })
        .await
        .unwrap();
    let kept = store.load("leased").await.unwrap().unwrap();
    assert_eq!(kept.lease, Some(held("a", 1_234_567)));
}
