//! Long conversations compacted through the agent loop, on every built-in wire: past
//! the estimate, the older part of the transcript is summarised by the model (a
//! request of its own, no tools) or by the application into one message; a call stays
//! with its result, the new turn is kept, and the run's log keeps what was compacted.

use mcp_agent::model::{Block, Role};
use mcp_agent::{Agent, Compaction, Event, Outcome};
use serde_json::json;

use crate::{filesystem, scratch, store_for, wire_model, ModelServer};

#[tokio::test]
async fn long_conversations_are_compacted_keeping_calls_with_results() {
    let long = "Please look at the folder and remember every detail. ".repeat(10);
    for (wire, by_model) in [
        ("chat", true),
        ("messages", true),
        ("responses", true),
        ("chat", false),
    ] {
        let dir = scratch(&format!("compaction-{wire}-{by_model}"));
        std::fs::write(dir.join("notes.txt"), "n").unwrap();
        let mut script = vec![
            json!({"tool_calls": [{"name": "list_directory", "arguments": {"path": dir.display().to_string()}}]}),
            json!({"echo_tools": true}),
        ];
        if by_model {
            script.push(json!({"text": "SUMMARY: the person asked to look at the folder; it holds notes.txt"}));
        }
        script.push(json!({"text": "the second answer"}));
        let scripted = ModelServer::scripted(&dir, json!(script));
        let model = wire_model(wire, &scripted);
        let mut compaction = Compaction::at_tokens(60).keep_recent(20);
        if !by_model {
            compaction = compaction.summarize_with(|old| {
                format!("SUMMARY by the application of {} messages", old.len())
            });
        }
        let agent = Agent::builder()
            .model(model)
            .system("be brief")
            .allow(["list_directory"])
            .server(filesystem(&dir))
            .compaction(compaction)
            .store(store_for(&dir, "sqlite").await)
            .build()
            .unwrap();
        let out = agent.run(long.as_str()).await.unwrap();
        let run_id = out.run_id().to_owned();
        let out = agent
            .follow_up(&run_id, "and the second question?")
            .await
            .unwrap();
        let Outcome::Finished { text, .. } = out else {
            panic!("{wire}: {out:?}")
        };
        assert_eq!(text, "the second answer");
        let requests = scripted.requests();
        let last = requests.last().unwrap()["body"].to_string();
        assert!(
            last.contains("[A summary of the earlier conversation"),
            "{wire}: {last}"
        );
        assert!(last.contains("SUMMARY"), "{wire}");
        assert!(
            last.contains("and the second question?"),
            "{wire}: the new turn was kept"
        );
        assert!(
            last.contains("be brief"),
            "{wire}: the system prompt was kept"
        );
        assert!(
            !last.contains("remember every detail"),
            "{wire}: the old turn was sent"
        );
        if by_model {
            assert_eq!(requests.len(), 4, "{wire}");
            let summary_request = requests[2]["body"].to_string();
            assert!(
                summary_request.contains("Summarise the conversation below"),
                "{wire}"
            );
            assert!(summary_request.contains("remember every detail"), "{wire}");
            assert!(
                requests[2]["body"].get("tools").is_none(),
                "{wire}: no tools offered"
            );
        } else {
            assert_eq!(requests.len(), 3, "{wire}");
        }
        // The log keeps what was compacted: the call with its result.
        let events = agent.events(&run_id).await.unwrap();
        let compacted = events
            .iter()
            .find_map(|e| match e {
                Event::Compacted {
                    messages,
                    estimate_before,
                    estimate_after,
                    ..
                } => {
                    assert!(estimate_after < estimate_before);
                    Some(messages.clone())
                }
                _ => None,
            })
            .expect("a Compacted event");
        let calls = compacted
            .iter()
            .flat_map(|m| &m.content)
            .filter(|b| matches!(b, Block::ToolCall { .. }))
            .count();
        let results = compacted
            .iter()
            .flat_map(|m| &m.content)
            .filter(|b| matches!(b, Block::ToolResult { .. }))
            .count();
        assert_eq!(
            (calls, results),
            (1, 1),
            "{wire}: a call went without its result"
        );
        let transcript = agent.transcript(&run_id).await.unwrap();
        // Kept as a new segment of the run's log: the compacted entries are gone from
        // the file, the new segment is the transcript read back.
        let c = rusqlite::Connection::open(dir.join("state/runs.sqlite3")).unwrap();
        let (first, entries): (i64, i64) = c
            .query_row(
                "SELECT min(n), count(*) FROM mcp_agent_transcripts WHERE run_id = ?1",
                [&run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert!(first > 0, "{wire}: the old segment is forgotten");
        assert_eq!(entries as usize, transcript.len(), "{wire}");
        assert_eq!(transcript[0].role, Role::System);
        assert!(
            transcript[1].joined_text().starts_with("[A summary"),
            "{wire}"
        );
        agent.close().await.unwrap();
    }
}

/// Inside one long turn (a person's request, then call after call), the cut falls
/// between call-and-result pairs: the request itself is kept as it was, after the
/// summary; a summary is not summarised again.
#[tokio::test]
async fn a_long_turn_keeps_the_persons_request() {
    let dir = scratch("compaction-one-turn");
    std::fs::write(dir.join("notes.txt"), "n".repeat(400)).unwrap();
    let read = json!({"name": "read_text_file", "arguments": {"path": dir.join("notes.txt").display().to_string()}});
    let scripted = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [read.clone()]},
            {"tool_calls": [read.clone()]},
            {"tool_calls": [read]},
            {"text": "done reading"}
        ]),
    );
    let agent = Agent::builder()
        .model(wire_model("chat", &scripted))
        .allow(["read_text_file"])
        .server(filesystem(&dir))
        .compaction(
            Compaction::at_tokens(150)
                .keep_recent(120)
                .summarize_with(|old| format!("SUMMARY of {} messages", old.len())),
        )
        .build()
        .unwrap();
    let Outcome::Finished { run_id, .. } = agent.run("READ THE NOTES THREE TIMES").await.unwrap()
    else {
        panic!()
    };
    let requests = scripted.requests();
    let last = &requests.last().unwrap()["body"]["messages"];
    assert!(
        last[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("[A summary"),
        "{last}"
    );
    assert_eq!(last[1]["content"], "READ THE NOTES THREE TIMES", "{last}");
    assert_eq!(last[2]["role"], "assistant", "{last}");
    let events = agent.events(&run_id).await.unwrap();
    let summaries: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Compacted {
                summary, messages, ..
            } => {
                assert!(messages
                    .iter()
                    .all(|m| m.joined_text() != "READ THE NOTES THREE TIMES"));
                Some(summary.clone())
            }
            _ => None,
        })
        .collect();
    assert!(!summaries.is_empty());
    agent.close().await.unwrap();
}
