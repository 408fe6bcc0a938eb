//! What applications build on: conversations that go on across runs and processes,
//! MCP prompts and resources as input, and every kind of tool result reaching the
//! model on both wires — against real servers and the scripted model over real HTTP.

use std::sync::{Arc, Mutex};

use mcp_agent::model::{Block, Message, Role};
use mcp_agent::runtime::Mcp;
use mcp_agent::{
    Agent, ChatCompletions, Decision, Event, Input, Messages, Mode, Model, ModelError, Outcome,
    SqliteRunStore,
};
use serde_json::{json, Value};

use super::{filesystem, peers, scratch, ModelServer, PyServer};

fn everything() -> Mcp {
    let bin = peers().join("npm/node_modules/.bin/mcp-server-everything");
    Mcp::builder("ev")
        .command([bin.display().to_string(), "stdio".into()])
        .build()
        .unwrap()
}

fn openai(model: &ModelServer) -> ChatCompletions {
    ChatCompletions::new(model.url(), "fake-model").unwrap()
}

fn anthropic(model: &ModelServer) -> Messages {
    Messages::new(format!("http://127.0.0.1:{}", model.port), "claude-test").unwrap()
}

/// The texts of the messages of request `n`, by role, as one string per message.
fn said(model: &ModelServer, n: usize) -> Vec<(String, String)> {
    model.requests()[n]["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (m["role"].as_str().unwrap_or_default().to_owned(), text)
        })
        .collect()
}

/// A conversation goes on across runs: each follow-up sees everything said before
/// (prompts, answers, tool calls and results), from this process or another with the
/// same store; `run_with` runs an application's own history; suspension works inside a
/// conversation, and a run that waits takes no follow-up until it is decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_goes_on_across_runs_and_processes() {
    let dir = scratch("conversation");
    std::fs::write(dir.join("a.txt"), "alpha").unwrap();
    std::fs::write(dir.join("b.txt"), "beta").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("a.txt")}}]},
            {"echo_tools": true},
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("b.txt")}}]},
            {"echo_tools": true},
            {"text": "you are welcome"},
            {"text": "history seen"},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": dir.join("c.txt"), "content": "c"}}]},
            {"echo_tools": true},
            {"text": "after the write"}
        ]),
    );
    let store = dir.join("runs.sqlite3");
    let events = Arc::new(Mutex::new(Vec::new()));
    let agent = |mode: Mode| {
        let seen = events.clone();
        Agent::builder()
            .model(openai(&model))
            .system("be brief")
            .mode(mode)
            .allow(["read_text_file"])
            .server(filesystem(&dir))
            .store(SqliteRunStore::open(&store).unwrap())
            .on_event(move |_, e| seen.lock().unwrap().push(e.clone()))
            .build()
            .unwrap()
    };
    let here = agent(Mode::ReadOnly);
    let mut chat = here.conversation();
    let Outcome::Finished { text, run_id, .. } = chat.send("read a").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "read_text_file: alpha");
    let Outcome::Finished {
        text, run_id: same, ..
    } = chat.send("and b?").await.unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (text.as_str(), same.as_str()),
        ("read_text_file: beta", run_id.as_str())
    );
    // The follow-up's first request held the whole conversation, the system prompt once.
    let seen = said(&model, 2);
    let roles: Vec<&str> = seen.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert!(
        seen[3].1.contains("alpha") && seen[5].1 == "and b?",
        "{seen:?}"
    );

    // Another process with the same store goes on with it.
    let there = agent(Mode::ReadOnly);
    let Outcome::Finished { text, .. } =
        there.conversation_of(&run_id).send("thanks").await.unwrap()
    else {
        panic!()
    };
    assert_eq!(text, "you are welcome");
    let seen = said(&model, 4);
    assert_eq!(seen.len(), 10, "{seen:?}");
    assert_eq!(seen[9], ("user".to_owned(), "thanks".to_owned()));
    let transcript = there.transcript(&run_id).await.unwrap();
    assert_eq!(transcript.last().unwrap().joined_text(), "you are welcome");
    assert!(events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, Event::RunContinued)));

    // An application's own history, as a new run.
    let history = vec![
        Message::text(Role::User, "hi"),
        Message::text(Role::Assistant, "hello"),
        Message::text(Role::User, "again"),
    ];
    let Outcome::Finished {
        text,
        run_id: other,
        ..
    } = here.run_with(history).await.unwrap()
    else {
        panic!()
    };
    assert_eq!(text, "history seen");
    assert_ne!(other, run_id);
    let seen = said(&model, 5);
    assert_eq!(
        seen.iter()
            .map(|(r, t)| format!("{r}:{t}"))
            .collect::<Vec<_>>(),
        [
            "system:be brief",
            "user:hi",
            "assistant:hello",
            "user:again"
        ]
    );

    // Suspension inside a conversation: no follow-up while it waits; decided, it goes on.
    let approving = agent(Mode::Approve);
    let mut chat = approving.conversation();
    let Outcome::ApprovalRequired {
        run_id, decision, ..
    } = chat.send("write c").await.unwrap()
    else {
        panic!()
    };
    let e = chat.send("hurry").await.unwrap_err();
    assert!(e.is_not_suspended(), "{e}");
    approving
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(dir.join("c.txt")).unwrap(), "c");
    let Outcome::Finished { text, .. } = chat.send("done?").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "after the write");
    // Unknown runs take no follow-up.
    assert!(here
        .follow_up("no-such-run", "x")
        .await
        .unwrap_err()
        .is_not_suspended());
    assert!(here.run("").await.unwrap_err().is_config());
    for a in [here, there, approving] {
        a.close().await.unwrap();
    }
}

/// An MCP prompt's messages (roles kept, an embedded resource inline) and a resource's
/// contents are a run's input (the seed's `chat.ask server.prompt(…)`); an image goes
/// to both wires as an image; audio Anthropic cannot take is refused naming the wire,
/// and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_prompts_resources_and_images_are_input() {
    let dir = scratch("input-parts");
    let ev = everything();
    let prompt = ev
        .prompt(
            "resource-prompt",
            [("resourceType", "Text"), ("resourceId", "1")],
        )
        .await
        .unwrap();
    let resources = ev.resources().await.unwrap();
    let text_resource = resources
        .iter()
        .find(|r| {
            r.mime_type
                .as_deref()
                .is_some_and(|m| m.starts_with("text/"))
        })
        .expect("server-everything lists a text resource");
    let read = ev.resource(&text_resource.uri).await.unwrap();
    let expected = read.contents[0].text.clone().unwrap();
    ev.close().await.unwrap();
    let image = Block::Image {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };

    for wire in ["openai", "anthropic"] {
        let model = ModelServer::scripted(&dir, json!([{"text": "ok"}, {"text": "ok"}]));
        let m: Box<dyn Model> = if wire == "openai" {
            Box::new(openai(&model))
        } else {
            Box::new(anthropic(&model))
        };
        let agent = Agent::builder().model(m).build().unwrap();
        let input = Input::from(prompt.clone()).and(read.clone()).and(vec![
            Block::Text {
                text: "and this".into(),
            },
            image.clone(),
        ]);
        agent.run(input).await.unwrap();
        let body = &model.requests()[0]["body"];
        let text = body.to_string();
        let first_line = expected.lines().next().unwrap();
        assert!(text.contains(first_line), "{wire}: {text}");
        assert!(
            text.contains("Please analyze the following resource"),
            "{wire}: {text}"
        );
        assert!(text.contains("iVBORw0KGgo="), "{wire}: the image was sent");
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "user", "{wire}");
        if wire == "openai" {
            assert!(
                text.contains("data:image/png;base64,iVBORw0KGgo="),
                "{text}"
            );
        } else {
            assert!(text.contains(r#""type":"image""#), "{text}");
            // Audio: refused, naming the wire; nothing sent.
            let audio = vec![Block::Audio {
                media_type: "audio/wav".into(),
                data: "AAAA".into(),
            }];
            let e = agent.run(audio).await.unwrap_err();
            assert!(
                matches!(e.model_error(), Some(ModelError::Unsupported { .. }))
                    && e.to_string().contains("Anthropic Messages"),
                "{e}"
            );
            assert_eq!(model.requests().len(), 1, "nothing was sent");
        }
    }
}

/// Every kind of tool result reaches the model as well as the wire allows, from real
/// servers: text; an image as an image (inside the tool result on Anthropic, in a user
/// message right after the results on Chat Completions); an embedded text resource
/// inline; a binary one, audio and links noted with their type and size; structured
/// content; a failing tool marked as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_tool_result_reaches_the_model() {
    let dir = scratch("result-kinds");
    let py = PyServer::start();
    for wire in ["openai", "anthropic"] {
        let model = ModelServer::scripted(
            &dir,
            json!([
                {"tool_calls": [
                    {"name": "get-tiny-image", "arguments": {}},
                    {"name": "get-resource-reference", "arguments": {"resourceType": "Text", "resourceId": 1}},
                    {"name": "get-resource-reference", "arguments": {"resourceType": "Blob", "resourceId": 2}},
                    {"name": "get-resource-links", "arguments": {"count": 1}},
                    {"name": "gzip-file-as-resource", "arguments": {
                        "name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resource"}},
                    {"name": "get-structured-content", "arguments": {"location": "Chicago"}},
                    {"name": "beep", "arguments": {}},
                    {"name": "fail", "arguments": {}}
                ]},
                {"text": "seen"}
            ]),
        );
        let m: Box<dyn Model> = if wire == "openai" {
            Box::new(openai(&model))
        } else {
            Box::new(anthropic(&model))
        };
        let py_only = Mcp::builder("py")
            .url(py.url())
            .only(["beep", "fail"])
            .build()
            .unwrap();
        let agent = Agent::builder()
            .model(m)
            .mode(Mode::Auto)
            .server(everything())
            .server(py_only)
            .build()
            .unwrap();
        let Outcome::Finished { text, .. } = agent.run("everything").await.unwrap() else {
            panic!()
        };
        assert_eq!(text, "seen");
        let body = &model.requests()[1]["body"];
        let all = body.to_string();
        for want in [
            "[image (image/png,",
            "attached]",
            "[resource demo://resource",
            "bytes of application/gzip left out",
            "[resource link: ",
            "Chicago",
            "a beep",
            "[audio (audio/wav, 40 bytes) left out",
        ] {
            assert!(all.contains(want), "{wire}: {want} in {all}");
        }
        let messages = body["messages"].as_array().unwrap();
        if wire == "openai" {
            let tools: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
            assert_eq!(tools.len(), 8, "{wire}");
            // No error flag on this wire: the failure is said in the text.
            assert!(tools.iter().any(|t| t["content"]
                .as_str()
                .unwrap()
                .starts_with("[the tool failed] ")));
            let images = messages.last().unwrap();
            assert_eq!(images["role"], "user");
            assert!(images["content"][1]["image_url"]["url"]
                .as_str()
                .unwrap()
                .starts_with("data:image/png;base64,"));
        } else {
            let results = messages.last().unwrap()["content"].as_array().unwrap();
            assert_eq!(results.len(), 8, "{wire}");
            let with_image = results
                .iter()
                .find(|r| r["content"].is_array())
                .expect("the image rides inside its tool result");
            assert_eq!(with_image["content"][1]["type"], "image");
            let failed = results.iter().filter(|r| r["is_error"] == true).count();
            assert_eq!(failed, 1, "{wire}: the failing tool is an error");
        }
        agent.close().await.unwrap();
    }
}

/// Tools implemented in Rust are offered beside the servers' and gated exactly like
/// them: the allow-list, the mode, a declared need for approval (suspending in `Auto`,
/// decided like any call), events naming the `functions` server; arguments that do
/// not fit the type are the model's error to read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_tools_are_gated_like_server_tools() {
    use mcp_agent::FunctionTool;
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Add {
        a: f64,
        b: f64,
    }
    let dir = scratch("function-tools");
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [
                {"name": "add", "arguments": {"a": 1.5, "b": 2}},
                {"name": "add", "arguments": {"a": "one"}},
                {"name": "transfer", "arguments": {"to": "bob"}}
            ]},
            {"echo_tools": true},
            {"tool_calls": [{"name": "transfer", "arguments": {"to": "bob"}}]},
            {"echo_tools": true}
        ]),
    );
    let moved = Arc::new(Mutex::new(Vec::new()));
    let log = moved.clone();
    let tools = move || {
        let log = log.clone();
        (
            FunctionTool::new("add", "Adds two numbers", |x: Add| async move {
                Ok::<_, String>(x.a + x.b)
            })
            .read_only(),
            FunctionTool::with_schema(
                "transfer",
                "Moves money",
                json!({"type": "object", "properties": {"to": {"type": "string"}}}),
                move |args: Value| {
                    let log = log.clone();
                    async move {
                        log.lock().unwrap().push(args["to"].clone());
                        Ok(json!("sent"))
                    }
                },
            )
            .requires_approval(),
        )
    };
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let (add, transfer) = tools();
    let read_only = Agent::builder()
        .model(openai(&model))
        .allow(["add"])
        .tool(add)
        .tool(transfer)
        .on_event(move |_, e| seen.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = read_only.run("compute").await.unwrap() else {
        panic!()
    };
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "add: 3.5");
    // Checked against the tool's schema before the gate: the function is not called.
    assert!(
        lines[1]
            .starts_with("add: {\"error\":\"the arguments do not match the input schema of `add`"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("transfer: {\"error\""),
        "read_only denies it: {text}"
    );
    assert!(moved.lock().unwrap().is_empty());
    let schema = &model.requests()[0]["body"]["tools"];
    let add_schema = schema
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "add")
        .unwrap();
    assert_eq!(
        add_schema["function"]["parameters"]["required"],
        json!(["a", "b"])
    );
    assert!(events.lock().unwrap().iter().any(|e| matches!(e,
        Event::BeforeToolCall { server, tool, .. } if server == "functions" && tool == "add")));

    // Auto: the declared need for approval still suspends; approved, it runs.
    let (add, transfer) = tools();
    let auto = Agent::builder()
        .model(openai(&model))
        .mode(Mode::Auto)
        .tool(add)
        .tool(transfer)
        .build()
        .unwrap();
    let Outcome::ApprovalRequired {
        run_id,
        decision,
        server,
        ..
    } = auto.run("pay bob").await.unwrap()
    else {
        panic!()
    };
    assert_eq!(server, "functions");
    assert!(moved.lock().unwrap().is_empty());
    let Outcome::Finished { text, .. } = auto
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(text, "transfer: sent");
    assert_eq!(*moved.lock().unwrap(), [json!("bob")]);

    // A server named like the function tools' pseudo-server is a configuration error.
    let (add, _) = tools();
    let e = Agent::builder()
        .model(openai(&model))
        .server(Mcp::builder("functions").command(["true"]).build().unwrap())
        .tool(add)
        .build()
        .unwrap_err();
    assert!(
        e.is_config() && e.to_string().contains("`functions`"),
        "{e}"
    );
}

/// Context care: a tool result over `max_result_size` reaches the model cut, with a
/// note of its size; an `on_context` hook trims what is sent (here with `trim_to`)
/// while the run keeps its whole transcript.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_is_capped_and_trimmed_by_the_hook() {
    let dir = scratch("context-care");
    std::fs::write(dir.join("big.txt"), "z".repeat(5000)).unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("big.txt")}}]},
            {"echo_tools": true},
            {"text": "trimmed"}
        ]),
    );
    let agent = Agent::builder()
        .model(openai(&model))
        .allow(["read_text_file"])
        .server(filesystem(&dir))
        .max_result_size(100)
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("read it").await.unwrap() else {
        panic!()
    };
    assert!(
        text.contains("[truncated: the result was 5000 bytes; the first 100 are shown]"),
        "{text}"
    );
    assert!(!text.contains(&"z".repeat(101)));

    let trimming = Agent::builder()
        .model(openai(&model))
        .on_context(|messages| mcp_agent::trim_to(messages, 400))
        .build()
        .unwrap();
    let history: Vec<Message> = (0..20)
        .flat_map(|i| {
            [
                Message::text(Role::User, format!("question {i} {}", "q".repeat(50))),
                Message::text(Role::Assistant, format!("answer {i} {}", "a".repeat(50))),
            ]
        })
        .chain([Message::text(Role::User, "the last question")])
        .collect();
    let Outcome::Finished { run_id, .. } = trimming.run_with(history).await.unwrap() else {
        panic!()
    };
    let sent = said(&model, 2);
    assert!(sent.len() < 10, "{sent:?}");
    assert!(sent[0].1.contains("earlier messages"), "{sent:?}");
    assert_eq!(sent.last().unwrap().1, "the last question");
    assert_eq!(trimming.transcript(&run_id).await.unwrap().len(), 42);
}
