//! Real OpenAI-compatible servers' wire quirks, replayed from recordings
//! (`tests/peers/real-llm/`: llama.cpp's `llama-server` and PyPI `llama-cpp-python`
//! 0.3.36 with a real small model), chunk for chunk, by `tests/peers/replay_model.py`.

use mcp_agent::model::{ChatRequest, Message, Role, ToolSpec};
use mcp_agent::{Agent, ChatCompletions, Model, ModelError, Outcome};
use serde_json::json;

use super::{filesystem, scratch, ModelServer};

/// The replayed model behind the OpenAI wire.
fn model(replay: &ModelServer) -> ChatCompletions {
    ChatCompletions::new(replay.url(), "smollm2-135m-instruct").unwrap()
}

fn ask(tools: bool) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::text(
            Role::User,
            "List the files in the directory /data/dir",
        )],
        tools: if tools {
            vec![ToolSpec {
                name: "list_directory".into(),
                description: "List a directory".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
                defer: false,
            }]
        } else {
            Vec::new()
        },
        output: None,
    }
}

/// llama-cpp-python repeats the function name in every streamed delta: the name is
/// taken once, the arguments joined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_repeated_in_every_delta_is_taken_once() {
    let dir = scratch("real-llm-name");
    let replay = ModelServer::replay(
        &dir,
        json!([{"play": "llama-cpp-python/04-tools-forced-stream"}]),
    );
    let model = model(&replay).streaming(true);
    let answer = model.complete(&ask(true)).await.unwrap();
    let calls = answer.message.tool_calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1, "list_directory");
    assert!(calls[0].2.is_object(), "{:?}", calls[0].2);
}

/// A stream that ends with neither a `finish_reason` nor `[DONE]` is a failed answer,
/// not an empty one; the pooled connection after it is dead (the server never reads
/// the next request), and the next call goes through on a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_stream_is_an_error_and_a_dead_connection_is_replaced() {
    let dir = scratch("real-llm-cut");
    let replay = ModelServer::replay(
        &dir,
        json!([
            {"play": "llama-cpp-python/06-tools-auto-stream", "then_dead": true},
            {"play": "llama-cpp-python/01-plain"}
        ]),
    );
    let streamed = model(&replay).streaming(true);
    let e = streamed.complete(&ask(true)).await.unwrap_err();
    assert!(
        e.to_string().contains("ended before it was complete"),
        "{e}"
    );
    // The same client (the same pool) again: its connection is dead.
    let answer = streamed
        .clone()
        .streaming(false)
        .complete(&ask(false))
        .await;
    let answer = answer.unwrap();
    assert!(!answer.message.joined_text().is_empty());
    assert_eq!(
        replay.requests().len(),
        2,
        "the dead connection's request was never read"
    );
}

/// Both servers' context overflows are ContextTooLong: llama.cpp's numeric `code` with
/// `type: exceed_context_size_error`, llama-cpp-python's `context_length_exceeded`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_context_overflows_are_recognised() {
    let dir = scratch("real-llm-context");
    for recorded in [
        "llama-server/13-context-too-long",
        "llama-cpp-python/13-context-too-long",
    ] {
        let replay = ModelServer::replay(&dir, json!([{"play": recorded}]));
        let e = model(&replay).complete(&ask(false)).await.unwrap_err();
        assert!(
            matches!(e, ModelError::ContextTooLong { .. }),
            "{recorded}: {e}"
        );
    }
}

/// The agent loop against replayed llama.cpp answers: a tool call, then the answer to
/// its result. The tool-call turn goes back with `content: ""` (llama-cpp-python
/// refuses `null`), and `tool_choice` is sent whenever tools are offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_runs_on_replayed_llama_cpp_answers() {
    let dir = scratch("real-llm-loop");
    for server in ["llama-server", "llama-cpp-python"] {
        let replay = ModelServer::replay(
            &dir,
            json!([
                {"play": format!("{server}/05-tools-auto")},
                {"play": "llama-server/10-roundtrip"}
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
            panic!("{server}: {out:?}")
        };
        assert!(text.contains("notes.txt"), "{server}: {text}");
        let sent = replay.requests();
        assert_eq!(sent.len(), 2, "{server}");
        assert_eq!(sent[0]["tool_choice"], "auto");
        let turn = &sent[1]["messages"][1];
        assert_eq!(turn["role"], "assistant");
        assert_eq!(turn["content"], "", "{server}: {turn}");
        assert_eq!(turn["tool_calls"][0]["function"]["name"], "list_directory");
        assert_eq!(sent[1]["messages"][2]["role"], "tool");
        agent.close().await.unwrap();
    }
}
