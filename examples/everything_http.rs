//! server-everything over Streamable HTTP, with typed methods from its snapshot.
//! The example starts the server itself (npx, port 3917) and stops it at the end.
//!
//! Run with `cargo run -p examples --example everything_http` (needs Node.js and npx).

use std::time::Duration;

use mcp_runtime::mcp;

#[mcp(
    url = "http://127.0.0.1:3917/mcp",
    snapshot = "everything",
    header("X-Example", "everything-http"),
    only(echo, "get-sum", "get-structured-content"),
    timeout = 30
)]
pub struct EverythingHttp;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut server = std::process::Command::new("npx")
        .args([
            "-y",
            "@modelcontextprotocol/server-everything@2026.8.31",
            "streamableHttp",
        ])
        .env("PORT", "3917")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let outcome = run().await;
    let _ = server.kill();
    let _ = server.wait();
    outcome
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    // npx may first need to fetch the package.
    for _ in 0..600 {
        if std::net::TcpStream::connect(("127.0.0.1", 3917)).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let everything = EverythingHttp::new();
    let echoed = everything
        .echo(everything_http_tools::Echo {
            message: "over HTTP".into(),
        })
        .await?;
    println!("{}", echoed.text());
    let sum = everything
        .get_sum(everything_http_tools::GetSum { a: 20.0, b: 22.0 })
        .await?;
    println!("{}", sum.text());
    let weather = everything
        .get_structured_content(everything_http_tools::GetStructuredContent {
            location: Default::default(),
        })
        .await?;
    if let Some(w) = weather.output {
        println!("{}°, {}", w.temperature, w.conditions);
    }
    everything.mcp().close().await?;
    Ok(())
}
