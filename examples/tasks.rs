//! Starts a long tool call in the background, keeps its id, listens to its status and
//! waits for its result — then picks the same task up again by its id, as another
//! process (or this one after a restart) would.
//!
//! ```sh
//! cargo run -p examples --example tasks          # server-everything via npx: `simulate-research-query`
//! cargo run -p examples --example tasks -- COMMAND… TOOL '{json arguments}'
//! ```
//! With no command, it runs server-everything (npx), whose `simulate-research-query`
//! runs only as a task (2025-11-25). With a command, it runs that stdio server and the
//! tool given (a 2026-07-28 server needs the tasks extension, which this declares).

use mcp_runtime::{client::Started, Change, Client, StdioConfig};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let (argv, tool, arguments) = if args.len() >= 3 {
        let arguments = serde_json::from_str(&args.pop().unwrap_or_default())?;
        let tool = args.pop().unwrap_or_default();
        (args, tool, arguments)
    } else {
        let argv = [
            "npx",
            "-y",
            "@modelcontextprotocol/server-everything@2026.8.31",
            "stdio",
        ];
        (
            argv.map(String::from).to_vec(),
            "simulate-research-query".to_owned(),
            json!({"topic": "tides"}),
        )
    };
    let client = Client::builder()
        .extension("io.modelcontextprotocol/tasks", json!({}))
        .after_change(|change| {
            if let Change::Task(status) = change {
                println!(
                    "  task {}: {:?} {}",
                    status.id,
                    status.state,
                    status.message.as_deref().unwrap_or("")
                );
            }
        })
        .stdio(StdioConfig::from_argv(argv)?)?;

    // A 2025-11-25 server says which tools run as tasks in its list: list them first
    // (a call never lists them itself).
    client.tools().await?;
    let task = match client.start(&tool, arguments).await? {
        Started::Task(task) => task,
        Started::Done(result) => {
            println!("the server ran `{tool}` at once: {}", result.text());
            return Ok(client.close().await?);
        }
    };
    println!("started `{tool}` as task {}", task.id());
    client.listen_for(&[], &[task.id()]).await?;
    let result = task.wait().await?;
    println!("result: {}", result.text());

    // Anyone with the id can ask about it (while the server keeps it).
    let again = client.task(task.id());
    println!("status by id: {:?}", again.status().await?.state);
    client.close().await?;
    Ok(())
}
