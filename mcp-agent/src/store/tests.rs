//! What is a store's own, beyond the contract: the memory store's bound, SQLite's
//! errors and deferred saves. What every store must do is tested once for all, in the
//! store conformance suite (`tests/it/store_suite.rs`).

use super::*;
use serde_json::json;

#[tokio::test]
async fn the_memory_store_is_bounded() {
    let store = MemoryRunStore::with_capacity(2);
    let run = |id: &str, status| RunRecord {
        id: id.into(),
        status,
        suspension: None,
        state: json!({}),
        lease: None,
        transcript: Default::default(),
        blobs: Vec::new(),
        events: Vec::new(),
        durability: Default::default(),
        ledger: Vec::new(),
        first: true,
    };
    store.save(&run("a", RunStatus::Suspended)).await.unwrap();
    store.save(&run("b", RunStatus::Suspended)).await.unwrap();
    // Full of runs that still wait: a new one is refused, the old ones stay.
    let e = store
        .save(&run("c", RunStatus::Suspended))
        .await
        .unwrap_err();
    assert!(e.is_store() && e.to_string().contains("full"), "{e}");
    // Saving a kept run is never refused.
    store.save(&run("a", RunStatus::Finished)).await.unwrap();
    // An ended run makes room.
    store.save(&run("c", RunStatus::Suspended)).await.unwrap();
    assert!(store.load("a").await.unwrap().is_none());
    assert!(store.load("b").await.unwrap().is_some());
    let page = store.list(&RunFilter::new()).await.unwrap();
    assert_eq!(page.runs.len(), 2);
}

#[cfg(feature = "sqlite")]
#[test]
fn a_store_error_keeps_its_cause() {
    use std::error::Error as _;
    // A folder where the file should be: SQLite cannot open it.
    let dir = std::env::temp_dir().join(format!("mcp-agent-store-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = SqliteRunStore::open(&dir).unwrap_err();
    assert!(e.is_store(), "{e}");
    let cause = e.source().expect("the cause is kept as the source");
    assert!(
        cause.downcast_ref::<std::io::Error>().is_some()
            || cause.downcast_ref::<rusqlite::Error>().is_some(),
        "{cause:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A deferred save is committed (another connection reads it at once, as a process
/// started after a crash of this one would) without being fsynced, and the connection
/// is back to fsyncing every other write.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_defers_only_the_save_it_is_asked_to() {
    let dir = std::env::temp_dir().join(format!("mcp-agent-defer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("runs.sqlite3");
    let store = SqliteRunStore::open(&path).unwrap();
    let synchronous = |store: &SqliteRunStore| -> i64 {
        let conn = mcp_runtime_core::lock(&store.conn);
        let c = conn.as_ref().expect("the connection is kept");
        c.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap()
    };
    assert_eq!(synchronous(&store), 2, "FULL by default");
    store
        .save(&RunRecord {
            id: "r".into(),
            status: RunStatus::Running,
            suspension: None,
            state: json!({"results": "kept"}),
            lease: None,
            transcript: Default::default(),
            blobs: Vec::new(),
            events: vec![json!({"event": "after_tool_call"})],
            durability: Durability::Deferred,
            ledger: Vec::new(),
            first: true,
        })
        .await
        .unwrap();
    assert_eq!(synchronous(&store), 2, "FULL again after the deferred save");
    // As if the process died: nothing closes or checkpoints the store.
    std::mem::forget(store);
    let other = SqliteRunStore::open(&path).unwrap();
    let kept = other.load("r").await.unwrap().unwrap();
    assert_eq!(kept.state, json!({"results": "kept"}));
    assert_eq!(
        other.events("r").await.unwrap(),
        [json!({"event": "after_tool_call"})]
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A SQLite file made before runs had owners gains the owner columns (and indexes):
/// its runs list with none until their next save, which fills them.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_adds_the_owner_columns_to_an_older_table() {
    let dir = std::env::temp_dir().join(format!("mcp-agent-owner-cols-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("runs.sqlite3");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE mcp_agent_runs (id TEXT PRIMARY KEY, status TEXT NOT NULL,
               state TEXT NOT NULL, updated_at INTEGER NOT NULL, suspension TEXT,
               lease_owner TEXT, lease_until INTEGER);
             INSERT INTO mcp_agent_runs VALUES ('old', 'suspended', '{\"options\":{\"tenant\":\"t\"}}', 1, 's', NULL, NULL);",
        )
        .unwrap();
    }
    let store = SqliteRunStore::open(&path).unwrap();
    let all = store.list(&RunFilter::new()).await.unwrap().runs;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].tenant, None, "empty until the next save");
    assert!(store
        .list(&RunFilter::new().tenant("t"))
        .await
        .unwrap()
        .runs
        .is_empty());
    let mut old = store.load("old").await.unwrap().unwrap();
    old.state = json!({"options": {"tenant": "t", "labels": {"k": "v"}}, "usage": {"input_tokens": 3, "output_tokens": 4}});
    store.save(&old).await.unwrap();
    let found = store
        .list(&RunFilter::new().tenant("t").label("k", "v"))
        .await
        .unwrap()
        .runs;
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].input_tokens, found[0].output_tokens), (3, 4));
    let indexes: i64 = {
        let conn = mcp_runtime_core::lock(&store.conn);
        let c = conn.as_ref().expect("the connection is kept");
        c.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name LIKE 'mcp_agent_runs_%'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(indexes, 4, "tenant, started_by, due_at, running");
    let _ = std::fs::remove_dir_all(dir);
}
