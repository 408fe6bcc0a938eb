//! An agent on the official filesystem MCP server, gated: read tools on the allow-list
//! run, anything else is denied (read_only), asked about (ask), or suspends the run for
//! a person's decision (approve).
//!
//! ```sh
//! AGENT_PROVIDER=openai AGENT_MODEL=<id> OPENAI_BASE_URL=http://localhost:11434/v1 [OPENAI_API_KEY=…] \
//!   cargo run -p examples --example agent_filesystem -- [--mode read_only|ask|approve|auto] [--allow NAME]... [--store URL] [--tenant NAME] DIR "PROMPT"
//! cargo run -p examples --example agent_filesystem -- [--store URL] --resume RUN_ID --decision DECISION_ID (--approve | --deny [--message TEXT])
//! cargo run -p examples --example agent_filesystem -- [--store URL] [--stream] --continue RUN_ID "PROMPT"   # a follow-up in the same conversation (policy as stored with the run); prints the answer
//! cargo run -p examples --example agent_filesystem -- ... --stream DIR "PROMPT"                               # streamed text to stdout as it arrives
//! cargo run -p examples --example agent_filesystem -- [--store URL] --resume RUN_ID --decision DECISION_ID --approve --record   # records the decision and exits; a worker runs it
//! cargo run -p examples --example agent_filesystem -- [--store URL] [--mode M] [--allow NAME]... --worker DIR   # a worker on the store until Ctrl-C
//! cargo run -p examples --example agent_filesystem -- ... --output-schema FILE DIR "PROMPT"                   # the answer as one line of JSON matching the JSON Schema in FILE, or exit 1 saying why not
//! cargo run -p examples --example agent_filesystem -- [--store URL] --status RUN_ID                              # prints status=<running|suspended|finished|failed|cancelled> (suspended: and a `pending run=… tool=… decision=…` line per call)
//! ```
//!
//! It attaches `@modelcontextprotocol/server-filesystem` on DIR (tool names are the
//! server's own). The default mode is `read_only`; without `--allow` the allow-list is
//! `read_text_file` and `list_directory`. A resume goes on under the mode and
//! allow-list the run started with; `--mode`/`--allow` given with `--resume` may only
//! tighten them (a looser policy is refused, naming what differs). It prints the model's final answer; when the
//! run suspends it prints one line per pending call,
//! `suspended run=<RUN_ID> tool=<NAME> decision=<DECISION_ID>` (with ` tenant=<NAME>`
//! at the end when the run belongs to one: `--tenant NAME` on a new run keeps it with
//! the run), and exits 0. A resume
//! names the decision it makes; a stale, unknown or already used decision id exits
//! non-zero with the reason and changes nothing. `--deny --message TEXT` tells the
//! model why. A finished run prints `run=<RUN_ID>` on stderr, so it can be continued
//! (`--continue`, from any process with the store).
//! `--record` keeps the decision without running anything (it prints `recorded
//! run=<RUN_ID> decision=<DECISION_ID>`); `--worker DIR` continues, until Ctrl-C, the
//! runs of the store that are due — decided, held by a process that died, or whose
//! suspension expired — with the server on DIR (several workers may share a store).
//! Runs wait in `./.mcp-agent/runs.sqlite3` unless `--store` names another SQLite file
//! or a PostgreSQL database (`postgres://…`; build with `--features postgres`).

use std::path::PathBuf;
use std::process::ExitCode;

use mcp_agent::{
    Agent, Decision, Mode, Model, Outcome, OutputSpec, RunOptions, RunStatus, RunStore,
    WorkerOptions,
};
use mcp_runtime::Mcp;

const SERVER: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

struct Args {
    /// `--mode`, when given.
    mode: Option<String>,
    allow: Vec<String>,
    store: String,
    resume: Option<Resume>,
    /// `--continue RUN_ID`: a follow-up of that finished run.
    follow: Option<String>,
    stream: bool,
    /// `--worker DIR`: continue the store's due runs until Ctrl-C.
    worker: bool,
    /// `--status RUN_ID`: print where the run stands.
    status: Option<String>,
    dir: Option<String>,
    prompt: Option<String>,
    /// `--tenant NAME`: the tenant a new run belongs to.
    tenant: Option<String>,
    /// `--output-schema FILE`: the answer must be JSON matching this schema.
    output_schema: Option<String>,
}

struct Resume {
    run: String,
    decision: String,
    approve: bool,
    message: Option<String>,
    /// `--record`: keep the decision, run nothing.
    record: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        mode: None,
        allow: Vec::new(),
        store: ".mcp-agent/runs.sqlite3".into(),
        resume: None,
        follow: None,
        stream: false,
        worker: false,
        status: None,
        dir: None,
        prompt: None,
        tenant: None,
        output_schema: None,
    };
    let mut approve: Option<bool> = None;
    let mut resume: Option<String> = None;
    let mut decision: Option<String> = None;
    let mut message: Option<String> = None;
    let mut record = false;
    let mut rest = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| it.next().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "--mode" => a.mode = Some(value("--mode")?),
            "--allow" => a.allow.push(value("--allow")?),
            "--store" => a.store = value("--store")?,
            "--resume" => resume = Some(value("--resume")?),
            "--decision" => decision = Some(value("--decision")?),
            "--message" => message = Some(value("--message")?),
            "--continue" => a.follow = Some(value("--continue")?),
            "--stream" => a.stream = true,
            "--tenant" => a.tenant = Some(value("--tenant")?),
            "--output-schema" => a.output_schema = Some(value("--output-schema")?),
            "--worker" => a.worker = true,
            "--status" => a.status = Some(value("--status")?),
            "--record" => record = true,
            "--approve" => approve = Some(true),
            "--deny" => approve = Some(false),
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            _ => rest.push(arg),
        }
    }
    if message.is_some() && approve != Some(false) {
        return Err("--message goes with --deny".into());
    }
    if a.status.is_some() {
        return Ok(a);
    }
    if record && resume.is_none() {
        return Err("--record goes with --resume RUN_ID".into());
    }
    if a.worker {
        if resume.is_some() || a.follow.is_some() || rest.len() != 1 {
            return Err("--worker takes one DIR (and --store, --mode, --allow)".into());
        }
        a.dir = rest.pop();
        return Ok(a);
    }
    match (resume, decision, approve) {
        (Some(run), Some(decision), Some(approve)) => {
            a.resume = Some(Resume {
                run,
                decision,
                approve,
                message,
                record,
            })
        }
        (Some(_), None, _) => {
            return Err(
                "--resume needs --decision DECISION_ID (printed when the run suspended)".into(),
            )
        }
        (Some(_), _, None) => return Err("--resume needs --approve or --deny".into()),
        (None, Some(_), _) | (None, _, Some(_)) => {
            return Err("--decision, --approve and --deny go with --resume RUN_ID".into())
        }
        (None, None, None) if a.follow.is_some() => {
            if rest.len() != 1 {
                return Err("--continue RUN_ID takes one \"PROMPT\"".into());
            }
            a.prompt = rest.pop();
        }
        (None, None, None) => {
            if rest.len() != 2 {
                return Err("give DIR and \"PROMPT\"".into());
            }
            a.prompt = rest.pop();
            a.dir = rest.pop();
        }
    }
    if a.follow.is_some() && a.resume.is_some() {
        return Err("--continue and --resume do not go together".into());
    }
    if a.output_schema.is_some() && (a.resume.is_some() || a.worker || a.status.is_some()) {
        return Err("--output-schema goes with a new run or --continue".into());
    }
    if a.output_schema.is_some() && a.stream {
        return Err("--output-schema prints one line of JSON: it does not go with --stream".into());
    }
    if a.tenant.is_some() && (a.follow.is_some() || a.resume.is_some()) {
        return Err("--tenant goes with a new run (a run keeps the tenant it started with)".into());
    }
    // A new run's defaults. A resume or a follow-up states no policy unless --mode or
    // --allow is given: the run goes on under the one it started with (a stated one
    // may only be tighter).
    if a.resume.is_none() && a.follow.is_none() {
        a.mode.get_or_insert_with(|| "read_only".into());
        if a.allow.is_empty() {
            a.allow = vec!["read_text_file".into(), "list_directory".into()];
        }
    }
    Ok(a)
}

/// Streamed text goes to stdout as it arrives.
fn print_piece(piece: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout();
    let _ = out.write_all(piece.as_bytes());
    let _ = out.flush();
}

fn model(stream: bool) -> Result<Box<dyn Model>, String> {
    examples::model_from_env(stream.then_some(print_piece as fn(&str)))
}

/// Where the example remembers each run's folder, to attach the server on resume.
fn dir_file(store: &str, run: &str) -> PathBuf {
    if examples::is_postgres(store) {
        return PathBuf::from(format!(".mcp-agent/run-{run}.dir"));
    }
    let base = PathBuf::from(store.strip_prefix("sqlite://").unwrap_or(store));
    base.with_file_name(format!("run-{run}.dir"))
}

/// The decision `--resume` gives, by `$USER`.
fn decision_of(r: &Resume) -> Decision {
    let who = std::env::var("USER").unwrap_or_else(|_| "cli".into());
    match (r.approve, &r.message) {
        (true, _) => Decision::approve(who),
        (false, None) => Decision::deny(who),
        (false, Some(m)) => Decision::deny(who).with_message(m.clone()),
    }
}

async fn main_inner() -> Result<(), String> {
    let args = parse()?;
    let model = model(args.stream)?;
    let runs = examples::run_store(&args.store).await?;
    if let Some(run) = &args.status {
        let kept = runs.load(run).await.map_err(|e| e.to_string())?;
        let kept = kept.ok_or_else(|| format!("no run {run} in {}", args.store))?;
        println!("status={}", format!("{:?}", kept.status).to_lowercase());
        if kept.status == RunStatus::Suspended {
            // What it waits on (a run recovered after its worker died waits again,
            // under new decision ids).
            let agent = Agent::builder()
                .model(model)
                .store(runs)
                .build()
                .map_err(|e| e.to_string())?;
            for p in agent.pending(run).await.map_err(|e| e.to_string())? {
                let tool: String = p.tool.chars().filter(|c| !c.is_control()).collect();
                println!("pending run={run} tool={tool} decision={}", p.decision);
            }
            return agent.close().await.map_err(|e| e.to_string());
        }
        return Ok(());
    }
    // Recording runs nothing, so it needs no server (nor the run's folder).
    if let Some(r) = args.resume.as_ref().filter(|r| r.record) {
        let agent = Agent::builder()
            .model(model)
            .store(runs)
            .build()
            .map_err(|e| e.to_string())?;
        agent
            .record_decision(&r.run, &r.decision, decision_of(r))
            .await
            .map_err(|e| e.to_string())?;
        println!("recorded run={} decision={}", r.run, r.decision);
        return agent.close().await.map_err(|e| e.to_string());
    }
    let known = args
        .resume
        .as_ref()
        .map(|r| r.run.clone())
        .or(args.follow.clone());
    let dir = match (&args.dir, known) {
        (Some(d), _) => d.clone(),
        (None, Some(run)) => std::fs::read_to_string(dir_file(&args.store, &run))
            .map_err(|_| format!("no run {run} in {}", args.store))?,
        _ => unreachable!("parse gives a folder or a run"),
    };
    let mode = match args.mode.as_deref() {
        None => None,
        Some("ask") => Some(Mode::ask(|server, tool, arguments| {
            eprint!("allow {server}/{tool} {arguments}? [y/N] ");
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            let yes = line.trim().eq_ignore_ascii_case("y");
            async move { yes }
        })),
        Some(other) => Some(other.parse::<Mode>().map_err(|e| e.to_string())?),
    };
    let files = Mcp::builder("fs")
        .command(["npx", "-y", SERVER, &dir])
        .build()
        .map_err(|e| e.to_string())?;
    let mut builder = Agent::builder().model(model).server(files).store(runs);
    if let Some(mode) = mode {
        builder = builder.mode(mode);
    }
    if !args.allow.is_empty() {
        builder = builder.allow(args.allow);
    }
    let agent = builder.build().map_err(|e| e.to_string())?;
    if args.worker {
        eprintln!("worker on {}: Ctrl-C stops it", args.store);
        let stop = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        let done = agent.worker(WorkerOptions::new()).run(stop).await;
        agent.close().await.map_err(|e| e.to_string())?;
        return done.map_err(|e| e.to_string());
    }
    // `--output-schema FILE`: a typed answer (JSON matching the schema in FILE).
    let output = match &args.output_schema {
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
            let schema: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| format!("{file}: not JSON: {e}"))?;
            Some(OutputSpec::new("answer", schema).map_err(|e| format!("{file}: {e}"))?)
        }
        None => None,
    };
    let outcome = match (&args.resume, &args.prompt) {
        (Some(r), _) => agent.resume(&r.run, &r.decision, decision_of(r)).await,
        (None, Some(prompt)) => match (&args.follow, output) {
            (Some(run), None) => agent.follow_up(run, prompt).await,
            (Some(run), Some(spec)) => agent.follow_up_shaped(run, prompt, spec).await,
            (None, output) => {
                let mut options = RunOptions::new();
                if let Some(t) = &args.tenant {
                    options = options.tenant(t.clone());
                }
                if let Some(spec) = output {
                    options = options.output(spec);
                }
                agent.run_with_options(prompt, options).await
            }
        },
        _ => unreachable!("parse gives a prompt or a run"),
    }
    .map_err(|e| e.to_string())?;
    // Every run remembers its folder (to resume or continue it).
    let file = dir_file(&args.store, outcome.run_id());
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(file, &dir).map_err(|e| e.to_string())?;
    match outcome {
        Outcome::Finished { text, run_id, .. } => {
            // Streamed, the text is out already.
            if args.stream {
                println!();
            } else {
                println!("{text}");
            }
            eprintln!("run={run_id}");
        }
        Outcome::Truncated { text, run_id, .. } => {
            if !args.stream {
                println!("{text}");
            }
            eprintln!(
                "the answer was cut at the model's output limit; go on with --continue {run_id}"
            );
            eprintln!("run={run_id}");
        }
        // (server-filesystem asks for no input; a server that does suspends the same way,
        // and `--deny` declines it.)
        Outcome::ApprovalRequired { run_id, calls, .. }
        | Outcome::InputRequired { run_id, calls, .. } => {
            // One line per call the run waits on (the calls of one model turn are
            // decided together, each by its own decision id).
            for call in calls {
                // Server text goes to a terminal: no control characters.
                let tool: String = call.tool.chars().filter(|c| !c.is_control()).collect();
                let tenant: String = match &call.tenant {
                    Some(t) => format!(
                        " tenant={}",
                        t.chars().filter(|c| !c.is_control()).collect::<String>()
                    ),
                    None => String::new(),
                };
                println!(
                    "suspended run={run_id} tool={tool} decision={}{tenant}",
                    call.decision
                );
            }
        }
        Outcome::StepLimit { run_id, .. } => {
            println!("run {run_id} stopped at the step limit");
            eprintln!("run={run_id}");
        }
        Outcome::InvalidOutput { run_id, reason, .. } => {
            eprintln!("run={run_id}");
            agent.close().await.map_err(|e| e.to_string())?;
            return Err(format!(
                "the answer does not match the output schema: {reason}"
            ));
        }
        other => println!("{other:?}"),
    }
    agent.close().await.map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    match main_inner().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent_filesystem: {e}");
            ExitCode::FAILURE
        }
    }
}
