//! What a model provider and a model send is untrusted, through the agent loop: a
//! provider that stalls is cut off; a key it echoes — anywhere in its error body, in
//! any JSON spelling — never reaches the error; a model's tool arguments that are not
//! JSON reach no tool.

use mcp_agent::{Agent, ChatCompletions, Outcome};
use serde_json::json;

use super::{scratch, ModelServer};

/// A provider that answers at once and then stalls mid-body (one byte every 0.2 s, for
/// ever) is cut off at the timeout — streamed or not — and the run says so instead of
/// hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_model_answer_is_cut_off_at_the_timeout() {
    let dir = scratch("stalled-model");
    let model = ModelServer::scripted(&dir, json!([{"trickle": true}]));
    for stream in [false, true] {
        let wire = ChatCompletions::new(model.url(), "fake-model")
            .unwrap()
            .timeout(std::time::Duration::from_secs(2))
            .streaming(stream);
        let agent = Agent::builder().model(wire).build().unwrap();
        let e = agent.run("hello").await.unwrap_err();
        assert!(
            e.is_model() && e.to_string().contains("took longer than"),
            "streamed {stream}: {e}"
        );
    }
}

/// A provider that quotes the key it refused does not put the key in the error (nor
/// in the run's events): on both wires, streamed or not. The positive control: the
/// error does quote what the provider said around it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_provider_echoes_is_not_in_the_error() {
    let dir = scratch("echoed-key");
    let model = ModelServer::scripted(&dir, json!([{"status": 401, "echo_key": true}]));
    for stream in [false, true] {
        let chat = ChatCompletions::new(model.url(), "m")
            .unwrap()
            .api_key("sk-ECHOED-KEY-CANARY-0042")
            .streaming(stream);
        let e = Agent::builder()
            .model(chat)
            .build()
            .unwrap()
            .run("x")
            .await
            .unwrap_err();
        let text = format!("{e} {e:?}");
        // The provider did quote it: what it quoted is there, scrubbed.
        assert!(
            text.contains("Incorrect API key provided: Bearer [redacted]"),
            "{text}"
        );
        assert!(!text.contains("ECHOED-KEY-CANARY"), "{text}");
        let messages = mcp_agent::Messages::new(format!("http://127.0.0.1:{}", model.port), "m")
            .unwrap()
            .api_key("sk-ECHOED-KEY-CANARY-0042")
            .streaming(stream);
        let e = Agent::builder()
            .model(messages)
            .build()
            .unwrap()
            .run("x")
            .await
            .unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(text.contains("invalid x-api-key: [redacted]"), "{text}");
        assert!(!text.contains("ECHOED-KEY-CANARY"), "{text}");
    }
}

/// A request to the scripted model made by hand, with one header: the body it answers.
fn post_by_hand(port: u16, path: &str, header: (&str, &str)) -> String {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\n{}: {}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}",
        header.0, header.1
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer.split_once("\r\n\r\n").unwrap().1.to_owned()
}

/// A key a provider quotes in a body that is not its usual error (a proxy's page, a
/// `detail` field), read raw for the error's first 300 bytes, is scrubbed before that
/// cut — so a key that straddles byte 300 leaves no prefix — and in every spelling JSON
/// gives it (`\/`, `\"`, `\\`, `\u00xx`): on both wires, streamed or not. The key holds
/// `/`, `"`, `\`, `&`, `<` and `>`; each spelling keeps its letters, so the reader looks
/// for `CANARY`. The positive controls: the body the provider sends, asked by hand,
/// quotes the key where the reader finds it (across the cut: only its prefix before
/// byte 300), and the error does quote the words around it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_provider_echoes_cut_or_escaped_is_not_in_the_error() {
    const KEY: &str = r#"sk-CANARY7f3/a"b\c&d<e>-0042"#;
    let quotes_key = |text: &str| text.contains("CANARY");
    let dir = scratch("echoed-key-spelled");
    let before = "x".repeat(290);
    let detail = r#"{"detail": "the key {key} is not valid"}"#;
    let cases = [
        (
            "across the cut",
            json!({"status": 502, "raw_body": format!("{before}{{key}} and more")}),
        ),
        (
            "across the cut, escaped",
            json!({"status": 502, "raw_body": format!("{before}{{key}}"), "escape": "json"}),
        ),
        (
            "JSON-escaped",
            json!({"status": 502, "raw_body": detail, "escape": "json", "content_type": "application/json"}),
        ),
        (
            "\\u-escaped",
            json!({"status": 502, "raw_body": detail, "escape": "unicode", "content_type": "application/json"}),
        ),
    ];
    for (case, turn) in cases {
        let model = ModelServer::scripted(&dir, json!([turn]));
        for (path, header) in [
            (
                "/v1/chat/completions",
                ("Authorization", format!("Bearer {KEY}")),
            ),
            ("/v1/messages", ("x-api-key", KEY.to_owned())),
        ] {
            let body = post_by_hand(model.port, path, (header.0, &header.1));
            assert!(quotes_key(&body), "{case}: {body}");
            if case.starts_with("across the cut") {
                assert_eq!(body.find("sk-CANARY"), Some(290), "{case}: {body}");
                assert!(
                    quotes_key(&body[..300]),
                    "{case}: the prefix before the cut"
                );
            } else {
                assert!(!body.contains(KEY), "{case}: the key is escaped: {body}");
            }
        }
        for stream in [false, true] {
            let chat = ChatCompletions::new(model.url(), "m")
                .unwrap()
                .api_key(KEY)
                .streaming(stream);
            let messages =
                mcp_agent::Messages::new(format!("http://127.0.0.1:{}", model.port), "m")
                    .unwrap()
                    .api_key(KEY)
                    .streaming(stream);
            let errors = [
                Agent::builder().model(chat).build().unwrap().run("x").await,
                Agent::builder()
                    .model(messages)
                    .build()
                    .unwrap()
                    .run("x")
                    .await,
            ];
            for e in errors {
                let e = e.unwrap_err();
                let text = format!("{e} {e:?}");
                assert!(e.is_model(), "{case}: {text}");
                assert!(!quotes_key(&text), "{case}, streamed {stream}: {text}");
                let around = if case.starts_with("across the cut") {
                    format!("{before}[redacted]")
                } else {
                    "the key [redacted] is not valid".to_owned()
                };
                assert!(text.contains(&around), "{case}, streamed {stream}: {text}");
            }
        }
    }
}

/// Counts the `tools/call` requests that reach a real server (their params), passing
/// everything through.
struct CountingCalls {
    inner: mcp_runtime::StdioTransport,
    calls: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

impl mcp_runtime::Transport for CountingCalls {
    fn request(
        &self,
        request: mcp_runtime::jsonrpc::Request,
        cx: mcp_runtime::transport::RequestContext,
    ) -> mcp_runtime::BoxFuture<'_, mcp_runtime::Result<mcp_runtime::jsonrpc::Response>> {
        if request.method == "tools/call" {
            self.calls.lock().unwrap().push(request.params.clone());
        }
        self.inner.request(request, cx)
    }
    fn notify<'a>(
        &'a self,
        n: mcp_runtime::jsonrpc::Notification,
        version: &'a str,
    ) -> mcp_runtime::BoxFuture<'a, mcp_runtime::Result<()>> {
        self.inner.notify(n, version)
    }
    fn cancel<'a>(
        &'a self,
        n: mcp_runtime::jsonrpc::Notification,
        version: &'a str,
    ) -> mcp_runtime::BoxFuture<'a, mcp_runtime::Result<()>> {
        self.inner.cancel(n, version)
    }
    fn close(&self) -> mcp_runtime::BoxFuture<'_, mcp_runtime::Result<()>> {
        self.inner.close()
    }
    fn connect<'a>(
        &'a self,
        incoming: &'a mcp_runtime::transport::Incoming,
    ) -> mcp_runtime::BoxFuture<'a, mcp_runtime::Result<()>> {
        self.inner.connect(incoming)
    }
    fn answers_every_request(&self) -> bool {
        self.inner.answers_every_request()
    }
    fn listen_ready(&self) -> mcp_runtime::BoxFuture<'_, mcp_runtime::Result<()>> {
        self.inner.listen_ready()
    }
    fn era_hint(&self) -> Option<mcp_runtime::client::Era> {
        self.inner.era_hint()
    }
    fn mirrors_param_headers(&self) -> bool {
        self.inner.mirrors_param_headers()
    }
}

/// The tool results in a request the model was sent: (call id, content, is_error).
fn tool_results(body: &serde_json::Value) -> Vec<(String, String, bool)> {
    let messages = body["messages"].as_array().unwrap();
    if let Some(last) = messages.last().filter(|m| m["content"].is_array()) {
        // Messages: the tool results are blocks of the last user turn.
        let results: Vec<_> = last["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| {
                let content = match &b["content"] {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (
                    b["tool_use_id"].as_str().unwrap().to_owned(),
                    content,
                    b["is_error"].as_bool().unwrap_or(false),
                )
            })
            .collect();
        if !results.is_empty() {
            return results;
        }
    }
    // Chat Completions: `tool` messages (no error flag on this wire).
    messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
                false,
            )
        })
        .collect()
}

/// Tool arguments a model sends that are not JSON (`{"path": `) reach no tool — neither
/// a server's nor a function tool's: the model's next request carries an error result
/// saying so, and the run goes on — on both wires, streamed or not. A counter on the
/// real filesystem server's wire, and the function tool's own record, see no call for
/// them; the positive control: the same counter and record see the valid call of the
/// same turn, whose result (the file, `noted`) the model also gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_that_are_not_json_reach_no_server() {
    use std::sync::{Arc, Mutex};
    let dir = scratch("broken-arguments");
    let file = dir.join("a.txt");
    std::fs::write(&file, "CONTENT-OF-A-71c2").unwrap();
    let turn = json!({"tool_calls": [
        {"name": "read_text_file", "raw_arguments": "{\"path\": "},
        {"name": "read_text_file", "arguments": {"path": file}},
        {"name": "note", "raw_arguments": "{\"text\": \"hi"},
        {"name": "note", "arguments": {"text": "hi"}}
    ]});
    let calls = Arc::new(Mutex::new(Vec::new()));
    let noted = Arc::new(Mutex::new(Vec::new()));
    let bin = super::peers()
        .join("npm/node_modules/.bin/mcp-server-filesystem")
        .display()
        .to_string();
    for anthropic in [false, true] {
        for stream in [false, true] {
            let case = format!("anthropic {anthropic}, streamed {stream}");
            let model = ModelServer::scripted(&dir, json!([turn, {"text": "done"}]));
            let (bin, root, seen) = (bin.clone(), dir.display().to_string(), calls.clone());
            let server = mcp_agent::runtime::Mcp::builder("fs")
                .transport(move || {
                    Ok(CountingCalls {
                        inner: mcp_runtime::StdioTransport::new(
                            mcp_runtime::StdioConfig::new(bin.clone()).arg(root.clone()),
                        ),
                        calls: seen.clone(),
                    })
                })
                .build()
                .unwrap();
            let record = noted.clone();
            let note = mcp_agent::FunctionTool::with_schema(
                "note",
                "Notes a text",
                json!({"type": "object", "properties": {"text": {"type": "string"}}}),
                move |args| {
                    record.lock().unwrap().push(args);
                    async { Ok(json!("noted")) }
                },
            );
            let builder = Agent::builder()
                .allow(["read_text_file", "note"])
                .server(server)
                .tool(note);
            let builder = if anthropic {
                builder.model(
                    mcp_agent::Messages::new(format!("http://127.0.0.1:{}", model.port), "m")
                        .unwrap()
                        .streaming(stream),
                )
            } else {
                builder.model(
                    ChatCompletions::new(model.url(), "m")
                        .unwrap()
                        .streaming(stream),
                )
            };
            let agent = builder.build().unwrap();
            let counted = calls.lock().unwrap().len();
            let recorded = noted.lock().unwrap().len();
            let outcome = agent.run("read a").await.unwrap();
            let Outcome::Finished { text, .. } = &outcome else {
                panic!("{case}: {outcome:?}")
            };
            assert_eq!(text, "done", "{case}");
            let sent = calls.lock().unwrap()[counted..].to_vec();
            assert_eq!(sent.len(), 1, "{case}: {sent:?}");
            assert_eq!(sent[0]["name"], "read_text_file", "{case}");
            assert_eq!(sent[0]["arguments"]["path"], json!(file), "{case}");
            let ran = noted.lock().unwrap()[recorded..].to_vec();
            assert_eq!(ran, [json!({"text": "hi"})], "{case}");
            let requests = model.requests();
            assert_eq!(requests.len(), 2, "{case}");
            let results = tool_results(&requests[1]["body"]);
            assert_eq!(results.len(), 4, "{case}: {results:?}");
            for (n, (id, content, is_error)) in results.iter().enumerate() {
                assert!(id.ends_with(&format!("_0_{n}")), "{case}: {results:?}");
                if n % 2 == 0 {
                    assert!(
                        content.contains("was not run: the arguments were not valid JSON"),
                        "{case}: {results:?}"
                    );
                } else {
                    let expected = ["CONTENT-OF-A-71c2", "noted"][n / 2];
                    assert!(content.contains(expected), "{case}: {results:?}");
                }
                if anthropic {
                    assert_eq!(*is_error, n % 2 == 0, "{case}: {results:?}");
                }
            }
            agent.close().await.unwrap();
        }
    }
}
