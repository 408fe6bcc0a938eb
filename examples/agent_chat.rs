//! A conversation with an agent in a terminal: each line you type is a turn of one
//! conversation (the model sees everything said so far); the answer streams as it is
//! written; a call that needs your approval is asked inline, `y`/`N`, and a server's
//! request for input is answered inline (a JSON object of its fields).
//!
//! ```sh
//! AGENT_PROVIDER=openai AGENT_MODEL=<id> OPENAI_BASE_URL=http://localhost:11434/v1 [OPENAI_API_KEY=…] \
//!   cargo run -p examples --example agent_chat -- [--store FILE] DIR
//! ```
//!
//! It attaches `@modelcontextprotocol/server-filesystem` on DIR: reading runs, anything
//! else asks you first (`Mode::Approve`). An empty line or end of input ends it; the
//! conversation stays in `./.mcp-agent/chat.sqlite3` (or `--store FILE`); its run id is
//! printed at the end (`run=<RUN_ID>` on stderr: `agent_filesystem --continue` takes it
//! up).

use std::io::{BufRead as _, Write as _};
use std::process::ExitCode;

use mcp_agent::{Agent, Decision, Mode, Model, Outcome, PendingWait, SqliteRunStore};
use mcp_runtime::{InputResponse, Mcp};

const SERVER: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

fn print_piece(piece: &str) {
    let mut out = std::io::stdout();
    let _ = out.write_all(piece.as_bytes());
    let _ = out.flush();
}

fn model() -> Result<Box<dyn Model>, String> {
    examples::model_from_env(Some(print_piece))
}

/// One line from the terminal; `None` at the end of input.
fn read_line() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

async fn chat() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut store = ".mcp-agent/chat.sqlite3".to_owned();
    if let Some(i) = args.iter().position(|a| a == "--store") {
        if i + 1 >= args.len() {
            return Err("--store needs a file".into());
        }
        store = args.remove(i + 1);
        args.remove(i);
    }
    let [dir] = <[String; 1]>::try_from(args)
        .map_err(|_| "give the folder to work in: agent_chat [--store FILE] DIR")?;
    let files = Mcp::builder("fs")
        .command(["npx", "-y", SERVER, &dir])
        .build()
        .map_err(|e| e.to_string())?;
    let agent = Agent::builder()
        .model(model()?)
        .mode(Mode::Approve)
        .allow([
            "read_text_file",
            "list_directory",
            "directory_tree",
            "search_files",
        ])
        .server(files)
        .store(SqliteRunStore::open(&store).map_err(|e| e.to_string())?)
        .build()
        .map_err(|e| e.to_string())?;
    let mut conversation = agent.conversation();
    loop {
        print!("> ");
        let _ = std::io::stdout().flush();
        let Some(line) = read_line().filter(|l| !l.is_empty()) else {
            break;
        };
        let mut outcome = conversation.send(line).await.map_err(|e| e.to_string())?;
        // Calls that need a person: asked here, decided together, and on.
        loop {
            let (run_id, calls) = match &outcome {
                Outcome::ApprovalRequired { run_id, calls, .. }
                | Outcome::InputRequired { run_id, calls, .. } => (run_id.clone(), calls.clone()),
                Outcome::Truncated { .. } => {
                    println!("\n(the answer was cut at the model's output limit: say \"go on\")");
                    break;
                }
                _ => {
                    println!();
                    break;
                }
            };
            let mut decisions = Vec::new();
            let who = std::env::var("USER").unwrap_or_else(|_| "you".into());
            for call in calls {
                // Server text goes to a terminal: no control characters.
                let clean = |t: &str| -> String { t.chars().filter(|c| !c.is_control()).collect() };
                let tool = clean(&call.tool);
                let decision = match &call.waits {
                    PendingWait::Input { requests } => {
                        // The server asks for input: each request answered as a JSON
                        // object of its fields (an empty line declines).
                        let mut answers = Vec::new();
                        for (key, request) in requests {
                            print!(
                                "\n{tool} asks: {} — answer as JSON (empty: decline) ",
                                clean(&request.message)
                            );
                            let _ = std::io::stdout().flush();
                            let line = read_line().unwrap_or_default();
                            let answer = match serde_json::from_str::<serde_json::Value>(&line) {
                                Ok(v) if !line.is_empty() => InputResponse::accept(v),
                                _ => InputResponse::Decline,
                            };
                            answers.push((key.clone(), answer));
                        }
                        Decision::answer(who.clone(), answers)
                    }
                    _ => {
                        print!("\nallow {tool} {}? [y/N] ", call.arguments);
                        let _ = std::io::stdout().flush();
                        if read_line().is_some_and(|a| a.eq_ignore_ascii_case("y")) {
                            Decision::approve(who.clone())
                        } else {
                            Decision::deny(who.clone())
                        }
                    }
                };
                decisions.push((call.decision.clone(), decision));
            }
            outcome = agent
                .decide(&run_id, decisions)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    if let Some(run) = conversation.run_id() {
        eprintln!("run={run}");
    }
    agent.close().await.map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    match chat().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent_chat: {e}");
            ExitCode::FAILURE
        }
    }
}
