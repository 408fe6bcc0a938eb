//! The agent: a model, attached MCP servers, the gate, and a tool loop that suspends
//! durably when a person must decide.
//!
//! Imports run downward: `util` (ids, clocks) and the data modules (`state`,
//! `decision`, `events`, `integrity`, `host`, `vault`, `skill_types`) at the bottom;
//! `shared` (the agent and what it holds) above them; the behaviour modules — each an
//! `impl Agent` block — on top. A child imports from its siblings by name, never from
//! this module.

mod allowances;
mod answers;
mod builder;
mod call;
mod conversation;
mod decision;
mod events;
mod gating;
mod host;
mod inbox;
mod integrity;
mod pins;
mod resume;
mod run;
mod shared;
mod skill_types;
mod skills;
mod state;

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
mod toolbox;
mod util;
mod vault;

#[cfg(test)]
mod tests;

pub use builder::AgentBuilder;
pub use conversation::Conversation;
pub use decision::{
    Allowance, Always, Binding, Decision, DecisionKind, Expiry, InputAsk, Outcome, Pending,
    PendingWait,
};
pub use events::Event;
pub use pins::Pin;
pub use shared::{Agent, MAX_PROGRESS_KEPT};
pub use skill_types::SkillApproval;
