//! Owner columns: every save keeps the run's tenant, who started it, its labels and
//! the tokens it spent (from its state) beside the state; `list` filters by them and
//! shows them.

use mcp_agent::{RunFilter, RunRecord, RunStatus, RunSummary};
use serde_json::{json, Value};

use super::{run, Backend};

fn state(tenant: Option<&str>, by: Option<&str>, labels: Value, tokens: (u64, u64)) -> Value {
    let mut options = json!({ "labels": labels });
    if let Some(t) = tenant {
        options["tenant"] = json!(t);
    }
    if let Some(p) = by {
        options["started_by"] = json!({"id": p, "name": format!("{p} (shown)")});
    }
    json!({
        "options": options,
        "usage": {"input_tokens": tokens.0, "output_tokens": tokens.1},
    })
}

fn ids(runs: &[RunSummary]) -> Vec<&str> {
    runs.iter().map(|r| r.id.as_str()).collect()
}

/// Runs of two tenants, started by two people, with labels (keys with dots, quotes
/// and non-ASCII too): each filter, alone and together, with a status and across
/// pages, gives exactly its runs; the summary shows owner and spend; a later save
/// replaces them; a state with none (or odd fields) lists with none.
pub(crate) async fn list_filters_by_owner(backend: &Backend) {
    let store = backend.open().await;
    let odd = r#"a.b "c" é"#;
    let runs = [
        (
            "o-1",
            Some("t1"),
            Some("ann"),
            json!({"env": "prod", odd: "x"}),
            RunStatus::Suspended,
        ),
        (
            "o-2",
            Some("t1"),
            Some("bob"),
            json!({"env": "dev"}),
            RunStatus::Suspended,
        ),
        (
            "o-3",
            Some("t2"),
            Some("ann"),
            json!({"env": "prod"}),
            RunStatus::Finished,
        ),
        ("o-4", None, None, json!({}), RunStatus::Suspended),
        (
            "o-5",
            Some("t1"),
            Some("ann"),
            json!({"env": "prod", "team": "red"}),
            RunStatus::Finished,
        ),
    ];
    for (n, (id, tenant, by, labels, status)) in runs.iter().enumerate() {
        let n = n as u64;
        store
            .save(&RunRecord {
                suspension: (*status == RunStatus::Suspended).then(|| format!("s-{id}")),
                ..run(
                    id,
                    *status,
                    state(*tenant, *by, labels.clone(), (100 + n, 10 + n)),
                )
            })
            .await
            .unwrap();
    }
    // An odd state: a tenant that is no string, labels that are no object.
    store
        .save(&run(
            "o-6",
            RunStatus::Suspended,
            json!({"options": {"tenant": 7, "labels": ["env", "prod"]}, "usage": "lots"}),
        ))
        .await
        .unwrap();
    let list = |filter: RunFilter| {
        let store = store.clone();
        async move { store.list(&filter).await.unwrap().runs }
    };
    assert_eq!(
        ids(&list(RunFilter::new().tenant("t1")).await),
        ["o-1", "o-2", "o-5"]
    );
    assert_eq!(
        ids(&list(RunFilter::new().started_by("ann")).await),
        ["o-1", "o-3", "o-5"]
    );
    assert_eq!(
        ids(&list(RunFilter::new().tenant("t1").started_by("ann")).await),
        ["o-1", "o-5"]
    );
    assert_eq!(
        ids(&list(RunFilter::new().tenant("t1").status(RunStatus::Suspended)).await),
        ["o-1", "o-2"]
    );
    assert_eq!(
        ids(&list(RunFilter::new().label("env", "prod")).await),
        ["o-1", "o-3", "o-5"]
    );
    assert_eq!(
        ids(&list(RunFilter::new().label("env", "prod").label("team", "red")).await),
        ["o-5"]
    );
    assert_eq!(ids(&list(RunFilter::new().label(odd, "x")).await), ["o-1"]);
    assert!(list(RunFilter::new().label("env", "staging"))
        .await
        .is_empty());
    assert!(list(RunFilter::new().tenant("t3")).await.is_empty());
    assert!(list(RunFilter::new().tenant("7")).await.is_empty());
    // Pages of one, by tenant: every run of it once, in id order.
    let mut filter = RunFilter::new().tenant("t1").limit(1);
    let mut paged = Vec::new();
    loop {
        let page = store.list(&filter).await.unwrap();
        paged.extend(page.runs.into_iter().map(|r| r.id));
        match page.next {
            Some(next) => filter = filter.cursor(next),
            None => break,
        }
    }
    assert_eq!(paged, ["o-1", "o-2", "o-5"]);
    // The summary shows the owner and what the run spent.
    let all = list(RunFilter::new()).await;
    assert_eq!(all.len(), 6);
    let one = &all[0];
    assert_eq!(one.tenant.as_deref(), Some("t1"));
    assert_eq!(one.started_by.as_deref(), Some("ann"));
    assert_eq!(one.labels.get("env").map(String::as_str), Some("prod"));
    assert_eq!(one.labels.get(odd).map(String::as_str), Some("x"));
    assert_eq!((one.input_tokens, one.output_tokens), (100, 10));
    let none = &all[3];
    assert_eq!(
        (none.tenant.as_ref(), none.started_by.as_ref()),
        (None, None)
    );
    assert!(none.labels.is_empty());
    let odd_run = &all[5];
    assert_eq!(odd_run.tenant, None);
    assert!(odd_run.labels.is_empty());
    assert_eq!((odd_run.input_tokens, odd_run.output_tokens), (0, 0));
    // A later save replaces the columns.
    let mut again = store.load("o-2").await.unwrap().unwrap();
    again.state = state(Some("t2"), Some("cy"), json!({"env": "prod"}), (5000, 700));
    again.first = false;
    store.save(&again).await.unwrap();
    assert_eq!(
        ids(&list(RunFilter::new().tenant("t1")).await),
        ["o-1", "o-5"]
    );
    let moved = list(RunFilter::new().started_by("cy")).await;
    assert_eq!(ids(&moved), ["o-2"]);
    assert_eq!(moved[0].tenant.as_deref(), Some("t2"));
    assert_eq!((moved[0].input_tokens, moved[0].output_tokens), (5000, 700));
}
