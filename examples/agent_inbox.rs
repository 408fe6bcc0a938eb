//! An approval inbox in the browser for an agent on the official filesystem MCP
//! server, under `approve` mode: reading runs, anything else waits for a person.
//!
//! ```sh
//! AGENT_PROVIDER=openai AGENT_MODEL=<id> OPENAI_BASE_URL=http://localhost:11434/v1 [OPENAI_API_KEY=…] \
//!   cargo run -p examples --example agent_inbox -- --listen 127.0.0.1:8080 [--store URL] [--principal NAME] [--allow-remote] DIR
//! ```
//!
//! Open `http://127.0.0.1:8080/`: start a run, see each call that waits (server,
//! tool, its description, the arguments), approve, deny with a message, edit the
//! arguments or always allow the tool, and watch the run go on. Everyone who opens the
//! page is `--principal` (default `$USER`): a real application takes the principal
//! from its own sign-in (`WebOptions::principal`). The page listens on loopback only
//! unless `--allow-remote` is given (it has no sign-in of its own). A worker in the
//! same process continues each run once its calls are decided; runs wait in
//! `./.mcp-agent/runs.sqlite3` unless `--store` names another SQLite file or a
//! PostgreSQL database (`postgres://…`, with `--features postgres`), where workers
//! of other processes may continue them too.

use std::net::SocketAddr;
use std::process::ExitCode;

use mcp_agent::web::{router, WebOptions};
use mcp_agent::{Agent, Mode, Principal, WorkerOptions};
use mcp_runtime::Mcp;

const SERVER: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

struct Args {
    listen: SocketAddr,
    store: String,
    principal: String,
    dir: String,
}

fn parse() -> Result<Args, String> {
    let (mut listen, mut store, mut principal, mut remote, mut dir) =
        (None, None, None, false, None);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| it.next().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "--listen" => listen = Some(value("--listen")?),
            "--store" => store = Some(value("--store")?),
            "--principal" => principal = Some(value("--principal")?),
            "--allow-remote" => remote = true,
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            _ if dir.is_none() => dir = Some(arg),
            _ => return Err("give one DIR".into()),
        }
    }
    let listen = listen.ok_or("give --listen ADDRESS:PORT (e.g. 127.0.0.1:8080)")?;
    let listen: SocketAddr = listen
        .parse()
        .map_err(|_| format!("--listen {listen}: give an IP address and a port"))?;
    if !listen.ip().is_loopback() && !remote {
        return Err(format!(
            "--listen {listen} is reachable from other machines, and this page has no sign-in: \
             listen on 127.0.0.1, or add --allow-remote behind a proxy that signs people in"
        ));
    }
    let principal = principal
        .or_else(|| std::env::var("USER").ok())
        .filter(|p| !p.is_empty())
        .ok_or("give --principal NAME ($USER is not set)")?;
    Ok(Args {
        listen,
        store: store.unwrap_or_else(|| ".mcp-agent/runs.sqlite3".into()),
        principal,
        dir: dir.ok_or("give the DIR the filesystem server works on")?,
    })
}

async fn main_inner() -> Result<(), String> {
    let args = parse()?;
    let model = examples::model_from_env(None)?;
    let runs = examples::run_store(&args.store).await?;
    let files = Mcp::builder("fs")
        .command(["npx", "-y", SERVER, &args.dir])
        .build()
        .map_err(|e| e.to_string())?;
    let agent = Agent::builder()
        .model(model)
        .server(files)
        .store(runs)
        .mode(Mode::Approve)
        .allow(["read_text_file", "list_directory"])
        .build()
        .map_err(|e| e.to_string())?;
    let who = Principal::new(args.principal);
    let options = WebOptions::new().principal(move |_| Some(who.clone()));
    let app = axum::Router::new().merge(router(agent.clone(), options));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("--listen {}: {e}", args.listen))?;
    println!("inbox on http://{}/ (Ctrl-C stops it)", args.listen);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // Decided runs go on here (a worker of another process with the store may too).
    let worker = agent.worker(WorkerOptions::new());
    let mut stopped_worker = stopped.clone();
    let work = tokio::spawn(worker.run(async move {
        let _ = stopped_worker.wait_for(|s| *s).await;
    }));
    let mut stopped_server = stopped;
    let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = stopped_server.wait_for(|s| *s).await;
    });
    let serving = tokio::spawn(async move { serve.await });
    let _ = tokio::signal::ctrl_c().await;
    let _ = stop.send(true);
    // Open event streams keep their connections: they get two seconds to go.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), serving).await;
    if let Ok(Err(e)) = work.await {
        eprintln!("agent_inbox: the worker stopped: {e}");
    }
    agent.close().await.map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    match main_inner().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent_inbox: {e}");
            ExitCode::FAILURE
        }
    }
}
