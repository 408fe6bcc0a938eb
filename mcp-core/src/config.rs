//! The MCP configuration files people already keep their servers in, read the way the
//! tools that write them read them:
//!
//! * Claude Code's and Cursor's `.mcp.json`: `{"mcpServers": {"NAME": SERVER}}`;
//! * VS Code's `.vscode/mcp.json`: `{"servers": {"NAME": SERVER}}`;
//!
//! where `SERVER` is `{"command", "args", "env", "cwd"}` (a stdio server, `"type":
//! "stdio"` or no type) or `{"url", "headers"}` (`"type": "http"`, `"sse"`, or no type).
//! Other keys (`disabled`, `autoApprove`, VS Code's `inputs`, …) are ignored.
//!
//! Every string may name variables, expanded when a server is read: `${VAR}` and
//! `${VAR:-default}` (Claude Code), `${env:VAR}`, `${workspaceFolder}` and
//! `${userHome}` (VS Code). A variable that is not set and has no default is an error
//! naming it; so is `${input:…}`, which only VS Code can prompt for.
//!
//! A configuration file says which program to start and where to send headers, so a
//! file from somewhere else is a way to run someone else's program: [`locate`] looks
//! only inside the project, and skips a file (or its folder) that another user owns or
//! that group or others may write to, as the snapshot lookup does
//! ([`crate::snapshot::Project`]).

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::snapshot::{check_folder, Project};
use crate::text::escape;

/// The configuration files looked for in each folder, nearest first: Claude Code's
/// and Cursor's, then VS Code's.
pub const FILES: [&str; 2] = [".mcp.json", ".vscode/mcp.json"];

/// The most of a configuration file read.
const MAX_FILE: u64 = 1024 * 1024;

/// One server, as a configuration file describes it (variables expanded). `Debug`
/// shows no environment or header values: they are often credentials.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerConfig {
    /// A server started as a process, spoken to over stdio.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables set for it (on top of the safe default set).
        env: Vec<(String, String)>,
        /// The folder it starts in.
        cwd: Option<PathBuf>,
    },
    /// A server reached over HTTP (Streamable HTTP, or HTTP+SSE).
    Http {
        /// Its endpoint.
        url: String,
        /// Headers sent with every request.
        headers: Vec<(String, String)>,
    },
}

/// A URL with what may be a credential left out: user information, query, fragment.
fn url_shown(url: &str) -> String {
    let cut = url.find(['?', '#']).unwrap_or(url.len());
    let (base, rest) = url.split_at(cut);
    let base = match base.split_once("://") {
        Some((scheme, after)) => {
            let authority = after.split('/').next().unwrap_or("");
            match authority.rfind('@') {
                Some(at) => format!("{scheme}://<redacted>@{}", &after[at + 1..]),
                None => base.to_owned(),
            }
        }
        None => base.to_owned(),
    };
    if rest.is_empty() {
        base
    } else {
        format!("{base}?<redacted>")
    }
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |pairs: &[(String, String)]| -> Vec<String> {
            pairs
                .iter()
                .map(|(k, _)| format!("{k}=<redacted>"))
                .collect()
        };
        match self {
            ServerConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                // Arguments may carry a key (`--api-key ${KEY}`): only their number.
                .field("args", &format_args!("<{} redacted>", args.len()))
                .field("env", &names(env))
                .field("cwd", cwd)
                .finish(),
            ServerConfig::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", &url_shown(url))
                .field("headers", &names(headers))
                .finish(),
        }
    }
}

/// A configuration file that cannot be used, and what to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    path: Option<PathBuf>,
    message: String,
}

impl ConfigError {
    fn new(path: Option<&Path>, message: impl Into<String>) -> Self {
        ConfigError {
            path: path.map(Path::to_path_buf),
            message: message.into(),
        }
    }

    /// The file, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(
                f,
                "{}: {}",
                escape(&p.display().to_string(), false),
                self.message
            ),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A configuration file's servers, unexpanded.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    path: PathBuf,
    base: PathBuf,
    servers: Map<String, Value>,
}

impl ConfigFile {
    /// Reads a configuration file (either format). `${workspaceFolder}` is the folder
    /// holding `.vscode/` for a file in one, else the file's own folder.
    pub fn read(path: &Path) -> Result<ConfigFile, ConfigError> {
        use std::io::Read as _;
        // `.mcp.json` has the folder `` as its parent: the folder is the current one.
        let absolute = std::path::absolute(path);
        let path = absolute.as_deref().unwrap_or(path);
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_FILE + 1).read_to_string(&mut text))
            .map_err(|e| ConfigError::new(Some(path), format!("cannot be read ({e})")))?;
        if text.len() as u64 > MAX_FILE {
            return Err(ConfigError::new(
                Some(path),
                "is larger than 1 MiB; is it really an MCP configuration file?",
            ));
        }
        let folder = path.parent().unwrap_or(Path::new("."));
        let base = if folder.file_name().is_some_and(|n| n == ".vscode") {
            folder.parent().unwrap_or(folder)
        } else {
            folder
        };
        ConfigFile::parse(&text, path, base)
    }

    /// Reads a configuration file's text; `path` is for messages, `base` is
    /// `${workspaceFolder}` and what a relative `cwd` is relative to.
    pub fn parse(text: &str, path: &Path, base: &Path) -> Result<ConfigFile, ConfigError> {
        let at = Some(path);
        let v: Value = serde_json::from_str(text)
            .map_err(|e| ConfigError::new(at, format!("is not valid JSON ({e})")))?;
        let Value::Object(mut top) = v else {
            return Err(ConfigError::new(at, "is not a JSON object"));
        };
        let servers =
            match (top.remove("mcpServers"), top.remove("servers")) {
                (Some(Value::Object(m)), None) | (None, Some(Value::Object(m))) => m,
                (Some(_), Some(_)) => return Err(ConfigError::new(
                    at,
                    "has both `mcpServers` (Claude Code, Cursor) and `servers` (VS Code); keep one",
                )),
                (None, None) => {
                    return Err(ConfigError::new(
                        at,
                        "has neither `mcpServers` (Claude Code, Cursor) nor `servers` (VS Code)",
                    ))
                }
                _ => {
                    return Err(ConfigError::new(
                        at,
                        "has a server list that is not a JSON object (name → server)",
                    ))
                }
            };
        Ok(ConfigFile {
            path: path.to_path_buf(),
            base: base.to_path_buf(),
            servers,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The servers' names, in the file's order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.servers.keys().map(String::as_str)
    }

    /// Whether the file describes `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.servers.contains_key(name)
    }

    /// The server `name`, its variables expanded from the process environment.
    pub fn server(&self, name: &str) -> Result<ServerConfig, ConfigError> {
        self.server_with(name, |var| std::env::var(var).ok())
    }

    /// The server `name`, its variables expanded by `var`.
    pub fn server_with(
        &self,
        name: &str,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<ServerConfig, ConfigError> {
        let at = Some(self.path.as_path());
        let shown = escape(name, false);
        let Some(entry) = self.servers.get(name) else {
            let hint = crate::snapshot::did_you_mean(name, self.names())
                .map(|n| format!("; did you mean `{}`?", escape(n, false)))
                .unwrap_or_default();
            return Err(ConfigError::new(
                at,
                format!("has no server `{shown}`{hint}"),
            ));
        };
        let Value::Object(entry) = entry else {
            return Err(ConfigError::new(
                at,
                format!("server `{shown}` is not a JSON object"),
            ));
        };
        let fail = |what: &str, why: String| {
            ConfigError::new(at, format!("server `{shown}`, `{what}`: {why}"))
        };
        let expand = |what: &str, text: &str| -> Result<String, ConfigError> {
            expand(text, &self.base, &var).map_err(|why| fail(what, why))
        };
        let string = |key: &str| -> Result<Option<String>, ConfigError> {
            match entry.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => expand(key, s).map(Some),
                Some(_) => Err(fail(key, "is not a string".into())),
            }
        };
        let pairs = |key: &str| -> Result<Vec<(String, String)>, ConfigError> {
            match entry.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| {
                        let what = format!("{key}.{k}");
                        let text = match v {
                            Value::String(s) => s.clone(),
                            Value::Number(n) => n.to_string(),
                            Value::Bool(b) => b.to_string(),
                            _ => return Err(fail(&what, "is not a string".into())),
                        };
                        Ok((k.clone(), expand(&what, &text)?))
                    })
                    .collect(),
                Some(_) => Err(fail(key, "is not a JSON object".into())),
            }
        };
        let kind = string("type")?;
        let url = string("url")?;
        let command = string("command")?;
        match (kind.as_deref(), url, command) {
            (Some("http" | "sse" | "streamable-http" | "streamableHttp") | None, Some(url), None) => {
                Ok(ServerConfig::Http {
                    url,
                    headers: pairs("headers")?,
                })
            }
            (Some("stdio") | None, None, Some(command)) => {
                if command.is_empty() {
                    return Err(fail("command", "is empty".into()));
                }
                if entry.contains_key("envFile") {
                    return Err(fail(
                        "envFile",
                        "is not read by this client; put the variables in `env` (values may name ${VAR})".into(),
                    ));
                }
                let args = match entry.get("args") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => items
                        .iter()
                        .enumerate()
                        .map(|(i, a)| match a {
                            Value::String(s) => expand(&format!("args[{i}]"), s),
                            _ => Err(fail(&format!("args[{i}]"), "is not a string".into())),
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err(fail("args", "is not a list".into())),
                };
                let cwd = string("cwd")?.map(|d| self.base.join(d));
                Ok(ServerConfig::Stdio {
                    command,
                    args,
                    env: pairs("env")?,
                    cwd,
                })
            }
            (_, Some(_), Some(_)) => Err(ConfigError::new(
                at,
                format!("server `{shown}` has both `url` and `command`; keep one"),
            )),
            (Some(kind @ "stdio"), _, _) => Err(ConfigError::new(
                at,
                format!("server `{shown}` has type `{kind}` without the `command` it needs"),
            )),
            (Some(kind @ ("http" | "sse" | "streamable-http" | "streamableHttp")), _, _) => {
                Err(ConfigError::new(
                    at,
                    format!("server `{shown}` has type `{kind}` without the `url` it needs"),
                ))
            }
            (Some(kind), _, _) => Err(ConfigError::new(
                at,
                format!(
                    "server `{shown}` has type `{}`, which this client does not know; use `stdio` (with `command`) or `http` / `sse` (with `url`)",
                    escape(kind, false)
                ),
            )),
            (None, None, None) => Err(ConfigError::new(
                at,
                format!("server `{shown}` has neither `command` (a stdio server) nor `url` (an HTTP server)"),
            )),
        }
    }
}

/// Expands `${…}` in `text`; `Err` says which variable and what to do.
fn expand(
    text: &str,
    base: &Path,
    var: &impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!(
                "`{}` opens `${{` without closing it",
                escape(text, false)
            ));
        };
        let inner = &after[..end];
        let shown_inner = escape(inner, false);
        let needed = |name: &str| -> Result<String, String> {
            var(name).ok_or_else(|| {
                format!("uses ${{{shown_inner}}}, but `{}` is not set; set it, or give a default (${{{0}:-value}})", escape(name, false))
            })
        };
        let value = if inner == "workspaceFolder" {
            base.display().to_string()
        } else if inner == "userHome" {
            needed("HOME")?
        } else if let Some(name) = inner.strip_prefix("env:") {
            needed(name)?
        } else if inner.starts_with("input:") {
            return Err(format!(
                "uses ${{{shown_inner}}}, an input only VS Code can prompt for; use ${{env:VAR}} and set VAR instead"
            ));
        } else if let Some((name, default)) = inner.split_once(":-") {
            var(name).unwrap_or_else(|| default.to_owned())
        } else if !inner.is_empty() && inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            needed(inner)?
        } else {
            return Err(format!(
                "uses ${{{}}}, which is not a variable this client knows (${{VAR}}, ${{VAR:-default}}, ${{env:VAR}}, ${{workspaceFolder}}, ${{userHome}})",
                escape(inner, false)
            ));
        };
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether a configuration file may be used: it and its folder belong to the current
/// user and neither group nor others may write to them.
pub fn check_file(path: &Path) -> Result<(), String> {
    let absolute = std::path::absolute(path);
    let path = absolute.as_deref().unwrap_or(path);
    check_folder(path)?;
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => check_folder(dir).map_err(|why| {
            format!(
                "its folder {}: {why}",
                escape(&dir.display().to_string(), false)
            )
        }),
        _ => Ok(()),
    }
}

/// A configuration file [`locate`] passed over, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passed {
    /// The file.
    pub file: PathBuf,
    /// Why, and what to fix.
    pub reason: String,
}

impl fmt::Display for Passed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the configuration file {} is not used: {}",
            escape(&self.file.display().to_string(), false),
            self.reason
        )
    }
}

/// What [`locate`] found.
#[derive(Debug, Default)]
pub struct Located {
    /// The nearest usable file describing the server.
    pub file: Option<ConfigFile>,
    /// Files passed over: unsafe ones (they may hold the server that was meant), and
    /// ones that cannot be read.
    pub skipped: Vec<Passed>,
}

/// The nearest configuration file inside the project that describes `name`: from the
/// project's start folder up to its root, `.mcp.json` then `.vscode/mcp.json` in each.
pub fn locate(project: &Project, name: &str) -> Located {
    let mut skipped = Vec::new();
    for folder in project.folders() {
        for rel in FILES {
            let path = folder.join(rel);
            if !path.is_file() {
                continue;
            }
            if let Err(reason) = check_file(&path) {
                skipped.push(Passed { file: path, reason });
                continue;
            }
            match ConfigFile::read(&path) {
                Ok(file) if file.contains(name) => {
                    return Located {
                        file: Some(file),
                        skipped,
                    }
                }
                Ok(_) => {}
                Err(e) => skipped.push(Passed {
                    file: path,
                    reason: e.message,
                }),
            }
        }
    }
    Located {
        file: None,
        skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("t0k".into()),
            "HOME" => Some("/home/me".into()),
            _ => None,
        }
    }

    fn file(text: &str) -> ConfigFile {
        ConfigFile::parse(text, Path::new("/p/.mcp.json"), Path::new("/p")).unwrap()
    }

    #[test]
    fn both_formats_and_every_variable_form() {
        let claude = file(
            r#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "${workspaceFolder}/x", "${MISSING:-d}"],
                       "env": {"KEY": "${TOKEN}", "N": 3}, "cwd": "sub"},
                "web": {"type": "http", "url": "https://h/${env:TOKEN}", "headers": {"Authorization": "Bearer ${TOKEN}"}}
            }}"#,
        );
        assert_eq!(
            claude.server_with("fs", vars).unwrap(),
            ServerConfig::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "/p/x".into(), "d".into()],
                env: vec![("KEY".into(), "t0k".into()), ("N".into(), "3".into())],
                cwd: Some(PathBuf::from("/p/sub")),
            }
        );
        let web = claude.server_with("web", vars).unwrap();
        assert_eq!(
            web,
            ServerConfig::Http {
                url: "https://h/t0k".into(),
                headers: vec![("Authorization".into(), "Bearer t0k".into())],
            }
        );
        // The positive control, then the value gone from Debug.
        assert!(format!("{web:?}").contains("Authorization"));
        assert!(!format!("{web:?}").contains("Bearer"), "{web:?}");
        // Values in a URL's query or user information, and arguments, are left out too.
        let keyed = ServerConfig::Http {
            url: "https://user:t0k@h/mcp?key=t0k".into(),
            headers: Vec::new(),
        };
        let shown = format!("{keyed:?}");
        assert!(
            shown.contains("https://<redacted>@h/mcp?<redacted>"),
            "{shown}"
        );
        assert!(!shown.contains("t0k"), "{shown}");
        let args = ServerConfig::Stdio {
            command: "srv".into(),
            args: vec!["--api-key".into(), "t0k".into()],
            env: vec![("K".into(), "t0k".into())],
            cwd: None,
        };
        let shown = format!("{args:?}");
        assert!(
            shown.contains("srv") && shown.contains("K=<redacted>"),
            "{shown}"
        );
        assert!(!shown.contains("t0k"), "{shown}");
        let vscode = file(
            r#"{"servers": {"s": {"type": "stdio", "command": "${userHome}/bin/s"}}, "inputs": []}"#,
        );
        assert!(matches!(vscode.server_with("s", vars).unwrap(),
            ServerConfig::Stdio { command, .. } if command == "/home/me/bin/s"));
    }

    #[test]
    fn what_cannot_be_used_says_what_to_fix() {
        let f = file(
            r#"{"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE}"}},
                "b": {"url": "u", "command": "c"}, "c": {"type": "http"},
                "d": {"command": "x", "args": ["${input:key}"]}, "e": {},
                "f": {"type": "ftp", "url": "u"}}}"#,
        );
        let err = |n: &str| f.server_with(n, vars).unwrap_err().to_string();
        assert!(
            err("a").contains("`env.K`: uses ${NOPE}, but `NOPE` is not set"),
            "{}",
            err("a")
        );
        assert!(
            err("b").contains("both `url` and `command`"),
            "{}",
            err("b")
        );
        assert!(
            err("c").contains("type `http` without the `url`"),
            "{}",
            err("c")
        );
        assert!(
            err("d").contains("only VS Code can prompt for"),
            "{}",
            err("d")
        );
        assert!(err("e").contains("neither `command`"), "{}", err("e"));
        assert!(err("aa").contains("did you mean `a`?"), "{}", err("aa"));
        assert!(err("a").starts_with("/p/.mcp.json: "), "{}", err("a"));
        let bad = ConfigFile::parse("{\"x\": 1}", Path::new("f"), Path::new("."));
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("neither `mcpServers`"));
    }
}
