//! Skills of an attached server (tests/peers/skillserver.py): listed to the model by
//! name and description only, loaded through `read_skill` under an approval bound to
//! the skill's files, every read checked, `allowed-tools` granted only when approved.

use std::path::Path;

use mcp_agent::{Agent, ChatCompletions, Decision, Event, Mode, Outcome, SkillApproval};
use mcp_runtime::Mcp;
use serde_json::{json, Value};

use super::{offered, peers, repo_root, scratch, store_for, ModelServer};

fn skillserver(log: &Path) -> Mcp {
    skillserver_variant(log, "")
}

/// The server as a later version serves it (`v2`: pdf-processing changed).
fn skillserver_variant(log: &Path, variant: &str) -> Mcp {
    Mcp::builder("docs")
        .command([
            peers().join("venv/bin/python").display().to_string(),
            repo_root()
                .join("tests/peers/skillserver.py")
                .display()
                .to_string(),
            "stdio".into(),
        ])
        .env("SKILLSERVER_LOG", log.display().to_string())
        .env("SKILLSERVER_VARIANT", variant)
        .build()
        .unwrap()
}

/// The requests the server received (`method uri`), but the session's own.
fn server_log(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with("initialize") && !l.starts_with("server/discover"))
        .map(str::to_owned)
        .collect()
}

fn agent(model: &ModelServer, server: Mcp, mode: Mode) -> mcp_agent::AgentBuilder {
    Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(mode)
        .server(server)
}

fn tool_description(request: &Value, name: &str) -> String {
    request["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == name)
        .map(|t| t["function"]["description"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// Approve mode: loading asks a person, who sees the fingerprint and the
/// `allowed-tools`; approved with the grant, the skill's server tool it names runs
/// without asking; a tampered skill is reported as changed; a file of a skill that
/// was never loaded is not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_load_under_approval_bound_to_their_files() {
    let dir = scratch("skills-approve");
    let log = dir.join("server.log");
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_skill", "arguments": {"skill": "docs:pdf-processing"}}]},
            {"tool_calls": [
                {"name": "read_skill_file", "arguments": {"skill": "docs:pdf-processing", "path": "references/FORMS.md"}},
                {"name": "extract_text", "arguments": {"path": "a.pdf"}},
                {"name": "read_skill_file", "arguments": {"skill": "docs:unlisted", "path": "scripts/secret.sh"}},
                {"name": "read_skill_file", "arguments": {"skill": "docs:pdf-processing", "path": "%2e%2e/%2e%2e/secrets/prod.env"}},
                {"name": "read_skill_file", "arguments": {"skill": "docs:pdf-processing", "path": ".%2e/secrets/prod.env"}},
                {"name": "read_skill_file", "arguments": {"skill": "docs:pdf-processing", "path": "..\\secrets\\prod.env"}},
                {"name": "read_skill_file", "arguments": {"skill": "docs:pdf-processing", "path": "references%2f..%2f..%2fsecrets"}}
            ]},
            {"echo_tools": true}
        ]),
    );
    let agent = agent(&model, skillserver(&log), Mode::Approve)
        .build()
        .unwrap();
    let Outcome::ApprovalRequired {
        run_id,
        server,
        tool,
        arguments,
        decision,
        ..
    } = agent.run("fill the form").await.unwrap()
    else {
        panic!("loading a skill in approve mode asks first")
    };
    assert_eq!((server.as_str(), tool.as_str()), ("docs", "read_skill"));
    assert_eq!(arguments["uri"], "skill://pdf-processing/SKILL.md");
    assert!(arguments["fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert_eq!(
        arguments["allowed_tools"],
        "Bash(python:*) Read extract_text"
    );
    // The model saw names and descriptions from the listing; nothing was fetched.
    let first = &model.requests()[0];
    let catalogue = tool_description(first, "read_skill");
    assert!(
        catalogue.contains("docs:pdf-processing — Extract text and tables"),
        "{catalogue}"
    );
    assert!(
        catalogue.contains("docs:nested/prefix/deep-skill"),
        "{catalogue}"
    );
    assert!(offered(first).contains(&"read_skill_file".to_owned()));
    assert!(
        !server_log(&log)
            .iter()
            .any(|l| l.starts_with("resources/read")),
        "nothing fetched before the load: {:?}",
        server_log(&log)
    );

    let Outcome::Finished { text, .. } = agent
        .resume(
            &run_id,
            &decision,
            Decision::approve("ann").with_allowed_tools(),
        )
        .await
        .unwrap()
    else {
        panic!("the run finishes")
    };
    // The loaded skill is tagged with its origin; the granted tool ran.
    let requests = model.requests();
    let loaded = requests[1]["body"]["messages"].to_string();
    assert!(loaded.contains("untrusted content"), "{loaded}");
    assert!(loaded.contains("\\\"server\\\":\\\"docs\\\""), "{loaded}");
    assert!(text.contains("read_skill_file: {\"origin\""), "{text}");
    assert!(text.contains("# Forms guide"), "{text}");
    assert!(text.contains("extract_text: text of a.pdf"), "{text}");
    assert!(text.contains("is not loaded"), "{text}");
    // `..` in any spelling stays inside the skill: refused, nothing asked of the server
    // (the log below holds only the legitimate reads).
    assert_eq!(
        text.matches("must stay within the skill").count(),
        4,
        "{text}"
    );
    assert_eq!(
        server_log(&log)
            .iter()
            .filter(|l| l.starts_with("resources/read") || l.starts_with("tools/call"))
            .cloned()
            .collect::<Vec<_>>(),
        [
            "resources/read skill://pdf-processing/SKILL.md",
            "resources/read skill://pdf-processing/references/FORMS.md",
            "tools/call",
        ]
    );
    let events = agent.events(&run_id).await.unwrap();
    assert!(events.iter().any(|e| matches!(e,
        Event::SkillLoaded { server, granted_tools, .. } if server == "docs" && granted_tools == &["extract_text"])));
    assert!(
        events.iter().any(|e| matches!(e,
        Event::SkillFileRead { path, .. } if path == "skill://pdf-processing/references/FORMS.md"))
    );
    agent.close().await.unwrap();
}

/// Read-only mode: only skills approved beforehand load, and only while their files
/// are the approved ones; `allowed-tools` grant nothing unless the approval says so;
/// a tampered skill is reported as changed and nothing after it is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_bound_to_files_and_grant_no_tools_by_themselves() {
    let dir = scratch("skills-read-only");
    let log = dir.join("server.log");
    // The entries as an application approved them earlier.
    let lister = skillserver(&dir.join("lister.log"));
    let skills = lister.client().unwrap().skills().await.unwrap();
    lister.close().await.unwrap();
    let entry = |name: &str| skills.iter().find(|s| s.name() == name).unwrap().clone();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [
                {"name": "read_skill", "arguments": {"skill": "docs:pdf-processing"}},
                {"name": "extract_text", "arguments": {}},
                {"name": "read_skill", "arguments": {"skill": "docs:tampered-digest"}},
                {"name": "read_skill_file", "arguments": {"skill": "docs:tampered-digest", "path": "references/FORMS.md"}},
                {"name": "read_skill", "arguments": {"skill": "docs:hidden-elsewhere"}},
                {"name": "read_skill", "arguments": {"skill": "docs:nested/prefix/deep-skill"}},
                {"name": "read_skill", "arguments": {"skill": "docs:too-big"}}
            ]},
            {"echo_tools": true}
        ]),
    );
    let agent = agent(&model, skillserver(&log), Mode::ReadOnly)
        .approve_skill(SkillApproval::new("docs", &entry("pdf-processing")))
        .approve_skill(SkillApproval::new("docs", &entry("tampered-digest")))
        .approve_skill(SkillApproval::new("docs", &entry("too-big")))
        // Approved for other files than the server serves now: does not cover it.
        .approve_skill(SkillApproval {
            fingerprint: entry("pdf-processing").fingerprint(),
            ..SkillApproval::new("docs", &entry("deep-skill"))
        })
        .build()
        .unwrap();
    let Outcome::Finished { text, run_id, .. } = agent.run("go").await.unwrap() else {
        panic!("read-only mode never suspends")
    };
    assert!(
        text.contains("read_skill: {\"files\"") || text.contains("\"instructions\""),
        "{text}"
    );
    assert!(text.contains("`extract_text` is not allowed"), "{text}");
    assert!(text.contains("changed and needs re-approval"), "{text}");
    assert!(
        text.contains("skill `docs:tampered-digest` is not loaded"),
        "{text}"
    );
    assert!(
        text.contains("there is no skill `docs:hidden-elsewhere`"),
        "{text}"
    );
    assert!(
        text.contains("skill `deep-skill` is not approved"),
        "{text}"
    );
    assert!(text.contains("16 MiB"), "{text}");
    let reads: Vec<String> = server_log(&log)
        .into_iter()
        .filter(|l| {
            !l.starts_with("skills/list")
                && !l.starts_with("tools/list")
                // The agent listens for the server's changes.
                && !l.starts_with("subscriptions/listen")
        })
        .collect();
    assert_eq!(
        reads,
        [
            "resources/read skill://pdf-processing/SKILL.md",
            "resources/read skill://tampered-digest/SKILL.md",
            "skills/get skill://tampered-digest/SKILL.md",
        ]
    );
    let events = agent.events(&run_id).await.unwrap();
    assert!(events.iter().any(|e| matches!(e,
        Event::SkillChanged { uri, .. } if uri == "skill://tampered-digest/SKILL.md")));
    assert!(events.iter().any(|e| matches!(e,
        Event::SkillLoaded { granted_tools, .. } if granted_tools.is_empty())));
    agent.close().await.unwrap();
}

/// A person approves what they were shown: when the server changed the skill between
/// the suspension and the decision (here, the run resumes in another agent talking to
/// the updated server), the run asks again, for the new files, and fetches nothing
/// before that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_resumed_after_the_skill_changed_asks_again() {
    let dir = scratch("skills-changed");
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_skill", "arguments": {"skill": "docs:pdf-processing"}}]},
            {"echo_tools": true}
        ]),
    );
    let first = agent(&model, skillserver(&dir.join("v1.log")), Mode::Approve)
        .store(store_for(&dir, "sqlite").await)
        .build()
        .unwrap();
    let Outcome::ApprovalRequired {
        run_id,
        arguments: shown,
        decision,
        ..
    } = first.run("go").await.unwrap()
    else {
        panic!("approve mode asks")
    };
    first.close().await.unwrap();

    let v2_log = dir.join("v2.log");
    let second = agent(&model, skillserver_variant(&v2_log, "v2"), Mode::Approve)
        .store(store_for(&dir, "sqlite").await)
        .build()
        .unwrap();
    let Outcome::ApprovalRequired {
        run_id: again,
        arguments: shown_again,
        decision: decision_again,
        ..
    } = second
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!("the skill changed after the person saw it: the run asks again")
    };
    assert_eq!(again, run_id);
    assert_ne!(shown["fingerprint"], shown_again["fingerprint"]);
    assert!(!server_log(&v2_log)
        .iter()
        .any(|l| l.starts_with("resources/read")));

    // The approval of the old files does not carry over.
    assert!(second
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap_err()
        .is_stale_decision());
    let Outcome::Finished { text, .. } = second
        .resume(&run_id, &decision_again, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!("approved for the new files, it loads")
    };
    assert!(text.contains("Version two"), "{text}");
    second.close().await.unwrap();
}
