//! Checks a declaration: settings that cannot work, and — with a snapshot — tool names
//! the server does not offer, fixed arguments a tool does not take, and method names
//! that collide.

use serde_json::Value;
use syn::spanned::Spanned;

use crate::ctxt::{hint, Ctxt};
use crate::parse::{Decl, Name, Predicate, Timeout};
use crate::schema::snake;

use mcp_runtime_core::protocol::LOG_LEVELS;

pub const PREDICATES: &[&str] = &["destructive", "open_world", "not_read_only"];

pub fn settings(d: &Decl, cx: &mut Ctxt, item_span: proc_macro2::Span) {
    for e in &d.errors {
        cx.push(e.clone());
    }
    let connections = [d.url.is_some(), d.command.is_some(), d.transport.is_some()];
    match connections.iter().filter(|c| **c).count() {
        // A setting that did not parse may be the connection: its error says enough.
        0 if !d.errors.is_empty() => {}
        0 => cx.error(
            item_span,
            "an MCP server needs `url = \"…\"`, `command(\"…\")` or `transport = Self::method`",
        ),
        1 => {}
        _ => {
            let second = d
                .command
                .as_ref()
                .map(|(k, _)| k.span())
                .or(d.transport.as_ref().map(|t| t.span()))
                .unwrap_or(item_span);
            cx.error(second, "give only one of `url`, `command` and `transport`")
        }
    }
    if let Some(url) = &d.url {
        // The runtime's own rule, compiled into this crate too.
        if let Err(e) = crate::url_rule::check(&url.value()) {
            cx.error(url.span(), e);
        }
    }
    if let Some((key, argv)) = &d.command {
        if argv.is_empty() || argv[0].value().is_empty() {
            cx.error(
                key.span(),
                "`command` needs at least the program, like `command(\"npx\", \"-y\", \"pkg\")`",
            );
        }
    }
    // Settings of one kind of connection on another are mistakes, not no-ops.
    let stdio_only = "applies to a `command` server only (a `url` server takes `header(...)` and `bearer_token`)";
    let http_only = "applies to a `url` server only (a `command` server takes `env(...)`)";
    if d.command.is_none() {
        if let Some(dir) = &d.directory {
            cx.error(dir.span(), format!("`directory` {stdio_only}"));
        }
        for (name, _) in &d.env {
            cx.error(name.span, format!("`env` {stdio_only}"));
        }
        for name in &d.inherit_env {
            cx.error(name.span, format!("`inherit_env` {stdio_only}"));
        }
        if let Some(key) = &d.inherit_all_env {
            cx.error(key.span(), format!("`inherit_all_env` {stdio_only}"));
        }
    }
    if d.url.is_none() {
        for (name, _) in &d.headers {
            cx.error(name.span(), format!("`header` {http_only}"));
        }
        if let Some(t) = &d.bearer_token {
            cx.error(source_span(t), format!("`bearer_token` {http_only}"));
        }
    }
    match &d.timeout {
        Some((_, Timeout::Secs(t))) => match t.base10_parse::<u64>() {
            Ok(0) | Err(_) => cx.error(
                t.span(),
                "`timeout` is seconds above zero (`30`, `2.5`) or a `Duration` (`Duration::from_millis(500)`)",
            ),
            Ok(_) => {}
        },
        Some((_, Timeout::Float(t))) => match t.base10_parse::<f64>() {
            Ok(v) if v > 0.0 && v.is_finite() => {}
            _ => cx.error(
                t.span(),
                "`timeout` is seconds above zero (`30`, `2.5`) or a `Duration` (`Duration::from_millis(500)`)",
            ),
        },
        _ => {}
    }
    if let Some(l) = &d.log_level {
        let s = l.value.clone();
        if !LOG_LEVELS.contains(&s.as_str()) {
            cx.error(
                l.span,
                format!(
                    "unknown MCP log level `{s}`: use one of {}{}",
                    LOG_LEVELS.join(", "),
                    hint(&s, &LOG_LEVELS)
                ),
            );
        }
    }
    if let Some((key, kinds)) = &d.input_requests {
        for k in kinds {
            let s = k.to_string();
            if !matches!(s.as_str(), "form" | "url" | "none") {
                cx.error(
                    k.span(),
                    format!("unknown input request kind `{s}`: use `form`, `url` or `none`"),
                );
            }
        }
        if kinds.len() > 1 && kinds.iter().any(|k| k == "none") {
            cx.error(
                key.span(),
                "`none` cannot be combined with other input request kinds",
            );
        }
        if kinds.is_empty() {
            cx.error(
                key.span(),
                "list the accepted kinds (`form`, `url`), or `none`",
            );
        }
    }
    for ext in &d.extensions {
        let n = &ext.name.value;
        let known = matches!(n.as_str(), "apps" | "tasks");
        let prefixed = n.split_once('/').is_some_and(|(prefix, rest)| {
            prefix.contains('.')
                && !rest.is_empty()
                && !prefix.starts_with('.')
                && !prefix.ends_with('.')
        });
        if !known && !prefixed {
            cx.error(
                ext.name.span,
                format!("extension `{n}` needs a vendor prefix, like \"com.example/{n}\" (`apps` and `tasks` are known by name)"),
            );
        }
    }
    if let Some(drift) = &d.drift {
        let s = drift.value.clone();
        if !matches!(s.as_str(), "warn" | "error" | "ignore") {
            cx.error(
                drift.span,
                format!("unknown drift policy `{s}`: use `warn`, `error` or `ignore`"),
            );
        }
    }
    for a in &d.approvals {
        if let Some(Predicate::Builtin(p)) = &a.predicate {
            let s = p.to_string();
            if !PREDICATES.contains(&s.as_str()) {
                cx.error(
                    p.span(),
                    format!(
                        "unknown approval predicate `{s}`: use {} or a method like `Self::needs_approval`{}",
                        PREDICATES.join(", "),
                        hint(&s, PREDICATES)
                    ),
                );
            }
        }
    }
    if let Some(o) = &d.oauth {
        if d.url.is_none() {
            cx.error(o.key.span(), "`oauth` applies to `url` servers (stdio servers take credentials from their environment)");
        }
        for (k, v) in &o.settings {
            if k == "grant" {
                let ok = matches!(v, crate::parse::Source::Method(p) if p.get_ident().is_some_and(|i| matches!(i.to_string().as_str(), "authorization_code" | "client_credentials" | "jwt_bearer")));
                if !ok {
                    cx.error(
                        k.span(),
                        "`grant` is `authorization_code`, `client_credentials` or `jwt_bearer`",
                    );
                }
            }
        }
        for (k, _) in &o.identity_provider {
            if !matches!(
                k.to_string().as_str(),
                "issuer" | "client_id" | "client_secret" | "id_token"
            ) {
                cx.error(k.span(), "identity_provider takes `issuer` (its token endpoint is read from its metadata), `client_id`, `client_secret` and `id_token`");
            }
        }
    }
    if let Some(p) = &d.prefix {
        let v = p.value();
        if v.is_empty()
            || !v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            cx.error(p.span(), "`prefix` is letters, digits, `_` or `-`");
        }
    }
}

/// What the model sees a server tool as, and the method generated for it.
pub struct Planned<'a> {
    pub tool: &'a Value,
    /// Its position among the snapshot's tools (the handle resolves them in that
    /// order, and a typed method calls its tool by position).
    pub position: usize,
    pub server_name: String,
    pub method: String,
    pub fixed: Vec<String>,
    pub span: proc_macro2::Span,
}

pub fn against_snapshot<'a>(d: &Decl, tools: &'a [Value], cx: &mut Ctxt) -> Vec<Planned<'a>> {
    let offered: Vec<&str> = tools
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect();
    let check_name = |setting: &str, n: &Name, cx: &mut Ctxt| {
        if !offered.contains(&n.value.as_str()) {
            cx.error(
                n.span,
                format!(
                    "`{setting}` names `{}`, which the server's snapshot does not offer{}",
                    n.value,
                    hint(&n.value, &offered)
                ),
            );
        }
    };
    for n in d.only.iter().flatten() {
        check_name("only", n, cx);
    }
    for n in &d.except {
        check_name("except", n, cx);
    }
    for t in &d.tools {
        check_name("tool", &t.name, cx);
    }
    for a in &d.approvals {
        for n in &a.names {
            check_name("requires_approval", n, cx);
        }
    }
    for n in d.defer.iter().flatten() {
        check_name("defer", n, cx);
    }
    for t in &d.tools {
        let Some(tool) = tools
            .iter()
            .find(|x| x.get("name").and_then(Value::as_str) == Some(t.name.value.as_str()))
        else {
            continue;
        };
        let props: Vec<&str> = tool
            .get("inputSchema")
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        for (k, _) in &t.fixed {
            if !props.contains(&k.value.as_str()) {
                cx.error(
                    k.span,
                    format!(
                        "`{}` takes no argument `{}`{}",
                        t.name.value,
                        k.value,
                        hint(&k.value, &props)
                    ),
                );
            }
        }
    }
    // Plan the methods and look for collisions.
    let mut planned: Vec<Planned> = Vec::new();
    for (position, tool) in tools.iter().enumerate() {
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            continue;
        };
        if d.only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n.value == name))
            || d.except.iter().any(|n| n.value == name)
        {
            continue;
        }
        let decl = d.tools.iter().find(|t| t.name.value == name);
        let model_name = match (decl.and_then(|t| t.rename.as_ref()), &d.prefix) {
            (Some(r), _) => r.value.clone(),
            (None, Some(p)) => format!("{}_{name}", p.value()),
            (None, None) => name.to_owned(),
        };
        let span = decl
            .map(|t| t.rename.as_ref().map(|r| r.span).unwrap_or(t.name.span))
            .or_else(|| d.prefix.as_ref().map(|p| p.span()))
            .unwrap_or_else(proc_macro2::Span::call_site);
        let method = snake(&model_name);
        if let Some(other) = planned.iter().find(|p| p.method == method) {
            cx.error(
                span,
                format!(
                    "tools `{}` and `{name}` would both become the method `{method}`; rename one with `tool(\"{name}\", as = …)`",
                    other.server_name
                ),
            );
        }
        if GENERATED.contains(&method.as_str()) {
            cx.error(
                span,
                format!("tool `{name}` would become the method `{method}`, which the declaration itself has; rename it with `tool(\"{name}\", as = …)` or set a `prefix`"),
            );
        }
        planned.push(Planned {
            tool,
            position,
            server_name: name.to_owned(),
            method,
            fixed: decl
                .map(|t| t.fixed.iter().map(|(k, _)| k.value.clone()).collect())
                .unwrap_or_default(),
            span,
        });
    }
    planned
}

/// The methods the macro gives every declared struct besides the typed ones (the
/// server's handle is behind `mcp()`, so its methods never meet a tool's).
pub const GENERATED: &[&str] = &["new", "with_context", "mcp"];

/// Where a value was written.
fn source_span(s: &crate::parse::Source) -> proc_macro2::Span {
    match s {
        crate::parse::Source::Lit(l) => l.span(),
        crate::parse::Source::Method(p) => p.span(),
    }
}
