//! The JSON API: the session, runs (list, start, one), decisions.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::guard::{csrf_token, error};
use super::shapes;
use super::state::Web;
use crate::agent::{Always, Decision, Principal, RunDetail, RunOptions};
use crate::error::Error;
use crate::store::RunFilter;

/// The most runs one page of `GET api/runs` has.
const MAX_PAGE: usize = 100;
/// The most store pages one listing looks through for runs the principal may see.
const MAX_SCANNED_PAGES: usize = 10;
/// The most labels a run started here may carry, and the longest key or value.
const MAX_LABELS: usize = 16;
const MAX_LABEL_LEN: usize = 200;

/// An error of the agent, as the API answers it.
fn failed(e: &Error) -> Response {
    if e.is_stale_decision() {
        return error(StatusCode::CONFLICT, e.to_string());
    }
    if e.is_unauthorized() {
        return error(StatusCode::FORBIDDEN, e.to_string());
    }
    if e.is_config() {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    tracing::warn!(error = %e, "the inbox could not answer a request");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "the agent could not answer (see the server's log)",
    )
}

/// `GET api/session`: who is asking, the tenants it works for, and the CSRF token
/// its requests that change anything carry.
pub(super) async fn session(
    State(web): State<Web>,
    Extension(who): Extension<Principal>,
) -> Response {
    Json(json!({
        "principal": { "id": who.id, "name": who.display_name() },
        "tenants": web.tenants_of(&who),
        "csrf": web.csrf_key.as_deref().map(|key| csrf_token(key, &who)),
    }))
    .into_response()
}

#[derive(Deserialize)]
pub(super) struct ListQuery {
    status: Option<String>,
    tenant: Option<String>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// The run `who` (working for `tenants`) may see, read from its sealed state; a run
/// that is not kept and one that is not theirs are the same `404`, so a run's
/// existence is not told.
pub(super) async fn visible(
    web: &Web,
    who: &Principal,
    tenants: &[String],
    run: &str,
) -> Result<RunDetail, Response> {
    let detail = web.agent.run_detail(run).await.map_err(|e| {
        if e.is_store() || e.is_config() {
            failed(&e)
        } else {
            // A run that does not read (its MAC does not check) is not shown.
            tracing::warn!(run, error = %e, "a run the inbox was asked for cannot be read");
            error(StatusCode::NOT_FOUND, "no such run")
        }
    })?;
    detail
        .filter(|d| {
            Web::may_see(
                who,
                tenants,
                d.tenant.as_deref(),
                d.started_by.as_ref().map(|p| p.id.as_str()),
            )
        })
        .ok_or_else(|| error(StatusCode::NOT_FOUND, "no such run"))
}

/// `GET api/runs?status=&tenant=&cursor=&limit=`: the runs `who` may see, newest
/// first within the page, each with what it waits on.
pub(super) async fn list(
    State(web): State<Web>,
    Extension(who): Extension<Principal>,
    Query(q): Query<ListQuery>,
) -> Response {
    let tenants = web.tenants_of(&who);
    let mut filter = RunFilter::new().limit(200);
    if let Some(s) = q.status.as_deref().filter(|s| !s.is_empty()) {
        let Some(status) = shapes::status_of(s) else {
            return error(
                StatusCode::BAD_REQUEST,
                "status is one of running, suspended, finished, failed, cancelled",
            );
        };
        filter = filter.status(status);
    }
    if let Some(t) = q.tenant.as_deref().filter(|t| !t.is_empty()) {
        if !tenants.iter().any(|m| m == t) {
            return error(StatusCode::FORBIDDEN, "not one of your tenants");
        }
        filter = filter.tenant(t);
    }
    if let Some(c) = q.cursor.filter(|c| !c.is_empty()) {
        filter = filter.cursor(c);
    }
    let want = q.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let mut found = Vec::new();
    let mut next = None;
    'pages: for _ in 0..MAX_SCANNED_PAGES {
        let page = match web.agent.runs(&filter).await {
            Ok(page) => page,
            Err(e) => return failed(&e),
        };
        for run in page.runs {
            let id = run.id.clone();
            // The store's owner columns pick candidates; the sealed state decides.
            if Web::may_see(
                &who,
                &tenants,
                run.tenant.as_deref(),
                run.started_by.as_deref(),
            ) {
                if let Ok(d) = visible(&web, &who, &tenants, &run.id).await {
                    found.push((run, d));
                }
            }
            if found.len() >= want {
                next = Some(id);
                break 'pages;
            }
            next = Some(id);
        }
        match page.next {
            Some(c) => filter = filter.cursor(c),
            None => {
                next = None;
                break;
            }
        }
    }
    found.sort_by_key(|(summary, _)| std::cmp::Reverse(summary.updated_at));
    let mut runs = Vec::new();
    for (summary, d) in found {
        let events = match web.agent.events(&d.run_id).await {
            Ok(events) if !d.pending.is_empty() => events,
            _ => Vec::new(),
        };
        let mut run = shapes::run(&d, &events);
        run["updated"] = json!(summary.updated_at);
        runs.push(run);
    }
    let mut body = json!({ "runs": runs });
    if let Some(next) = next {
        body["next"] = json!(next);
    }
    Json(body).into_response()
}

#[derive(Deserialize)]
pub(super) struct StartBody {
    prompt: String,
    tenant: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// `POST api/runs`: starts a run in the background, started by `who`; `201
/// {"run": id}` once it is kept.
pub(super) async fn start(
    State(web): State<Web>,
    Extension(who): Extension<Principal>,
    Json(body): Json<StartBody>,
) -> Response {
    if body.prompt.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "the prompt is empty");
    }
    let mut options = RunOptions::new().started_by(who.clone());
    if let Some(t) = body.tenant.filter(|t| !t.is_empty()) {
        if !web.tenants_of(&who).contains(&t) {
            return error(StatusCode::FORBIDDEN, "not one of your tenants");
        }
        options = options.tenant(t);
    }
    if body.labels.len() > MAX_LABELS
        || body
            .labels
            .iter()
            .any(|(k, v)| k.len() > MAX_LABEL_LEN || v.len() > MAX_LABEL_LEN)
    {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "at most {MAX_LABELS} labels, each key and value at most {MAX_LABEL_LEN} bytes"
            ),
        );
    }
    for (k, v) in body.labels {
        options = options.label(k, v);
    }
    match web.agent.start(body.prompt, options).await {
        // The run goes on on its own task; the handle is not needed to follow it.
        Ok(handle) => {
            (StatusCode::CREATED, Json(json!({ "run": handle.run_id() }))).into_response()
        }
        Err(e) => failed(&e),
    }
}

/// `GET api/runs/{run}`: the run, its transcript, events and what it waits on.
pub(super) async fn detail(
    State(web): State<Web>,
    Extension(who): Extension<Principal>,
    Path(run): Path<String>,
) -> Response {
    let d = match visible(&web, &who, &web.tenants_of(&who), &run).await {
        Ok(d) => d,
        Err(r) => return r,
    };
    let events = match web.agent.events(&run).await {
        Ok(events) => events,
        Err(e) => return failed(&e),
    };
    let mut run = shapes::run(&d, &events);
    run["usage"] =
        json!({ "input_tokens": d.usage.input_tokens, "output_tokens": d.usage.output_tokens });
    run["failure"] = json!(d.failure);
    run["messages"] = shapes::transcript(&d.messages);
    run["events"] = events
        .iter()
        .enumerate()
        .map(|(i, e)| shapes::event(i as u64 + 1, e))
        .collect();
    Json(run).into_response()
}

#[derive(Deserialize)]
pub(super) struct DecideBody {
    decision: String,
    kind: String,
    message: Option<String>,
    arguments: Option<Value>,
    /// For `always`: `agent` (every run from now on, the default) or `run`.
    scope: Option<String>,
}

/// `POST api/runs/{run}/decisions`: records `who`'s decision on one call
/// ([`Agent::record_decision`](crate::Agent::record_decision)); `200` when kept,
/// `409` for a stale or spent decision, `403` when `who` may not decide it.
pub(super) async fn decide(
    State(web): State<Web>,
    Extension(who): Extension<Principal>,
    Path(run): Path<String>,
    Json(body): Json<DecideBody>,
) -> Response {
    if let Err(r) = visible(&web, &who, &web.tenants_of(&who), &run).await {
        return r;
    }
    let decision = match body.kind.as_str() {
        "approve" => Decision::approve(who.clone()),
        "deny" => match body.message.filter(|m| !m.trim().is_empty()) {
            Some(m) => Decision::deny(who.clone()).with_message(m),
            None => Decision::deny(who.clone()),
        },
        "edit" => match body.arguments {
            Some(args @ Value::Object(_)) => Decision::edit(who.clone(), args),
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "an edit gives the new arguments as a JSON object",
                )
            }
        },
        "always" => {
            let scope = match body.scope.as_deref() {
                None | Some("agent") => Always::Agent,
                Some("run") => Always::Run,
                Some(_) => return error(StatusCode::BAD_REQUEST, "scope is agent or run"),
            };
            Decision::approve(who.clone()).always(scope)
        }
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "kind is one of approve, deny, edit, always",
            )
        }
    };
    match web
        .agent
        .record_decision(&run, &body.decision, decision)
        .await
    {
        Ok(()) => Json(json!({ "recorded": body.decision })).into_response(),
        Err(e) => failed(&e),
    }
}
