//! `mcp`: looks at any MCP server, calls its tools, and writes and checks the snapshots
//! `#[mcp(...)]` reads. docs/cli.md shows every command with an example session.
//!
//! * `mcp info NAME` — the protocol era and version negotiated, the server's name,
//!   version, capabilities and instructions.
//! * `mcp tools`, `prompts`, `resources`, `templates` — the lists, as aligned tables
//!   on a terminal (tab-separated otherwise); `--json` prints the protocol's JSON.
//! * `mcp call NAME TOOL ['{json}'] [--arg K=V…] [--text] [--task]` — the result's
//!   JSON (or its text); progress on stderr; Ctrl-C cancels the call.
//! * `mcp prompt`, `read`, `complete`, `listen`, `tasks` — every other client method.
//! * `mcp snapshot [NAME] [--check]` — the committed snapshots in `.mcp/`.
//! * `mcp login NAME` — OAuth in a browser; credentials kept for the other commands.
//! * `mcp completions bash|zsh|fish` — a shell completion script.
//!
//! A server is named by a snapshot in `.mcp/`, by an entry in `.mcp.json` (Claude
//! Code, Cursor) or `.vscode/mcp.json` (VS Code), by `--config FILE`, or given with
//! `--url URL` / `-- COMMAND…`. Snapshots and configuration files are looked for inside
//! the current project only, and ones others could have written are skipped with a
//! warning (see `server.rs`).
//!
//! Exit codes: 0 ok; 1 the tool returned an error result (or a snapshot is out of
//! date); 2 usage; 3 connection or protocol failure; 4 authorization needed; 130
//! interrupted.

mod args;
mod calls;
mod failure;
mod lists;
mod progress;
mod server;
mod show;
mod snapshots;

use std::process::ExitCode;

use failure::{code, Failure};

#[tokio::main]
async fn main() -> ExitCode {
    let mut cli = args::cli();
    let m = match cli.try_get_matches_from_mut(std::env::args_os()) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { code::USAGE } else { 0 });
        }
    };
    // Ctrl-C cancels what runs (the server is told) rather than killing the process;
    // `snapshot`, `login` and `completions` just stop.
    let watched = !matches!(
        m.subcommand_name(),
        Some("snapshot" | "login" | "completions")
    );
    let interrupt = progress::interrupt(watched);
    let out = match m.subcommand() {
        Some(("info", sm)) => lists::info(sm, &interrupt).await,
        Some(("tools", sm)) => lists::tools(sm, &interrupt).await,
        Some(("prompts", sm)) => lists::prompts(sm, &interrupt).await,
        Some(("prompt", sm)) => lists::prompt(sm, &interrupt).await,
        Some(("resources", sm)) => lists::resources(sm, &interrupt).await,
        Some(("templates", sm)) => lists::templates(sm, &interrupt).await,
        Some(("read", sm)) => lists::read(sm, &interrupt).await,
        Some(("complete", sm)) => lists::complete(sm, &interrupt).await,
        Some(("call", sm)) => calls::call(sm, &interrupt).await,
        Some(("tasks", sm)) => calls::tasks(sm, &interrupt).await,
        Some(("listen", sm)) => calls::listen(sm, &interrupt).await,
        Some(("login", sm)) => calls::login(sm).await,
        Some(("snapshot", sm)) => snapshots::snapshot(sm).await,
        Some(("completions", sm)) => completions(&mut cli, sm),
        _ => Err(Failure::usage("unknown command; `mcp --help` lists them")),
    };
    match out {
        Ok(code) => code,
        Err(e) => {
            // Errors may quote what a server said (its stderr too): escaped, lines kept.
            eprintln!("mcp: {}", show::shown_lines(&e.message));
            ExitCode::from(e.code)
        }
    }
}

/// `mcp completions SHELL`.
fn completions(cli: &mut clap::Command, m: &clap::ArgMatches) -> Result<ExitCode, Failure> {
    use clap_complete::Shell;
    let shell = match m.get_one::<String>("shell").map(String::as_str) {
        Some("bash") => Shell::Bash,
        Some("zsh") => Shell::Zsh,
        Some("fish") => Shell::Fish,
        Some("elvish") => Shell::Elvish,
        Some("powershell") => Shell::PowerShell,
        _ => {
            return Err(Failure::usage(
                "which shell? bash, zsh, fish, elvish or powershell",
            ))
        }
    };
    clap_complete::generate(shell, cli, "mcp", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
