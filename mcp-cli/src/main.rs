//! `mcp`: writes and checks the snapshots `#[mcp(...)]` reads, and inspects servers.
//!
//! * `mcp snapshot` refreshes every snapshot in `.mcp/` from its server (stdio servers
//!   are started; HTTP servers get a bearer token from `MCP_TOKEN_<NAME>` if set).
//! * `mcp snapshot --check` exits non-zero when a server's lists differ (for CI).
//! * `mcp snapshot NAME --url URL` / `mcp snapshot NAME -- COMMAND…` adds one.
//! * `mcp tools NAME`, `mcp call NAME TOOL '{json}'` inspect a server by snapshot name
//!   (or `--url` / `-- COMMAND…`).
//! * `mcp login NAME` authorizes with an OAuth server in a browser (a loopback
//!   redirect) and keeps the credentials (`~/.config/mcp/credentials.json`, 0600) for
//!   the other commands.
//!
//! Snapshots are looked for inside the current project only: from the current folder
//! up to the nearest folder with `.git` (`.hg`, `.jj`) or a `Cargo.toml` with
//! `[workspace]`; outside any, up to the nearest folder with a `Cargo.toml`; outside
//! any package too, in the current folder alone. A `.mcp/` folder another user owns, or
//! that group or others may write to, is skipped with a warning. A stored server
//! (its `command` is started, its `url` is sent credentials) from above the project
//! is used only with `--allow-outside-project`; `--dir DIR` names a folder explicitly.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Arg, ArgAction, ArgMatches, Command};
use mcp_runtime::auth::{FileStore, LoopbackAuthorizer, OAuth};
use mcp_runtime::snapshot::{self, Snapshot};
use mcp_runtime::{Client, HttpConfig, StdioConfig};
use serde_json::{json, Value};

fn cli() -> Command {
    let target = |c: Command| {
        c.arg(
            Arg::new("url")
                .long("url")
                .help("the server's Streamable HTTP endpoint"),
        )
        .arg(
            Arg::new("command")
                .last(true)
                .num_args(1..)
                .help("the command that starts a stdio server"),
        )
        .arg(
            Arg::new("dir")
                .long("dir")
                .help("the snapshot folder (default: the nearest .mcp/ from here up to the project root)"),
        )
        .arg(
            Arg::new("allow-outside-project")
                .long("allow-outside-project")
                .action(ArgAction::SetTrue)
                .help("look for snapshots above the project root too, and use (start) what is found there"),
        )
    };
    Command::new("mcp")
        .about("Snapshots of declared MCP servers, and quick inspection of any MCP server")
        .subcommand_required(true)
        .subcommand(target(
            Command::new("snapshot")
                .about("Refresh (or with --check, verify) the committed snapshots in .mcp/")
                .arg(Arg::new("name").help("only this server; with --url or a command, add it"))
                .arg(
                    Arg::new("check")
                        .long("check")
                        .action(ArgAction::SetTrue)
                        .help("exit 1 when a snapshot is out of date"),
                ),
        ))
        .subcommand(target(
            Command::new("tools")
                .about("List a server's tools")
                .arg(Arg::new("name")),
        ))
        .subcommand(target(
            Command::new("login")
                .about("Authorize with an OAuth server in a browser; the credentials are kept for `mcp tools`/`mcp call`")
                .arg(Arg::new("name").required(true))
                .arg(Arg::new("owner").long("owner").default_value("default").help("whose credentials these are"))
                .arg(Arg::new("open").long("open").help("program that opens the URL (for example xdg-open)")),
        ))
        .subcommand(target(
            Command::new("call")
                .about("Call a tool and print its result as JSON")
                .arg(Arg::new("name").required(true))
                .arg(Arg::new("tool").required(true))
                .arg(Arg::new("arguments").default_value("{}")),
        ))
}

#[tokio::main]
async fn main() -> ExitCode {
    let m = cli().get_matches();
    let out = match m.subcommand() {
        Some(("snapshot", sm)) => snapshot(sm).await,
        Some(("tools", sm)) => tools(sm).await,
        Some(("call", sm)) => call(sm).await,
        Some(("login", sm)) => login(sm).await,
        _ => Err("unknown command".into()),
    };
    match out {
        Ok(code) => code,
        Err(e) => {
            // Errors may quote what a server said.
            eprintln!("mcp: {}", shown(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}

type Failure = Box<dyn std::error::Error>;

/// The snapshot lookup from here: inside the current project (the nearest folder, from
/// here up, with `.git`, `.hg` or `.jj`, or a `Cargo.toml` with `[workspace]`; else the
/// nearest with a `Cargo.toml`; else this folder alone), or past it with
/// `--allow-outside-project`.
fn project(m: &ArgMatches) -> Result<snapshot::Project, Failure> {
    let cwd = std::env::current_dir()?;
    Ok(if m.get_flag("allow-outside-project") {
        snapshot::Project::unbounded(&cwd)
    } else {
        snapshot::Project::of(&cwd)
    })
}

/// Warns about the snapshot folders a lookup passed over.
fn warn_skipped(found: &snapshot::Found) {
    for s in &found.skipped {
        eprintln!("mcp: warning: {s}");
    }
}

/// Where the project ends, for messages.
fn root_shown(project: &snapshot::Project) -> String {
    project
        .root()
        .map(|r| shown(&r.display().to_string()).into_owned())
        .unwrap_or_else(|| "/".to_owned())
}

/// What to say when the project has no snapshot (folder) but one above it does.
fn outside_hint(project: &snapshot::Project, beyond: snapshot::Found) -> String {
    match beyond.path {
        Some(p) if !project.contains(&p) => format!(
            "; {} is above the project root {} and is not used (a snapshot there could start any program): pass --allow-outside-project to use it",
            shown(&p.display().to_string()),
            root_shown(project)
        ),
        _ => String::new(),
    }
}

/// A snapshot folder named with `--dir`: used as named, if it is safe to.
fn named_dir(d: &str) -> Result<PathBuf, Failure> {
    let dir = PathBuf::from(d);
    if dir.exists() {
        snapshot::check_folder(&dir).map_err(|reason| {
            format!(
                "the snapshot folder {} is not used: {reason}",
                shown(&dir.display().to_string())
            )
        })?;
    }
    Ok(dir)
}

fn snapshot_dir(m: &ArgMatches, create: bool) -> Result<PathBuf, Failure> {
    if let Some(d) = m.get_one::<String>("dir") {
        return named_dir(d);
    }
    let project = project(m)?;
    let found = project.snapshot_dir();
    warn_skipped(&found);
    if let Some(dir) = found.path {
        return Ok(dir);
    }
    if create {
        return Ok(project.start().join(snapshot::DIR));
    }
    let hint = outside_hint(
        &project,
        snapshot::Project::unbounded(project.start()).snapshot_dir(),
    );
    Err(format!(
        "no usable .mcp/ folder from here up to the project root {}; add a server with `mcp snapshot NAME --url URL` or `mcp snapshot NAME -- COMMAND`{hint}",
        root_shown(&project)
    )
    .into())
}

/// The connection a snapshot or the command line describes.
fn connection(m: &ArgMatches, stored: Option<&Value>) -> Result<Value, Failure> {
    if let Some(url) = m.get_one::<String>("url") {
        return Ok(json!({"url": url}));
    }
    if let Some(cmd) = m.get_many::<String>("command") {
        return Ok(json!({"command": cmd.collect::<Vec<_>>()}));
    }
    stored
        .cloned()
        .ok_or_else(|| "give --url URL or -- COMMAND… (no snapshot describes this server)".into())
}

/// Where `mcp login` keeps credentials: `$MCP_CREDENTIALS`, else
/// `~/.config/mcp/credentials.json` (mode 0600).
fn credentials_path() -> PathBuf {
    if let Ok(p) = std::env::var("MCP_CREDENTIALS") {
        return PathBuf::from(p);
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| ".".into());
    PathBuf::from(home).join(".config/mcp/credentials.json")
}

fn client(name: &str, server: &Value) -> Result<Client, Failure> {
    client_with(name, server, None)
}

fn client_with(name: &str, server: &Value, oauth: Option<OAuth>) -> Result<Client, Failure> {
    let builder = Client::builder().name(name);
    if let Some(url) = server.get("url").and_then(Value::as_str) {
        let mut config = HttpConfig::new(url);
        let path = credentials_path();
        let oauth = oauth.or_else(|| {
            path.exists().then(|| {
                OAuth::new()
                    .owner(format!("default@{name}"))
                    .store(FileStore::new(&path))
            })
        });
        if let Some(o) = oauth {
            config = config.oauth(o);
        }
        let var = format!("MCP_TOKEN_{}", name.to_ascii_uppercase().replace('-', "_"));
        if let Ok(token) = std::env::var(&var) {
            config = config.bearer_token(token);
        }
        return Ok(builder.http(config)?);
    }
    if let Some(argv) = server.get("command").and_then(Value::as_array) {
        let argv: Vec<String> = argv
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        // A spawned server gets a clean environment (the runtime's default): this
        // command's own credentials (`MCP_TOKEN_*`, `MCP_CREDENTIALS`) are for HTTP
        // servers, and never reach a local one.
        let config = StdioConfig::from_argv(argv)?;
        return Ok(builder.stdio(config)?);
    }
    Err(format!("the snapshot of `{name}` says neither `url` nor `command`").into())
}

/// Text from a server, safe to print: control characters escaped.
fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    mcp_runtime_core::text::escape(text, false)
}

/// JSON from a server, safe to print: serde_json escapes control characters already;
/// the Unicode controls that reorder or hide text are escaped too (`\u202e`), which
/// keeps it valid JSON (they only occur inside strings).
fn json_shown(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}' | '\u{80}'..='\u{9f}')
        {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// What a server offers now, in snapshot form.
async fn capture(name: &str, server: &Value) -> Result<Snapshot, Failure> {
    let c = client(name, server)?;
    let details = c.connect().await?;
    let tools = c.tools().await?;
    let prompts = if details.capabilities.prompts() {
        c.prompts().await?
    } else {
        Vec::new()
    };
    let templates = if details.capabilities.resources() {
        c.resource_templates().await?
    } else {
        Vec::new()
    };
    c.close().await?;
    Ok(Snapshot::new(
        name,
        server.clone(),
        tools
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?,
        prompts
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?,
        templates
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?,
    ))
}

async fn snapshot(m: &ArgMatches) -> Result<ExitCode, Failure> {
    let check = m.get_flag("check");
    let adding = m.contains_id("url") || m.contains_id("command");
    let dir = snapshot_dir(m, adding)?;
    let names: Vec<String> = match m.get_one::<String>("name") {
        Some(n) => vec![n.clone()],
        None => {
            let mut names: Vec<String> = std::fs::read_dir(&dir)?
                .flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|f| f.strip_suffix(".json"))
                        .map(str::to_owned)
                })
                .collect();
            names.sort();
            names
        }
    };
    if names.is_empty() {
        return Err(format!("no snapshots in {}", dir.display()).into());
    }
    std::fs::create_dir_all(&dir)?;
    let mut stale = 0;
    for name in names {
        let path = dir.join(format!("{name}.json"));
        let old = if path.exists() {
            Some(Snapshot::read(&path)?)
        } else {
            None
        };
        let server = connection(m, old.as_ref().map(|o| &o.server))?;
        let new = match capture(&name, &server).await {
            Ok(n) => n,
            Err(e) => {
                eprintln!(
                    "mcp: {name}: cannot reach the server: {}",
                    shown(&e.to_string())
                );
                stale += 1;
                continue;
            }
        };
        let same = old.as_ref() == Some(&new);
        if check {
            if same {
                println!("{name}: up to date");
            } else {
                println!("{name}: out of date; run `mcp snapshot {name}`");
                stale += 1;
            }
        } else {
            new.write(&path)?;
            let tools = new.tools.len();
            println!(
                "{name}: {} ({tools} tools){}",
                path.display(),
                if same {
                    ", unchanged".to_owned()
                } else {
                    format!("; {}", changes(old.as_ref(), &new))
                }
            );
        }
    }
    if !check {
        reindex(&dir)?;
    }
    Ok(if stale == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What changed from the old snapshot to the new one, in a line.
fn changes(old: Option<&Snapshot>, new: &Snapshot) -> String {
    let Some(old) = old else {
        return "new".to_owned();
    };
    let by_name = |s: &Snapshot| -> std::collections::BTreeMap<String, Value> {
        s.tools
            .iter()
            .filter_map(|t| Some((t.get("name")?.as_str()?.to_owned(), t.clone())))
            .collect()
    };
    let (before, after) = (by_name(old), by_name(new));
    let added: Vec<&str> = after
        .keys()
        .filter(|k| !before.contains_key(*k))
        .map(String::as_str)
        .collect();
    let removed: Vec<&str> = before
        .keys()
        .filter(|k| !after.contains_key(*k))
        .map(String::as_str)
        .collect();
    let changed: Vec<&str> = after
        .iter()
        .filter(|(k, v)| before.get(*k).is_some_and(|b| b != *v))
        .map(|(k, _)| k.as_str())
        .collect();
    let mut parts = Vec::new();
    for (what, names) in [("added", added), ("removed", removed), ("changed", changed)] {
        if !names.is_empty() {
            parts.push(format!("tools {what}: {}", names.join(", ")));
        }
    }
    if old.prompts != new.prompts {
        parts.push("prompts changed".to_owned());
    }
    if old.resource_templates != new.resource_templates {
        parts.push("resource templates changed".to_owned());
    }
    if old.server != new.server {
        parts.push("connection changed".to_owned());
    }
    if parts.is_empty() {
        "rewritten".to_owned()
    } else {
        parts.join("; ")
    }
}

/// Rewrites `.mcp/.index`, which crates declaring a server without a snapshot depend
/// on, so an added, changed or removed snapshot takes effect on their next build. The
/// first time, those crates depended on their `Cargo.toml` instead: it is touched.
fn reindex(dir: &std::path::Path) -> Result<(), Failure> {
    let path = dir.join(snapshot::INDEX);
    let text = snapshot::index(dir);
    let existed = path.exists();
    if existed && std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
        return Ok(());
    }
    std::fs::write(&path, text)?;
    if !existed {
        if let Some(root) = dir.parent() {
            touch_manifests(root, 0);
        }
    }
    Ok(())
}

/// Marks every package's `Cargo.toml` under `root` as modified (build outputs,
/// hidden folders and `node_modules` skipped).
fn touch_manifests(root: &std::path::Path, depth: usize) {
    if depth > 6 {
        return;
    }
    let manifest = root.join("Cargo.toml");
    if manifest.is_file() {
        if let Ok(f) = std::fs::File::options().append(true).open(&manifest) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
    }
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            touch_manifests(&entry.path(), depth + 1);
        }
    }
}

async fn open(m: &ArgMatches) -> Result<Client, Failure> {
    let name = m
        .get_one::<String>("name")
        .cloned()
        .unwrap_or_else(|| "server".into());
    let server = server_for(m, &name)?;
    client(&name, &server)
}

/// The connection of `name`: from the command line, else from its snapshot — one
/// inside the current project (or named with `--dir`), unless
/// `--allow-outside-project`.
fn server_for(m: &ArgMatches, name: &str) -> Result<Value, Failure> {
    if m.contains_id("url") || m.contains_id("command") {
        return connection(m, None);
    }
    let path = match m.get_one::<String>("dir") {
        Some(d) => Some(named_dir(d)?.join(format!("{name}.json"))).filter(|p| p.is_file()),
        None => {
            let project = project(m)?;
            let found = project.locate(name);
            warn_skipped(&found);
            match found.path {
                Some(p) => Some(p),
                None => {
                    let hint = outside_hint(
                        &project,
                        snapshot::Project::unbounded(project.start()).locate(name),
                    );
                    return Err(format!(
                        "no snapshot of `{}` from here up to the project root {}: give --url URL or -- COMMAND…{hint}",
                        shown(name),
                        root_shown(&project)
                    )
                    .into());
                }
            }
        }
    };
    let stored = path.map(|p| Snapshot::read(&p)).transpose()?;
    connection(m, stored.as_ref().map(|s| &s.server))
}

async fn login(m: &ArgMatches) -> Result<ExitCode, Failure> {
    let name = m.get_one::<String>("name").cloned().unwrap_or_default();
    let server = server_for(m, &name)?;
    if server.get("url").is_none() {
        return Err("`mcp login` is for HTTP servers (stdio servers take credentials from their environment)".into());
    }
    let path = credentials_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut loopback = LoopbackAuthorizer::bind()?;
    if let Some(open) = m.get_one::<String>("open") {
        loopback = loopback.open_with(open.clone());
    }
    let owner = m
        .get_one::<String>("owner")
        .map_or("default", String::as_str);
    let oauth = OAuth::new()
        .owner(format!("{owner}@{name}"))
        .store(FileStore::new(&path))
        .redirect_uri(loopback.redirect_uri())
        .authorizer(loopback);
    let c = client_with(&name, &server, Some(oauth))?;
    let tools = c.tools().await?;
    c.close().await?;
    println!(
        "{name}: authorized ({} tools); credentials in {}",
        tools.len(),
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

async fn tools(m: &ArgMatches) -> Result<ExitCode, Failure> {
    let c = open(m).await?;
    for t in c.tools().await? {
        let description = t.description.unwrap_or_default();
        // Names and descriptions come from the server: nothing in them may act on the
        // terminal.
        println!(
            "{}\t{}",
            shown(&t.name),
            shown(description.lines().next().unwrap_or(""))
        );
    }
    c.close().await?;
    Ok(ExitCode::SUCCESS)
}

async fn call(m: &ArgMatches) -> Result<ExitCode, Failure> {
    let c = open(m).await?;
    let tool = m.get_one::<String>("tool").ok_or("which tool?")?;
    let args: Value = serde_json::from_str(
        m.get_one::<String>("arguments")
            .map_or("{}", String::as_str),
    )
    .map_err(|e| format!("the arguments are not JSON: {e}"))?;
    // A call never lists the tools itself: list them first, so the call knows the
    // tool's header mirrors (2026-07-28 HTTP), task support (2025-11-25) and UI
    // resource. A server that cannot list them still gets the call.
    match c.tools().await {
        Ok(_) => {}
        Err(e) if e.is_protocol() => {}
        Err(e) => return Err(e.into()),
    }
    let r = c.call(tool, args).await?;
    println!("{}", json_shown(&serde_json::to_string_pretty(&r)?));
    c.close().await?;
    Ok(if r.is_error() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
