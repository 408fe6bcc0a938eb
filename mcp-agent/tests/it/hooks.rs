//! The application's hooks through the agent loop, on every built-in wire, against a
//! real server-filesystem: `before_call` refuses a call and rewrites another (the
//! rewrite is put to the person again, bound to what they now see), `after_call`
//! redacts a result before the model or the store sees it, a hook that panics fails
//! only its call, and `check_answer` sends the model back once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mcp_agent::{
    Agent, AnswerCheck, BeforeCall, CallResult, ChatCompletions, Decision, Event, Mode, Outcome,
};
use serde_json::json;

use crate::{filesystem, scratch, wire_model, ModelServer, WIRES};

#[tokio::test]
async fn hooks_refuse_rewrite_redact_and_check_the_answer() {
    for wire in WIRES {
        let dir = scratch(&format!("hooks-{wire}"));
        let files = dir.join("files");
        std::fs::create_dir_all(files.join("secret")).unwrap();
        std::fs::write(files.join("notes.txt"), "the password is hunter2").unwrap();
        let files = files.canonicalize().unwrap();
        let path = |p: &str| files.join(p).display().to_string();
        let scripted = ModelServer::scripted(
            &dir,
            json!([
                {"tool_calls": [
                    {"name": "write_file", "arguments": {"path": path("a.txt"), "content": "as the model wrote it"}},
                    {"name": "list_directory", "arguments": {"path": path("secret")}},
                    {"name": "read_text_file", "arguments": {"path": path("notes.txt")}},
                    {"name": "get_file_info", "arguments": {"path": path("notes.txt")}}
                ]},
                {"text": "a draft"},
                {"text": "the final answer"}
            ]),
        );
        let model = wire_model(wire, &scripted);
        let answers = Arc::new(AtomicUsize::new(0));
        let seen = answers.clone();
        let agent = Agent::builder()
            .model(model)
            .server(filesystem(&files))
            .mode(Mode::Approve)
            .allow(["list_directory", "read_text_file", "get_file_info"])
            .before_call(|call| match call.tool {
                "list_directory"
                    if call.arguments["path"]
                        .as_str()
                        .is_some_and(|p| p.ends_with("secret")) =>
                {
                    BeforeCall::Refuse("that folder is off limits".into())
                }
                "write_file" => {
                    let mut arguments = call.arguments.clone();
                    arguments["content"] = json!("as the application rewrote it");
                    BeforeCall::Rewrite(arguments)
                }
                _ => BeforeCall::Continue,
            })
            .after_call(|call, result| match call.tool {
                "read_text_file" => CallResult::new(
                    result.text.replace("hunter2", "[redacted]"),
                    result.is_error,
                ),
                "get_file_info" => panic!("a hook with a bug"),
                _ => result,
            })
            .check_answer(move |_, text| {
                seen.fetch_add(1, Ordering::SeqCst);
                if text.contains("draft") {
                    AnswerCheck::Retry("give the final answer, not a draft".into())
                } else {
                    AnswerCheck::Accept
                }
            })
            .build()
            .unwrap();
        let out = agent.run("tidy up").await.unwrap();
        let Outcome::ApprovalRequired {
            run_id,
            decision,
            arguments,
            ..
        } = out
        else {
            panic!("{wire}: {out:?}")
        };
        assert_eq!(arguments["content"], "as the model wrote it");
        // Approved as the model wrote it: the hook rewrites it, and the person is asked
        // again — about what will be sent now.
        let out = agent
            .resume(&run_id, &decision, Decision::approve("ann"))
            .await
            .unwrap();
        let Outcome::ApprovalRequired {
            decision: again,
            arguments,
            ..
        } = out
        else {
            panic!("{wire}: a rewritten call ran without the person seeing it: {out:?}")
        };
        assert_ne!(again, decision);
        assert_eq!(arguments["content"], "as the application rewrote it");
        assert!(!files.join("a.txt").exists());
        let out = agent
            .resume(&run_id, &again, Decision::approve("ann"))
            .await
            .unwrap();
        let Outcome::Finished { text, .. } = out else {
            panic!("{wire}: {out:?}")
        };
        assert_eq!(text, "the final answer");
        assert_eq!(
            std::fs::read_to_string(files.join("a.txt")).unwrap(),
            "as the application rewrote it"
        );
        assert_eq!(answers.load(Ordering::SeqCst), 2);
        // What the model read after the calls: the refusal, the redacted text, the
        // failed hook's withheld result — never the secret.
        let requests = scripted.requests();
        let after_calls = requests[1]["body"].to_string();
        assert!(
            after_calls.contains("that folder is off limits"),
            "{wire}: {after_calls}"
        );
        assert!(
            after_calls.contains("the password is [redacted]"),
            "{wire}: {after_calls}"
        );
        assert!(
            after_calls.contains("after_call hook failed on `get_file_info`"),
            "{wire}"
        );
        assert!(
            !after_calls.contains("hunter2"),
            "{wire}: the model saw the secret"
        );
        let retry = requests[2]["body"].to_string();
        assert!(
            retry.contains("give the final answer, not a draft"),
            "{wire}: {retry}"
        );
        // Nor does the run keep it (positive control: the redacted text is kept).
        let transcript = serde_json::to_string(&agent.transcript(&run_id).await.unwrap()).unwrap();
        assert!(transcript.contains("[redacted]") && !transcript.contains("hunter2"));
        let events = agent.events(&run_id).await.unwrap();
        let hooks: Vec<(String, String)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Hook { hook, outcome, .. } => Some((hook.clone(), outcome.clone())),
                _ => None,
            })
            .collect();
        for expected in [
            ("before_call", "rewrite"),
            ("before_call", "refuse"),
            ("after_call", "changed"),
            ("after_call", "panicked"),
            ("check_answer", "retry"),
            ("check_answer", "accept"),
        ] {
            assert!(
                hooks
                    .iter()
                    .any(|(h, o)| h == expected.0 && o == expected.1),
                "{wire}: no {expected:?} in {hooks:?}"
            );
        }
        agent.close().await.unwrap();
    }
}

/// `Mode::ask_decision`: the callback decides as a person would — allow, deny with a
/// message the model reads, or edit the arguments (checked against the schema: an edit
/// that breaks it is not sent).
#[tokio::test]
async fn an_ask_callback_denies_with_a_message_and_edits() {
    use mcp_agent::Asked;
    let dir = scratch("ask-decision");
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("notes.txt"), "n").unwrap();
    let files = files.canonicalize().unwrap();
    let path = |p: &str| files.join(p).display().to_string();
    let scripted = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [
                {"name": "write_file", "arguments": {"path": path("a.txt"), "content": "the model's"}},
                {"name": "write_file", "arguments": {"path": path("b.txt"), "content": "the model's"}},
                {"name": "list_directory", "arguments": {"path": path("")}},
                {"name": "read_text_file", "arguments": {"path": path("notes.txt")}}
            ]},
            {"echo_tools": true}
        ]),
    );
    let agent = Agent::builder()
        .model(ChatCompletions::new(scripted.url(), "fake").unwrap())
        .server(filesystem(&files))
        .mode(Mode::ask_decision(|_server, tool, arguments| {
            let (tool, arguments) = (tool.to_owned(), arguments.clone());
            async move {
                match tool.as_str() {
                    "write_file"
                        if arguments["path"]
                            .as_str()
                            .is_some_and(|p| p.ends_with("a.txt")) =>
                    {
                        let mut edited = arguments.clone();
                        edited["content"] = json!("the callback's");
                        Asked::Edit(edited)
                    }
                    // An edit that breaks the schema (no `content`).
                    "write_file" => Asked::Edit(json!({"path": arguments["path"]})),
                    "list_directory" => Asked::Deny(Some("listing is not for today".into())),
                    _ => Asked::Allow,
                }
            }
        }))
        .build()
        .unwrap();
    let Outcome::Finished { text, run_id, .. } = agent.run("go").await.unwrap() else {
        panic!()
    };
    assert_eq!(
        std::fs::read_to_string(files.join("a.txt")).unwrap(),
        "the callback's"
    );
    assert!(
        !files.join("b.txt").exists(),
        "an edit that breaks the schema was sent"
    );
    assert!(
        text.contains("`list_directory` was not allowed: listing is not for today"),
        "{text}"
    );
    assert!(text.contains("do not match its input schema"), "{text}");
    assert!(text.contains("read_text_file: n"), "{text}");
    let events = agent.events(&run_id).await.unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::ArgumentsInvalid { edited: true, .. })));
    agent.close().await.unwrap();
}
