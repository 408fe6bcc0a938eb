//! Model settings on both wires, what the wire sends for them, usage per call and per
//! run, a truncated answer reported as such, Azure-style headers and query, and plain
//! HTTP to another machine only when allowed — against the scripted model over HTTP.

use std::sync::{Arc, Mutex};

use mcp_agent::{Agent, ChatCompletions, Event, Messages, Mode, Model, Outcome, ToolChoice, Usage};
use serde_json::{json, Value};

use super::{filesystem, scratch, ModelServer};

fn body(model: &ModelServer, n: usize) -> Value {
    model.requests()[n]["body"].clone()
}

/// Every setting reaches the wire as that wire spells it; `tool_choice` is sent
/// whenever tools are offered (auto unless set); extra body fields go last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_reach_both_wires() {
    let dir = scratch("settings-wires");
    let model = ModelServer::scripted(&dir, json!([{"text": "ok"}]));
    let chat = ChatCompletions::new(model.url(), "m")
        .unwrap()
        .temperature(0.2)
        .top_p(0.9)
        .max_tokens(300)
        .stop(["END"])
        .tool_choice(ToolChoice::Required)
        .parallel_tool_calls(false)
        .reasoning_effort("low")
        .extra_body(json!({"seed": 7}));
    let agent = Agent::builder()
        .model(chat)
        .allow(["list_directory"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    agent.run("hi").await.unwrap();
    let b = body(&model, 0);
    for (k, v) in [
        ("temperature", json!(0.2)),
        ("top_p", json!(0.9)),
        ("max_tokens", json!(300)),
        ("stop", json!(["END"])),
        ("tool_choice", json!("required")),
        ("parallel_tool_calls", json!(false)),
        ("reasoning_effort", json!("low")),
        ("seed", json!(7)),
    ] {
        assert_eq!(b[k], v, "chat completions {k}: {b}");
    }
    // Unset, tool_choice is still sent (auto) when tools are offered, never without.
    let plain = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .allow(["list_directory"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    plain.run("hi").await.unwrap();
    assert_eq!(body(&model, 1)["tool_choice"], "auto");
    let bare = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .build()
        .unwrap();
    bare.run("hi").await.unwrap();
    assert!(body(&model, 2).get("tool_choice").is_none());

    let messages = Messages::new(format!("http://127.0.0.1:{}", model.port), "claude")
        .unwrap()
        .temperature(0.5)
        .stop(["END"])
        .tool_choice(ToolChoice::Tool("list_directory".into()))
        .parallel_tool_calls(false)
        .thinking(2048)
        .prompt_caching(true);
    let agent = Agent::builder()
        .model(messages)
        .system("be brief")
        .allow(["list_directory", "read_text_file"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    agent.run("hi").await.unwrap();
    let b = body(&model, 3);
    assert_eq!(b["temperature"], 0.5, "{b}");
    assert_eq!(b["stop_sequences"], json!(["END"]));
    assert_eq!(
        b["tool_choice"],
        json!({"type": "tool", "name": "list_directory", "disable_parallel_tool_use": true})
    );
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(
        b["max_tokens"],
        2048 + 4096,
        "max_tokens exceeds the thinking budget"
    );
    assert_eq!(
        b["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    let tools = b["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "{b}");
    assert_eq!(
        tools.last().unwrap()["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(tools[0].get("cache_control").is_none());
}

/// Usage per model call in the events and summed in the outcome, on both wires,
/// streamed or not (Chat Completions streams it when `stream_options.include_usage`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_reported_per_call_and_per_run() {
    let dir = scratch("settings-usage");
    for (wire, streamed) in [
        ("openai", false),
        ("openai", true),
        ("anthropic", false),
        ("anthropic", true),
    ] {
        let model = ModelServer::scripted(
            &dir,
            json!([
                {"tool_calls": [{"name": "list_directory", "arguments": {"path": dir}}]},
                {"echo_tools": true}
            ]),
        );
        let m: Box<dyn Model> = if wire == "openai" {
            Box::new(
                ChatCompletions::new(model.url(), "m")
                    .unwrap()
                    .streaming(streamed),
            )
        } else {
            Box::new(
                Messages::new(format!("http://127.0.0.1:{}", model.port), "c")
                    .unwrap()
                    .streaming(streamed),
            )
        };
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = events.clone();
        let agent = Agent::builder()
            .model(m)
            .allow(["list_directory"])
            .server(filesystem(&dir))
            .on_event(move |_, e| seen.lock().unwrap().push(e.clone()))
            .build()
            .unwrap();
        let out = agent.run("list").await.unwrap();
        assert!(matches!(out, Outcome::Finished { .. }), "{out:?}");
        let per_call: Vec<Usage> = events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                Event::ModelAnswered { usage, .. } => *usage,
                _ => None,
            })
            .collect();
        assert_eq!(per_call.len(), 2, "{wire} streamed={streamed}");
        // Request 0 and 1: inputs 100 and 101 (+ 40 cached on Messages, counted apart
        // there), outputs 10 each.
        let expected_input = if wire == "openai" { 201 } else { 201 + 80 };
        let total = out.usage();
        assert_eq!(
            total.input_tokens, expected_input,
            "{wire} streamed={streamed}: {total:?}"
        );
        assert_eq!(total.output_tokens, 20, "{wire} streamed={streamed}");
        assert_eq!(total.cached_input_tokens, 80, "{wire} streamed={streamed}");
        if wire == "openai" {
            assert_eq!(total.reasoning_tokens, 6);
            if streamed {
                assert_eq!(body(&model, 0)["stream_options"]["include_usage"], true);
            }
        }
        agent.close().await.unwrap();
    }
}

/// An answer cut at the output limit is reported as truncated — never taken as the
/// answer — on both wires, and its half-written tool calls do not run; a follow-up
/// continues the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_answer_is_reported_not_taken() {
    let dir = scratch("settings-truncated");
    for wire in ["openai", "anthropic"] {
        let model = ModelServer::scripted(
            &dir,
            json!([
                {"text": "The answer is", "finish": "length"},
                {"text": "forty-two"}
            ]),
        );
        let m: Box<dyn Model> = if wire == "openai" {
            Box::new(
                ChatCompletions::new(model.url(), "m")
                    .unwrap()
                    .max_tokens(3),
            )
        } else {
            Box::new(
                Messages::new(format!("http://127.0.0.1:{}", model.port), "c")
                    .unwrap()
                    .max_tokens(3),
            )
        };
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = events.clone();
        let agent = Agent::builder()
            .model(m)
            .on_event(move |_, e| seen.lock().unwrap().push(e.clone()))
            .build()
            .unwrap();
        let out = agent.run("what is it?").await.unwrap();
        let Outcome::Truncated { run_id, text, .. } = out else {
            panic!("{wire}: {out:?}")
        };
        assert_eq!(text, "The answer is");
        assert!(events.lock().unwrap().iter().any(|e| matches!(e,
            Event::ModelAnswered { stop: Some(s), .. } if s == "length")));
        let Outcome::Finished { text, .. } = agent.follow_up(&run_id, "go on").await.unwrap()
        else {
            panic!()
        };
        assert_eq!(text, "forty-two");
    }
}

/// Azure OpenAI style: a secret header (`api-key`) and a query parameter
/// (`api-version`) on every request; the header's value is scrubbed from errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_headers_and_query_reach_the_provider_and_never_an_error() {
    let dir = scratch("settings-azure");
    let model = ModelServer::scripted(
        &dir,
        json!([{"text": "ok"}, {"status": 400, "error": "bad api-key AZURE-KEY-CANARY-77"}]),
    );
    let agent = Agent::builder()
        .model(
            ChatCompletions::new(model.url(), "gpt-deployment")
                .unwrap()
                .secret_header("api-key", "AZURE-KEY-CANARY-77")
                .header("x-team", "blue")
                .query("api-version", "2024-10-21"),
        )
        .build()
        .unwrap();
    agent.run("hi").await.unwrap();
    let r = &model.requests()[0];
    assert_eq!(r["headers"]["api-key"], "AZURE-KEY-CANARY-77");
    assert_eq!(r["headers"]["x-team"], "blue");
    assert_eq!(r["path"], "/v1/chat/completions?api-version=2024-10-21");
    let e = agent.run("again").await.unwrap_err();
    let text = e.to_string();
    assert!(text.contains("bad api-key"), "the positive control: {text}");
    assert!(!text.contains("AZURE-KEY-CANARY-77"), "{text}");
}

/// Plain `http://` to another machine is refused before anything is sent — unless
/// allowed, when the client does try to reach it (here a `.invalid` name, which never
/// resolves: no traffic leaves this machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_another_machine_only_when_allowed() {
    let refused = Agent::builder()
        .model(
            ChatCompletions::new("http://ollama.invalid:11434/v1", "llama")
                .unwrap()
                .api_key("KEY-NEVER-SENT"),
        )
        .mode(Mode::ReadOnly)
        .build()
        .unwrap();
    let e = refused.run("hi").await.unwrap_err();
    assert!(e.to_string().contains("allow_insecure_http"), "{e}");
    let allowed = Agent::builder()
        .model(
            ChatCompletions::new("http://ollama.invalid:11434/v1", "llama")
                .unwrap()
                .allow_insecure_http(),
        )
        .build()
        .unwrap();
    let e = allowed.run("hi").await.unwrap_err();
    assert!(!e.to_string().contains("allow_insecure_http"), "{e}");
    assert!(
        e.to_string().contains("ollama.invalid"),
        "it tried to reach it: {e}"
    );
    // A URL that is not http(s) at all is refused at once.
    assert!(ChatCompletions::new("ftp://example.com/v1", "m").is_err());
}
