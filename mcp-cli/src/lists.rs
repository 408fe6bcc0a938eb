//! The commands that look: `info`, `tools`, `prompts`, `prompt`, `resources`,
//! `templates`, `read`, `complete`.

use std::future::Future;
use std::process::ExitCode;

use clap::ArgMatches;
use mcp_runtime::client::Era;
use mcp_runtime::model::{CompletionRef, Content, LogMessage};
use mcp_runtime::{CancellationToken, Client};
use serde_json::{json, Value};

use crate::failure::Failure;
use crate::server::{self, Options, Resolved};
use crate::show::{first_line, print_json, say, shown, shown_lines, table};

/// A command's server and client; the server's log messages go to stderr.
pub struct Open {
    /// The server.
    pub r: Resolved,
    /// Its client.
    pub c: Client,
    /// Ctrl-C.
    pub interrupt: CancellationToken,
}

impl Open {
    /// Opens the server the command line names, with `options`.
    pub fn new(
        m: &ArgMatches,
        interrupt: &CancellationToken,
        mut options: Options,
    ) -> Result<Open, Failure> {
        let r = server::resolve(m)?;
        let configure = options.configure.take();
        let own_log = options.own_log;
        options.configure = Some(Box::new(move |b: mcp_runtime::ClientBuilder| {
            let b = if own_log { b } else { b.after_log(print_log) };
            match configure {
                Some(f) => f(b),
                None => b,
            }
        }));
        let c = server::client(m, &r, options)?;
        Ok(Open {
            r,
            c,
            interrupt: interrupt.clone(),
        })
    }

    /// Runs `f`, unless Ctrl-C comes first; a runtime error says what to do.
    pub async fn run<T>(
        &self,
        f: impl Future<Output = mcp_runtime::Result<T>>,
    ) -> Result<T, Failure> {
        tokio::select! {
            out = f => out.map_err(|e| Failure::server(&self.r.name, e)),
            () = self.interrupt.cancelled() => Err(Failure::interrupted("the request was abandoned")),
        }
    }

    /// Whether the server offers `area` (a capability: `prompts`, `resources`,
    /// `completions`); when not, says so on stderr.
    pub async fn offers(&self, area: &str) -> Result<bool, Failure> {
        let d = self.run(self.c.connect()).await?;
        let offered = d.capabilities.0.get(area).is_some_and(|v| !v.is_null());
        if !offered {
            eprintln!(
                "mcp: {} offers no {area} (its capabilities have no `{area}`)",
                shown(&self.r.name)
            );
        }
        Ok(offered)
    }

    /// Closes the connection (a stdio server is stopped).
    pub async fn close(self) -> Result<ExitCode, Failure> {
        self.c
            .close()
            .await
            .map_err(|e| Failure::server(&self.r.name, e))?;
        Ok(ExitCode::SUCCESS)
    }
}

/// A log message from the server, on stderr.
pub fn print_log(m: &LogMessage) {
    let level = m.level.map_or("log", |l| l.as_str());
    let logger = m
        .logger
        .as_deref()
        .map(|l| format!(" [{}]", shown(l)))
        .unwrap_or_default();
    let text = match &m.data {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    eprintln!("server {level}{logger}: {}", shown_lines(&text));
}

/// `mcp info`.
pub async fn info(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let o = Open::new(m, interrupt, Options::default())?;
    let d = o.run(o.c.connect()).await?;
    let era = match d.era {
        Era::Modern => "modern",
        Era::Legacy => "legacy",
    };
    if m.get_flag("json") {
        print_json(&json!({
            "protocolVersion": d.protocol_version,
            "era": era,
            "serverInfo": serde_json::to_value(&d.info)?,
            "capabilities": d.capabilities.0,
            "instructions": d.instructions,
        }));
        return o.close().await;
    }
    let mut caps = Vec::new();
    if let Value::Object(map) = &d.capabilities.0 {
        for (area, v) in map {
            let flags: Vec<&str> = match v {
                Value::Object(f) => f
                    .iter()
                    .filter(|(_, v)| v.as_bool() == Some(true))
                    .map(|(k, _)| k.as_str())
                    .collect(),
                _ => Vec::new(),
            };
            caps.push(if flags.is_empty() {
                shown(area).into_owned()
            } else {
                format!("{} ({})", shown(area), shown(&flags.join(", ")))
            });
        }
    }
    let how = match d.era {
        Era::Modern => "modern era: stateless, no handshake",
        Era::Legacy => "legacy era: initialize handshake",
    };
    let mut rows = vec![
        vec![
            "server".to_owned(),
            format!("{} {}", shown(&d.info.name), shown(&d.info.version)),
        ],
        vec![
            "protocol".to_owned(),
            format!("{} ({how})", shown(&d.protocol_version)),
        ],
        vec!["capabilities".to_owned(), caps.join(", ")],
    ];
    if let Some(t) = &d.info.title {
        rows.insert(1, vec!["title".to_owned(), shown(t).into_owned()]);
    }
    table(&rows);
    if let Some(text) = d.instructions.as_deref().filter(|t| !t.trim().is_empty()) {
        say!("instructions:");
        for line in shown_lines(text).lines() {
            say!("  {line}");
        }
    }
    o.close().await
}

/// `mcp tools`.
pub async fn tools(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let o = Open::new(m, interrupt, Options::default())?;
    let tools = o.run(o.c.tools()).await?;
    if m.get_flag("json") {
        print_json(&json!({ "tools": serde_json::to_value(&tools)? }));
    } else {
        // Names and descriptions come from the server: nothing in them may act on the
        // terminal.
        let rows: Vec<Vec<String>> = tools
            .iter()
            .map(|t| {
                vec![
                    shown(&t.name).into_owned(),
                    first_line(t.description.as_deref()),
                ]
            })
            .collect();
        table(&rows);
    }
    o.close().await
}

/// `mcp prompts`.
pub async fn prompts(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let o = Open::new(m, interrupt, Options::default())?;
    let prompts = if o.offers("prompts").await? {
        o.run(o.c.prompts()).await?
    } else {
        Vec::new()
    };
    if m.get_flag("json") {
        print_json(&json!({ "prompts": serde_json::to_value(&prompts)? }));
    } else {
        let rows: Vec<Vec<String>> = prompts
            .iter()
            .map(|p| {
                let args: Vec<String> = p
                    .arguments
                    .iter()
                    .map(|a| format!("{}{}", shown(&a.name), if a.required { "" } else { "?" }))
                    .collect();
                vec![
                    shown(&p.name).into_owned(),
                    args.join(" "),
                    first_line(p.description.as_deref()),
                ]
            })
            .collect();
        table(&rows);
    }
    o.close().await
}

/// `KEY=VALUE` pairs.
pub fn key_values<'a>(
    items: impl Iterator<Item = &'a String>,
    what: &str,
) -> Result<Vec<(String, String)>, Failure> {
    items
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(Failure::usage(format!(
                "{what} `{}`: write it as KEY=VALUE",
                shown(kv)
            ))),
        })
        .collect()
}

/// `mcp prompt NAME PROMPT [KEY=VALUE…]`.
pub async fn prompt(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let o = Open::new(m, interrupt, Options::default())?;
    let name = m.get_one::<String>("prompt").cloned().unwrap_or_default();
    let args = key_values(
        m.get_many::<String>("arguments").into_iter().flatten(),
        "the prompt argument",
    )?;
    let asked = tokio::select! {
        r = o.c.prompt(&name, args) => r,
        () = o.interrupt.cancelled() => return Err(Failure::interrupted("the request was abandoned")),
    };
    let result = match asked {
        Ok(r) => r,
        // The server refused it: if it has no such prompt, say which it has.
        Err(e) if e.is_protocol() || e.is_not_found() => {
            let failure = Failure::server(&o.r.name, e);
            return Err(not_found(&o, failure, &name).await);
        }
        Err(e) => return Err(Failure::server(&o.r.name, e)),
    };
    if m.get_flag("json") {
        print_json(&serde_json::to_value(&result)?);
        return o.close().await;
    }
    if let Some(d) = &result.description {
        say!("# {}", shown(d));
    }
    for message in &result.messages {
        let role = serde_json::to_value(&message.role)?;
        say!("{}:", shown(role.as_str().unwrap_or("?")));
        say!("{}", content_text(&message.content));
    }
    o.close().await
}

/// A prompt that failed: if the server has no such prompt, say which it has.
async fn not_found(o: &Open, e: Failure, name: &str) -> Failure {
    let listed = tokio::select! {
        r = o.c.prompts() => r,
        () = o.interrupt.cancelled() => return e,
    };
    let Ok(prompts) = listed else {
        return e;
    };
    if prompts.iter().any(|p| p.name == name) {
        return e;
    }
    let hint = mcp_runtime::snapshot::did_you_mean(name, prompts.iter().map(|p| p.name.as_str()))
        .map(|n| format!("; did you mean `{}`?", shown(n)))
        .unwrap_or_else(|| "; `mcp prompts` lists them".to_owned());
    Failure::usage(format!(
        "{} has no prompt `{}`{hint}",
        shown(&o.r.name),
        shown(name)
    ))
}

/// A content block for a person: its text, or what it is.
pub fn content_text(c: &Content) -> String {
    match c {
        Content::Text { text, .. } => shown_lines(text).into_owned(),
        other => {
            let v = serde_json::to_value(other).unwrap_or(Value::Null);
            let kind = v.get("type").and_then(Value::as_str).unwrap_or("content");
            let mime = v
                .get("mimeType")
                .and_then(Value::as_str)
                .map(|m| format!(", {}", shown(m)))
                .unwrap_or_default();
            let uri = v
                .get("uri")
                .or_else(|| v.get("resource").and_then(|r| r.get("uri")))
                .and_then(Value::as_str)
                .map(|u| format!(" {}", shown(u)))
                .unwrap_or_default();
            format!("[{kind}{uri}{mime}; --json shows it whole]")
        }
    }
}

/// `mcp resources`.
pub async fn resources(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let o = Open::new(m, interrupt, Options::default())?;
    let resources = if o.offers("resources").await? {
        o.run(o.c.resources()).await?
    } else {
        Vec::new()
    };
    if m.get_flag("json") {
        print_json(&json!({ "resources": serde_json::to_value(&resources)? }));
    } else {
        let rows: Vec<Vec<String>> = resources
            .iter()
            .map(|r| {
                vec![
                    shown(&r.uri).into_owned(),
                    shown(&r.name).into_owned(),
                    first_line(r.description.as_deref()),
                ]
            })
            .collect();
        table(&rows);
    }
    o.close().await
}

/// `mcp templates`.
pub async fn templates(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let o = Open::new(m, interrupt, Options::default())?;
    let templates = if o.offers("resources").await? {
        o.run(o.c.resource_templates()).await?
    } else {
        Vec::new()
    };
    if m.get_flag("json") {
        print_json(&json!({ "resourceTemplates": serde_json::to_value(&templates)? }));
    } else {
        let rows: Vec<Vec<String>> = templates
            .iter()
            .map(|t| {
                vec![
                    shown(&t.uri_template).into_owned(),
                    shown(&t.name).into_owned(),
                    first_line(t.description.as_deref()),
                ]
            })
            .collect();
        table(&rows);
    }
    o.close().await
}

/// `mcp read NAME URI`.
pub async fn read(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let o = Open::new(m, interrupt, Options::default())?;
    let uri = m.get_one::<String>("uri").cloned().unwrap_or_default();
    let result = o.run(o.c.resource(&uri)).await?;
    if m.get_flag("json") {
        print_json(&serde_json::to_value(&result)?);
        return o.close().await;
    }
    for c in &result.contents {
        match (&c.text, &c.blob) {
            (Some(text), _) => say!("{}", shown_lines(text)),
            (None, Some(_)) => say!(
                "[{} bytes of {} from {}; --json shows it base64-encoded]",
                c.blob_bytes().map_or(0, |b| b.len()),
                shown(c.mime_type.as_deref().unwrap_or("binary data")),
                shown(&c.uri)
            ),
            (None, None) => say!("[{}: empty]", shown(&c.uri)),
        }
    }
    o.close().await
}

/// `mcp complete NAME (--prompt P | --template T) ARGUMENT [VALUE] [--context K=V…]`.
pub async fn complete(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let reference = match (
        m.get_one::<String>("prompt-ref"),
        m.get_one::<String>("template-ref"),
    ) {
        (Some(p), _) => CompletionRef::Prompt(p.clone()),
        (None, Some(t)) => CompletionRef::Resource(t.clone()),
        (None, None) => {
            return Err(Failure::usage(
                "complete an argument of what? give --prompt PROMPT or --template URI_TEMPLATE",
            ))
        }
    };
    let o = Open::new(m, interrupt, Options::default())?;
    let argument = m.get_one::<String>("argument").cloned().unwrap_or_default();
    let value = m.get_one::<String>("value").cloned().unwrap_or_default();
    let context = key_values(
        m.get_many::<String>("context").into_iter().flatten(),
        "--context",
    )?;
    let context: Vec<(&str, &str)> = context
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let completion = o
        .run(o.c.complete(reference, &argument, &value, &context))
        .await?;
    if m.get_flag("json") {
        print_json(&json!({ "completion": serde_json::to_value(&completion)? }));
    } else {
        for v in &completion.values {
            say!("{}", shown(v));
        }
        if completion.has_more {
            eprintln!(
                "(more values exist{})",
                completion
                    .total
                    .map(|t| format!(": {t} in all"))
                    .unwrap_or_default()
            );
        }
    }
    o.close().await
}
