//! Leases and fencing: a lease fences out every other owner; once it ended, a stale
//! claim takes the run over and the old holder can neither save nor renew.

use mcp_agent::{Claim, Lease, RunRecord, RunStatus};
use serde_json::{json, Value};

use super::{held, now_ms, Backend};

fn running(state: Value, lease: Option<Lease>) -> RunRecord {
    RunRecord {
        lease,
        ..super::run("leased", RunStatus::Running, state)
    }
}

/// A lease fences out every other owner, renews only for its owner, and once it has
/// ended a stale claim takes the run over — after which the old owner can neither
/// save nor renew. A run that waits is never stale.
pub(crate) async fn leases_fence_and_end(backend: &Backend) {
    let store = backend.open().await;
    let now = now_ms();
    let hour = 3_600_000;
    let a = held("owner-a", now + hour);
    store
        .save(&running(json!({"n": 1}), Some(a.clone())))
        .await
        .unwrap();
    // The holder saves (appending to the run's event log) and renews.
    store
        .save(&RunRecord {
            events: vec![json!({"e": 1}), json!({"e": 2})],
            ..running(json!({"n": 2}), Some(a.clone()))
        })
        .await
        .unwrap();
    store
        .save(&RunRecord {
            events: vec![json!({"e": 3})],
            ..running(json!({"n": 2}), Some(a.clone()))
        })
        .await
        .unwrap();
    assert!(store
        .renew("leased", &held("owner-a", now + 2 * hour))
        .await
        .unwrap());
    // While the lease holds, the run is not stale, and nobody else saves or renews it.
    assert!(store
        .claim(
            "leased",
            Claim::Stale(now),
            &held("owner-b", now + 3 * hour)
        )
        .await
        .unwrap()
        .is_none());
    assert!(!store
        .renew("leased", &held("owner-b", now + 3 * hour))
        .await
        .unwrap());
    let e = store
        .save(&RunRecord {
            events: vec![json!({"e": "not kept"})],
            ..running(json!({"n": 99}), Some(held("owner-b", now + hour)))
        })
        .await
        .unwrap_err();
    assert!(e.is_lease_lost() && e.is_store(), "{e}");
    // Not only a first save: a later one is fenced too.
    let e = store
        .save(&RunRecord {
            first: false,
            ..running(json!({"n": 99}), Some(held("owner-b", now + hour)))
        })
        .await
        .unwrap_err();
    assert!(e.is_lease_lost(), "{e}");
    // A refused save appends nothing: the log is the holder's, in order.
    assert_eq!(
        store.events("leased").await.unwrap(),
        [json!({"e": 1}), json!({"e": 2}), json!({"e": 3})]
    );
    let e = store
        .save(&running(json!({"n": 99}), None))
        .await
        .unwrap_err();
    assert!(e.is_lease_lost(), "{e}");
    assert_eq!(
        store.load("leased").await.unwrap().unwrap().state,
        json!({"n": 2})
    );
    // Nothing kept under an id: renewing it is not a loss.
    assert!(store
        .renew("nothing-here", &held("owner-a", now + hour))
        .await
        .unwrap());

    // Once the lease has ended (a clock past it), another process takes the run over.
    let later = now + 2 * hour + 1;
    let b = held("owner-b", later + hour);
    let taken = store
        .claim("leased", Claim::Stale(later), &b)
        .await
        .unwrap()
        .expect("a run on an ended lease is taken over");
    assert_eq!(taken.state, json!({"n": 2}));
    assert_eq!(
        taken.lease.as_ref().map(|l| l.owner.as_str()),
        Some("owner-b")
    );
    // The old holder is fenced out.
    assert!(!store
        .renew("leased", &held("owner-a", later + hour))
        .await
        .unwrap());
    let e = store
        .save(&running(json!({"n": 3}), Some(a)))
        .await
        .unwrap_err();
    assert!(e.is_lease_lost(), "{e}");
    // The new holder's lease holds against a third.
    assert!(store
        .claim(
            "leased",
            Claim::Stale(later),
            &held("owner-c", later + hour)
        )
        .await
        .unwrap()
        .is_none());
    store
        .save(&running(json!({"n": 4}), Some(b.clone())))
        .await
        .unwrap();
    assert_eq!(
        store.load("leased").await.unwrap().unwrap().state,
        json!({"n": 4})
    );
    // A run that waits is never stale, whatever its lease.
    store
        .save(&RunRecord {
            status: RunStatus::Suspended,
            suspension: Some("s".into()),
            ..running(json!({"n": 5}), Some(held("owner-b", 0)))
        })
        .await
        .unwrap();
    assert!(store
        .claim("leased", Claim::Stale(u64::MAX / 2), &held("owner-d", 1))
        .await
        .unwrap()
        .is_none());
    // A claim of its suspension takes it, under the claimer's lease.
    let d = store
        .claim("leased", Claim::Suspended("s"), &held("owner-d", 1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.lease, Some(held("owner-d", 1)));
    assert!(store.delete("leased").await.unwrap());
    assert!(store.events("leased").await.unwrap().is_empty());
}

/// A renewal moves the lease's end for its owner only (the run's state and status
/// stay); a renewed lease keeps the run from being stale until its new end.
pub(crate) async fn a_lease_is_renewed_only_by_its_owner(backend: &Backend) {
    let store = backend.open().await;
    let now = now_ms();
    store
        .save(&running(
            json!({"n": 1}),
            Some(held("owner-a", now + 1_000)),
        ))
        .await
        .unwrap();
    // Renewed through another handle, as the holder's renewal task may.
    let other = backend.open().await;
    assert!(other
        .renew("leased", &held("owner-a", now + 10_000))
        .await
        .unwrap());
    let kept = store.load("leased").await.unwrap().unwrap();
    assert_eq!(kept.lease, Some(held("owner-a", now + 10_000)));
    assert_eq!(
        (kept.status, kept.state),
        (RunStatus::Running, json!({"n": 1}))
    );
    // Past the old end, before the new one: not stale.
    assert!(store
        .claim(
            "leased",
            Claim::Stale(now + 5_000),
            &held("owner-b", now + 20_000)
        )
        .await
        .unwrap()
        .is_none());
    // Another owner's renewal is refused and changes nothing.
    assert!(!store
        .renew("leased", &held("owner-b", now + 99_000))
        .await
        .unwrap());
    assert_eq!(
        store.load("leased").await.unwrap().unwrap().lease,
        Some(held("owner-a", now + 10_000))
    );
    // A run saved without a lease is held by nobody: no owner renews it.
    store
        .save(&RunRecord {
            id: "free".into(),
            ..running(json!({}), None)
        })
        .await
        .unwrap();
    assert!(!store
        .renew("free", &held("owner-a", now + 10_000))
        .await
        .unwrap());
    // The holder saves with its renewed lease (the end is the save's).
    store
        .save(&running(
            json!({"n": 2}),
            Some(held("owner-a", now + 30_000)),
        ))
        .await
        .unwrap();
    assert_eq!(
        store.load("leased").await.unwrap().unwrap().lease,
        Some(held("owner-a", now + 30_000))
    );
}
