//! Schemas enforced through the agent loop: arguments checked against a tool's
//! `inputSchema` before the gate (nothing sent, no person asked), structured output
//! checked against its `outputSchema`, hostile schemas bounded — on both built-in
//! wires, against a real server (server-filesystem) and a deliberately odd one.

use mcp_agent::{Agent, Event, Mode, Outcome};
use serde_json::{json, Value};

use crate::{filesystem, hostile, scratch, wire_model, ModelServer, WIRES};

/// What the model was sent in a request, as one string.
fn results_sent(request: &Value) -> String {
    request["body"].to_string()
}

#[tokio::test]
async fn arguments_are_checked_before_the_gate_and_output_after_the_call() {
    for wire in WIRES {
        let dir = scratch(&format!("schemas-{wire}"));
        let files = dir.join("files");
        std::fs::create_dir_all(&files).unwrap();
        let files = files.canonicalize().unwrap();
        let target = files.join("a.txt").display().to_string();
        let scripted = ModelServer::scripted(
            &dir,
            json!([
                {"tool_calls": [
                    {"name": "strict", "arguments": {"count": 0}},
                    {"name": "write_file", "arguments": {"path": target}},
                    {"name": "sum_bad", "arguments": {}},
                    {"name": "sum_ok", "arguments": {}},
                    {"name": "bomb", "arguments": {"x": "deep"}},
                    {"name": "far", "arguments": {"x": 1}}
                ]},
                {"tool_calls": [{"name": "strict", "arguments": {"path": "/p", "count": 2}}]},
                {"echo_tools": true}
            ]),
        );
        let model = wire_model(wire, &scripted);
        let agent = Agent::builder()
            .model(model)
            .server(filesystem(&files))
            .server(hostile("schemas"))
            // `write_file` needs a person; the odd server's tools run alone.
            .mode(Mode::Approve)
            .allow(["strict", "sum_bad", "sum_ok", "bomb", "far"])
            .build()
            .unwrap();
        let out = agent.run("go").await.unwrap();
        let Outcome::Finished { text, run_id, .. } = out else {
            panic!("{wire}: an invalid call must never wait for a person: {out:?}")
        };
        // The invalid `strict` never reached the server: the valid one is its second
        // call (`bomb` was the first), and `far` the third.
        assert!(text.contains("strict call #3"), "{wire}: {text}");
        assert!(!files.join("a.txt").exists());
        let events = agent.events(&run_id).await.unwrap();
        let invalid: Vec<(&str, &str)> = events
            .iter()
            .filter_map(|e| match e {
                Event::ArgumentsInvalid {
                    tool, violations, ..
                } => Some((tool.as_str(), violations.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(invalid.len(), 2, "{wire}: {invalid:?}");
        assert!(
            invalid[0].0 == "strict"
                && invalid[0].1.contains("at /count")
                && invalid[0].1.contains("`minimum`")
                && invalid[0].1.contains("\"path\" is a required property"),
            "{wire}: {invalid:?}"
        );
        assert!(invalid[1].0 == "write_file" && invalid[1].1.contains("content"));
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::ApprovalRequested { .. })),
            "{wire}: a person was asked about an invalid call"
        );
        // The hostile schemas: not followed, the call went on (the server checks).
        let unchecked: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::SchemaUnchecked { tool, reason, .. } => {
                    assert!(reason.starts_with("inputSchema: "), "{reason}");
                    Some(tool.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(unchecked, ["bomb", "far"], "{wire}");
        let mismatched: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::OutputMismatch { tool, reason, .. } => {
                    assert!(reason.contains("at /sum"), "{reason}");
                    Some(tool.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(mismatched, ["sum_bad"], "{wire}: sum_ok matched");
        // What the model read: the violations as the call's error, the output note.
        let second = results_sent(&scripted.requests()[1]);
        assert!(
            second.contains("do not match the input schema of `strict`, so nothing was sent"),
            "{wire}: {second}"
        );
        assert!(
            second.contains("does not match its outputSchema"),
            "{wire}: {second}"
        );
        agent.close().await.unwrap();
    }
}
