//! Typed answers through the agent loop, on every built-in wire: the schema asked of
//! the model natively (Chat Completions `response_format`, Responses `text.format`,
//! Anthropic Messages a tool it must call), tools working during the run (a real server-filesystem), a wrong
//! answer repaired once by telling the model what is wrong, and a model that never
//! gives one ending in `Outcome::InvalidOutput` with its raw text.

use mcp_agent::{Agent, Event, Outcome, OUTPUT_TOOL};
use serde_json::{json, Value};

use crate::{filesystem, scratch, wire_model, ModelServer, WIRES};

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Listing {
    /// The files found.
    files: Vec<String>,
}

/// A final answer, as each wire carries a typed one.
fn answer(wire: &str, value: Value) -> Value {
    if wire != "messages" {
        json!({"text": value.to_string()})
    } else {
        json!({"tool_calls": [{"name": OUTPUT_TOOL, "arguments": value}]})
    }
}

#[tokio::test]
async fn a_typed_run_answers_in_its_schema_or_says_why_not() {
    for wire in WIRES {
        let dir = scratch(&format!("typed-{wire}"));
        let files = dir.join("files");
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(files.join("a.txt"), "A").unwrap();
        let files = files.canonicalize().unwrap();
        let scripted = ModelServer::scripted(
            &dir,
            json!([
                {"tool_calls": [{"name": "list_directory", "arguments": {"path": files.display().to_string()}}]},
                answer(wire, json!({"files": 1})),
                answer(wire, json!({"files": ["a.txt"]}))
            ]),
        );
        let agent = Agent::builder()
            .model(wire_model(wire, &scripted))
            .server(filesystem(&files))
            .allow(["list_directory"])
            .build()
            .unwrap();
        let typed = agent.run_typed::<Listing>("list the files").await.unwrap();
        assert_eq!(
            typed.value,
            Some(Listing {
                files: vec!["a.txt".into()]
            }),
            "{wire}: {:?}",
            typed.outcome
        );
        let Outcome::Finished { run_id, text, .. } = &typed.outcome else {
            panic!("{:?}", typed.outcome)
        };
        assert_eq!(text, r#"{"files":["a.txt"]}"#);
        let requests = scripted.requests();
        assert_eq!(requests.len(), 3, "{wire}");
        let first = &requests[0]["body"];
        if wire == "chat" {
            let format = &first["response_format"];
            assert_eq!(format["type"], "json_schema", "{first}");
            assert_eq!(format["json_schema"]["name"], "Listing");
            assert_eq!(format["json_schema"]["strict"], true);
            assert_eq!(
                format["json_schema"]["schema"]["properties"]["files"]["type"],
                "array"
            );
        } else if wire == "responses" {
            let format = &first["text"]["format"];
            assert_eq!(format["type"], "json_schema", "{first}");
            assert_eq!(format["name"], "Listing");
            assert_eq!(format["strict"], true);
        } else {
            let tools = first["tools"].as_array().unwrap();
            let output = tools.iter().find(|t| t["name"] == OUTPUT_TOOL).unwrap();
            assert_eq!(output["input_schema"]["required"], json!(["files"]));
            assert_eq!(first["tool_choice"]["type"], "any");
        }
        // The tool ran (its result reached the model), and the repair said what was
        // wrong, where.
        let second = requests[1]["body"].to_string();
        assert!(second.contains("a.txt"), "{wire}: {second}");
        let third = requests[2]["body"].to_string();
        assert!(
            third.contains("does not match the required output `Listing`")
                && third.contains("at /files"),
            "{wire}: {third}"
        );
        let events = agent.events(run_id).await.unwrap();
        let invalid: Vec<bool> = events
            .iter()
            .filter_map(|e| match e {
                Event::OutputInvalid { repair, .. } => Some(*repair),
                _ => None,
            })
            .collect();
        assert_eq!(invalid, [true], "{wire}");

        // A model that answers in prose, again and again: one repair, then the run
        // ends saying why, with the raw text.
        let prose_dir = dir.join("prose");
        std::fs::create_dir_all(&prose_dir).unwrap();
        let prose =
            ModelServer::scripted(&prose_dir, json!([{"text": "There is one file, a.txt."}]));
        let agent = Agent::builder()
            .model(wire_model(wire, &prose))
            .build()
            .unwrap();
        let typed = agent.run_typed::<Listing>("list the files").await.unwrap();
        assert!(typed.value.is_none());
        let Outcome::InvalidOutput { text, reason, .. } = &typed.outcome else {
            panic!("{wire}: {:?}", typed.outcome)
        };
        assert_eq!(text, "There is one file, a.txt.");
        assert!(reason.contains("not JSON"), "{reason}");
        assert_eq!(prose.requests().len(), 2, "{wire}: one repair round");
    }
}

/// A typed run that waits for a person keeps its schema: another agent on the same
/// store (as another process would) resumes it, and the answer is held to the schema
/// there too — a wrong one repaired, the right one read as `T`.
async fn a_resumed_typed_run_is_held_to_its_schema(store_url: &str) {
    let tag = if store_url.starts_with("postgres://") {
        "pg"
    } else {
        "sqlite"
    };
    let dir = scratch(&format!("typed-resumed-{tag}"));
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let files = files.canonicalize().unwrap();
    let scripted = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "write_file", "arguments": {"path": files.join("a.txt").display().to_string(), "content": "A"}}]},
            {"text": "I wrote a.txt"},
            {"text": "{\"files\": [\"a.txt\"]}"}
        ]),
    );
    let build = |store| {
        Agent::builder()
            .model(wire_model("chat", &scripted))
            .server(filesystem(&files))
            .mode(mcp_agent::Mode::Approve)
            .store(store)
            .build()
            .unwrap()
    };
    let first = build(crate::store_for(&dir, store_url).await);
    let typed = first
        .run_typed::<Listing>("write a.txt, then list")
        .await
        .unwrap();
    let Outcome::ApprovalRequired {
        run_id, decision, ..
    } = typed.outcome
    else {
        panic!("{:?}", typed.outcome)
    };
    first.close().await.unwrap();
    let second = build(crate::store_for(&dir, store_url).await);
    let outcome = second
        .resume(&run_id, &decision, mcp_agent::Decision::approve("ann"))
        .await
        .unwrap();
    let typed = mcp_agent::TypedOutcome::<Listing>::read(outcome);
    assert_eq!(
        typed.value,
        Some(Listing {
            files: vec!["a.txt".into()]
        }),
        "{:?}",
        typed.outcome
    );
    let requests = scripted.requests();
    assert_eq!(
        requests[2]["body"]["response_format"]["json_schema"]["name"], "Listing",
        "the resumed run still asks for the schema"
    );
    assert!(requests[2]["body"].to_string().contains("is not JSON"));
    second.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_typed_run_is_held_to_its_schema_sqlite() {
    a_resumed_typed_run_is_held_to_its_schema("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_typed_run_is_held_to_its_schema_postgres() {
    let pg = mcp_test_support::Postgres::start();
    a_resumed_typed_run_is_held_to_its_schema(&pg.url).await;
}
