//! A minimal, fast MCP server for the benchmark, so the clients' costs are what is
//! measured: `initialize` (2024-11-05 … 2025-11-25) and `server/discover`
//! (2026-07-28), `tools/list`, and two tools — `echo {message}` and `big {bytes}` (a
//! text result of that many bytes). Over stdio (`fastserver stdio`) or HTTP
//! (`fastserver http <port>`: JSON replies on POST /mcp, a session id from
//! `initialize`, 405 for GET). One parse per message; nothing else.

use std::convert::Infallible;
use std::io::{BufRead, Write};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};

const LEGACY: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const MODERN: &str = "2026-07-28";

/// The answer to one message (`None` for a notification).
fn answer(msg: &Value) -> Option<Value> {
    let id = msg.get("id")?.clone();
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let modern = params
        .pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
        .is_some();
    let info = json!({"name": "fastserver", "version": "1.0.0"});
    let mut result = match method {
        "initialize" => {
            let asked = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or(LEGACY[0]);
            let version = if LEGACY.contains(&asked) {
                asked
            } else {
                LEGACY[0]
            };
            json!({"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info})
        }
        "server/discover" => json!({
            "supportedVersions": [MODERN],
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": info},
        }),
        "ping" => json!({}),
        "tools/list" => json!({"tools": [
            {"name": "echo", "description": "Echoes the message.",
             "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
            {"name": "big", "description": "Returns that many bytes of text.",
             "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]}},
        ]}),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params.get("arguments").cloned().unwrap_or(Value::Null);
            match name {
                "echo" => {
                    let m = args.get("message").and_then(Value::as_str).unwrap_or("");
                    json!({"content": [{"type": "text", "text": m}], "isError": false})
                }
                "big" => {
                    let n = args.get("bytes").and_then(Value::as_u64).unwrap_or(0) as usize;
                    json!({"content": [{"type": "text", "text": "x".repeat(n)}], "isError": false})
                }
                _ => {
                    return Some(
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "unknown tool"}}),
                    )
                }
            }
        }
        _ => {
            return Some(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
            )
        }
    };
    if modern {
        if let Value::Object(m) = &mut result {
            m.insert("resultType".into(), json!("complete"));
        }
    }
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn stdio() {
    let mut input = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin());
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut line = Vec::with_capacity(64 * 1024);
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if let Some(reply) = answer(&msg) {
            let _ = serde_json::to_writer(&mut out, &reply);
            let _ = out.write_all(b"\n");
        }
        // Flush when no more input is already waiting: replies to pipelined requests
        // go out together.
        if input.buffer().is_empty() {
            let _ = out.flush();
        }
    }
}

async fn http(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, body: Bytes, session: bool| {
        let mut r = Response::builder()
            .status(status)
            .header("content-type", "application/json");
        if session {
            r = r.header("mcp-session-id", "fastserver-session");
        }
        Ok(r.body(Full::new(body)).unwrap_or_default())
    };
    match *req.method() {
        hyper::Method::POST => {}
        hyper::Method::DELETE => return reply(StatusCode::OK, Bytes::new(), false),
        _ => return reply(StatusCode::METHOD_NOT_ALLOWED, Bytes::new(), false),
    }
    let Ok(body) = req.into_body().collect().await else {
        return reply(StatusCode::BAD_REQUEST, Bytes::new(), false);
    };
    let Ok(msg) = serde_json::from_slice::<Value>(&body.to_bytes()) else {
        return reply(StatusCode::BAD_REQUEST, Bytes::new(), false);
    };
    let init = msg.get("method").and_then(Value::as_str) == Some("initialize");
    match answer(&msg) {
        Some(a) => reply(
            StatusCode::OK,
            Bytes::from(serde_json::to_vec(&a).unwrap_or_default()),
            init,
        ),
        None => reply(StatusCode::ACCEPTED, Bytes::new(), false),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("stdio") => stdio(),
        Some("http") => {
            let port: u16 = args.get(2).and_then(|p| p.parse().ok()).unwrap_or(0);
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                    .await
                    .expect("bind");
                println!("READY {}", listener.local_addr().expect("addr").port());
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(async move {
                        let io = hyper_util::rt::TokioIo::new(stream);
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, hyper::service::service_fn(http))
                            .await;
                    });
                }
            });
        }
        _ => {
            eprintln!("usage: fastserver stdio | fastserver http <port>");
            std::process::exit(2);
        }
    }
}
