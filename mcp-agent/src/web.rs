//! The approval inbox in the browser (feature `web`): an axum [`Router`] an
//! application mounts under any path, with a JSON API, each run's events live
//! (server-sent events), and one HTML page — the inbox and a run view — served by the
//! router itself (no build step, no CDN).
//!
//! ```no_run
//! # async fn serve(agent: mcp_agent::Agent) -> std::io::Result<()> {
//! use mcp_agent::web::{router, WebOptions};
//! use mcp_agent::Principal;
//!
//! // Who is asking comes from the application (its session cookie, a proxy's header…).
//! let options = WebOptions::new()
//!     .principal(|parts| {
//!         let user = parts.headers.get("x-user")?.to_str().ok()?;
//!         Some(Principal::new(user))
//!     })
//!     .tenants(|_who| vec!["support".to_owned()]);
//! let app = axum::Router::new().nest("/inbox", router(agent, options));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! What a person may see and do:
//! - every request needs a principal from [`WebOptions::principal`] (none: `401`);
//! - a principal sees the runs it started and the runs of its tenants
//!   ([`WebOptions::tenants`]); another run is `404`, as a run that does not exist;
//! - a decision goes through [`Agent::record_decision`]: bound to the call shown,
//!   single use (`409` for a stale or spent id), asked of the agent's
//!   [`authorize`](crate::AgentBuilder::authorize) callback (`403` when refused); a
//!   [`Worker`](crate::Worker) of any process with the store continues the run;
//! - a request that changes anything needs the session's CSRF token
//!   (`x-csrf-token`, from `GET api/session`) and, from a browser, the same origin
//!   (`Origin`, `Sec-Fetch-Site`); bodies are bounded ([`WebOptions::max_body`]);
//! - every response carries a strict Content-Security-Policy (scripts and styles from
//!   the router only, no inline script) and is never cached; the page shows every text
//!   from a model or a server as text, never as HTML.
//!
//! docs/agent.md, "An approval inbox in the browser", has the API.

use std::fmt;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use http::request::Parts;

use crate::agent::{Agent, Principal};

mod api;
mod assets;
mod guard;
mod live;
mod shapes;

/// The most bytes a request body may have, unless [`WebOptions::max_body`] says
/// otherwise (64 KiB).
pub const DEFAULT_MAX_BODY: usize = 64 * 1024;

type PrincipalFn = dyn Fn(&Parts) -> Option<Principal> + Send + Sync;
type TenantsFn = dyn Fn(&Principal) -> Vec<String> + Send + Sync;

/// How the inbox router finds who is asking and what they may see.
#[derive(Clone)]
pub struct WebOptions {
    principal: Option<Arc<PrincipalFn>>,
    tenants: Option<Arc<TenantsFn>>,
    max_body: usize,
}

impl fmt::Debug for WebOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebOptions")
            .field("principal", &self.principal.is_some())
            .field("tenants", &self.tenants.is_some())
            .field("max_body", &self.max_body)
            .finish()
    }
}

impl Default for WebOptions {
    fn default() -> Self {
        WebOptions::new()
    }
}

impl WebOptions {
    /// No principal extractor yet (every request is refused with `401` until one is
    /// given), no tenants, bodies up to [`DEFAULT_MAX_BODY`].
    pub fn new() -> WebOptions {
        WebOptions {
            principal: None,
            tenants: None,
            max_body: DEFAULT_MAX_BODY,
        }
    }

    /// Who is asking, from the request's head (the application's session, a
    /// proxy's authenticated header): `None` refuses the request with `401`.
    pub fn principal(
        mut self,
        f: impl Fn(&Parts) -> Option<Principal> + Send + Sync + 'static,
    ) -> WebOptions {
        self.principal = Some(Arc::new(f));
        self
    }

    /// The tenants a principal works for: it sees (and may start runs in, and decide
    /// on) their runs, besides the runs it started itself. None by default.
    pub fn tenants(
        mut self,
        f: impl Fn(&Principal) -> Vec<String> + Send + Sync + 'static,
    ) -> WebOptions {
        self.tenants = Some(Arc::new(f));
        self
    }

    /// The most bytes a request body may have (a larger one is refused with `413`).
    pub fn max_body(mut self, bytes: usize) -> WebOptions {
        self.max_body = bytes;
        self
    }
}

/// What every handler shares.
#[derive(Clone)]
struct Web {
    agent: Agent,
    options: WebOptions,
    /// The key the CSRF tokens are made with (random, per router).
    csrf_key: Arc<[u8; 32]>,
}

impl Web {
    fn tenants_of(&self, who: &Principal) -> Vec<String> {
        self.options
            .tenants
            .as_ref()
            .map(|f| f(who))
            .unwrap_or_default()
    }

    /// Whether `who` may see (and decide on) a run of `tenant` started by `started_by`.
    fn may_see(&self, who: &Principal, tenant: Option<&str>, started_by: Option<&str>) -> bool {
        started_by == Some(who.id.as_str())
            || tenant.is_some_and(|t| self.tenants_of(who).iter().any(|m| m == t))
    }
}

/// The inbox router for `agent`: mount it under any path
/// (`Router::new().nest("/inbox", router(agent, options))`). Fails closed: without
/// [`WebOptions::principal`] every request is `401`. The key its CSRF tokens are made
/// with is drawn at random here (a router made again, or another process, gives other
/// tokens: the page fetches its token again when one is refused).
pub fn router(agent: Agent, options: WebOptions) -> Router {
    let mut key = [0u8; 32];
    if getrandom::getrandom(&mut key).is_err() {
        // No randomness: no token can be made, so none is accepted (every
        // mutating request is refused; see `guard`).
        tracing::error!(
            "the system's random number generator failed: the inbox refuses every change"
        );
    }
    let max_body = options.max_body;
    let web = Web {
        agent,
        options,
        csrf_key: Arc::new(key),
    };
    Router::new()
        .route("/", get(assets::page))
        .route("/inbox.js", get(assets::script))
        .route("/inbox.css", get(assets::style))
        .route("/api/session", get(api::session))
        .route("/api/runs", get(api::list).post(api::start))
        .route("/api/runs/{run}", get(api::detail))
        .route("/api/runs/{run}/decisions", post(api::decide))
        .route("/api/runs/{run}/events", get(live::events))
        .layer(axum::middleware::from_fn_with_state(
            web.clone(),
            guard::guard,
        ))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(web)
}
