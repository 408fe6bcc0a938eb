//! Claims: what makes a decision apply exactly once — of the claims of one run, one
//! wins; a claim takes only the status (and suspension) it names.

use mcp_agent::{Claim, RunRecord, RunStatus};
use serde_json::json;

use super::{held, lease, now_ms, run, suspended, Backend};

/// A suspended run is taken once by a claim of its suspension, never by a claim of
/// another suspension or of another status; a failed run once by a retry; an unknown
/// run by none.
pub(crate) async fn claims_once(backend: &Backend) {
    let store = backend.open().await;
    store
        .save(&suspended("r1", "s1", json!({"n": 1})))
        .await
        .unwrap();
    // Another suspension of the same run, or a retry, takes nothing.
    assert!(store
        .claim("r1", Claim::Suspended("s0"), &lease("x"))
        .await
        .unwrap()
        .is_none());
    assert!(store
        .claim("r1", Claim::Failed, &lease("x"))
        .await
        .unwrap()
        .is_none());
    let first = store
        .claim("r1", Claim::Suspended("s1"), &lease("x"))
        .await
        .unwrap();
    let second = store
        .claim("r1", Claim::Suspended("s1"), &lease("y"))
        .await
        .unwrap();
    let first = first.expect("the first claim takes the run");
    assert_eq!(first.state, json!({"n": 1}));
    assert_eq!(first.suspension.as_deref(), Some("s1"));
    assert_eq!(first.status, RunStatus::Running);
    assert_eq!(first.lease, Some(lease("x")));
    assert!(second.is_none(), "a decision applies once");
    let kept = store.load("r1").await.unwrap().unwrap();
    assert_eq!(kept.status, RunStatus::Running);
    assert_eq!(kept.lease, Some(lease("x")), "the winner holds it");
    assert!(store
        .claim("unknown", Claim::Suspended("s1"), &lease("x"))
        .await
        .unwrap()
        .is_none());
    assert!(store.load("unknown").await.unwrap().is_none());
    // A failed run is taken once by a retry.
    store
        .save(&RunRecord {
            lease: first.lease.clone(),
            ..run("r1", RunStatus::Failed, json!({"n": 2}))
        })
        .await
        .unwrap();
    let retried = store
        .claim("r1", Claim::Failed, &lease("z"))
        .await
        .unwrap()
        .expect("a retry takes a failed run");
    assert_eq!(retried.state, json!({"n": 2}));
    assert!(store
        .claim("r1", Claim::Failed, &lease("x"))
        .await
        .unwrap()
        .is_none());
}

/// Twenty claims at once, each through a handle of its own (as twenty processes
/// would): exactly one wins, for each kind of claim.
pub(crate) async fn one_claimer_wins_among_many(backend: &Backend) {
    let store = backend.open().await;
    let cases: [(RunRecord, Claim<'static>); 4] = [
        (suspended("wait", "s", json!({})), Claim::Suspended("s")),
        (run("failed", RunStatus::Failed, json!({})), Claim::Failed),
        (
            run("finished", RunStatus::Finished, json!({})),
            Claim::Finished,
        ),
        (
            RunRecord {
                lease: Some(held("dead", 1)),
                ..run("stale", RunStatus::Running, json!({}))
            },
            Claim::Stale(now_ms()),
        ),
    ];
    for (record, claim) in cases {
        store.save(&record).await.unwrap();
        let mut handles = Vec::new();
        for _ in 0..20 {
            handles.push(backend.open().await);
        }
        let tries: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(n, s)| {
                let id = record.id.clone();
                tokio::spawn(async move {
                    s.claim(&id, claim, &lease(&format!("claimer-{n}")))
                        .await
                        .unwrap()
                        .map(|r| r.lease.unwrap().owner)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tries {
            winners.extend(t.await.unwrap());
        }
        assert_eq!(winners.len(), 1, "{}: {winners:?}", record.id);
        let kept = store.load(&record.id).await.unwrap().unwrap();
        assert_eq!(kept.lease.unwrap().owner, winners[0], "the winner holds it");
    }
}

/// Each claim takes its own status only: a finished run by a follow-up, a stale run
/// only once its lease ended (or when it has none), a cancelled run by none.
pub(crate) async fn a_claim_takes_only_what_it_names(backend: &Backend) {
    let store = backend.open().await;
    let now = now_ms();
    let claims = |now| {
        [
            Claim::Suspended("s"),
            Claim::Failed,
            Claim::Finished,
            Claim::Stale(now),
        ]
    };
    store
        .save(&run("cancelled", RunStatus::Cancelled, json!({})))
        .await
        .unwrap();
    store
        .save(&run("finished", RunStatus::Finished, json!({"f": 1})))
        .await
        .unwrap();
    store
        .save(&RunRecord {
            lease: Some(held("holder", now + 60_000)),
            ..run("held", RunStatus::Running, json!({}))
        })
        .await
        .unwrap();
    store
        .save(&run("unleased", RunStatus::Running, json!({"u": 1})))
        .await
        .unwrap();
    for claim in claims(now) {
        assert!(
            store
                .claim("cancelled", claim, &lease("x"))
                .await
                .unwrap()
                .is_none(),
            "{claim:?} took a cancelled run"
        );
        assert!(
            store
                .claim("held", claim, &lease("x"))
                .await
                .unwrap()
                .is_none(),
            "{claim:?} took a run whose lease holds"
        );
    }
    for claim in [Claim::Suspended("s"), Claim::Failed, Claim::Stale(now)] {
        assert!(store
            .claim("finished", claim, &lease("x"))
            .await
            .unwrap()
            .is_none());
    }
    let f = store
        .claim("finished", Claim::Finished, &lease("x"))
        .await
        .unwrap()
        .expect("a follow-up takes a finished run");
    assert_eq!((f.status, f.state), (RunStatus::Running, json!({"f": 1})));
    // A running run without a lease (its holder never took one) is stale.
    let u = store
        .claim("unleased", Claim::Stale(now), &lease("x"))
        .await
        .unwrap()
        .expect("a running run without a lease is stale");
    assert_eq!(u.state, json!({"u": 1}));
    // Once the held run's lease ended, it is stale — at exactly its end, not yet.
    assert!(store
        .claim("held", Claim::Stale(now + 60_000), &lease("x"))
        .await
        .unwrap()
        .is_none());
    assert!(store
        .claim("held", Claim::Stale(now + 60_001), &lease("x"))
        .await
        .unwrap()
        .is_some());
    // Nothing a claim refused changed the run.
    let c = store.load("cancelled").await.unwrap().unwrap();
    assert_eq!((c.status, c.lease), (RunStatus::Cancelled, None));
}
