//! A run's state as the store keeps it: the transcript, the calls of the current turn, the suspension it waits in, the policy it goes on under.

use std::sync::Arc;

use mcp_runtime::PendingInput;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::model::{Block, Message, Usage};
use crate::store::{Lease, LedgerEntry, RunStatus};

use super::decision::{Allowance, Binding, Pending, PendingWait};
use super::events::Event;
use super::options::RunOptions;
use super::skill_types::{HeldSkill, SkillApproval};
use super::transcript::{Kept, Mark};
use super::vault::Answers;

/// How many times one call may ask for input that callbacks answer at once.
pub(super) const MAX_INPUT_ROUNDS: usize = 8;

/// The version of the stored run state this code writes. Version 1 (before batch
/// decisions) kept one flag per fact of a call; version 2 had no save counter, sealed
/// status, call keys nor bindings of sent and paused calls; version 3 kept the
/// transcript inside the state (it is still read: its next save moves the transcript
/// to the store's log).
pub(super) const STATE_VERSION: u32 = 4;

/// The oldest version of the stored run state this code reads.
pub(super) const OLDEST_STATE_VERSION: u32 = 3;

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// A call of the current model turn that has not ended yet.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct PendingCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: Value,
    /// Where it stands.
    pub(super) at: CallState,
    /// A random key of its own (model call ids may repeat across turns): the sent
    /// ledger names it `key/round`.
    #[serde(default)]
    pub(super) key: String,
    /// How many times it was sent (a call that paused for input is sent again).
    #[serde(default)]
    pub(super) round: u32,
    /// The `before_call` hook has had its word (it is not asked again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) hooked: bool,
}

impl PendingCall {
    /// Its item in the sent ledger, for the send about to be made.
    pub(super) fn ledger_item(&self) -> String {
        format!("{}/{}", self.key, self.round)
    }
}

/// Where one call of the current turn stands. A call moves
/// `New → AwaitingApproval → Approved | Denied`, or `New → Approved` (the gate allowed
/// it), then `Approved → Executing → ` ended (its result kept, the call gone from the
/// turn) — or, when the server asks for input, `→ AwaitingInput → Answered →
/// Executing` again. A call a stopped process left `Executing` ends with "outcome
/// unknown" (or is sent again, when its tool says that is harmless).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(super) enum CallState {
    /// Not through the gate yet.
    New,
    /// Waits for a person's approval.
    AwaitingApproval(Box<Awaiting>),
    /// May run: the gate allowed it (`person` none), or a person approved it.
    Approved {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        person: Option<Box<PersonApproval>>,
    },
    /// A person denied it.
    Denied {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Sent to this server; its result is not kept yet.
    Executing {
        server: String,
        /// What it was sent to: the server, its configuration, the tool's definition
        /// and the arguments (a recovery resends it only while they are the same).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binding: Option<Binding>,
        /// A person had approved it (a need for approval the gate finds again, when
        /// it is recovered, is met while the binding holds).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        approved: bool,
        /// For a call handed to a sub-agent: the id of the run it starts (drawn and
        /// kept before it starts, so a recovered run takes that run up again).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sub_run: Option<String>,
    },
    /// Paused for input a server asked for that no callback gave.
    AwaitingInput {
        /// The decision that names it.
        decision: String,
        input: PendingInput,
        /// The answers given so far (callbacks', and a person's for some keys), as the
        /// run may keep them.
        #[serde(flatten)]
        answers: Answers,
        /// The server and tool that asked (the call is sent again only to them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        asker: Option<Box<Asker>>,
    },
    /// Handed to a sub-agent ([`Agent::as_tool`](crate::Agent::as_tool)): its run
    /// `run` (in the sub-agent's store) goes on for it, and the decisions it waits for
    /// — listed with this run's — are `decisions` (empty once each is recorded: the
    /// sub-agent's run is then continued for this call).
    Delegated {
        run: String,
        #[serde(default)]
        decisions: Vec<String>,
    },
    /// Input given: it is sent again with the answers.
    Answered {
        input: PendingInput,
        #[serde(flatten)]
        answers: Answers,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        asker: Option<Box<Asker>>,
    },
}

impl CallState {
    /// Waits for a person (approval or input).
    pub(super) fn awaits_person(&self) -> bool {
        match self {
            CallState::AwaitingApproval(_) | CallState::AwaitingInput { .. } => true,
            CallState::Delegated { decisions, .. } => !decisions.is_empty(),
            _ => false,
        }
    }

    /// Whether the decision `id` names this call (or, for a call handed to a
    /// sub-agent, a call its run waits on).
    pub(super) fn names(&self, id: &str) -> bool {
        match self {
            CallState::Delegated { decisions, .. } => decisions.iter().any(|d| d == id),
            other => other.decision() == Some(id),
        }
    }

    /// The decision that names it, while it waits for a person.
    pub(super) fn decision(&self) -> Option<&str> {
        match self {
            CallState::AwaitingApproval(a) => Some(&a.decision),
            CallState::AwaitingInput { decision, .. } => Some(decision),
            _ => None,
        }
    }
}

/// Who asked for input: the binding of the call as it was sent (server, its
/// configuration, the tool's definition, the arguments), and whether a person had
/// approved it (a need for approval the gate finds again is then met).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Asker {
    pub(super) binding: Binding,
    #[serde(default)]
    pub(super) approved: bool,
}

/// A call waiting for a person's approval: the decision that names it and what the
/// person is shown.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Awaiting {
    pub(super) decision: String,
    pub(super) server: String,
    /// What an approval is bound to (none for a skill load: see `skill`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) binding: Option<Binding>,
    /// For a skill load: the fingerprint of the files the person is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) skill: Option<String>,
    /// The arguments shown (for a skill load: its uri, fingerprint, allowed-tools).
    pub(super) arguments: Value,
    /// The tool's description and input schema, as shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) input_schema: Option<Value>,
}

/// A person's approval of a call, and what it holds for.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct PersonApproval {
    pub(super) by: String,
    /// The decision that approved it (the sent ledger records it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) decision: Option<String>,
    /// The call runs on it only while these are the same (tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) binding: Option<Binding>,
    /// For a skill load: the fingerprint approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) skill: Option<String>,
    /// For a skill load: its `allowed-tools` granted too.
    #[serde(default)]
    pub(super) grant_tools: bool,
}

/// A call that paused for input: the input, and the answers it has so far.
pub(super) type Paused = Box<(PendingInput, Answers)>;

/// How one allowed call ended.
pub(super) enum CallEnd {
    /// Its result for the model (text, images), and whether it failed.
    Done(String, Vec<Block>, bool),
    /// It waits for input no callback gave: the input, and the answers it has (those
    /// callbacks gave, and a person's this process still holds).
    Paused(Box<(PendingInput, Answers)>),
    /// A sub-agent's run took it, and waits for a person: the run, and the decisions
    /// it waits for.
    Delegated(String, Vec<String>),
}

/// What a call that did not end is left waiting for.
pub(super) enum Halt {
    /// Input a server asked for.
    Input(Paused),
    /// A sub-agent's run: its id and the decisions it waits for.
    Delegated(String, Vec<String>),
}

/// A run started by a sub-agent tool of another run ([`Agent::as_tool`](crate::Agent::as_tool)):
/// which run and call it works for, and the policies it goes on under beside its
/// own (its parent's, and theirs): a call runs only when every one of them lets it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Parent {
    pub(super) run: String,
    pub(super) tool: String,
    pub(super) policies: Vec<Policy>,
}

/// Everything a run is: kept in the store while it waits.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct RunState {
    /// The format of this state ([`STATE_VERSION`]).
    #[serde(default)]
    pub(super) version: u32,
    pub(super) id: String,
    /// The save counter: one more at every save (the MAC covers it). A run whose
    /// counter is behind its sent ledger's was put back from an older copy.
    #[serde(default)]
    pub(super) seq: u64,
    /// The status it was saved with (the MAC covers it; a claim moves the row to
    /// `running` and nothing else).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) saved_as: Option<RunStatus>,
    /// The transcript. Kept apart from the state, appended message by message (see
    /// `transcript`); read from the state only as version 3 kept it.
    #[serde(default, skip_serializing)]
    pub(super) messages: Vec<Message>,
    /// Where the store keeps the transcript, and the digest of what it keeps there.
    #[serde(default)]
    pub(super) transcript: Mark,
    /// What the store holds of the transcript and its large values, as this process
    /// knows it.
    #[serde(skip)]
    pub(super) log: Kept,
    pub(super) pending: Vec<PendingCall>,
    pub(super) results: Vec<Block>,
    /// Events not kept yet: the next save appends them to the run's event log (in
    /// the store, beside the state — never rewritten).
    #[serde(skip)]
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
    /// Tools a person allowed for the rest of the run (bound like a standing
    /// allowance: server, configuration, tool, definition).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) always: Vec<Allowance>,
    /// The suspension the run waits in, while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) suspension: Option<Suspension>,
    /// How many tool calls and model turns have completed: an error after a resume
    /// with nothing run since puts the run back in its suspension.
    #[serde(default)]
    pub(super) ran: u64,
    /// The tokens the run's model calls took, summed.
    #[serde(default)]
    pub(super) usage: Usage,
    /// When the run started (milliseconds since the epoch; 0: kept before this was):
    /// its budget's deadline counts from here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) started_at: u64,
    /// The model calls the run made (answered), across resumes and follow-ups.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) model_calls: u64,
    /// The repair rounds a typed answer took since the model was last asked by a
    /// person (a follow-up starts again at 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) output_repairs: u64,
    /// The times in a row `check_answer` sent the model back.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) answer_retries: u64,
    /// The tool calls the run sent (a call sent again with input a server asked for
    /// counts again).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) tool_calls: u64,
    /// The error that stopped a failed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) failure: Option<String>,
    /// When a worker retries the failed run (milliseconds since the epoch): set when
    /// the error that stopped it was transient, and retries are left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) retry_at: Option<u64>,
    /// How many times workers retried the run after transient errors.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) retries: u32,
    /// Kept in the store at least once (a run that fails before its first save leaves
    /// nothing to retry).
    #[serde(skip)]
    pub(super) persisted: bool,
    /// This process's hold on the run (the store keeps it beside the state).
    #[serde(skip)]
    pub(super) lease: Option<Lease>,
    /// What the run was started with: its owner, labels and budget.
    #[serde(default, skip_serializing_if = "RunOptions::is_empty")]
    pub(super) options: RunOptions,
    /// The policy the run goes on under (kept with it: a resume does not loosen it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) policy: Option<Policy>,
    /// The run this one works for, when a sub-agent tool started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) parent: Option<Parent>,
    /// The gates of `parent`'s policies, live in this process (their `ask` callbacks
    /// included); built from the kept policies when the run goes on elsewhere.
    #[serde(skip)]
    pub(super) outer: Vec<Arc<Gate>>,
    /// The standing allowances of the store, as this process read them for the loop:
    /// read when a call first needs them (one that needs a person's approval), once
    /// each time the loop takes the run up.
    #[serde(skip)]
    pub(super) standing: tokio::sync::OnceCell<Vec<Allowance>>,
    /// That policy's gate, for this process, when it is not the agent's own.
    #[serde(skip)]
    pub(super) gate: Option<Arc<Gate>>,
    /// Sent-ledger entries the next save appends.
    #[serde(skip)]
    pub(super) ledger: Vec<LedgerEntry>,
    /// The ledger's `Sent` items, as read when this process took the run up (and
    /// appended since): a call among them is never sent again.
    #[serde(skip)]
    pub(super) sent: std::collections::HashSet<String>,
    /// The decisions the ledger records as spent (a call they approved was sent).
    #[serde(skip)]
    pub(super) spent: std::collections::HashSet<String>,
}

/// The mode, allow-list and step limit in force for a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Policy {
    pub(super) mode: String,
    pub(super) allow: Vec<String>,
    pub(super) max_steps: u32,
}

/// One suspension of a run: its id (the calls it waits on name their decisions).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Suspension {
    pub(super) id: String,
    /// When decisions stop applying (milliseconds since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) expires_at: Option<u64>,
}

impl PendingCall {
    /// What this call waits for in the suspension `suspension` of run `run_id` (started
    /// with `options`); `None` when it waits for nobody.
    pub(super) fn pending(
        &self,
        run_id: &str,
        suspension: &Suspension,
        options: &RunOptions,
    ) -> Result<Option<Pending>> {
        let (decision, server, arguments, waits) = match &self.at {
            CallState::AwaitingApproval(a) => (
                a.decision.clone(),
                a.server.clone(),
                a.arguments.clone(),
                PendingWait::Approval {
                    binding: a.binding.clone(),
                    description: a.description.clone(),
                    input_schema: a.input_schema.clone(),
                },
            ),
            CallState::AwaitingInput {
                decision,
                input,
                answers,
                ..
            } => {
                let requests = input
                    .requests()
                    .map_err(|e| Error::store(format!("run {run_id}: {e}")))?
                    .into_iter()
                    .filter(|(k, _)| !answers.has(k))
                    .collect();
                (
                    decision.clone(),
                    input.server().to_owned(),
                    self.arguments.clone(),
                    PendingWait::Input { requests },
                )
            }
            _ => return Ok(None),
        };
        Ok(Some(Pending {
            run_id: run_id.to_owned(),
            suspension: suspension.id.clone(),
            decision,
            server,
            tool: self.name.clone(),
            arguments,
            waits,
            tenant: options.tenant.clone(),
            started_by: options.started_by.clone(),
            expires_at: suspension.expires_at,
            sub_run: None,
        }))
    }
}
