//! Real OpenAI-compatible servers' wire quirks, replayed from recordings
//! (`tests/peers/real-llm/`: llama.cpp's `llama-server` and PyPI `llama-cpp-python`
//! 0.3.36 with a real small model), chunk for chunk, by `tests/peers/replay_model.py`.

use std::io::BufRead as _;
use std::process::{Command, Stdio};

use mcp_agent::model::{ChatRequest, Message, Role, ToolSpec};
use mcp_agent::{Agent, ChatCompletions, Model, ModelError, Outcome};
use serde_json::{json, Value};

use super::{filesystem, free_port, peers, repo_root, scratch, Killed};

/// The replaying server, killed when dropped.
struct Replay {
    _child: Killed,
    port: u16,
}

impl Replay {
    fn start(dir: &std::path::Path, script: Value) -> Replay {
        let path = dir.join("replay.json");
        std::fs::write(&path, script.to_string()).unwrap();
        let port = free_port();
        let mut child = Command::new(peers().join("venv/bin/python"))
            .arg(repo_root().join("tests/peers/replay_model.py"))
            .args([port.to_string(), path.display().to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("READY"), "the replay server did not start");
        Replay {
            _child: Killed(child),
            port,
        }
    }

    fn model(&self) -> ChatCompletions {
        ChatCompletions::new(
            format!("http://127.0.0.1:{}/v1", self.port),
            "smollm2-135m-instruct",
        )
        .unwrap()
    }

    fn requests(&self) -> Vec<Value> {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET /_requests HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        serde_json::from_str(&text[text.find("\r\n\r\n").unwrap() + 4..]).unwrap()
    }
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
    }
}

/// llama-cpp-python repeats the function name in every streamed delta: the name is
/// taken once, the arguments joined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_repeated_in_every_delta_is_taken_once() {
    let dir = scratch("real-llm-name");
    let replay = Replay::start(
        &dir,
        json!([{"play": "llama-cpp-python/04-tools-forced-stream"}]),
    );
    let model = replay.model().streaming(true);
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
    let replay = Replay::start(
        &dir,
        json!([
            {"play": "llama-cpp-python/06-tools-auto-stream", "then_dead": true},
            {"play": "llama-cpp-python/01-plain"}
        ]),
    );
    let streamed = replay.model().streaming(true);
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
        let replay = Replay::start(&dir, json!([{"play": recorded}]));
        let e = replay.model().complete(&ask(false)).await.unwrap_err();
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
        let replay = Replay::start(
            &dir,
            json!([
                {"play": format!("{server}/05-tools-auto")},
                {"play": "llama-server/10-roundtrip"}
            ]),
        );
        let agent = Agent::builder()
            .model(replay.model())
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
