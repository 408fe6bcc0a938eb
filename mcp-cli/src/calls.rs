//! The commands that act or wait: `call`, `tasks`, `listen`, `login`.

use std::process::ExitCode;
use std::sync::Arc;

use clap::ArgMatches;
use mcp_runtime::auth::{FileStore, LoopbackAuthorizer, OAuth};
use mcp_runtime::client::{Started, TaskState, TaskStatus};
use mcp_runtime::model::{LogLevel, LogMessage};
use mcp_runtime::{CallToolResult, CancellationToken, Change, ClientBuilder, RequestOptions};
use serde_json::{json, Map, Value};

use crate::failure::{code, Failure};
use crate::lists::{key_values, Open};
use crate::progress::Reporter;
use crate::server::{self, Options};
use crate::show::{json_shown, print_json, say, shown, shown_lines, table};

/// The tasks extension, declared where tasks are used (2026-07-28 servers run tasks
/// only for clients that declare it).
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// The arguments of `mcp call`: the JSON object, then each `--arg KEY=VALUE` (a value
/// that parses as JSON is that JSON, anything else a string).
fn arguments(m: &ArgMatches) -> Result<Map<String, Value>, Failure> {
    let mut args = match m.get_one::<String>("arguments") {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(Failure::usage("the arguments must be a JSON object, like '{\"message\": \"hi\"}' (or give --arg KEY=VALUE)")),
            Err(e) => return Err(Failure::usage(format!("the arguments are not JSON: {e} (or give --arg KEY=VALUE)"))),
        },
    };
    for (k, v) in key_values(m.get_many::<String>("arg").into_iter().flatten(), "--arg")? {
        let value = serde_json::from_str(&v).unwrap_or(Value::String(v));
        args.insert(k, value);
    }
    Ok(args)
}

/// Prints a tool's result: its JSON (the default, which scripts rely on), or with
/// `--text` only its text content. Exit code 1 for an error result.
fn print_result(m: &ArgMatches, r: &CallToolResult) -> Result<ExitCode, Failure> {
    if m.try_get_one::<bool>("text").ok().flatten() == Some(&true) {
        say!("{}", shown_lines(&r.text()));
    } else {
        say!("{}", json_shown(&serde_json::to_string_pretty(r)?));
    }
    Ok(if r.is_error() {
        ExitCode::from(code::FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn state_name(s: &TaskState) -> String {
    match s {
        TaskState::Working => "working".into(),
        TaskState::InputRequired => "input_required".into(),
        TaskState::Completed => "completed".into(),
        TaskState::Failed => "failed".into(),
        TaskState::Cancelled => "cancelled".into(),
        TaskState::Other(s) => shown(s).into_owned(),
        other => format!("{other:?}"),
    }
}

fn status_line(s: &TaskStatus) -> String {
    let message = s
        .message
        .as_deref()
        .map(|m| format!(": {}", shown(m)))
        .unwrap_or_default();
    format!("task {} {}{message}", shown(&s.id), state_name(&s.state))
}

/// `mcp call NAME TOOL [JSON] [--arg K=V…] [--text] [--task]`.
pub async fn call(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let as_task = m.get_flag("task");
    let options = Options {
        configure: as_task.then(|| {
            Box::new(|b: ClientBuilder| {
                b.extension(TASKS, json!({})).after_change(|c| {
                    if let Change::Task(s) = c {
                        eprintln!("{}", status_line(s));
                    }
                })
            }) as Box<dyn FnOnce(ClientBuilder) -> ClientBuilder>
        }),
        ..Options::default()
    };
    let o = Open::new(m, interrupt, options)?;
    let tool = m.get_one::<String>("tool").cloned().unwrap_or_default();
    let args = Value::Object(arguments(m)?);
    // List first, so the call knows the tool's header mirrors (2026-07-28 HTTP), task
    // support (2025-11-25) and UI resource, and a misspelt tool is named. A server
    // that cannot list its tools still gets the call.
    let listed = tokio::select! {
        r = o.c.tools() => r,
        () = interrupt.cancelled() => return Err(Failure::interrupted("nothing was called")),
    };
    match listed {
        Ok(tools) if !tools.iter().any(|t| t.name == tool) => {
            let hint =
                mcp_runtime::snapshot::did_you_mean(&tool, tools.iter().map(|t| t.name.as_str()))
                    .map(|n| format!("; did you mean `{}`?", shown(n)))
                    .unwrap_or_else(|| "; `mcp tools` lists them".to_owned());
            let _ = o.c.close().await;
            return Err(Failure::usage(format!(
                "{} has no tool `{}`{hint}",
                shown(&o.r.name),
                shown(&tool)
            )));
        }
        Ok(_) => {}
        Err(e) if e.is_protocol() => {}
        Err(e) => return Err(Failure::server(&o.r.name, e)),
    }
    let reporter = Arc::new(Reporter::new());
    let shows = reporter.clone();
    let progress = move |p: &mcp_runtime::model::Progress| shows.report(p);
    let result = if as_task {
        let started = o.run(o.c.start(&tool, args)).await?;
        match started {
            Started::Done(r) => Ok(*r),
            Started::Task(task) => {
                eprintln!("task {} started", shown(task.id()));
                let mut opts = RequestOptions::default()
                    .with_progress(progress)
                    .with_cancel(interrupt.clone());
                if let Some(t) = server::timeout(m)? {
                    opts = opts.with_max_timeout(t);
                }
                let out = task.wait_with(&opts).await;
                if out.is_err() && interrupt.is_cancelled() {
                    reporter.finish();
                    let said = match task.cancel().await {
                        Ok(()) => "the task was cancelled (tasks/cancel)".to_owned(),
                        Err(e) => format!("cancelling the task failed: {e}"),
                    };
                    let _ = o.c.close().await;
                    return Err(Failure::interrupted(&said));
                }
                out
            }
        }
    } else {
        o.c.call(&tool, args)
            .on_progress(progress)
            .cancel_on(interrupt.clone())
            .await
    };
    reporter.finish();
    match result {
        Ok(r) => {
            let exit = print_result(m, &r)?;
            // The result is out: a failing close changes nothing of it.
            if let Err(e) = o.c.close().await {
                eprintln!(
                    "mcp: warning: closing the connection failed: {}",
                    shown(&e.to_string())
                );
            }
            Ok(exit)
        }
        Err(e) => {
            let f = Failure::server(&o.r.name, e);
            // Closing gently lets the cancellation reach the server first.
            let _ = o.c.close().await;
            Err(f)
        }
    }
}

/// `mcp tasks NAME [ID] [--cancel | --wait]`.
pub async fn tasks(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let options = Options {
        configure: Some(Box::new(|b: ClientBuilder| b.extension(TASKS, json!({})))),
        ..Options::default()
    };
    let o = Open::new(m, interrupt, options)?;
    let json = m.get_flag("json");
    let Some(id) = m.get_one::<String>("id") else {
        let mut tasks = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        // A server that hands out cursors forever is not followed forever, nor held
        // without bound.
        for _ in 0..1000 {
            let mut params = Map::new();
            if let Some(c) = cursor.take() {
                params.insert("cursor".into(), Value::String(c));
            }
            let mut page = o
                .run(o.c.request("tasks/list", params, RequestOptions::default()))
                .await?;
            if let Some(Value::Array(items)) = page.get_mut("tasks").map(Value::take) {
                tasks.extend(items);
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(c) if !c.is_empty() && tasks.len() < 100_000 && seen.insert(c.to_owned()) => {
                    cursor = Some(c.to_owned())
                }
                _ => break,
            }
        }
        if json {
            print_json(&json!({ "tasks": tasks }));
        } else {
            let field = |t: &Value, k: &str| {
                shown(t.get(k).and_then(Value::as_str).unwrap_or("")).into_owned()
            };
            let rows: Vec<Vec<String>> = tasks
                .iter()
                .map(|t| {
                    vec![
                        field(t, "taskId"),
                        field(t, "status"),
                        field(t, "lastUpdatedAt"),
                        field(t, "statusMessage"),
                    ]
                })
                .collect();
            table(&rows);
        }
        return o.close().await;
    };
    let task = o.c.task(id.clone());
    if m.get_flag("cancel") {
        o.run(task.cancel()).await?;
        eprintln!("task {}: cancellation requested", shown(id));
    }
    if m.get_flag("wait") {
        let reporter = Arc::new(Reporter::new());
        let shows = reporter.clone();
        let mut opts = RequestOptions::default()
            .with_progress(move |p| shows.report(p))
            .with_cancel(interrupt.clone());
        if let Some(t) = server::timeout(m)? {
            opts = opts.with_max_timeout(t);
        }
        let out = task.wait_with(&opts).await;
        reporter.finish();
        if out.is_err() && interrupt.is_cancelled() {
            let _ = o.c.close().await;
            return Err(Failure::interrupted(&format!(
                "the task still runs; `mcp tasks {} {} --cancel` cancels it",
                shown(&o.r.name),
                shown(id)
            )));
        }
        let r = out.map_err(|e| Failure::server(&o.r.name, e))?;
        let exit = print_result(m, &r)?;
        o.close().await?;
        return Ok(exit);
    }
    if json {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::String(id.clone()));
        let v = o
            .run(o.c.request("tasks/get", params, RequestOptions::default()))
            .await?;
        print_json(&v);
    } else {
        let s = o.run(task.status()).await?;
        say!("{}", status_line(&s));
    }
    o.close().await
}

/// A notification, for a person (or with `--json`, as the protocol's JSON).
fn print_change(c: &Change, json: bool) {
    if json {
        let v = match c {
            Change::Tools => json!({"method": "notifications/tools/list_changed"}),
            Change::Prompts => json!({"method": "notifications/prompts/list_changed"}),
            Change::Resources => json!({"method": "notifications/resources/list_changed"}),
            Change::Resource(uri) => {
                json!({"method": "notifications/resources/updated", "params": {"uri": uri}})
            }
            Change::Task(s) => json!({"method": "notifications/tasks/status", "params": {
                "taskId": s.id, "status": state_name(&s.state), "statusMessage": s.message}}),
            other => json!({"method": format!("{other:?}")}),
        };
        say!("{}", json_shown(&v.to_string()));
        return;
    }
    match c {
        Change::Tools => say!("tools changed"),
        Change::Prompts => say!("prompts changed"),
        Change::Resources => say!("resources changed"),
        Change::Resource(uri) => say!("resource updated: {}", shown(uri)),
        Change::Task(s) => say!("{}", status_line(s)),
        other => say!("{}", shown(&format!("{other:?}"))),
    }
}

fn print_log_line(l: &LogMessage, json: bool) {
    if json {
        let v = json!({"method": "notifications/message", "params": {
            "level": l.level.map(LogLevel::as_str), "logger": l.logger, "data": l.data}});
        say!("{}", json_shown(&v.to_string()));
        return;
    }
    let text = match &l.data {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let logger = l
        .logger
        .as_deref()
        .map(|g| format!(" [{}]", shown(g)))
        .unwrap_or_default();
    say!(
        "log {}{logger}: {}",
        l.level.map_or("?", LogLevel::as_str),
        shown_lines(&text)
    );
}

/// `mcp listen NAME [--resource URI…] [--task ID…]`: notifications on stdout until
/// Ctrl-C (exit 130) or `--timeout` (exit 0).
pub async fn listen(m: &ArgMatches, interrupt: &CancellationToken) -> Result<ExitCode, Failure> {
    let json = m.get_flag("json");
    // From info up unless --log-level says otherwise (which the client then sets).
    let level = if m.contains_id("log-level") {
        None
    } else {
        Some(LogLevel::Info)
    };
    let resources: Vec<String> = m
        .get_many::<String>("resource")
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let tasks: Vec<String> = m
        .get_many::<String>("task-id")
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let with_tasks = !tasks.is_empty();
    let options = Options {
        own_log: true,
        whole_timeout: true,
        configure: Some(Box::new(move |b: ClientBuilder| {
            let b = b
                .after_change(move |c| print_change(c, json))
                .after_log(move |l| print_log_line(l, json));
            let b = match level {
                Some(l) => b.log_level(l),
                None => b,
            };
            if with_tasks {
                b.extension(TASKS, json!({}))
            } else {
                b
            }
        })),
        ..Options::default()
    };
    let o = Open::new(m, interrupt, options)?;
    // Listening is no request: the timeout bounds how long, not each request.
    let limit = server::timeout(m)?;
    let r: Vec<&str> = resources.iter().map(String::as_str).collect();
    let t: Vec<&str> = tasks.iter().map(String::as_str).collect();
    let details = o.run(o.c.connect()).await?;
    o.run(o.c.listen_for(&r, &t)).await?;
    let caps = &details.capabilities;
    let announces =
        caps.tools_list_changed() || caps.prompts_list_changed() || caps.resources_list_changed();
    eprintln!(
        "listening to {}{} (Ctrl-C to stop)",
        shown(&o.r.name),
        if announces || !r.is_empty() || !t.is_empty() {
            ""
        } else {
            "; it announces no list changes, so only its log messages can come"
        }
    );
    let interrupted = match limit {
        Some(d) => tokio::select! {
            () = tokio::time::sleep(d) => false,
            () = interrupt.cancelled() => true,
        },
        None => {
            interrupt.cancelled().await;
            true
        }
    };
    o.close().await?;
    if interrupted {
        return Err(Failure::interrupted("stopped listening"));
    }
    Ok(ExitCode::SUCCESS)
}

/// `mcp login NAME`.
pub async fn login(m: &ArgMatches) -> Result<ExitCode, Failure> {
    let r = server::resolve(m)?;
    if !matches!(
        r.server,
        mcp_runtime_core::config::ServerConfig::Http { .. }
    ) {
        return Err(Failure::usage("`mcp login` is for HTTP servers (stdio servers take credentials from their environment)"));
    }
    let path = server::credentials_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut loopback = LoopbackAuthorizer::bind().map_err(|e| Failure::server(&r.name, e))?;
    if let Some(open) = m.get_one::<String>("open") {
        loopback = loopback.open_with(open.clone());
    }
    let owner = m
        .get_one::<String>("owner")
        .map_or("default", String::as_str);
    let oauth = OAuth::new()
        .owner(format!("{owner}@{}", r.name))
        .store(FileStore::new(&path))
        .redirect_uri(loopback.redirect_uri())
        .authorizer(loopback);
    let c = server::client(
        m,
        &r,
        Options {
            oauth: Some(oauth),
            ..Options::default()
        },
    )?;
    let fail = |e| Failure::server(&r.name, e);
    let tools = c.tools().await.map_err(fail)?;
    c.close().await.map_err(fail)?;
    say!(
        "{}: authorized ({} tools); credentials in {}",
        r.name,
        tools.len(),
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}
