//! Who may decide what: the one check every path that applies a person's decision
//! goes through before it applies anything ([`Agent::authorize_decisions`]).

use crate::error::{Error, Result};

use super::decision::{Decision, DecisionAsk};
use super::events::Event;
use super::handle::Agent;
use super::state::RunState;

impl Agent {
    /// Asks the `authorize` callback about each of `decisions` on calls of `state`
    /// (a run read from the store and checked against its integrity MAC, waiting in
    /// the suspension `suspension`), before any of them is applied. `Ok` when every one
    /// is allowed (or the agent has no callback); otherwise nothing may be applied:
    /// each refused decision is told to the `on_event` callbacks
    /// ([`Event::DecisionUnauthorized`]) and the error's `is_unauthorized()` is true.
    /// A decision that names no waiting call is left to the caller's own checks.
    pub(super) async fn authorize_decisions(
        &self,
        state: &RunState,
        suspension: &str,
        decisions: &[(String, Decision)],
    ) -> Result<()> {
        // The suspension the caller found the run waiting in, as its sealed state
        // says (fail closed: nothing to check against is a refusal).
        let Some(waiting) = state.suspension.as_ref().filter(|s| s.id == suspension) else {
            return Err(Error::unauthorized(format!(
                "run {}: the suspension {suspension} is not the one the run waits in",
                state.id
            )));
        };
        let mut refused = Vec::new();
        // Calls a sub-agent's run waits on are decided on as this run's.
        let delegated = if decisions.iter().any(|(id, _)| {
            state
                .pending
                .iter()
                .any(|c| c.at.names(id) && c.at.decision().is_none())
        }) {
            self.delegated_pending(state).await?
        } else {
            Vec::new()
        };
        for (id, decision) in decisions {
            let Some(call) = state.pending.iter().find(|c| c.at.names(id)) else {
                continue;
            };
            let pending = match call.pending(&state.id, waiting, &state.options)? {
                Some(p) => p,
                None => match delegated.iter().find(|p| p.decision == *id) {
                    Some(p) => p.clone(),
                    // Not waited on by the sub-agent's run any more: it refuses it.
                    None => continue,
                },
            };
            let ask = DecisionAsk {
                principal: decision.principal.clone(),
                kind: decision.kind_name().to_owned(),
                labels: state.options.labels.clone(),
                pending,
            };
            if !self.inner.callbacks.authorized(ask).await {
                let event = Event::DecisionUnauthorized {
                    decision: id.clone(),
                    tool: call.name.clone(),
                    principal: decision.principal.clone(),
                    by: decision.by().to_owned(),
                };
                tracing::warn!(
                    run = %state.id,
                    decision = %id,
                    principal = %decision.principal.id,
                    "a decision was not authorized; nothing changed"
                );
                self.inner.callbacks.emit(&state.id, &event);
                refused.push(format!("{id} by `{}`", decision.principal.id));
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        Err(Error::unauthorized(format!(
            "run {}: decision {} may not be made by its principal; nothing changed (the run still waits)",
            state.id,
            refused.join(", ")
        )))
    }
}
