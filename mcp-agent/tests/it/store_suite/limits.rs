//! Capacity: what a store returns is bounded whatever it holds — a run's first
//! 100,000 events and ledger entries, 10,000 standing allowances.

use mcp_agent::{LedgerEntry, LedgerKind, RunRecord, RunStatus};
use serde_json::json;

use super::{run, Backend};

const MAX_EVENTS: usize = 100_000;
const MAX_LEDGER: usize = 100_000;
const MAX_ALLOWANCES: usize = 10_000;

/// A run with more events than a store returns gives its first 100,000, in order; a
/// ledger with more entries is either refused or read back as its first 100,000.
pub(crate) async fn events_and_the_ledger_are_capped(backend: &Backend) {
    let store = backend.open().await;
    store
        .save(&RunRecord {
            events: (0..MAX_EVENTS - 1).map(|n| json!(n)).collect(),
            ..run("r", RunStatus::Running, json!({}))
        })
        .await
        .unwrap();
    store
        .save(&RunRecord {
            events: vec![json!(MAX_EVENTS - 1), json!("one too many")],
            first: false,
            ..run("r", RunStatus::Running, json!({}))
        })
        .await
        .unwrap();
    let events = store.events("r").await.unwrap();
    assert_eq!(events.len(), MAX_EVENTS);
    assert!(
        events.iter().enumerate().all(|(n, e)| *e == json!(n)),
        "the first ones, in order"
    );

    let item = |n: usize| format!("call-{n:06}/0");
    let ledger: Vec<_> = (0..=MAX_LEDGER)
        .map(|n| LedgerEntry::new(LedgerKind::Sent, item(n), None, 1))
        .collect();
    let saved = store
        .save(&RunRecord {
            ledger,
            ..run("l", RunStatus::Running, json!({}))
        })
        .await;
    let kept = store.ledger("l").await.unwrap();
    match saved {
        Err(e) => assert!(e.is_store() && kept.is_empty(), "{e}"),
        Ok(()) => {
            assert_eq!(kept.len(), MAX_LEDGER);
            assert!(kept.iter().enumerate().all(|(n, e)| e.item == item(n)));
        }
    }
}

/// More standing allowances than a store returns: the save of one too many is either
/// refused or kept, and `allowances` gives 10,000 either way.
pub(crate) async fn allowances_are_capped(backend: &Backend) {
    let store = backend.open().await;
    for n in 0..MAX_ALLOWANCES {
        let id = format!("a-{n:05}");
        store.save_allowance(&id, &json!({"id": id})).await.unwrap();
    }
    let over = store.save_allowance("b", &json!({"id": "b"})).await;
    let all = store.allowances().await.unwrap();
    assert_eq!(all.len(), MAX_ALLOWANCES, "{over:?}");
    // Replacing a kept one is never refused.
    store
        .save_allowance("a-00000", &json!({"id": "a-00000", "n": 2}))
        .await
        .unwrap();
    assert!(store
        .allowances()
        .await
        .unwrap()
        .contains(&json!({"id": "a-00000", "n": 2})));
}
