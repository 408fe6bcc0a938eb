//! The agent's spans, collected as an OpenTelemetry pipeline would
//! (`tracing-opentelemetry` into an in-memory exporter): a run, its model calls and its
//! tool calls, with the GenAI semantic-convention names and attributes, parented
//! under the run; no secret, and no argument or result unless asked for.

use std::collections::HashMap;

use mcp_agent::{Agent, ChatCompletions, Outcome};
use opentelemetry_sdk::trace::SpanData;
use serde_json::json;

use super::{filesystem, scratch, ModelServer};

fn attributes(span: &SpanData) -> HashMap<String, String> {
    span.attributes
        .iter()
        .map(|kv| (kv.key.as_str().to_owned(), kv.value.as_str().into_owned()))
        .collect()
}

/// The spans of one run: its `invoke_agent` span(s) and every span of their traces.
fn spans_of(run_id: &str) -> Vec<SpanData> {
    let o = super::observed();
    o.provider.force_flush().unwrap();
    let all = o.spans.get_finished_spans().unwrap();
    let traces: Vec<_> = all
        .iter()
        .filter(|s| {
            s.name == "invoke_agent"
                && attributes(s)
                    .get("gen_ai.conversation.id")
                    .map(String::as_str)
                    == Some(run_id)
        })
        .map(|s| s.span_context.trace_id())
        .collect();
    all.into_iter()
        .filter(|s| traces.contains(&s.span_context.trace_id()))
        .collect()
}

#[test]
fn spans_follow_the_genai_conventions_and_hold_no_secret() {
    // The process's subscriber, before anything runs.
    super::observed();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = scratch("traces");
    std::fs::write(dir.join("a.txt"), "SECRET-CONTENT-CANARY").unwrap();
    let run_id = rt.block_on(async {
        let model = ModelServer::scripted(
            &dir,
            json!([
                {"tool_calls": [
                    {"name": "list_directory", "arguments": {"path": dir}},
                    {"name": "read_text_file", "arguments": {"path": dir.join("a.txt")}}
                ]},
                {"echo_tools": true}
            ]),
        );
        let agent = Agent::builder()
            .model(
                ChatCompletions::new(model.url(), "fake-model")
                    .unwrap()
                    .api_key("MODEL-KEY-CANARY"),
            )
            .allow(["list_directory", "read_text_file"])
            .server(filesystem(&dir))
            .build()
            .unwrap();
        let out = agent.run("read").await.unwrap();
        assert!(matches!(out, Outcome::Finished { .. }), "{out:?}");
        agent.close().await.unwrap();
        out.run_id().to_owned()
    });
    let spans = spans_of(&run_id);
    let named =
        |name: &str| -> Vec<&SpanData> { spans.iter().filter(|s| s.name == name).collect() };
    let run = named("invoke_agent");
    assert_eq!(
        run.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let run = run[0];
    let a = attributes(run);
    assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(a["gen_ai.provider.name"], "openai");
    assert_eq!(a["gen_ai.usage.input_tokens"], "201");
    let chats = named("chat fake-model");
    assert_eq!(chats.len(), 2);
    for c in &chats {
        let a = attributes(c);
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.request.model"], "fake-model");
        assert_eq!(a["gen_ai.usage.output_tokens"], "10");
        assert_eq!(
            c.parent_span_id,
            run.span_context.span_id(),
            "chat under the run"
        );
    }
    assert!(chats
        .iter()
        .any(|c| attributes(c)["gen_ai.response.finish_reasons"] == "tool_calls"));
    for tool in ["list_directory", "read_text_file"] {
        let t = named(&format!("execute_tool {tool}"));
        assert_eq!(t.len(), 1, "{tool}");
        let a = attributes(t[0]);
        assert_eq!(a["gen_ai.operation.name"], "execute_tool");
        assert_eq!(a["gen_ai.tool.name"], tool);
        assert_eq!(a["mcp.method.name"], "tools/call");
        assert!(a["mcp.protocol.version"].starts_with("20"), "{a:?}");
        assert_eq!(a["mcp_agent.server.name"], "fs");
        assert!(!a.contains_key("gen_ai.tool.call.arguments"), "opt-in only");
        assert_eq!(
            t[0].parent_span_id,
            run.span_context.span_id(),
            "{tool} under the run"
        );
    }
    // The positive control: the attributes are read (the model id is seen); no secret
    // (the model key, the server's environment canary) and no content is in any.
    let everything = format!("{:?}", spans.iter().map(attributes).collect::<Vec<_>>());
    assert!(everything.contains("fake-model"));
    for secret in [
        "MODEL-KEY-CANARY",
        "SECRET-CONTENT-CANARY",
        "ENV-CANARY-91c2",
    ] {
        assert!(!everything.contains(secret), "{secret} in a span");
    }

    // Asked for, tool spans carry the arguments and the result.
    let run_id = rt.block_on(async {
        let model = ModelServer::scripted(
            &dir,
            json!([
                {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("a.txt")}}]},
                {"echo_tools": true}
            ]),
        );
        let agent = Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .allow(["read_text_file"])
            .server(filesystem(&dir))
            .trace_content(true)
            .build()
            .unwrap();
        let out = agent.run("read").await.unwrap();
        agent.close().await.unwrap();
        out.run_id().to_owned()
    });
    let spans = spans_of(&run_id);
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool read_text_file")
        .unwrap();
    let a = attributes(tool);
    assert!(a["gen_ai.tool.call.arguments"].contains("a.txt"), "{a:?}");
    assert_eq!(a["gen_ai.tool.call.result"], "SECRET-CONTENT-CANARY");
}
