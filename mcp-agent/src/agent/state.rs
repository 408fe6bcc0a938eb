//! A run's state as the store keeps it: the transcript, the calls of the current turn, the suspension it waits in, the policy it goes on under.

use super::*;

/// How many times one call may ask for input that callbacks answer at once.
pub(super) const MAX_INPUT_ROUNDS: usize = 8;

/// A call of the current model turn that has not run yet.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct PendingCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: Value,
    /// A person's decision, once there is one (or `true` once the gate allowed a call
    /// that then paused for input: the gate is not asked twice).
    pub(super) approved: Option<bool>,
    /// Input the server asked for that no callback answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) input: Option<PendingInput>,
    /// Answers to it (wire form), from callbacks and then a person.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) answers: Vec<(String, Value)>,
    /// A person answered: the call goes on with `answers`.
    #[serde(default)]
    pub(super) answered: bool,
    /// For a skill load waiting for approval: the fingerprint the person was shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) bound: Option<String>,
    /// The person's approval also granted the skill's `allowed-tools`.
    #[serde(default)]
    pub(super) grant_tools: bool,
    /// A person's reason for denying it, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) denial: Option<String>,
    /// What a person's approval of it is bound to (set when it waits for approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) binding: Option<Binding>,
    /// Sent to this server and not known to have answered: recorded before the call
    /// is sent, cleared when its result is kept. A run recovered with it set does
    /// not send the call again (unless the tool says it is idempotent or read-only):
    /// its outcome is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) executing: Option<String>,
    /// The tool's description and input schema as the person was shown them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) shown: Option<(String, Value)>,
}

impl PendingCall {
    /// Paused for input nobody has given yet.
    pub(super) fn waits_for_input(&self) -> bool {
        self.input.is_some() && !self.answered
    }
}

/// A call that paused for input: the input, and the answers callbacks gave.
pub(super) type Paused = (PendingInput, Vec<(String, Value)>);

/// How one allowed call ended.
pub(super) enum CallEnd {
    /// Its result for the model, and whether it failed.
    Done(String, bool),
    /// It waits for input no callback gave: the input, and the answers callbacks did
    /// give.
    Paused(PendingInput, Vec<(String, Value)>),
}

/// Everything a run is: kept in the store while it waits.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct RunState {
    pub(super) id: String,
    pub(super) messages: Vec<Message>,
    pub(super) pending: Vec<PendingCall>,
    pub(super) results: Vec<Block>,
    pub(super) events: Vec<Event>,
    pub(super) steps: u32,
    /// Deferred tools a (emulated) tool search has loaded into the model's context.
    #[serde(default)]
    pub(super) loaded: Vec<String>,
    /// Skills the run loaded, with the entries held while acting on them.
    #[serde(default)]
    pub(super) held: Vec<HeldSkill>,
    /// Skill approvals given in this run.
    #[serde(default)]
    pub(super) skill_approvals: Vec<SkillApproval>,
    /// Tools an approved skill's `allowed-tools` granted: (server, tool, skill uri).
    #[serde(default)]
    pub(super) granted: Vec<(String, String, String)>,
    /// The suspension the run waits in, while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) suspension: Option<Suspension>,
    /// How many tool calls and model turns have completed: an error after a resume
    /// with nothing run since puts the run back in its suspension.
    #[serde(default)]
    pub(super) ran: u64,
    /// The error that stopped a failed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) failure: Option<String>,
    /// Kept in the store at least once (a run that fails before its first save leaves
    /// nothing to retry).
    #[serde(skip)]
    pub(super) persisted: bool,
    /// This process's hold on the run (the store keeps it beside the state).
    #[serde(skip)]
    pub(super) lease: Option<Lease>,
    /// The policy the run goes on under (kept with it: a resume does not loosen it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) policy: Option<Policy>,
    /// That policy's gate, for this process, when it is not the agent's own.
    #[serde(skip)]
    pub(super) gate: Option<Arc<Gate>>,
}

/// The mode, allow-list and step limit in force for a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Policy {
    pub(super) mode: String,
    pub(super) allow: Vec<String>,
    pub(super) max_steps: u32,
}

/// What a suspended run waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Waits {
    /// A person's approval (or denial) of the first pending call.
    Approval,
    /// Answers to the input the first pending call asked for.
    Input,
}

/// One suspension of a run: its id, the decision it waits for, and of what kind.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Suspension {
    pub(super) id: String,
    pub(super) decision: String,
    pub(super) waits: Waits,
    /// When decisions stop applying (milliseconds since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) expires_at: Option<u64>,
}
