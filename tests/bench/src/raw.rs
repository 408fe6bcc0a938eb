//! The floor every client is measured against: the same calls written and read by
//! hand over a pipe and over HTTP, no client library.

use super::*;

pub(super) fn raw_line(id: usize, era: Era, tool: &str, args: Value) -> Vec<u8> {
    let mut params = json!({"name": tool, "arguments": args});
    if era == Era::Modern {
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}});
    }
    let mut v = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}),
    )
    .unwrap_or_default();
    v.push(b'\n');
    v
}

pub(super) fn raw_stdio(kind: Kind, era: Era, s: Sizes) -> Res<Value> {
    let start = Instant::now();
    let mut child = Command::new(fastserver())
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or("stdin")?;
    let mut out = BufReader::with_capacity(64 * 1024, child.stdout.take().ok_or("stdout")?);
    let mut line = Vec::new();
    if era == Era::Legacy {
        stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"raw\",\"version\":\"0\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")?;
        out.read_until(b'\n', &mut line)?;
    }
    let n = match kind {
        Kind::Seq => s.seq,
        Kind::Conc => s.conc,
        Kind::Cold | Kind::Big => 1,
    };
    let lines: Vec<Vec<u8>> = (1..=n)
        .map(|i| match kind {
            Kind::Big => raw_line(i, era, "big", json!({"bytes": s.big})),
            _ => raw_line(i, era, "echo", json!({"message": "hi"})),
        })
        .collect();
    let (t0, c0) = (Instant::now(), cpu());
    match kind {
        Kind::Conc => {
            let mut sent = 0;
            let mut got = 0;
            while got < n {
                while sent < n && sent - got < IN_FLIGHT {
                    stdin.write_all(&lines[sent])?;
                    sent += 1;
                }
                line.clear();
                out.read_until(b'\n', &mut line)?;
                got += 1;
            }
        }
        _ => {
            for l in &lines {
                stdin.write_all(l)?;
                line.clear();
                out.read_until(b'\n', &mut line)?;
                if line.is_empty() {
                    return Err("the server closed its stdout".into());
                }
            }
        }
    }
    let (wall, used) = (t0.elapsed(), cpu() - c0);
    let wall = if kind == Kind::Cold {
        start.elapsed()
    } else {
        wall
    };
    drop(stdin);
    let _ = child.wait();
    Ok(report(kind, n, wall, used))
}

pub(super) fn raw_http(kind: Kind, era: Era, url: &str, s: Sizes) -> Res<Value> {
    use http_body_util::{BodyExt, Full};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let url = url.to_owned();
    rt.block_on(async move {
        let start = Instant::now();
        let client: hyper_util::client::legacy::Client<_, Full<bytes::Bytes>> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        let post = |body: Vec<u8>, session: Option<&str>, method: &str| {
            let mut b = hyper::Request::post(url.as_str())
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream");
            match era {
                Era::Modern => {
                    b = b
                        .header("mcp-protocol-version", "2026-07-28")
                        .header("mcp-method", method)
                }
                Era::Legacy => {
                    b = b.header("mcp-protocol-version", "2025-11-25");
                    if let Some(s) = session {
                        b = b.header("mcp-session-id", s);
                    }
                }
            }
            b.body(Full::new(bytes::Bytes::from(body)))
        };
        let mut session = None;
        if era == Era::Legacy {
            let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
            let r = client.request(post(init.to_vec(), None, "initialize")?).await?;
            session = r
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            r.into_body().collect().await?;
        }
        let n = match kind {
            Kind::Seq => s.seq,
            Kind::Conc => s.conc,
            Kind::Cold | Kind::Big => 1,
        };
        let bodies: Vec<Vec<u8>> = (1..=n)
            .map(|i| {
                let mut l = match kind {
                    Kind::Big => raw_line(i, era, "big", json!({"bytes": s.big})),
                    _ => raw_line(i, era, "echo", json!({"message": "hi"})),
                };
                l.pop();
                l
            })
            .collect();
        let (t0, c0) = (Instant::now(), cpu());
        if kind == Kind::Conc {
            let per = n / IN_FLIGHT;
            let mut tasks = Vec::new();
            let mut bodies = bodies.into_iter();
            for _ in 0..IN_FLIGHT {
                let mine: Vec<_> = bodies.by_ref().take(per).collect();
                let reqs: Vec<_> = mine
                    .into_iter()
                    .map(|b| post(b, session.as_deref(), "tools/call"))
                    .collect::<Result<_, _>>()?;
                let client = client.clone();
                tasks.push(tokio::spawn(async move {
                    for r in reqs {
                        let resp = client.request(r).await?;
                        resp.into_body().collect().await?;
                    }
                    Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
                }));
            }
            for t in tasks {
                t.await??;
            }
            let used = cpu() - c0;
            return Ok(report(kind, per * IN_FLIGHT, t0.elapsed(), used));
        }
        for b in bodies {
            let resp = client
                .request(post(b, session.as_deref(), "tools/call")?)
                .await?;
            resp.into_body().collect().await?;
        }
        let (wall, used) = (t0.elapsed(), cpu() - c0);
        let wall = if kind == Kind::Cold { start.elapsed() } else { wall };
        Ok(report(kind, n, wall, used))
    })
}

// ---------------------------------------------------------------- mcp-runtime
