//! Every setting of `#[mcp(...)]`, in the forms it takes. Nothing connects: servers
//! connect on first use.

use mcp_runtime::{mcp, model::Progress, CallToolResult, Change, InputRequest, InputResponse, Tool};

#[mcp(
    url = "https://mcp.example.com/mcp",
    header("X-MCP-Toolsets", "issues,pull_requests"),
    header("X-Account", Self::account),
    bearer_token = Self::token,
    timeout = 30,
    log_level = warning,
    input_requests(form, url),
    extension(apps),
    extension(tasks),
    extension("com.example/audit", level = "full", verbose = true),
    prefix = "linear",
    except(delete_everything),
    tool(search_issues, as = find_issues, description = "Search the team's issues", fixed_arguments(owner = "crmne", repo = Self::repo), wrap = Self::trim),
    tool(Summarize),
    requires_approval(create_issue, merge_pull_request),
    requires_approval(if = destructive),
    requires_approval(close_issue, if = Self::is_risky),
    defer(search_code, list_workflows),
    after_change = Self::refresh,
    after_change = Self::log_change,
    after_progress = Self::show_progress,
    before_input_request = Self::ask_operator,
    drift = warn,
    crate = "::mcp_runtime",
)]
pub struct Linear {
    user: String,
}

impl Linear {
    fn account(&self) -> String {
        format!("acct-{}", self.user)
    }
    fn token(&self) -> String {
        format!("token-for-{}", self.user)
    }
    fn repo(&self) -> &'static str {
        "ruby_llm"
    }
    async fn trim(&self, result: CallToolResult, _args: serde_json::Value) -> mcp_runtime::Result<CallToolResult> {
        Ok(result)
    }
    fn is_risky(&self, tool: &Tool) -> bool {
        tool.is_destructive()
    }
    fn refresh(&self, _change: &Change) {}
    fn log_change(&self, change: &Change) {
        println!("{change:?}");
    }
    fn show_progress(&self, p: &Progress) {
        println!("{}", p.progress);
    }
    async fn ask_operator(&self, _req: InputRequest) -> Option<InputResponse> {
        Some(InputResponse::Decline)
    }
}

#[derive(Default)]
pub struct Summarize;

impl mcp_runtime::declared::LocalTool for Summarize {
    fn definition(&self) -> Tool {
        serde_json::from_value(serde_json::json!({"name": "summarize", "inputSchema": {"type": "object"}})).unwrap()
    }
    fn call<'a>(&'a self, _server: &'a mcp_runtime::Mcp, _args: serde_json::Value) -> mcp_runtime::BoxFuture<'a, mcp_runtime::Result<CallToolResult>> {
        Box::pin(async { Ok(CallToolResult::default()) })
    }
}

#[mcp(
    command("npx", "-y", "@modelcontextprotocol/server-filesystem", "."),
    directory = "/tmp",
    env(NODE_ENV = "production", API_KEY = Self::api_key),
    inherit_env("LANG", "AWS_PROFILE"),
    inherit_all_env,
    input_requests(none),
    defer,
    snapshot = "files",
)]
pub struct Files {
    key: String,
}

impl Files {
    fn api_key(&self) -> String {
        self.key.clone()
    }
}

#[mcp(
    url = "https://wiki.example.com/mcp",
    oauth(
        owner = user,
        scopes("read", "write"),
        client_id = "wiki-app",
        client_secret = Self::wiki_secret,
        identity_provider(issuer = "https://acme.okta.com", client_id = "okta-app", client_secret = "okta-secret", id_token = Self::id_token),
    ),
)]
pub struct Wiki {
    user: String,
}

impl Wiki {
    fn wiki_secret(&self) -> String {
        "s".into()
    }
    fn id_token(&self) -> String {
        format!("id-token-of-{}", self.user)
    }
}

#[mcp(url = "https://reports.example.com/mcp", oauth(grant = client_credentials, client_id = "reports", private_key = Self::key))]
pub struct Reports;

impl Reports {
    fn key(&self) -> &'static str {
        "-----BEGIN PRIVATE KEY-----"
    }
}

#[mcp(url = "https://ci.example.com/mcp", oauth(grant = jwt_bearer, client_id = "ci", assertion = Self::workload_token))]
pub struct Ci;

impl Ci {
    fn workload_token(&self) -> String {
        std::fs::read_to_string("/var/run/secrets/tokens/mcp-token").unwrap_or_default()
    }
}

#[mcp(transport = Self::tunnel)]
pub struct Tunneled;

impl Tunneled {
    fn tunnel(&self) -> mcp_runtime::StdioTransport {
        mcp_runtime::StdioTransport::new(mcp_runtime::StdioConfig::new("ssh").args(["host", "mcp-server"]))
    }
}

fn main() {
    let linear: Linear = Linear::new("ann".into());
    let _shared: Linear = linear.clone(); // cheap: clones share the inputs and the connection
    assert_eq!(linear.mcp().name(), "linear");
    let _attached: mcp_runtime::Mcp = (&linear).into();
    let files = Files::with_context(mcp_runtime::declared::Context::new().request_timeout(std::time::Duration::from_secs(5)), "k".into());
    assert_eq!(files.mcp().name(), "files");
    // Typed methods from the `files` snapshot exist and take typed arguments.
    let _ = files_tools::ReadTextFile { path: "README.md".into(), head: None, tail: None };
    let _ = Tunneled::new();
    let wiki = Wiki::new("ann".into());
    assert!(!wiki.mcp().is_authorized());
    let _ = (Reports::new(), Ci::new());
}
