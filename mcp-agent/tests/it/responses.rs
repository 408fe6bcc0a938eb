//! The OpenAI Responses wire against llama.cpp's `POST /v1/responses`, replayed from
//! recordings (`tests/peers/real-llm/llama-server-responses/`): plain and streamed
//! answers, function calls (streamed as argument deltas), the round trip through the
//! agent loop, `tool_choice: required`, a strict `text.format` the server ignores
//! (caught by the typed answer's check), a context overflow, and a refused
//! `previous_response_id` (never sent: the whole conversation goes each turn). And
//! against the scripted model: reasoning items sent back verbatim, streamed or not.

use mcp_agent::model::{ChatRequest, Message, Role, ToolSpec};
use mcp_agent::{Agent, Model, ModelError, Outcome, Responses};
use serde_json::json;

use super::{filesystem, scratch, ModelServer};

fn model(server: &ModelServer) -> Responses {
    Responses::new(server.url(), "smollm2-135m-instruct").unwrap()
}

fn ask(tools: bool) -> ChatRequest {
    ChatRequest::new(
        vec![
            Message::text(Role::System, "You are a helpful assistant with tools."),
            Message::text(Role::User, "List the files in the directory /data/dir"),
        ],
        if tools {
            vec![ToolSpec {
                name: "list_directory".into(),
                description: "List the files and folders in a directory".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
                defer: false,
            }]
        } else {
            Vec::new()
        },
    )
}

const HERE: &str = "llama-server-responses";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_responses_wire_reads_llama_servers_answers() {
    let dir = scratch("responses-replay");
    let replay = ModelServer::replay(
        &dir,
        json!([
            {"play": format!("{HERE}/01-plain")},
            {"play": format!("{HERE}/02-plain-stream")},
            {"play": format!("{HERE}/03-tools-auto")},
            {"play": format!("{HERE}/04-tools-auto-stream")},
            {"play": format!("{HERE}/07-tools-required")},
            {"play": format!("{HERE}/09-context-too-long")},
            {"play": format!("{HERE}/10-previous-response-id")}
        ]),
    );
    let plain = model(&replay).complete(&ask(false)).await.unwrap();
    assert_eq!(plain.message.joined_text(), "Hello, hello!");
    assert_eq!(plain.usage.unwrap().input_tokens, 26);
    let streamed = model(&replay)
        .streaming(true)
        .complete(&ask(false))
        .await
        .unwrap();
    assert!(!streamed.message.joined_text().is_empty());
    for (what, m) in [
        ("plain", model(&replay)),
        ("streamed", model(&replay).streaming(true)),
        ("required", model(&replay)),
    ] {
        let answer = m.complete(&ask(true)).await.unwrap();
        let calls = answer.message.tool_calls();
        assert_eq!(calls.len(), 1, "{what}: {calls:?}");
        assert_eq!(calls[0].1, "list_directory", "{what}");
        assert_eq!(calls[0].2, json!({"path": "/data/dir"}), "{what}");
        assert!(
            calls[0].0.starts_with("call_"),
            "{what}: the call_id, not the item id"
        );
    }
    let e = model(&replay).complete(&ask(false)).await.unwrap_err();
    assert!(matches!(e, ModelError::ContextTooLong { .. }), "{e}");
    // A refusal of another kind is not taken for an overflow.
    let e = model(&replay).complete(&ask(false)).await.unwrap_err();
    assert!(matches!(e, ModelError::Other { .. }), "{e}");
    assert!(e.to_string().contains("previous_response_id"), "{e}");
    let sent = replay.requests();
    assert_eq!(
        sent[0]["instructions"],
        "You are a helpful assistant with tools."
    );
    assert_eq!(sent[1]["stream"], true);
    assert_eq!(sent[2]["tools"][0]["type"], "function");
    assert!(sent.iter().all(|r| r.get("previous_response_id").is_none()));
}

/// The loop on replayed answers: a function call, run on a real server-filesystem,
/// goes back as `function_call` and `function_call_output` items with the whole
/// conversation; a strict `text.format` the server ignores is caught.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_runs_on_the_responses_wire() {
    let dir = scratch("responses-loop");
    let replay = ModelServer::replay(
        &dir,
        json!([
            {"play": format!("{HERE}/03-tools-auto")},
            {"play": format!("{HERE}/05-roundtrip")}
        ]),
    );
    let agent = Agent::builder()
        .model(model(&replay))
        .allow(["list_directory"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    let out = agent
        .run("List the files in the directory /data/dir")
        .await
        .unwrap();
    let Outcome::Finished { text, .. } = out else {
        panic!("{out:?}")
    };
    assert!(text.contains("notes.txt"), "{text}");
    let sent = replay.requests();
    let input = sent[1]["input"].as_array().unwrap();
    let call = input.iter().find(|i| i["type"] == "function_call").unwrap();
    let output = input
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap();
    assert_eq!(call["call_id"], output["call_id"]);
    assert_eq!(call["name"], "list_directory");
    assert_eq!(input[0]["role"], "user", "the whole conversation is sent");
    agent.close().await.unwrap();

    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Person {
        name: String,
        age: u32,
    }
    let replay = ModelServer::replay(&dir, json!([{"play": format!("{HERE}/08-json-schema")}]));
    let agent = Agent::builder().model(model(&replay)).build().unwrap();
    let typed = agent
        .run_typed::<Person>("Give a JSON object with a name and an age.")
        .await
        .unwrap();
    assert!(typed.value.is_none());
    let Outcome::InvalidOutput { text, reason, .. } = &typed.outcome else {
        panic!("{:?}", typed.outcome)
    };
    assert!(text.starts_with("```python"), "{text}");
    assert!(reason.contains("not JSON"), "{reason}");
    let sent = replay.requests();
    assert_eq!(sent.len(), 2, "one repair round");
    assert_eq!(sent[0]["text"]["format"]["type"], "json_schema");
    assert_eq!(sent[0]["text"]["format"]["name"], "Person");
}

/// A reasoning item (with its encrypted content) goes back verbatim in the next
/// request, streamed or not; usage and the stop are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_items_go_back_verbatim() {
    for streamed in [false, true] {
        let dir = scratch(&format!("responses-reasoning-{streamed}"));
        let scripted = ModelServer::scripted(
            &dir,
            json!([
                {"tool_calls": [{"name": "list_directory", "arguments": {"path": dir.display().to_string()}}], "reasoning": "ENCRYPTED-1"},
                {"echo_tools": true}
            ]),
        );
        let agent = Agent::builder()
            .model(
                Responses::new(scripted.url(), "fake")
                    .unwrap()
                    .streaming(streamed)
                    .stateless(true),
            )
            .allow(["list_directory"])
            .server(filesystem(&dir))
            .build()
            .unwrap();
        let out = agent.run("list").await.unwrap();
        let Outcome::Finished { text, usage, .. } = out else {
            panic!("{out:?}")
        };
        assert!(text.starts_with("list_directory: "), "{text}");
        assert_eq!(usage.reasoning_tokens, 6);
        let sent = scripted.requests();
        assert_eq!(sent[0]["body"]["store"], false);
        let input = sent[1]["body"]["input"].as_array().unwrap();
        let reasoning = input.iter().find(|i| i["type"] == "reasoning").unwrap();
        assert_eq!(
            reasoning["encrypted_content"], "ENCRYPTED-1",
            "streamed: {streamed}"
        );
        // …with the item that followed it, as it came (its id too).
        let call = input.iter().find(|i| i["type"] == "function_call").unwrap();
        assert_eq!(call["id"], "fc_0_0", "streamed: {streamed}");
        agent.close().await.unwrap();
    }
}
