//! The model wires through the loop: provider errors, deferred tools behind a tool
//! search (emulated on Chat Completions, native on Anthropic), streamed answers.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_errors_are_clear() {
    let dir = scratch("errors");
    let model = ModelServer::scripted(&dir, json!([{"status": 429, "error": "slow down"}]));
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .build()
        .unwrap();
    let e = agent.run("hi").await.unwrap_err();
    assert!(e.is_model(), "{e}");
    assert!(
        matches!(
            e.model_error(),
            Some(mcp_agent::ModelError::RateLimited { .. })
        ),
        "{e}"
    );
    let model = ModelServer::scripted(
        &dir,
        json!([{"status": 400, "error": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"}]),
    );
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .build()
        .unwrap();
    let e = agent.run("hi").await.unwrap_err();
    assert!(
        matches!(
            e.model_error(),
            Some(mcp_agent::ModelError::ContextTooLong { .. })
        ),
        "{e}"
    );
    // Anthropic: a prompt too long is ContextTooLong; another request error that
    // merely says "context" is not.
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"status": 400, "error": "prompt is too long: 208310 tokens > 200000 maximum"},
            {"status": 400, "error": "tool_use ids were found without tool_result blocks (context: messages.2)"}
        ]),
    );
    let agent = Agent::builder()
        .model(mcp_agent::Messages::new(model.url(), "m").unwrap())
        .build()
        .unwrap();
    let e = agent.run("hi").await.unwrap_err();
    assert!(
        matches!(
            e.model_error(),
            Some(mcp_agent::ModelError::ContextTooLong { .. })
        ),
        "{e}"
    );
    let e = agent.run("hi").await.unwrap_err();
    assert!(
        matches!(e.model_error(), Some(mcp_agent::ModelError::Other { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("tool_use ids"), "{e}");
    // No model configured: a configuration error, never a vendor default.
    assert!(Agent::builder().build().unwrap_err().is_config());
}

/// Chat Completions has no tool search: deferred tools stay out of the model's context
/// until the emulated `tool_search` loads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_tools_are_loaded_by_an_emulated_tool_search() {
    let dir = scratch("defer-emulated");
    std::fs::write(dir.join("notes.txt"), "deferred notes").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "tool_search", "arguments": {"query": "read text"}}]},
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("notes.txt")}}]},
            {"echo_tools": true}
        ]),
    );
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .allow(["read_text_file", "list_directory"])
        .defer("fs", ["read_text_file"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("read the notes").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "read_text_file: deferred notes");
    let requests = model.requests();
    let mut first = offered(&requests[0]);
    first.sort();
    assert_eq!(
        first,
        ["list_directory", "tool_search"],
        "deferred: not offered yet"
    );
    let search = &requests[0]["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "tool_search")
        .unwrap()["function"]["description"];
    assert!(
        search.as_str().unwrap().contains("read_text_file"),
        "{search}"
    );
    let mut second = offered(&requests[1]);
    second.sort();
    assert_eq!(
        second,
        ["list_directory", "read_text_file"],
        "loaded by the search"
    );
    agent.close().await.unwrap();
}

/// The Anthropic Messages wire with its native tool search: deferred tools are sent
/// flagged with the search tool, and the search's blocks come back in the next request
/// exactly as the provider sent them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages_with_native_tool_search_round_trip() {
    anthropic_round_trip(false).await;
}

/// The same, streamed: `input_json_delta` pieces make the tool input, provider blocks
/// still round-trip untouched, text reaches `on_text` as it arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages_streamed_round_trip() {
    anthropic_round_trip(true).await;
}

async fn anthropic_round_trip(streamed: bool) {
    let dir = scratch(if streamed {
        "anthropic-stream"
    } else {
        "anthropic"
    });
    std::fs::write(dir.join("notes.txt"), "anthropic notes").unwrap();
    let search_use = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {"query": "read file"}});
    let search_result = json!({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
        "content": {"type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference", "tool_name": "read_text_file"}]}});
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"raw": [search_use, search_result,
                     {"type": "tool_use", "id": "toolu_1", "name": "read_text_file", "input": {"path": dir.join("notes.txt")}}],
             "stop_reason": "tool_use"},
            {"echo_tools": true}
        ]),
    );
    let pieces = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let agent = Agent::builder()
        .model(
            mcp_agent::Messages::new(format!("http://127.0.0.1:{}", model.port), "claude-test")
                .unwrap()
                .api_key("ANTHROPIC-KEY-CANARY")
                .on_text({
                    let pieces = pieces.clone();
                    move |t| pieces.lock().unwrap().push(t.to_owned())
                })
                // on_text turns streaming on; the unstreamed run turns it off again.
                .streaming(streamed),
        )
        .system("be brief")
        .allow(["read_text_file", "list_directory"])
        .defer("fs", ["read_text_file"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("read the notes").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "read_text_file: anthropic notes");
    let pieces = pieces.lock().unwrap().clone();
    if streamed {
        assert!(pieces.len() > 1, "{pieces:?}");
        assert_eq!(pieces.concat(), text);
    } else {
        assert!(pieces.is_empty());
    }
    let requests = model.requests();
    let first = &requests[0];
    assert_eq!(first["body"]["stream"].as_bool().unwrap_or(false), streamed);
    assert_eq!(first["x-api-key"], "ANTHROPIC-KEY-CANARY");
    assert_eq!(first["anthropic-version"], "2023-06-01");
    assert_eq!(first["body"]["system"], "be brief");
    let tools = first["body"]["tools"].as_array().unwrap();
    let read = tools
        .iter()
        .find(|t| t["name"] == "read_text_file")
        .unwrap();
    assert_eq!(read["defer_loading"], true);
    assert!(tools.iter().any(|t| t["name"] == "tool_search_tool_bm25"));
    let assistant = &requests[1]["body"]["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0], search_use);
    assert_eq!(assistant["content"][1], search_result);
    agent.close().await.unwrap();
}

/// Chat Completions streamed: tool-call arguments arrive in fragments by index, text in
/// deltas (each reaching `on_text`), `[DONE]` ends it; the run is the same as unstreamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_streamed_round_trip() {
    let dir = scratch("openai-stream");
    std::fs::write(dir.join("a.txt"), "alpha").unwrap();
    std::fs::write(dir.join("b.txt"), "beta").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [
                {"name": "read_text_file", "arguments": {"path": dir.join("a.txt")}},
                {"name": "read_text_file", "arguments": {"path": dir.join("b.txt")}}
            ]},
            {"echo_tools": true}
        ]),
    );
    let pieces = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let p = pieces.clone();
    let agent = Agent::builder()
        .model(
            ChatCompletions::new(model.url(), "fake-model")
                .unwrap()
                .on_text(move |t| p.lock().unwrap().push(t.to_owned())),
        )
        .allow(["read_text_file"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("read both").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "read_text_file: alpha\nread_text_file: beta");
    let pieces = pieces.lock().unwrap().clone();
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat(), text);
    let requests = model.requests();
    assert_eq!(requests[0]["body"]["stream"], true);
    // The assembled calls went back to the model with their ids and whole arguments.
    let assistant = &requests[1]["body"]["messages"][1];
    assert_eq!(assistant["tool_calls"][0]["id"], "call_0_0");
    assert_eq!(assistant["tool_calls"][1]["id"], "call_0_1");
    let args: Value = serde_json::from_str(
        assistant["tool_calls"][1]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args["path"], dir.join("b.txt").display().to_string());
    agent.close().await.unwrap();
}
