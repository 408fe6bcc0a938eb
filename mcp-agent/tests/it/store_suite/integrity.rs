//! Decisions, the sent ledger and integrity: what the store enforces of issue #35's
//! rules (an entry is kept once, the ledger is append-only and outlives the run, a
//! deleted run stays deleted), and what the agent refuses over any store (a row
//! tampered with, or put together from two saves).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mcp_agent::model::{Block, ChatRequest, ChatResponse, Message, Role, Stop};
use mcp_agent::runtime::BoxFuture;
use mcp_agent::{
    Agent, Claim, Decision, FunctionTool, LedgerEntry, LedgerKind, Mode, Model, ModelError,
    Outcome, RunRecord, RunStatus, RunStore,
};
use serde_json::json;

use super::{lease, now_secs, run, suspended, Backend};

fn entry(kind: LedgerKind, item: &str, decision: Option<&str>, seq: u64) -> LedgerEntry {
    let mut e = LedgerEntry::new(kind, item.into(), decision.map(Into::into), seq);
    e.mac = Some(format!("hmac-sha256:{item}"));
    e
}

/// Puts `copy` back as run's row, as a restore from a backup does (its lease ended).
async fn restore(store: &dyn RunStore, copy: &RunRecord) {
    store.delete(&copy.id).await.unwrap();
    store
        .save(&RunRecord {
            lease: copy
                .lease
                .clone()
                .map(|l| mcp_agent::Lease { until: 0, ..l }),
            events: Vec::new(),
            ledger: Vec::new(),
            first: true,
            ..copy.clone()
        })
        .await
        .unwrap();
}

/// A decision is kept once (the save that applies it appends its `Decided` entry)
/// and spent once: the same decision saved again — a copy of the run put back and
/// claimed again — is refused as rolled back, atomically (neither the state, nor the
/// events, nor the save's other entries are kept).
pub(crate) async fn a_decision_is_kept_once_and_spent_once(backend: &Backend) {
    let store = backend.open().await;
    let waiting = suspended("r", "s1", json!({"at": "waiting"}));
    store.save(&waiting).await.unwrap();
    let claimed = store
        .claim("r", Claim::Suspended("s1"), &lease("a"))
        .await
        .unwrap()
        .unwrap();
    let decided = entry(LedgerKind::Decided, "d1", None, 1);
    let sent = entry(LedgerKind::Sent, "call-1/0", Some("d1"), 1);
    store
        .save(&RunRecord {
            events: vec![json!({"e": "decided"})],
            ledger: vec![decided.clone(), sent.clone()],
            first: false,
            ..run("r", RunStatus::Running, json!({"at": "decided"}))
        })
        .await
        .expect_err("saved without the claimer's lease");
    store
        .save(&RunRecord {
            events: vec![json!({"e": "decided"})],
            ledger: vec![decided.clone(), sent.clone()],
            lease: claimed.lease.clone(),
            first: false,
            ..run("r", RunStatus::Running, json!({"at": "decided"}))
        })
        .await
        .unwrap();
    // Read back as appended, through another handle too.
    let other = backend.open().await;
    assert_eq!(other.ledger("r").await.unwrap(), [decided.clone(), sent]);

    // The waiting copy put back: the store takes the claim (it cannot tell) ...
    restore(store.as_ref(), &waiting).await;
    let again = store
        .claim("r", Claim::Suspended("s1"), &lease("b"))
        .await
        .unwrap()
        .expect("the copy put back is claimed");
    // ... but the decision is spent: saving it again is refused, with nothing kept.
    let e = store
        .save(&RunRecord {
            events: vec![json!({"e": "decided again"})],
            ledger: vec![
                entry(LedgerKind::Sent, "call-2/0", Some("d1"), 1),
                decided.clone(),
            ],
            lease: again.lease.clone(),
            first: false,
            ..run("r", RunStatus::Running, json!({"at": "decided again"}))
        })
        .await
        .unwrap_err();
    assert!(e.is_rolled_back() && e.is_store(), "{e}");
    let kept = store.load("r").await.unwrap().unwrap();
    assert_eq!(
        kept.state,
        json!({"at": "waiting"}),
        "the state is not kept"
    );
    assert!(
        store.events("r").await.unwrap().is_empty(),
        "nor the events"
    );
    assert_eq!(store.ledger("r").await.unwrap().len(), 2, "nor its entries");
    // A decision not yet in the ledger is kept by the same holder.
    store
        .save(&RunRecord {
            ledger: vec![entry(LedgerKind::Decided, "d2", None, 2)],
            lease: again.lease.clone(),
            first: false,
            ..run("r", RunStatus::Running, json!({"at": "d2"}))
        })
        .await
        .unwrap();
    assert_eq!(store.ledger("r").await.unwrap().len(), 3);
}

/// The ledger is append-only: entries in the order appended, over saves (within a
/// save too, whatever their names); one entry twice in a save is refused; each run
/// has its own; it outlives the run's deletion and a prune.
pub(crate) async fn the_ledger_is_append_only_and_outlives_the_run(backend: &Backend) {
    let store = backend.open().await;
    assert!(store.ledger("unknown").await.unwrap().is_empty());
    let first = [
        entry(LedgerKind::Sent, "z-call/0", None, 1),
        entry(LedgerKind::Sent, "a-call/0", Some("d0"), 1),
    ];
    store
        .save(&RunRecord {
            ledger: first.to_vec(),
            ..run("r", RunStatus::Running, json!({}))
        })
        .await
        .unwrap();
    // The same item under the other kind is another entry.
    let second = entry(LedgerKind::Decided, "z-call/0", None, 2);
    store
        .save(&RunRecord {
            ledger: vec![second.clone()],
            first: false,
            ..run("r", RunStatus::Running, json!({}))
        })
        .await
        .unwrap();
    let all = [first[0].clone(), first[1].clone(), second];
    assert_eq!(store.ledger("r").await.unwrap(), all);
    // One entry twice in one save: refused, nothing of it kept.
    let twice = entry(LedgerKind::Sent, "m-call/0", None, 3);
    let e = store
        .save(&RunRecord {
            ledger: vec![twice.clone(), twice],
            first: false,
            ..run("r", RunStatus::Running, json!({"n": 3}))
        })
        .await
        .unwrap_err();
    assert!(e.is_rolled_back(), "{e}");
    assert_eq!(store.ledger("r").await.unwrap(), all);
    assert_eq!(store.load("r").await.unwrap().unwrap().state, json!({}));
    // Another run's ledger is its own, even with the same items.
    store
        .save(&RunRecord {
            ledger: vec![all[0].clone()],
            ..run("other", RunStatus::Finished, json!({}))
        })
        .await
        .unwrap();
    assert_eq!(store.ledger("other").await.unwrap(), [all[0].clone()]);
    assert_eq!(store.ledger("r").await.unwrap(), all);
    // Deleted or pruned, the runs go; their ledgers stay.
    assert!(store.delete("r").await.unwrap());
    assert_eq!(store.prune(now_secs() + 3600).await.unwrap(), 1);
    assert!(store.load("other").await.unwrap().is_none());
    assert_eq!(store.ledger("r").await.unwrap(), all);
    assert_eq!(store.ledger("other").await.unwrap(), [all[0].clone()]);
    // A run put back under the id finds its ledger: what it holds is refused.
    let e = store
        .save(&RunRecord {
            ledger: vec![all[1].clone()],
            ..run("r", RunStatus::Running, json!({}))
        })
        .await
        .unwrap_err();
    assert!(e.is_rolled_back(), "{e}");
    assert!(store.load("r").await.unwrap().is_none(), "nothing kept");
}

/// A run deleted stays deleted: a later save (not its first) is refused with
/// `is_deleted()` and keeps nothing; only a first save makes it again.
pub(crate) async fn a_deleted_run_stays_deleted(backend: &Backend) {
    let store = backend.open().await;
    store
        .save(&RunRecord {
            events: vec![json!({"e": 1})],
            lease: Some(lease("a")),
            ..run("r", RunStatus::Running, json!({"n": 1}))
        })
        .await
        .unwrap();
    assert!(store.delete("r").await.unwrap());
    assert!(!store.delete("r").await.unwrap(), "deleted once");
    assert!(store.load("r").await.unwrap().is_none());
    assert!(store.events("r").await.unwrap().is_empty());
    let e = store
        .save(&RunRecord {
            events: vec![json!({"e": 2})],
            lease: Some(lease("a")),
            first: false,
            ..run("r", RunStatus::Running, json!({"n": 2}))
        })
        .await
        .unwrap_err();
    assert!(e.is_deleted() && e.is_store(), "{e}");
    assert!(!e.is_lease_lost(), "{e}");
    assert!(
        store.load("r").await.unwrap().is_none(),
        "it did not come back"
    );
    assert!(store.events("r").await.unwrap().is_empty());
    assert!(store
        .list(&Default::default())
        .await
        .unwrap()
        .runs
        .is_empty());
    // Nothing kept under the id: renewing it is not a loss, claiming it takes nothing.
    assert!(store.renew("r", &lease("a")).await.unwrap());
    assert!(store
        .claim("r", Claim::Stale(u64::MAX / 4), &lease("b"))
        .await
        .unwrap()
        .is_none());
    // A run never kept is deleted too, for a save that is not its first.
    let e = store
        .save(&RunRecord {
            first: false,
            ..run("never", RunStatus::Running, json!({}))
        })
        .await
        .unwrap_err();
    assert!(e.is_deleted(), "{e}");
    // A first save makes it again (a new run, or a copy put back), with a new log.
    store
        .save(&run("r", RunStatus::Suspended, json!({"n": 3})))
        .await
        .unwrap();
    assert_eq!(
        store.load("r").await.unwrap().unwrap().state,
        json!({"n": 3})
    );
    assert!(store.events("r").await.unwrap().is_empty());
}

/// A model that asks for `write` once, then answers.
struct Writer(AtomicUsize);

impl Model for Writer {
    fn complete<'a>(
        &'a self,
        _: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ModelError>> {
        let first = self.0.fetch_add(1, Ordering::SeqCst) == 0;
        Box::pin(async move {
            Ok(if first {
                let call = Block::ToolCall {
                    id: "c1".into(),
                    name: "write".into(),
                    arguments: json!({"path": "a"}),
                };
                let message = Message {
                    role: Role::Assistant,
                    content: vec![call],
                };
                ChatResponse::new(message, Stop::ToolCalls)
            } else {
                ChatResponse::new(Message::text(Role::Assistant, "done"), Stop::End)
            })
        })
    }
}

/// With an integrity key, over any store: a run whose stored arguments were rewritten,
/// or whose row was put together from two saves (the state of one suspension under
/// another's id), is refused and nothing runs; the row as the agent kept it resumes (the
/// positive control) — so the store keeps the state, status and suspension exactly.
pub(crate) async fn a_tampered_or_mixed_row_is_refused(backend: &Backend) {
    let store = backend.open().await;
    let written = Arc::new(Mutex::new(Vec::new()));
    let seen = written.clone();
    let tool = FunctionTool::with_schema(
        "write",
        "Writes",
        json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        move |args| {
            seen.lock().unwrap().push(args["path"].clone());
            async { Ok(json!("written")) }
        },
    )
    .requires_approval();
    let agent = Agent::builder()
        .model(Writer(AtomicUsize::new(0)))
        .mode(Mode::Approve)
        .tool(tool)
        .store(store.clone())
        .integrity_key([7; 32])
        .build()
        .unwrap();
    let Outcome::ApprovalRequired {
        run_id, decision, ..
    } = agent.run("write a").await.unwrap()
    else {
        panic!("the write waits for approval")
    };
    let kept = store.load(&run_id).await.unwrap().unwrap();
    assert_eq!(kept.status, RunStatus::Suspended);

    // The stored arguments rewritten: refused.
    let mut tampered = kept.clone();
    tampered.state["pending"][0]["arguments"]["path"] = json!("evil");
    assert_ne!(
        tampered.state, kept.state,
        "the arguments are where we looked"
    );
    restore(store.as_ref(), &tampered).await;
    let e = agent
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(e.is_store() && e.to_string().contains("integrity"), "{e}");

    // The state of one suspension under another's id: a row of two saves, refused.
    restore(
        store.as_ref(),
        &RunRecord {
            suspension: Some("another-suspension".into()),
            ..kept.clone()
        },
    )
    .await;
    let e = agent
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(
        e.is_store()
            && e.to_string()
                .contains("not the one its state was saved with"),
        "{e}"
    );
    assert!(written.lock().unwrap().is_empty(), "nothing ran");

    // The row as the agent kept it resumes.
    restore(store.as_ref(), &kept).await;
    let out = agent
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap();
    assert!(matches!(out, Outcome::Finished { .. }), "{out:?}");
    assert_eq!(*written.lock().unwrap(), [json!("a")]);
    agent.close().await.unwrap();
}
