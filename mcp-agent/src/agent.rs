//! The agent: a model, attached MCP servers, the gate, and a tool loop that suspends
//! durably when a person must decide.
//!
//! The agent is made of components that own their state, each with a small API:
//! `policy` (the gate, whether the builder stated a policy, the limits, how far
//! approvals reach), `bookkeeping` (the store, integrity key, leases, expiry: saving,
//! loading, claiming and holding runs), `attached` (the servers and the host the loop
//! calls), `callbacks`, `skill_registry` (skills offered, approvals, loads reused) and
//! `vault`. `handle` holds the agent — an `Arc` of those components — and what needs
//! more than one of them (an event, a save).
//!
//! Imports run downward: `ids`, `clock` and the data modules (`state`, `decision`,
//! `events`, `options`, `retry_policy`, `integrity`, `host`, `vault`, `skill_types`)
//! at the bottom; the components above them; `handle` above those; the behaviour
//! modules — each an `impl Agent` block, `retries` and `budget` among them — on top. A
//! child imports from its siblings by name, never from this module.

mod adopt;
mod allowances;
mod answer;
mod attached;
mod authorization;
mod backoff;
mod bookkeeping;
mod budget;
mod builder;
mod call;
mod callbacks;
mod clock;
mod compact;
mod compaction;
mod conversation;
mod decision;
mod delegate;
mod detail;
mod events;
mod handle;
mod hooks;
mod host;
mod ids;
mod inbox;
mod integrity;
mod live;
mod options;
mod output;
mod policy;
mod resume;
mod retries;
mod retry_policy;
mod run;
mod schema_cache;
mod schemas;
mod skill_registry;
mod skill_types;
mod skills;
mod state;
mod transcript;
mod turn;
mod typed;
mod vault;
mod worker;

/// What `crate::fuzzing` reaches: a stored run's state read as a resume reads it (no
/// integrity key), and written back: the second read must give the same run.
pub(crate) fn fuzz_stored_run(state: serde_json::Value) -> std::result::Result<(), String> {
    let Ok(run) = serde_json::from_value::<state::RunState>(state) else {
        return Ok(());
    };
    let once = serde_json::to_value(&run).map_err(|e| e.to_string())?;
    let again: state::RunState = serde_json::from_value(once.clone())
        .map_err(|e| format!("a run written back does not read: {e}"))?;
    let twice = serde_json::to_value(&again).map_err(|e| e.to_string())?;
    if once != twice {
        return Err("a run read, written and read again changed".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;

pub use allowances::Pin;
pub use builder::AgentBuilder;
pub use compaction::Compaction;
pub use conversation::Conversation;
pub use decision::{
    Allowance, Always, Binding, Decision, DecisionAsk, DecisionKind, Expiry, InboxPage, InputAsk,
    Outcome, Pending, PendingWait,
};
pub use detail::RunDetail;
pub use events::Event;
pub use handle::{Agent, MAX_PROGRESS_KEPT};
pub use hooks::{AnswerCheck, BeforeCall, CallInfo, CallResult, MAX_ANSWER_RETRIES};
pub use live::{RunEvent, RunEvents, RunHandle};
pub use options::{Budget, BudgetLimit, Principal, RunOptions};
pub use output::{OutputSpec, DEFAULT_REPAIRS};
pub use retry_policy::RetryPolicy;
pub use skill_types::SkillApproval;
pub use typed::TypedOutcome;
pub use worker::{Worker, WorkerOptions};
