//! What the agent keeps of skills: approvals, the skills a run sees and holds.

use mcp_runtime::skills::Skill;
use serde::{Deserialize, Serialize};

use crate::gate::ToolFacts;
use crate::model::Block;

/// The tool the model loads a skill with.
pub(super) const READ_SKILL: &str = "read_skill";
/// The tool the model reads a loaded skill's other files with.
pub(super) const READ_SKILL_FILE: &str = "read_skill_file";

/// A person's approval of one skill of one server, bound to its files: the approval
/// holds while the skill's [`fingerprint`](Skill::fingerprint) (its `{uri, digest}`
/// set) is the same, and is revoked when the skill changes. Serializable, so an
/// application can keep approvals and give them to the next agent
/// ([`AgentBuilder::approve_skill`](crate::AgentBuilder::approve_skill)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillApproval {
    /// The server's name (the host's label for it, never the server's own).
    pub server: String,
    /// The skill's `SKILL.md` URI.
    pub uri: String,
    /// The skill's fingerprint when it was approved.
    pub fingerprint: String,
    /// The person also granted the tools the skill's `allowed-tools` names (tools of
    /// the same server, by exact name): they are allowed while the run acts on it.
    #[serde(default)]
    pub allowed_tools: bool,
}

impl SkillApproval {
    /// Approves `skill`, as listed now by the server named `server`.
    pub fn new(server: impl Into<String>, skill: &Skill) -> SkillApproval {
        SkillApproval {
            server: server.into(),
            uri: skill.uri().to_owned(),
            fingerprint: skill.fingerprint(),
            allowed_tools: false,
        }
    }
    /// Also grants the tools the skill's `allowed-tools` names.
    pub fn with_allowed_tools(mut self) -> SkillApproval {
        self.allowed_tools = true;
        self
    }
    pub(super) fn covers(&self, server: &str, skill: &Skill) -> bool {
        self.server == server && self.uri == skill.uri() && self.fingerprint == skill.fingerprint()
    }
}

/// A skill of an attached server, as a run sees it.
#[derive(Clone)]
pub(super) struct AgentSkill {
    pub(super) server: usize,
    pub(super) entry: Skill,
}

/// A skill the run loaded: the entry held while acting on it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct HeldSkill {
    pub(super) id: String,
    pub(super) server: String,
    pub(super) entry: Skill,
    /// Bytes read of it so far (a dynamic skill has no manifest to count: reading
    /// stops at the 16 MiB limit).
    #[serde(default)]
    pub(super) read_bytes: u64,
}

/// What a skill call comes to.
pub(super) enum SkillStep {
    /// A result for the model.
    Done(Block),
    /// The call waits for a person's approval.
    Suspend,
}

/// A tool an approved skill's `allowed-tools` granted (same server, exact name).
pub(super) fn granted(grants: &[(String, String, String)], tool: &ToolFacts) -> bool {
    grants
        .iter()
        .any(|(server, name, _)| *server == tool.server && *name == tool.name)
}
