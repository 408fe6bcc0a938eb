//! The event log as a watcher reads it: numbered 1, 2, 3, … per run with no gap, read
//! a page after a number, and waited for.

use std::time::{Duration, Instant};

use mcp_agent::{RunRecord, RunStatus, EVENTS_MAX_WAIT, MAX_EVENTS_PAGE};
use serde_json::json;

use super::{lease, run, Backend};

/// Every run's events are numbered from 1 in the order appended, save after save and
/// handle after handle; `events_after` reads the ones after a number, at most a page;
/// another run's numbers are its own; a deleted run has none.
pub(crate) async fn events_are_numbered_without_gaps(backend: &Backend) {
    let store = backend.open().await;
    assert!(store.events_after("r", None, 10).await.unwrap().is_empty());
    let first = RunRecord {
        events: (1..=3).map(|n| json!({"n": n})).collect(),
        lease: Some(lease("a")),
        ..run("r", RunStatus::Running, json!({}))
    };
    store.save(&first).await.unwrap();
    let other = backend.open().await;
    // A save without events numbers none; the next ones go on from 4.
    let next = RunRecord {
        events: Vec::new(),
        first: false,
        ..first.clone()
    };
    other.save(&next).await.unwrap();
    other
        .save(&RunRecord {
            events: (4..=6).map(|n| json!({"n": n})).collect(),
            ..next.clone()
        })
        .await
        .unwrap();
    store
        .save(&RunRecord {
            events: vec![json!("other")],
            ..run("s", RunStatus::Running, json!({}))
        })
        .await
        .unwrap();
    let numbered = |from: u64, to: u64| -> Vec<(u64, serde_json::Value)> {
        (from..=to).map(|n| (n, json!({"n": n}))).collect()
    };
    for handle in [&store, &other] {
        assert_eq!(
            handle.events_after("r", None, 100).await.unwrap(),
            numbered(1, 6)
        );
        assert_eq!(
            handle.events_after("r", Some(0), 100).await.unwrap(),
            numbered(1, 6)
        );
        assert_eq!(
            handle.events_after("r", Some(2), 2).await.unwrap(),
            numbered(3, 4)
        );
        assert!(handle
            .events_after("r", Some(6), 10)
            .await
            .unwrap()
            .is_empty());
        assert!(handle
            .events_after("r", Some(u64::MAX), 10)
            .await
            .unwrap()
            .is_empty());
        // A limit of 0 reads one; a page is at most MAX_EVENTS_PAGE.
        assert_eq!(
            handle.events_after("r", Some(4), 0).await.unwrap(),
            numbered(5, 5)
        );
        assert_eq!(
            handle.events_after("s", None, 10).await.unwrap(),
            [(1, json!("other"))]
        );
    }
    // What `events_after` numbers is what `events` lists.
    let listed = store.events("r").await.unwrap();
    let paged: Vec<_> = store
        .events_after("r", None, usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    assert_eq!(listed, paged);
    // A page holds at most MAX_EVENTS_PAGE, whatever the limit asked for.
    store
        .save(&RunRecord {
            events: (0..MAX_EVENTS_PAGE + 5).map(|n| json!(n)).collect(),
            ..run("big", RunStatus::Running, json!({}))
        })
        .await
        .unwrap();
    let page = other.events_after("big", None, usize::MAX).await.unwrap();
    assert_eq!(page.len(), MAX_EVENTS_PAGE);
    assert_eq!(
        page.last(),
        Some(&(MAX_EVENTS_PAGE as u64, json!(MAX_EVENTS_PAGE - 1)))
    );
    let rest = other
        .events_after("big", Some(MAX_EVENTS_PAGE as u64), usize::MAX)
        .await
        .unwrap();
    assert_eq!(rest.len(), 5);
    assert!(store.delete("r").await.unwrap());
    assert!(other.events_after("r", None, 10).await.unwrap().is_empty());
}

/// A wait for events after a number returns when the run has them (at once), and a
/// waiter in another handle is woken by a save that appends some — well before the
/// longest wait, on every store.
pub(crate) async fn a_waiter_learns_of_new_events(backend: &Backend) {
    let store = backend.open().await;
    let first = RunRecord {
        events: vec![json!(1)],
        lease: Some(lease("a")),
        ..run("r", RunStatus::Running, json!({}))
    };
    store.save(&first).await.unwrap();
    // Events after 0 are there: the wait returns.
    tokio::time::timeout(Duration::from_secs(120), store.wait_events("r", 0))
        .await
        .expect("a wait for what is there returns")
        .unwrap();
    let watcher = backend.open().await;
    // The waiter waits (and reads again whenever the wait returns) until event 2 is
    // there; the save comes after its first wait began.
    let (began, begun) = tokio::sync::oneshot::channel();
    let waiting = tokio::spawn(async move {
        let mut began = Some(began);
        let start = Instant::now();
        loop {
            let seen = watcher.events_after("r", Some(1), 10).await.unwrap();
            if !seen.is_empty() {
                return (seen, start.elapsed());
            }
            let wait = watcher.wait_events("r", 1);
            if let Some(b) = began.take() {
                // Told once the first wait was asked for (the save may race it:
                // either way it must be seen).
                let _ = b.send(());
            }
            wait.await.unwrap();
        }
    });
    begun.await.unwrap();
    store
        .save(&RunRecord {
            events: vec![json!(2)],
            first: false,
            ..first.clone()
        })
        .await
        .unwrap();
    let (seen, took) = tokio::time::timeout(Duration::from_secs(120), waiting)
        .await
        .expect("the waiter saw the new event")
        .unwrap();
    assert_eq!(seen, [(2, json!(2))]);
    // Woken by the save (or a bounded poll), not by the longest wait running out.
    assert!(took < EVENTS_MAX_WAIT, "{took:?}");
}
