//! Owners and authorization: runs kept with their tenant, who started them and their
//! labels; the inbox over them (by tenant, by principal, by label) checked against
//! each run's sealed state; decisions by principals, asked of the agent's `authorize`
//! callback before anything applies; standing allowances scoped to the tenant whose
//! run granted them. Against the real filesystem server, the scripted model, and
//! SQLite and PostgreSQL where the store matters.

use std::sync::{Arc, Mutex};

use mcp_agent::{
    Agent, Always, ChatCompletions, Decision, Event, Mode, Outcome, Principal, RunFilter,
    RunOptions, RunStatus, RunStore,
};
use serde_json::{json, Value};

use super::decisions::{approval, status};
use super::{filesystem, scratch, store_for, ModelServer, Postgres};

/// An agent in approve mode on the filesystem server of `dir`, keyed, that tells
/// `events` what happens; `only` (when given) is the one principal id its
/// `authorize` callback allows, and only on runs of tenant `team-a`.
fn owned_agent(
    model: &ModelServer,
    dir: &std::path::Path,
    store: Arc<dyn RunStore>,
    only: Option<&'static str>,
) -> (Agent, Arc<Mutex<Vec<Event>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let mut builder = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Approve)
        .allow(["read_text_file", "list_directory"])
        .server(filesystem(dir))
        .store(store)
        .integrity_key("owners-test-integrity-key-0123456789")
        .on_event(move |_, e| seen.lock().unwrap().push(e.clone()));
    if let Some(id) = only {
        builder = builder.authorize(move |ask| async move {
            ask.principal.id == id && ask.pending.tenant.as_deref() == Some("team-a")
        });
    }
    (builder.build().unwrap(), events)
}

fn write(path: &std::path::Path, content: &str) -> Value {
    json!({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]})
}

fn tag(store_url: &str) -> &'static str {
    if store_url.starts_with("postgres://") {
        "pg"
    } else {
        "sqlite"
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_filters_by_tenant_principal_and_label_sqlite() {
    the_inbox_filters_by_tenant_principal_and_label("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_filters_by_tenant_principal_and_label_postgres() {
    let pg = Postgres::start();
    the_inbox_filters_by_tenant_principal_and_label(&pg.url).await;
}

/// Three waiting runs of two tenants started by two people: the inbox of a tenant,
/// of a person, of both, of a label lists exactly their calls, each with the run's
/// tenant and who started it; the listing shows the owners and the tokens spent. A
/// run whose stored tenant was rewritten fails its integrity check: it is in no
/// inbox, and no decision applies to it.
async fn the_inbox_filters_by_tenant_principal_and_label(store_url: &str) {
    let dir = scratch(&format!("owners-inbox-{}", tag(store_url)));
    let files: Vec<_> = (0..3).map(|n| dir.join(format!("f{n}.txt"))).collect();
    let model = ModelServer::scripted(
        &dir,
        json!([
            write(&files[0], "0"),
            write(&files[1], "1"),
            write(&files[2], "2"),
            {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, store_url).await;
    let (agent, _) = owned_agent(&model, &dir, store.clone(), None);
    let owners = [
        ("team-a", Principal::new("ann").named("Ann A."), "ops"),
        ("team-a", Principal::new("bob"), "dev"),
        ("team-b", Principal::new("ann").named("Ann A."), "ops"),
    ];
    let mut runs = Vec::new();
    for (tenant, who, label) in owners.iter().cloned() {
        let options = RunOptions::new()
            .tenant(tenant)
            .started_by(who)
            .label("area", label);
        let (run, _, decision) = approval(agent.run_with_options("write", options).await.unwrap());
        runs.push((run, decision));
    }
    let inbox = |filter: RunFilter| {
        let agent = &agent;
        async move {
            let mut got: Vec<(String, Option<String>, Option<String>)> = agent
                .inbox(&filter)
                .await
                .unwrap()
                .pending
                .into_iter()
                .map(|p| (p.run_id, p.tenant, p.started_by.map(|s| s.id)))
                .collect();
            got.sort();
            got
        }
    };
    let entry = |n: usize| {
        let (tenant, who, _) = &owners[n];
        (
            runs[n].0.clone(),
            Some(tenant.to_string()),
            Some(who.id.clone()),
        )
    };
    let sorted = |mut v: Vec<(String, Option<String>, Option<String>)>| {
        v.sort();
        v
    };
    assert_eq!(
        inbox(RunFilter::new().tenant("team-a")).await,
        sorted(vec![entry(0), entry(1)])
    );
    assert_eq!(
        inbox(RunFilter::new().started_by("ann")).await,
        sorted(vec![entry(0), entry(2)])
    );
    assert_eq!(
        inbox(RunFilter::new().tenant("team-a").started_by("ann")).await,
        vec![entry(0)]
    );
    assert_eq!(
        inbox(RunFilter::new().label("area", "ops")).await,
        sorted(vec![entry(0), entry(2)])
    );
    assert_eq!(
        inbox(RunFilter::new().tenant("team-b").label("area", "dev")).await,
        vec![]
    );
    assert_eq!(inbox(RunFilter::new().tenant("team-c")).await, vec![]);
    // The display name comes with the inbox entry; the decision is the one to name.
    let one = agent
        .inbox(&RunFilter::new().tenant("team-a").started_by("ann"))
        .await
        .unwrap();
    assert_eq!(one.pending.len(), 1);
    assert_eq!(one.pending[0].decision, runs[0].1);
    assert_eq!(
        one.pending[0].started_by.as_ref().unwrap().display_name(),
        "Ann A."
    );
    // The listing shows each run's owner and what it spent.
    let listed = agent
        .runs(
            &RunFilter::new()
                .tenant("team-a")
                .status(RunStatus::Suspended),
        )
        .await
        .unwrap();
    assert_eq!(listed.runs.len(), 2);
    for r in &listed.runs {
        assert_eq!(r.tenant.as_deref(), Some("team-a"));
        assert!(r.started_by.is_some());
        assert!(r.labels.contains_key("area"));
        assert!(r.input_tokens > 0 || r.output_tokens > 0, "{r:?}");
    }

    // A writer of the store moves run 2 to team-a: the row says team-a, the sealed
    // state no longer opens. It is in no inbox, and no decision applies to it.
    let mut moved = store.load(&runs[2].0).await.unwrap().unwrap();
    moved.state["options"]["tenant"] = json!("team-a");
    store.save(&moved).await.unwrap();
    let listed = agent
        .runs(&RunFilter::new().tenant("team-a"))
        .await
        .unwrap();
    assert_eq!(listed.runs.len(), 3, "the row says team-a");
    assert_eq!(
        inbox(RunFilter::new().tenant("team-a")).await,
        sorted(vec![entry(0), entry(1)])
    );
    let e = agent
        .resume(&runs[2].0, &runs[2].1, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(e.is_store() && e.to_string().contains("integrity"), "{e}");
    assert!(!files[2].exists());
    // The others still decide as usual.
    let Outcome::Finished { .. } = agent
        .resume(&runs[0].0, &runs[0].1, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!("ann's run goes on")
    };
    assert_eq!(std::fs::read_to_string(&files[0]).unwrap(), "0");
    assert!(!files[1].exists());
    agent.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthorized_decision_is_refused_and_evented_sqlite() {
    an_unauthorized_decision_is_refused_and_evented("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthorized_decision_is_refused_and_evented_postgres() {
    let pg = Postgres::start();
    an_unauthorized_decision_is_refused_and_evented(&pg.url).await;
}

/// Only ann may decide on team-a's runs: bob's approval (and his denial) is refused
/// with `is_unauthorized()`, the callbacks hear `DecisionUnauthorized` naming him,
/// and nothing changes — the run waits in the same suspension, the decision is not
/// spent — so ann's approval of the same decision applies, recorded with her
/// principal. On a team-b run even ann is refused.
async fn an_unauthorized_decision_is_refused_and_evented(store_url: &str) {
    let dir = scratch(&format!("owners-authorize-{}", tag(store_url)));
    let (a, b) = (dir.join("a.txt"), dir.join("b.txt"));
    let model = ModelServer::scripted(
        &dir,
        json!([write(&a, "a"), {"echo_tools": true}, write(&b, "b")]),
    );
    let store = store_for(&dir, store_url).await;
    let (agent, events) = owned_agent(&model, &dir, store.clone(), Some("ann"));
    let options = RunOptions::new().tenant("team-a").started_by("carol");
    let (run, suspension, decision) =
        approval(agent.run_with_options("write a", options).await.unwrap());
    let before = store.load(&run).await.unwrap().unwrap();

    for refused in [
        Decision::approve(Principal::new("bob").named("Bob B.")),
        Decision::deny("bob"),
    ] {
        let e = agent.resume(&run, &decision, refused).await.unwrap_err();
        assert!(e.is_unauthorized() && !e.is_stale_decision(), "{e}");
    }
    let unauthorized: Vec<(String, String, String)> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::DecisionUnauthorized {
                decision,
                principal,
                by,
                ..
            } => Some((decision.clone(), principal.id.clone(), by.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        unauthorized,
        [
            (decision.clone(), "bob".into(), "Bob B.".into()),
            (decision.clone(), "bob".into(), "bob".into())
        ]
    );
    // Nothing changed: same row, same suspension, same decision waiting, not run.
    let after = store.load(&run).await.unwrap().unwrap();
    assert_eq!(after.state, before.state);
    assert_eq!(
        status(store.as_ref(), &run).await,
        (RunStatus::Suspended, Some(suspension.clone()))
    );
    assert_eq!(agent.pending(&run).await.unwrap()[0].decision, decision);
    assert!(store
        .events(&run)
        .await
        .unwrap()
        .iter()
        .all(|e| e["event"] != "decision_unauthorized"));
    assert!(!a.exists());

    // Ann may: the same decision applies, with her principal in its event.
    let ann = Principal::new("ann").named("Ann A.");
    let Outcome::Finished { .. } = agent
        .resume(&run, &decision, Decision::approve(ann.clone()))
        .await
        .unwrap()
    else {
        panic!("ann's approval applies")
    };
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "a");
    let kept = store.events(&run).await.unwrap();
    let decided: Vec<&Value> = kept
        .iter()
        .filter(|e| e["event"] == "approval_decided")
        .collect();
    assert_eq!(decided.len(), 1, "{kept:?}");
    assert_eq!(decided[0]["by"], "Ann A.");
    assert_eq!(
        decided[0]["principal"],
        json!({"id": "ann", "name": "Ann A."})
    );

    // On another tenant's run the callback says no to ann too.
    let options = RunOptions::new().tenant("team-b");
    let (run_b, _, decision_b) =
        approval(agent.run_with_options("write b", options).await.unwrap());
    let e = agent
        .resume(&run_b, &decision_b, Decision::approve(ann))
        .await
        .unwrap_err();
    assert!(e.is_unauthorized(), "{e}");
    assert!(!b.exists());
    agent.close().await.unwrap();
}

/// "Always allow" granted in a team-a run covers later team-a runs (the control),
/// never a team-b run nor a run with no tenant; and an allowance whose tenant was
/// rewritten in the store fails its integrity check and covers nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_allowance_does_not_cover_another_tenants_run() {
    let dir = scratch("owners-allowance");
    let f: Vec<_> = (0..5).map(|n| dir.join(format!("w{n}.txt"))).collect();
    let model = ModelServer::scripted(
        &dir,
        json!([
            write(&f[0], "0"), {"echo_tools": true},
            write(&f[1], "1"), {"echo_tools": true},
            write(&f[2], "2"),
            write(&f[3], "3"),
            write(&f[4], "4")
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    let (agent, _) = owned_agent(&model, &dir, store.clone(), None);
    let team = |t: &str| RunOptions::new().tenant(t);

    let (run, _, decision) = approval(agent.run_with_options("w0", team("team-a")).await.unwrap());
    let Outcome::Finished { .. } = agent
        .resume(
            &run,
            &decision,
            Decision::approve("ann").always(Always::Agent),
        )
        .await
        .unwrap()
    else {
        panic!("approved")
    };
    let allowances = agent.allowances().await.unwrap();
    assert_eq!(allowances.len(), 1);
    assert_eq!(allowances[0].tenant.as_deref(), Some("team-a"));

    // Another team-a run: allowed without asking.
    let Outcome::Finished { .. } = agent.run_with_options("w1", team("team-a")).await.unwrap()
    else {
        panic!("the team's allowance covers its next run")
    };
    assert_eq!(std::fs::read_to_string(&f[1]).unwrap(), "1");
    // A team-b run and a run with no tenant: asked.
    approval(agent.run_with_options("w2", team("team-b")).await.unwrap());
    approval(agent.run("w3").await.unwrap());
    assert!(!f[2].exists() && !f[3].exists());

    // The allowance rewritten in the store to team-b: its MAC fails, it is ignored.
    let mut kept = store.allowances().await.unwrap().pop().unwrap();
    kept["tenant"] = json!("team-b");
    let id = kept["id"].as_str().unwrap().to_owned();
    store.save_allowance(&id, &kept).await.unwrap();
    assert!(agent.allowances().await.unwrap().is_empty());
    approval(agent.run_with_options("w4", team("team-b")).await.unwrap());
    assert!(!f[4].exists());
    agent.close().await.unwrap();
}
