//! Which server a command talks to, and the client that talks to it.
//!
//! A server is named on the command line (`--url URL`, `-- COMMAND…`), by a
//! configuration file (`--config FILE`), or by name: a snapshot in the project's
//! `.mcp/`, else a server in the project's `.mcp.json` or `.vscode/mcp.json`. Snapshots
//! and configuration files are looked for inside the current project only (from here
//! up to the project root), and one that another user owns, or that group or others
//! may write to, is skipped with a warning: either could start any program.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::ArgMatches;
use mcp_runtime::auth::{FileStore, OAuth};
use mcp_runtime::client::ProtocolMode;
use mcp_runtime::snapshot::{self, Snapshot};
use mcp_runtime::{Client, ClientBuilder, HttpConfig, StdioConfig};
use mcp_runtime_core::config::{self, ConfigFile, ServerConfig};
use serde_json::{json, Value};

use crate::failure::{token_var, Failure};
use crate::show::shown;

/// A server, and how a snapshot records it.
pub struct Resolved {
    /// The name it goes by.
    pub name: String,
    /// The name was given (not the default `server`).
    pub named: bool,
    /// How to start or reach it (variables expanded).
    pub server: ServerConfig,
    /// What a snapshot of it keeps: `{"url"}`, `{"command"}`, or `{"config": FILE}`
    /// (so a configuration file's secrets never land in a committed snapshot).
    pub stored: Value,
}

/// The snapshot lookup from here: inside the current project, or past it with
/// `--allow-outside-project`.
pub fn project(m: &ArgMatches) -> Result<snapshot::Project, Failure> {
    let cwd = std::env::current_dir()?;
    Ok(if m.get_flag("allow-outside-project") {
        snapshot::Project::unbounded(&cwd)
    } else {
        snapshot::Project::of(&cwd)
    })
}

/// Warns about the snapshot folders a lookup passed over.
pub fn warn_skipped(found: &snapshot::Found) {
    for s in &found.skipped {
        eprintln!("mcp: warning: {s}");
    }
}

/// Where the project ends, for messages.
pub fn root_shown(project: &snapshot::Project) -> String {
    project
        .root()
        .map(|r| shown(&r.display().to_string()).into_owned())
        .unwrap_or_else(|| "/".to_owned())
}

/// What to say when the project has no snapshot (folder) but one above it does.
pub fn outside_hint(project: &snapshot::Project, beyond: snapshot::Found) -> String {
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
pub fn named_dir(d: &str) -> Result<PathBuf, Failure> {
    let dir = PathBuf::from(d);
    if dir.exists() {
        snapshot::check_folder(&dir).map_err(|reason| {
            Failure::usage(format!(
                "the snapshot folder {} is not used: {reason}",
                shown(&dir.display().to_string())
            ))
        })?;
    }
    Ok(dir)
}

/// The server's name on the command line (`server` when none is given).
pub fn name_of(m: &ArgMatches) -> String {
    m.get_one::<String>("name")
        .cloned()
        .unwrap_or_else(|| "server".into())
}

/// The server the command line names.
pub fn resolve(m: &ArgMatches) -> Result<Resolved, Failure> {
    let name = name_of(m);
    if let Some(r) = from_command_line(m, &name)? {
        return Ok(r);
    }
    if !m.contains_id("name") {
        return Err(Failure::usage(
            "which server? give a NAME (a snapshot, or a server in .mcp.json / .vscode/mcp.json), --url URL, or -- COMMAND…",
        ));
    }
    if let Some(file) = m.get_one::<String>("config") {
        return from_config_file(Path::new(file), &name, None);
    }
    // A snapshot first (one inside the project, or in --dir), then the configuration
    // files inside the project.
    let project = project(m)?;
    let snapshot = match m.get_one::<String>("dir") {
        Some(d) => Some(named_dir(d)?.join(format!("{name}.json"))).filter(|p| p.is_file()),
        None => {
            let found = project.locate(&name);
            warn_skipped(&found);
            found.path
        }
    };
    if let Some(path) = snapshot {
        let stored = Snapshot::read(&path)?.server;
        let path = std::path::absolute(&path)?;
        let base = path
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/"));
        return from_stored(&name, stored, base);
    }
    let located = config::locate(&project, &name);
    for passed in &located.skipped {
        eprintln!("mcp: warning: {passed}");
    }
    if let Some(file) = located.file {
        return from_config(&file, &name);
    }
    Err(unknown(&project, &name))
}

/// `--url URL` or `-- COMMAND…`.
fn from_command_line(m: &ArgMatches, name: &str) -> Result<Option<Resolved>, Failure> {
    if let Some(url) = m.get_one::<String>("url") {
        return Ok(Some(Resolved {
            name: name.to_owned(),
            named: m.contains_id("name"),
            server: ServerConfig::Http {
                url: url.clone(),
                headers: Vec::new(),
            },
            stored: json!({ "url": url }),
        }));
    }
    if let Some(argv) = m.get_many::<String>("command") {
        let argv: Vec<String> = argv.cloned().collect();
        return Ok(Some(Resolved {
            name: name.to_owned(),
            named: m.contains_id("name"),
            server: stdio(&argv)?,
            stored: json!({ "command": argv }),
        }));
    }
    Ok(None)
}

fn stdio(argv: &[String]) -> Result<ServerConfig, Failure> {
    let (command, args) = argv
        .split_first()
        .ok_or_else(|| Failure::usage("the server's command is empty"))?;
    Ok(ServerConfig::Stdio {
        command: command.clone(),
        args: args.to_vec(),
        env: Vec::new(),
        cwd: None,
    })
}

/// The server a snapshot records. `base` is the folder holding its `.mcp/`.
pub fn from_stored(name: &str, stored: Value, base: &Path) -> Result<Resolved, Failure> {
    if let Some(file) = stored.get("config").and_then(Value::as_str) {
        let path = inside_project(Path::new(file), base).map_err(|why| {
            Failure::usage(format!(
                "the snapshot of `{}` names the configuration file {}, which {why}; add it again with `mcp snapshot {0}`",
                shown(name),
                shown(file)
            ))
        })?;
        return from_config_file(&path, name, Some(stored.clone()));
    }
    let server = if let Some(url) = stored.get("url").and_then(Value::as_str) {
        ServerConfig::Http {
            url: url.to_owned(),
            headers: Vec::new(),
        }
    } else if let Some(argv) = stored.get("command").and_then(Value::as_array) {
        let argv: Vec<String> = argv
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        stdio(&argv)?
    } else {
        return Err(Failure::usage(format!(
            "the snapshot of `{}` says neither `url`, `command` nor `config`; add it again with `mcp snapshot {0} --url URL` or `-- COMMAND`",
            shown(name)
        )));
    };
    Ok(Resolved {
        name: name.to_owned(),
        named: true,
        server,
        stored,
    })
}

/// `file`, relative to `base` (the folder holding `.mcp/`), as a path inside the
/// project `base` is in; `Err` says why not.
fn inside_project(file: &Path, base: &Path) -> Result<PathBuf, String> {
    if file.is_absolute() {
        return Err("is not relative to the project".into());
    }
    let mut path = PathBuf::new();
    for c in base.join(file).components() {
        match c {
            std::path::Component::ParentDir => {
                path.pop();
            }
            std::path::Component::CurDir => {}
            other => path.push(other),
        }
    }
    let root = snapshot::project_root(base);
    if path.starts_with(&root) {
        Ok(path)
    } else {
        Err(format!(
            "is outside the project root {}",
            shown(&root.display().to_string())
        ))
    }
}

/// How a snapshot records the configuration file `file`: relative to `base` (the
/// folder holding `.mcp/`), so it means the same on every checkout. A file outside
/// the project cannot be recorded.
pub fn stored_config(file: &Path, base: &Path) -> Result<String, Failure> {
    let file = std::path::absolute(file)?;
    let root = snapshot::project_root(base);
    if !file.starts_with(&root) {
        return Err(Failure::usage(format!(
            "the configuration file {} is outside the project root {}: a snapshot records only files inside the project; snapshot this server with --url or -- COMMAND instead",
            shown(&file.display().to_string()),
            shown(&root.display().to_string())
        )));
    }
    let from: Vec<_> = base.components().collect();
    let to: Vec<_> = file.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..from.len() {
        rel.push("..");
    }
    for c in &to[common..] {
        rel.push(c);
    }
    Ok(rel.display().to_string())
}

/// The server `name` of a configuration file named on the command line or in a
/// snapshot: used as named, if it is safe to.
fn from_config_file(path: &Path, name: &str, stored: Option<Value>) -> Result<Resolved, Failure> {
    config::check_file(path).map_err(|reason| {
        Failure::usage(format!(
            "the configuration file {} is not used: {reason}",
            shown(&path.display().to_string())
        ))
    })?;
    let file = ConfigFile::read(path)?;
    let mut r = from_config(&file, name)?;
    if let Some(s) = stored {
        r.stored = s;
    }
    Ok(r)
}

fn from_config(file: &ConfigFile, name: &str) -> Result<Resolved, Failure> {
    let server = file.server(name)?;
    let path = std::path::absolute(file.path()).unwrap_or_else(|_| file.path().to_path_buf());
    Ok(Resolved {
        name: name.to_owned(),
        named: true,
        server,
        stored: json!({ "config": path.display().to_string() }),
    })
}

/// The error for a name found nowhere: what the project has, and the nearest name.
fn unknown(project: &snapshot::Project, name: &str) -> Failure {
    let mut known: Vec<String> = Vec::new();
    if let Some(dir) = project.snapshot_dir().path {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if let Some(n) = e.file_name().to_str().and_then(|f| f.strip_suffix(".json")) {
                known.push(n.to_owned());
            }
        }
    }
    for folder in project.folders() {
        for rel in config::FILES {
            let path = folder.join(rel);
            if path.is_file() && config::check_file(&path).is_ok() {
                if let Ok(f) = ConfigFile::read(&path) {
                    known.extend(f.names().map(str::to_owned));
                }
            }
        }
    }
    let hint = snapshot::did_you_mean(name, known.iter().map(String::as_str))
        .map(|n| format!(" (did you mean `{}`?)", shown(n)))
        .unwrap_or_default();
    let outside = outside_hint(
        project,
        snapshot::Project::unbounded(project.start()).locate(name),
    );
    Failure::usage(format!(
        "no server `{}`{hint}: no snapshot of it in .mcp/ and no entry for it in .mcp.json or .vscode/mcp.json from here up to the project root {}; give --url URL or -- COMMAND…{outside}",
        shown(name),
        root_shown(project)
    ))
}

/// Where `mcp login` keeps credentials: `$MCP_CREDENTIALS`, else
/// `~/.config/mcp/credentials.json` (mode 0600).
pub fn credentials_path() -> PathBuf {
    if let Ok(p) = std::env::var("MCP_CREDENTIALS") {
        return PathBuf::from(p);
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| ".".into());
    PathBuf::from(home).join(".config/mcp/credentials.json")
}

/// How a command's client is set up, beyond the server.
#[derive(Default)]
pub struct Options {
    /// Credentials from `mcp login` (else the kept ones, if any).
    pub oauth: Option<OAuth>,
    /// What to add to the builder (callbacks).
    pub configure: Option<Box<dyn FnOnce(ClientBuilder) -> ClientBuilder>>,
    /// The command shows the server's log messages itself (else they go to stderr).
    pub own_log: bool,
    /// `--timeout` bounds the command as a whole (`listen`), not each request.
    pub whole_timeout: bool,
}

/// The client for `r`, as the command line says (`--protocol`, `--header`,
/// `--timeout`).
pub fn client(m: &ArgMatches, r: &Resolved, options: Options) -> Result<Client, Failure> {
    let mut builder = Client::builder().name(r.name.clone());
    if let Some(mode) = m.try_get_one::<String>("protocol").ok().flatten() {
        builder = builder.protocol(match mode.as_str() {
            "modern" => ProtocolMode::Modern,
            "legacy" => ProtocolMode::Legacy,
            _ => ProtocolMode::Auto,
        });
    }
    if let Some(level) = m.try_get_one::<String>("log-level").ok().flatten() {
        let level = level
            .parse()
            .map_err(|e: mcp_runtime::Error| Failure::usage(e.to_string()))?;
        builder = builder.log_level(level);
    }
    if let Some(secs) = timeout(m)?.filter(|_| !options.whole_timeout) {
        builder = builder.timeout(secs).max_timeout(secs);
    }
    if let Some(configure) = options.configure {
        builder = configure(builder);
    }
    let headers: Vec<(String, String)> = match m.try_get_many::<String>("header").ok().flatten() {
        Some(h) => h.map(|h| header(h)).collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let fail = |e| Failure::server(&r.name, e);
    match &r.server {
        ServerConfig::Http { url, headers: own } => {
            let mut config = HttpConfig::new(url);
            for (k, v) in own.iter().chain(&headers) {
                config = config.header(k, v);
            }
            let path = credentials_path();
            let oauth = options.oauth.or_else(|| {
                path.exists().then(|| {
                    OAuth::new()
                        .owner(format!("default@{}", r.name))
                        .store(FileStore::new(&path))
                })
            });
            if let Some(o) = oauth {
                config = config.oauth(o);
            }
            // `MCP_TOKEN_<NAME>` is for the server named so: a `--url` given without a
            // name gets none.
            if r.named {
                if let Ok(token) = std::env::var(token_var(&r.name)) {
                    config = config.bearer_token(token);
                }
            }
            builder.http(config).map_err(fail)
        }
        ServerConfig::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            if !headers.is_empty() {
                return Err(Failure::usage(
                    "--header is for HTTP servers; a stdio server takes its settings from its command line and environment",
                ));
            }
            // A spawned server gets a clean environment (the runtime's default) and
            // what its configuration gives it: this command's own credentials
            // (`MCP_TOKEN_*`, `MCP_CREDENTIALS`) are for HTTP servers, and never reach
            // a local one.
            let mut config = StdioConfig::new(command.clone()).args(args.iter().cloned());
            for (k, v) in env {
                config = config.env(k, v);
            }
            if let Some(dir) = cwd {
                config = config.directory(dir);
            }
            builder.stdio(config).map_err(fail)
        }
        other => Err(Failure::usage(format!(
            "this version of mcp cannot start {other:?}"
        ))),
    }
}

/// `--timeout SECS`.
pub fn timeout(m: &ArgMatches) -> Result<Option<Duration>, Failure> {
    match m.try_get_one::<f64>("timeout").ok().flatten() {
        None => Ok(None),
        Some(s) if s.is_finite() && *s > 0.0 && *s < 1e9 => Ok(Some(Duration::from_secs_f64(*s))),
        Some(s) => Err(Failure::usage(format!(
            "--timeout {s}: give a number of seconds above 0"
        ))),
    }
}

/// `--header NAME:VALUE`.
fn header(h: &str) -> Result<(String, String), Failure> {
    match h.split_once(':') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        // The value may be a credential: not repeated.
        _ => Err(Failure::usage("a --header is not NAME:VALUE")),
    }
}
