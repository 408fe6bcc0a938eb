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

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

use crate::agent::Agent;

mod api;
mod assets;
mod guard;
mod live;
mod options;
mod shapes;
mod state;

pub use options::{WebOptions, DEFAULT_MAX_BODY};
use state::Web;

/// The inbox router for `agent`: mount it under any path
/// (`Router::new().nest("/inbox", router(agent, options))`). Fails closed: without
/// [`WebOptions::principal`] every request is `401`. The key its CSRF tokens are made
/// with is drawn at random here (a router made again, or another process, gives other
/// tokens: the page fetches its token again when one is refused).
pub fn router(agent: Agent, options: WebOptions) -> Router {
    let mut key = [0u8; 32];
    // No randomness: no token can be made, so none is accepted (every request that
    // changes anything is refused; see `guard`) — never a key anyone could guess.
    let csrf_key = match getrandom::getrandom(&mut key) {
        Ok(()) => Some(Arc::new(key)),
        Err(e) => {
            tracing::error!(error = %e, "the system's random number generator failed: the inbox refuses every change");
            None
        }
    };
    let max_body = options.max_body;
    let web = Web {
        agent,
        options,
        csrf_key,
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
