//! The client the official MCP conformance suite runs for each client scenario.
//!
//! The harness calls `mcp-conformance-client <server-url>` with
//! `MCP_CONFORMANCE_SCENARIO`, `MCP_CONFORMANCE_PROTOCOL_VERSION` and (for some
//! scenarios) `MCP_CONFORMANCE_CONTEXT` set. Every scenario goes through the public API
//! of `mcp-runtime`, as an application would use it. Exit code 0 means the client did
//! what the scenario asks without an error.

use std::process::ExitCode;

use mcp_runtime::auth::{Callback, Grant, IdentityProvider, OAuth};
use mcp_runtime::{client::ProtocolMode, Client, HttpConfig, InputRequest, InputResponse, Secret};
use serde_json::{json, Map, Value};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MCP_LOG")
                .unwrap_or_else(|_| "debug".into()),
        )
        .init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp-conformance-client: {e}");
            ExitCode::FAILURE
        }
    }
}

type Failure = Box<dyn std::error::Error>;

async fn run() -> Result<(), Failure> {
    let url = std::env::args()
        .next_back()
        .ok_or("usage: mcp-conformance-client <server-url>")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let version =
        std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_else(|_| "2025-11-25".into());
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    eprintln!("scenario {scenario} at {version} against {url}");

    // The harness says which wire to use: the 2026-07-28 era is detected by probing;
    // the dated versions use the handshake.
    let mode = if mcp_runtime::client::MODERN_VERSIONS.contains(&version.as_str()) {
        ProtocolMode::Auto
    } else {
        ProtocolMode::Legacy
    };
    let mut http = HttpConfig::new(url);
    if scenario.starts_with("auth/") {
        http = http.oauth(oauth_for(&scenario, &context)?);
    }
    let client = Client::builder()
        .name("conformance")
        .protocol(mode)
        .input_handler(|req: InputRequest| async move {
            // Fill the form from its defaults, then with plausible values.
            let mut values = req.defaults();
            if let mcp_runtime::input::InputKind::Form { schema } = &req.kind {
                fill(schema, &mut values);
            }
            InputResponse::Accept(values)
        })
        .http(http)?;

    match scenario.as_str() {
        "initialize" | "request-metadata" => {
            client.connect().await?;
            client.tools().await?;
        }
        "tools_call" => {
            let tools = client.tools().await?;
            for tool in tools.iter().filter(|t| t.name == "add_numbers") {
                let r = client.call(&tool.name, json!({"a": 2, "b": 3})).await?;
                eprintln!("{}: {}", tool.name, r.text());
            }
        }
        "elicitation-sep1034-client-defaults" => {
            client.tools().await?;
            let r = client
                .call("test_client_elicitation_defaults", json!({}))
                .await?;
            eprintln!("{}", r.text());
        }
        "sse-retry" => {
            client.tools().await?;
            let r = client.call("test_reconnection", json!({})).await?;
            eprintln!("{}", r.text());
        }
        "sep-2322-client-request-state" => {
            let tools = client.tools().await?;
            for tool in tools.iter().filter(|t| t.name.starts_with("test_mrtr")) {
                let r = client.call(&tool.name, json!({})).await?;
                eprintln!("{}: {}", tool.name, r.text());
            }
        }
        "http-standard-headers" => {
            let tools = client.tools().await?;
            if let Some(t) = tools.first() {
                client.call(&t.name, json!({})).await?;
            }
            let resources = client.resources().await?;
            if let Some(r) = resources.first() {
                client.resource(&r.uri).await?;
            }
            let prompts = client.prompts().await?;
            if let Some(p) = prompts.first() {
                client
                    .prompt(&p.name, Vec::<(String, String)>::new())
                    .await?;
            }
        }
        "http-custom-headers" => {
            client.tools().await?;
            let calls = context
                .get("toolCalls")
                .and_then(Value::as_array)
                .ok_or("MCP_CONFORMANCE_CONTEXT has no toolCalls")?;
            for call in calls {
                let name = call
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or("a tool call without a name")?;
                let args = call.get("arguments").cloned().unwrap_or(json!({}));
                let r = client.call(name, args).await?;
                eprintln!("{name}: {}", r.text());
            }
        }
        "http-invalid-tool-headers" => {
            // Tools with invalid x-mcp-header annotations are left out of the list.
            for tool in client.tools().await? {
                let r = client.call(&tool.name, json!({})).await?;
                eprintln!("{}: {}", tool.name, r.text());
            }
        }
        "json-schema-ref-no-deref" => {
            client.tools().await?;
        }
        "json-schema-2020-12-preservation" => {
            let tools = client.tools().await?;
            let focal = tools
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .ok_or("no json_schema_2020_12_tool")?;
            client
                .call("json_schema_echo", json!({"schema": focal.input_schema}))
                .await?;
        }
        "auth/metadata-var1" => {
            // The web-application flow: authorize first (discovery through the
            // well-known URLs, no 401 needed), then use the server.
            let auth = client.authorization()?;
            let url = auth.url("http://localhost:3000/callback").await?;
            let callback = follow_without_redirects(url).await?;
            auth.complete(callback).await?;
            assert!(auth.is_authorized());
            for tool in client.tools().await? {
                client.call(&tool.name, json!({})).await?;
            }
        }
        s if s.starts_with("auth/") => {
            // Authorization happens when the server first answers 401.
            let tools = client.tools().await?;
            for tool in &tools {
                client.call(&tool.name, json!({})).await?;
            }
        }
        "sep-2640-client-no-prefetch"
            if std::env::var("MCP_CONFORMANCE_SKILLS_POSITIVE").as_deref() == Ok("1") =>
        {
            // The positive control CI runs: against this honest server the checked
            // load passes and the supporting file is read (so the scenario fails).
            skill_then_file(&client, "pdf-processing", "references/FORMS.md").await?;
        }
        "sep-2640-client-no-prefetch" => {
            // Connect and list: the registry is built from the listing alone.
            let skills = client.skills().await?;
            for s in &skills {
                eprintln!(
                    "skill {} ({}): {}",
                    s.name(),
                    s.uri(),
                    s.description().escape_debug()
                );
            }
        }
        s if s.starts_with("sep-2640-client-verify-") => {
            // Load the skill, then read its supporting file (only when the load
            // verified). A verifying client stops at the load.
            let unlisted = s == "sep-2640-client-verify-unlisted";
            let file = if unlisted {
                "scripts/extract.py"
            } else {
                "references/FORMS.md"
            };
            skill_then_file(&client, "pdf-processing", file).await?;
        }
        other => return Err(format!("unknown scenario `{other}`").into()),
    }
    client.close().await?;
    Ok(())
}

/// Lists the server's skills, loads `name` and reads `file` of it. With
/// `MCP_CONFORMANCE_SKILLS_VERIFY=off` (the negative control CI runs) the files are
/// read as plain resources, without the checks a load makes: the `verify-*`
/// scenarios must then fail, which shows that their passing comes from the checks.
async fn skill_then_file(client: &Client, name: &str, file: &str) -> Result<(), Failure> {
    let skills = client.skills().await?;
    let skill = skills
        .iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| format!("the server lists no `{name}` skill"))?;
    if std::env::var("MCP_CONFORMANCE_SKILLS_VERIFY").as_deref() == Ok("off") {
        eprintln!("NEGATIVE CONTROL: reading {name} without verification");
        client.resource(skill.uri()).await?;
        let uri = skill.resolve(file).ok_or("the file is outside the skill")?;
        client.resource(&uri).await?;
        return Ok(());
    }
    let loaded = match client.load_skill(skill).await? {
        mcp_runtime::skills::LoadOutcome::Done(l) => l,
        not => {
            eprintln!("not loaded: {not}");
            return Err(format!("skill {name}: {not}").into());
        }
    };
    eprintln!("loaded {} from {}", loaded.skill().uri(), loaded.server());
    let content = match loaded.read(file).await? {
        mcp_runtime::skills::LoadOutcome::Done(c) => c,
        not => {
            eprintln!("not read: {not}");
            return Err(format!("{file} of skill {name}: {not}").into());
        }
    };
    eprintln!("read {} ({} bytes)", content.uri, content.bytes().len());
    Ok(())
}

/// The OAuth settings a scenario calls for, from its context.
fn oauth_for(scenario: &str, context: &Value) -> Result<OAuth, Failure> {
    let get = |k: &str| context.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut o = OAuth::new()
        .redirect_uri("http://localhost:3000/callback")
        .authorizer(follow_without_redirects);
    match scenario {
        "auth/basic-cimd" => {
            o = o.client_metadata_url("https://conformance-test.local/client-metadata.json");
        }
        "auth/client-credentials-basic" => {
            o = o.grant(Grant::ClientCredentials).client(
                get("client_id").ok_or("no client_id")?,
                get("client_secret"),
            );
        }
        "auth/client-credentials-jwt" => {
            o = o
                .grant(Grant::ClientCredentials)
                .client(get("client_id").ok_or("no client_id")?, None)
                .private_key(get("private_key_pem").ok_or("no private_key_pem")?);
        }
        "auth/wif-jwt-bearer" => {
            let jwt = get("valid_jwt").ok_or("no valid_jwt")?;
            o = o
                .client(get("client_id").ok_or("no client_id")?, None)
                .assertion(move || {
                    let jwt = jwt.clone();
                    async move { Ok(Secret::new(jwt)) }
                });
        }
        "auth/enterprise-managed-authorization" => {
            let id_token = get("idp_id_token").ok_or("no idp_id_token")?;
            o = o
                .client(
                    get("client_id").ok_or("no client_id")?,
                    get("client_secret"),
                )
                .identity_provider(IdentityProvider::new(
                    get("idp_issuer").ok_or("no idp_issuer")?,
                    get("idp_client_id").unwrap_or_default(),
                    get("idp_client_secret").unwrap_or_default(),
                    move || {
                        let t = id_token.clone();
                        async move { Ok(Secret::new(t)) }
                    },
                ));
        }
        _ => {
            if let Some(id) = get("client_id") {
                o = o.client(id, get("client_secret"));
            }
        }
    }
    Ok(o)
}

/// The headless "browser": fetch the authorization URL without following the
/// redirect, and read the callback from `Location`.
async fn follow_without_redirects(url: String) -> mcp_runtime::Result<Callback> {
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            mcp_runtime::Error::transport("the conformance authorization server is not http://")
        })?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut s = std::net::TcpStream::connect(authority)
            .map_err(|e| mcp_runtime::Error::transport(format!("cannot reach {authority}: {e}")))?;
        let path = if path.is_empty() { "/" } else { path };
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
        )
        .map_err(|e| mcp_runtime::Error::transport(e.to_string()))?;
        let mut response = String::new();
        let _ = s.read_to_string(&mut response);
        let location = response
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("location")
                    .then(|| v.trim().to_owned())
            })
            .ok_or_else(|| {
                mcp_runtime::Error::invalid_response("the authorization endpoint did not redirect")
            })?;
        Ok(Callback::from_url(&location))
    })
    .await
    .map_err(|e| mcp_runtime::Error::transport(e.to_string()))?
}

/// Plausible values for required properties that have no default.
fn fill(schema: &Value, values: &mut Map<String, Value>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, p) in props {
        if values.contains_key(name) || !required.contains(&name.as_str()) {
            continue;
        }
        let v = if let Some(e) = p
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|e| e.first())
        {
            e.clone()
        } else {
            match p.get("type").and_then(Value::as_str) {
                Some("integer") => json!(p.get("minimum").and_then(Value::as_i64).unwrap_or(1)),
                Some("number") => json!(p.get("minimum").and_then(Value::as_f64).unwrap_or(1.0)),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                _ => json!("conformance"),
            }
        };
        values.insert(name.clone(), v);
    }
}
