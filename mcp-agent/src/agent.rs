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
mod resume;
mod run;
mod shared;
mod skill_types;
mod skills;
mod state;
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
pub use shared::{Agent, MAX_PROGRESS_KEPT};
pub use skill_types::SkillApproval;
