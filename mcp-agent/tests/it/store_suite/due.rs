//! Workers' claims: `claim_due` takes the runs due for a worker — ready or expiring
//! (their `due_at` has come), failed and due for a retry, running on an ended lease —
//! each once, however many claimers ask at once.

use std::collections::BTreeSet;

use mcp_agent::{RunRecord, RunStatus};
use serde_json::json;

use super::{held, lease, now_ms, run, suspended, Backend};

/// What is due is taken, with the status it had; what is not (due later, never due,
/// ended, held on a live lease) is left; a second claim finds nothing.
pub(crate) async fn claim_due_takes_what_is_due(backend: &Backend) {
    let store = backend.open().await;
    let now = now_ms();
    let past = json!({"due_at": now - 1000});
    let later = json!({"due_at": now + 3_600_000});
    let saves = [
        suspended("ready", "s1", past.clone()),
        suspended("later", "s2", later.clone()),
        suspended("never", "s3", json!({})),
        run("failed-due", RunStatus::Failed, past.clone()),
        run("failed", RunStatus::Failed, json!({})),
        run("done", RunStatus::Finished, past.clone()),
        RunRecord {
            lease: Some(held("dead", now - 1)),
            ..run("stale", RunStatus::Running, json!({}))
        },
        RunRecord {
            lease: Some(held("alive", now + 3_600_000)),
            ..run("held", RunStatus::Running, past.clone())
        },
    ];
    for r in &saves {
        store.save(r).await.unwrap();
    }
    let got = store.claim_due(now, &lease("w"), 100).await.unwrap();
    let mut taken: Vec<(String, RunStatus)> =
        got.iter().map(|r| (r.id.clone(), r.status)).collect();
    taken.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        taken,
        [
            ("failed-due".to_owned(), RunStatus::Failed),
            ("ready".to_owned(), RunStatus::Suspended),
            ("stale".to_owned(), RunStatus::Running),
        ]
    );
    let ready = got.iter().find(|r| r.id == "ready").unwrap();
    assert_eq!(ready.suspension.as_deref(), Some("s1"));
    assert_eq!(ready.state, past);
    for r in &got {
        assert_eq!(r.lease, Some(lease("w")));
        let kept = store.load(&r.id).await.unwrap().unwrap();
        assert_eq!(kept.status, RunStatus::Running, "{}", r.id);
        assert_eq!(kept.lease, Some(lease("w")), "{}", r.id);
    }
    for id in ["later", "never", "failed", "done", "held"] {
        let kept = store.load(id).await.unwrap().unwrap();
        assert_ne!(kept.lease, Some(lease("w")), "{id} is not due");
    }
    assert!(store
        .claim_due(now, &lease("v"), 100)
        .await
        .unwrap()
        .is_empty());
    // A limit is kept.
    for n in 0..5 {
        store
            .save(&suspended(&format!("more{n}"), "s", past.clone()))
            .await
            .unwrap();
    }
    assert_eq!(store.claim_due(now, &lease("u"), 2).await.unwrap().len(), 2);
    assert!(store
        .claim_due(now, &lease("u"), 0)
        .await
        .unwrap()
        .is_empty());
}

/// Eight claimers at once, each through a handle of its own (as eight workers on
/// several machines), a few runs at a time until nothing is left: every due run is
/// taken, and none by two.
pub(crate) async fn two_claimers_never_get_the_same_run(backend: &Backend) {
    let store = backend.open().await;
    let now = now_ms();
    let mut all = BTreeSet::new();
    for n in 0..60 {
        let id = format!("run{n:02}");
        let record = match n % 3 {
            0 => suspended(&id, "s", json!({"due_at": now - 10})),
            1 => run(&id, RunStatus::Failed, json!({"due_at": now - 10})),
            _ => RunRecord {
                lease: Some(held("dead", now - 10)),
                ..run(&id, RunStatus::Running, json!({}))
            },
        };
        store.save(&record).await.unwrap();
        all.insert(id);
    }
    let mut claimers = Vec::new();
    for w in 0..8 {
        let store = backend.open().await;
        claimers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = store
                    .claim_due(now, &lease(&format!("w{w}")), 3)
                    .await
                    .unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got.into_iter().map(|r| r.id));
            }
        }));
    }
    let mut taken = Vec::new();
    for c in claimers {
        taken.extend(c.await.unwrap());
    }
    let unique: BTreeSet<String> = taken.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        taken.len(),
        "a run was claimed twice: {taken:?}"
    );
    assert_eq!(unique, all, "every due run is taken");
}
