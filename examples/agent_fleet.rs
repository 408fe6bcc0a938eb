//! The "web" side of an application with workers: one long-lived process starts many
//! runs at once and records a person's decision on each run that waits for one; the
//! workers (`agent_filesystem --worker DIR` processes on the same store) continue them.
//!
//! ```sh
//! AGENT_PROVIDER=openai AGENT_MODEL=<id> OPENAI_BASE_URL=http://localhost:11434/v1 \
//!   cargo run -p examples --features postgres --example agent_fleet -- \
//!   --store postgres://… --runs 100 [--prefix r] [--tenant NAME] [--approve-every 3] [--concurrency 8] DIR
//! ```
//!
//! Run `n` (1 ≤ n ≤ `--runs`) is the prompt `<prefix><n>` on `@modelcontextprotocol/server-filesystem`
//! on DIR, mode `approve`, kept with `--tenant`. Every `--approve-every`-th run (0: none)
//! may only read (`read_text_file`), so a write suspends it for a decision, which this
//! process records at once (`Agent::record_decision`: nothing runs here, a worker goes
//! on); the other runs may also write (`edit_file`) and finish here. One line per run
//! on stdout: `done name=<NAME> run=<RUN_ID>`, `decided name=<NAME> run=<RUN_ID>
//! at=<SECONDS SINCE THE EPOCH>` (when the decision was kept), or `failed name=<NAME>
//! run=<RUN_ID>` (the model kept failing past the retry policy: the run is kept failed,
//! and a worker retries it when its retry is due). Any other end is named on stderr,
//! and the process exits non-zero at the end.
//! `tests/fleet.sh` drives it.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use mcp_agent::{Agent, ChatCompletions, Decision, Mode, Outcome, RunOptions, RunStore};
use mcp_runtime::Mcp;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

const SERVER: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

struct Args {
    store: String,
    runs: u32,
    prefix: String,
    tenant: Option<String>,
    approve_every: u32,
    concurrency: usize,
    dir: String,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        store: ".mcp-agent/runs.sqlite3".into(),
        runs: 10,
        prefix: "r".into(),
        tenant: None,
        approve_every: 3,
        concurrency: 8,
        dir: String::new(),
    };
    let mut it = std::env::args().skip(1);
    let mut dir = None;
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--store" => a.store = value("--store")?,
            "--prefix" => a.prefix = value("--prefix")?,
            "--tenant" => a.tenant = Some(value("--tenant")?),
            "--runs" => a.runs = number(&value("--runs")?, "--runs")?,
            "--approve-every" => {
                a.approve_every = number(&value("--approve-every")?, "--approve-every")?
            }
            "--concurrency" => {
                a.concurrency = number(&value("--concurrency")?, "--concurrency")?.max(1) as usize
            }
            other if other.starts_with("--") => return Err(format!("unknown flag {other}")),
            _ if dir.is_none() => dir = Some(arg),
            _ => return Err("give one DIR".into()),
        }
    }
    a.dir = dir.ok_or("give DIR")?;
    Ok(a)
}

fn number(text: &str, name: &str) -> Result<u32, String> {
    text.parse()
        .map_err(|_| format!("{name} takes a number, not {text:?}"))
}

/// An agent on its own filesystem server, allowed `allow` without asking.
fn agent(runs: &Arc<dyn RunStore>, dir: &str, allow: &[&str]) -> Result<Agent, String> {
    let id = std::env::var("AGENT_MODEL").map_err(|_| "set AGENT_MODEL to the model's id")?;
    let base =
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".into());
    let mut model = ChatCompletions::new(base, id).map_err(|e| e.to_string())?;
    if let Ok(key) = std::env::var("OPENAI_API_KEY") {
        model = model.api_key(key);
    }
    let files = Mcp::builder("fs")
        .command(["npx", "-y", SERVER, dir])
        .build()
        .map_err(|e| e.to_string())?;
    Agent::builder()
        .model(model)
        .server(files)
        .store(runs.clone())
        .mode(Mode::Approve)
        .allow(allow.iter().copied())
        .build()
        .map_err(|e| e.to_string())
}

/// Run `name` on `agent`; its stdout line, or why it went wrong.
async fn one(agent: Agent, name: String, options: RunOptions) -> Result<String, String> {
    let handle = agent
        .start(name.as_str(), options)
        .await
        .map_err(|e| format!("{name}: {e}"))?;
    let run = handle.run_id().to_owned();
    let outcome = match handle.outcome().await {
        Ok(outcome) => outcome,
        // The run is kept failed; a transient failure (the model's 429s and 5xx past
        // the retry policy) is retried later by a worker.
        Err(e) if e.is_model() => return Ok(format!("failed name={name} run={run}")),
        Err(e) => return Err(format!("{name} (run {run}): {e}")),
    };
    match outcome {
        Outcome::Finished { run_id, .. } => Ok(format!("done name={name} run={run_id}")),
        Outcome::ApprovalRequired { run_id, calls, .. } => {
            for call in calls {
                agent
                    .record_decision(&run_id, &call.decision, Decision::approve("fleet"))
                    .await
                    .map_err(|e| format!("{name}: the decision was not recorded: {e}"))?;
            }
            let at = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_err(|e| e.to_string())?
                .as_secs_f64();
            Ok(format!("decided name={name} run={run_id} at={at:.6}"))
        }
        other => Err(format!("{name} neither finished nor suspended: {other:?}")),
    }
}

async fn main_inner() -> Result<bool, String> {
    let args = parse()?;
    let runs = examples::run_store(&args.store).await?;
    let open = agent(&runs, &args.dir, &["read_text_file", "edit_file"])?;
    let gated = agent(&runs, &args.dir, &["read_text_file"])?;
    let places = Arc::new(Semaphore::new(args.concurrency));
    let mut tasks = JoinSet::new();
    for n in 1..=args.runs {
        let place = places
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let gate = args.approve_every > 0 && n % args.approve_every == 0;
        let agent = if gate { gated.clone() } else { open.clone() };
        let mut options = RunOptions::new();
        if let Some(t) = &args.tenant {
            options = options.tenant(t.clone());
        }
        let name = format!("{}{n}", args.prefix);
        tasks.spawn(async move {
            let line = one(agent, name, options).await;
            drop(place);
            line
        });
    }
    let mut all_well = true;
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(Ok(line)) => println!("{line}"),
            Ok(Err(e)) => {
                eprintln!("agent_fleet: {e}");
                all_well = false;
            }
            Err(e) => {
                eprintln!("agent_fleet: a run's task ended: {e}");
                all_well = false;
            }
        }
    }
    open.close().await.map_err(|e| e.to_string())?;
    gated.close().await.map_err(|e| e.to_string())?;
    Ok(all_well)
}

#[tokio::main]
async fn main() -> ExitCode {
    match main_inner().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("agent_fleet: {e}");
            ExitCode::FAILURE
        }
    }
}
