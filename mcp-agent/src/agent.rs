//! The agent: a model, attached MCP servers, the gate, and a tool loop that suspends
//! durably when a person must decide.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use mcp_runtime::{BoxFuture, InputRequest, InputResponse, Mcp, PendingInput, RequestOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::gate::{Gate, Mode, ToolFacts, Verdict};
use crate::model::{Block, ChatRequest, Message, Model, Role, ToolSpec};
use crate::store::{lock, Claim, MemoryRunStore, RunRecord, RunStatus, RunStore};

mod skills;
pub use skills::SkillApproval;
use skills::{HeldSkill, SkillStep, READ_SKILL, READ_SKILL_FILE};

/// Something that happened in a run, in order. Delivered to the `on_event` callbacks
/// and kept with the run. Events carry tool names and the model's arguments, never a
/// configured secret (tokens, header or environment values).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The run started.
    RunStarted,
    /// A tool call the gate allowed is about to run.
    BeforeToolCall {
        /// The server.
        server: String,
        /// The tool's model-facing name.
        tool: String,
        /// The arguments.
        arguments: Value,
    },
    /// A tool call returned.
    AfterToolResult {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The tool failed.
        is_error: bool,
    },
    /// A running tool reported progress (the seed's `after_tool_progress`). A run keeps
    /// at most [`MAX_PROGRESS_KEPT`] of them per call (the latest last); callbacks see
    /// every one.
    ToolProgress {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// How far along.
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// The server's message (at most 1000 characters kept).
        message: Option<String>,
    },
    /// The gate denied a call.
    Denied {
        /// The tool the model asked for.
        tool: String,
        /// Why.
        reason: String,
    },
    /// A call waits for a person's approval.
    ApprovalRequested {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The arguments.
        arguments: Value,
        /// What an approval will be bound to (absent for a skill load, which is bound
        /// to the skill's fingerprint).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binding: Option<Binding>,
    },
    /// A person decided.
    ApprovalDecided {
        /// The tool.
        tool: String,
        /// Approved or denied.
        approved: bool,
        /// Who decided.
        by: String,
        /// When (seconds since the epoch).
        at: u64,
        /// What the decision is bound to: an approval applies only while the server,
        /// its configuration, the tool's definition and the arguments are these.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binding: Option<Binding>,
    },
    /// An approval was not applied: what it was bound to changed before the call ran
    /// (the tool is gone, moved to another server, its definition or the server's
    /// configuration changed, the arguments differ). Nothing ran; the call goes
    /// through the gate again (a person is asked again, in a new suspension).
    DecisionVoided {
        /// The tool.
        tool: String,
        /// What changed.
        reason: String,
    },
    /// A server asked for input (elicitation) that no `on_input` callback answered.
    InputRequested {
        /// The server.
        server: String,
        /// The tool whose call asked.
        tool: String,
        /// What the server says it needs, one message per request (at most 1000
        /// characters each kept).
        messages: Vec<String>,
        /// The background task waiting for the input, when the call runs as one.
        task: Option<String>,
    },
    /// Input was given (by a callback or a person); the values themselves are not kept
    /// in events.
    InputAnswered {
        /// The tool.
        tool: String,
        /// `accept`, `decline` or `cancel`, one per request answered.
        actions: Vec<String>,
        /// Who answered (`on_input` for a callback).
        by: String,
        /// When (seconds since the epoch).
        at: u64,
    },
    /// A skill was loaded: its `SKILL.md` checked against the entry, which the run
    /// holds from now on.
    SkillLoaded {
        /// The server.
        server: String,
        /// The skill's `SKILL.md` URI.
        uri: String,
        /// The fingerprint of its files the load was approved for.
        fingerprint: String,
        /// Tools of the server its `allowed-tools` named that the approval granted.
        granted_tools: Vec<String>,
    },
    /// A file of a loaded skill was read and checked.
    SkillFileRead {
        /// The server.
        server: String,
        /// The skill's `SKILL.md` URI.
        uri: String,
        /// The file's URI.
        path: String,
    },
    /// A skill's file did not match the entry it was loaded from (or is loaded
    /// from): the content was not used, the skill is no longer held and its approvals
    /// in the run are revoked. It changed and needs re-approval.
    SkillChanged {
        /// The server.
        server: String,
        /// The skill's `SKILL.md` URI.
        uri: String,
        /// What differed.
        reason: String,
    },
    /// The run stopped to wait for a decision or for input.
    RunSuspended {
        /// The suspension's id.
        #[serde(default)]
        suspension: String,
        /// The decision it waits for (what a resume names).
        #[serde(default)]
        decision: String,
    },
    /// A decision was refused: it did not apply to what the run waits for (already
    /// applied, for an earlier suspension, of the other kind, or for a run that is
    /// not waiting). Nothing changed.
    DecisionRefused {
        /// The decision the resume named.
        decision: String,
        /// Who decided.
        by: String,
        /// Why it was refused.
        reason: String,
    },
    /// An error stopped the run. When nothing had run since it was resumed it waits
    /// again for the same decision (`resumable`); otherwise it is `failed`, keeping
    /// what ran, and [`Agent::retry`] continues it.
    RunFailed {
        /// What went wrong.
        error: String,
        /// The run waits again in the suspension it was resumed from.
        resumable: bool,
    },
    /// A failed run was taken up again ([`Agent::retry`]).
    RunRetried,
    /// A suspension expired with no decision: the call it waited on did not run.
    SuspensionExpired {
        /// The suspension.
        suspension: String,
        /// The decision nobody made.
        decision: String,
        /// The tool.
        tool: String,
    },
    /// The run was cancelled ([`Agent::cancel`]); the calls it waited on did not run.
    RunCancelled {
        /// Who cancelled it.
        by: String,
    },
    /// The run ended.
    RunFinished,
}

type EventFn = Arc<dyn Fn(&str, &Event) + Send + Sync>;

/// How a run ended (for now).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Outcome {
    /// The model's final answer.
    Finished {
        /// The run.
        run_id: String,
        /// The answer.
        text: String,
    },
    /// A tool call waits for a person: [`Agent::resume`] with the decision id and the
    /// decision, from this process or another.
    ApprovalRequired {
        /// The run.
        run_id: String,
        /// This suspension of the run (every suspension has its own id).
        suspension: String,
        /// The decision the call waits for: a resume names it, and it applies once.
        decision: String,
        /// The server.
        server: String,
        /// The tool's model-facing name.
        tool: String,
        /// The arguments the model gave.
        arguments: Value,
    },
    /// A tool call waits for input a server asked for and no `on_input` callback
    /// answered: [`Agent::resume`] with [`Decision::answer`] (or a denial, which
    /// declines), from this process or another.
    InputRequired {
        /// The run.
        run_id: String,
        /// This suspension of the run.
        suspension: String,
        /// The decision the call waits for: a resume names it, and it applies once.
        decision: String,
        /// The server.
        server: String,
        /// The tool's model-facing name.
        tool: String,
        /// The arguments the model gave.
        arguments: Value,
        /// What the server asks, by its key for each request.
        requests: Vec<(String, InputRequest)>,
    },
    /// The run took as many model turns as allowed without finishing.
    StepLimit {
        /// The run.
        run_id: String,
    },
    /// Nobody decided before the suspension expired, and the agent ends such runs
    /// ([`Expiry::End`]): the call did not run.
    Expired {
        /// The run.
        run_id: String,
    },
}

/// What happens to a run whose suspension expired undecided
/// ([`AgentBuilder::suspension_expiry`], [`Agent::expire_due`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expiry {
    /// The model reads that the call expired and was not run, and the run goes on
    /// (the default).
    #[default]
    Continue,
    /// The run ends ([`Outcome::Expired`]).
    End,
}

/// A person's decision on a suspended call: approve or deny a call that waits for
/// approval; answer (or deny, which declines) a call that waits for input.
#[derive(Clone, Debug)]
pub struct Decision {
    /// Run the call (or give the model an error result).
    pub approved: bool,
    /// Who decided (kept in the run's events).
    pub by: String,
    /// Answers to the input a server asked for, by request key.
    pub answers: Vec<(String, InputResponse)>,
    /// For loading a skill: also grant the tools its `allowed-tools` names (see
    /// [`with_allowed_tools`](Self::with_allowed_tools)).
    pub allowed_tools: bool,
    /// For a denial: why, for the model to read with the error result.
    pub message: Option<String>,
    /// Made with [`answer`](Self::answer): it answers input, it approves nothing.
    answering: bool,
}

impl Decision {
    /// Approve, by `who`.
    pub fn approve(who: impl Into<String>) -> Self {
        Decision {
            approved: true,
            by: who.into(),
            answers: Vec::new(),
            allowed_tools: false,
            message: None,
            answering: false,
        }
    }
    /// Deny, by `who`. For a call that waits for input: every request is declined.
    pub fn deny(who: impl Into<String>) -> Self {
        Decision {
            approved: false,
            by: who.into(),
            answers: Vec::new(),
            allowed_tools: false,
            message: None,
            answering: false,
        }
    }
    /// Answers the input a call waits for, by `who`: one answer per request key of
    /// [`Outcome::InputRequired`] (a request left unanswered is declined).
    pub fn answer<I, K>(who: impl Into<String>, answers: I) -> Self
    where
        I: IntoIterator<Item = (K, InputResponse)>,
        K: Into<String>,
    {
        Decision {
            approved: true,
            by: who.into(),
            answers: answers.into_iter().map(|(k, a)| (k.into(), a)).collect(),
            allowed_tools: false,
            message: None,
            answering: true,
        }
    }
    /// For an approval of loading a skill: also grant the tools of the skill's server
    /// that its `allowed-tools` names, while the run acts on it. Without this the
    /// skill's `allowed-tools` are ignored.
    pub fn with_allowed_tools(mut self) -> Self {
        self.allowed_tools = true;
        self
    }
    /// For a denial: tells the model why (it reads it with the call's error result).
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// What a person's approval of a tool call is bound to: the call runs on it only while
/// each part is the same when it is about to run, in whichever process resumes the
/// run. Digests are `sha256:` and 64 hex digits (see [`mcp_runtime::digest`]); none
/// holds a secret value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Binding {
    /// The server's name (the host's label for it).
    pub server: String,
    /// The server's configuration ([`Mcp::config_fingerprint`]): how it is started or
    /// reached.
    pub server_config: String,
    /// The tool's model-facing name.
    pub tool: String,
    /// The tool's definition ([`mcp_runtime::McpTool::definition_digest`]): name,
    /// description, input schema, annotations.
    pub definition: String,
    /// The arguments the person saw.
    pub arguments: String,
}

impl Binding {
    /// What an approval of calling `tool` (of the server `server`) with `arguments`
    /// is bound to.
    fn new(server: &Mcp, tool: &AgentTool, arguments: &Value) -> Binding {
        Binding {
            server: tool.facts.server.clone(),
            server_config: server.config_fingerprint(),
            tool: tool.facts.name.clone(),
            definition: tool.def.definition_digest(),
            arguments: mcp_runtime::digest::sha256_json(arguments),
        }
    }

    /// What differs now, if anything: the live tool of that name (with its server),
    /// and the arguments.
    fn changed(&self, now: Option<(&Mcp, &AgentTool)>, arguments: &Value) -> Option<String> {
        let Some((server, t)) = now else {
            return Some(format!(
                "`{}` is no longer offered by any attached server",
                self.tool
            ));
        };
        if t.facts.server != self.server {
            return Some(format!(
                "`{}` is now offered by server `{}`, not by `{}`",
                self.tool, t.facts.server, self.server
            ));
        }
        if server.config_fingerprint() != self.server_config {
            return Some(format!(
                "server `{}` is now started or reached differently",
                self.server
            ));
        }
        if t.def.definition_digest() != self.definition {
            return Some(format!(
                "the definition of `{}` changed (description, input schema or annotations)",
                self.tool
            ));
        }
        if mcp_runtime::digest::sha256_json(arguments) != self.arguments {
            return Some(format!("the arguments of `{}` changed", self.tool));
        }
        None
    }
}

/// What a suspended run waits on ([`Agent::pending`]), for an application that did not
/// see the [`Outcome`] (an approval inbox): the ids a decision names, and what the
/// person decides on.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Pending {
    /// The run.
    pub run_id: String,
    /// The suspension it waits in.
    pub suspension: String,
    /// The decision it waits for ([`Agent::resume`] names it).
    pub decision: String,
    /// The server.
    pub server: String,
    /// The tool's model-facing name.
    pub tool: String,
    /// The arguments the model gave (for a skill load: what the person approves — its
    /// uri, fingerprint and `allowed-tools`).
    pub arguments: Value,
    /// What it waits for.
    pub waits: PendingWait,
}

/// What a suspended call waits for.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum PendingWait {
    /// A person's approval or denial.
    Approval {
        /// What an approval is bound to (absent for a skill load).
        binding: Option<Binding>,
        /// The tool's description, as shown.
        description: Option<String>,
        /// The tool's input schema, as shown.
        input_schema: Option<Value>,
    },
    /// Answers to a server's requests for input, by key (with their schemas).
    Input {
        /// The requests still unanswered.
        requests: Vec<(String, InputRequest)>,
    },
}

/// A server's request for input, as an `on_input` callback sees it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct InputAsk {
    /// The run.
    pub run_id: String,
    /// The tool whose call asked (model-facing name).
    pub tool: String,
    /// The server's key for this request.
    pub key: String,
    /// The request (its `server` names the server).
    pub request: InputRequest,
}

type InputFn = Arc<dyn Fn(InputAsk) -> BoxFuture<'static, Option<InputResponse>> + Send + Sync>;

/// How many times one call may ask for input that callbacks answer at once.
const MAX_INPUT_ROUNDS: usize = 8;

/// A call of the current model turn that has not run yet.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct PendingCall {
    id: String,
    name: String,
    arguments: Value,
    /// A person's decision, once there is one (or `true` once the gate allowed a call
    /// that then paused for input: the gate is not asked twice).
    approved: Option<bool>,
    /// Input the server asked for that no callback answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    input: Option<PendingInput>,
    /// Answers to it (wire form), from callbacks and then a person.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    answers: Vec<(String, Value)>,
    /// A person answered: the call goes on with `answers`.
    #[serde(default)]
    answered: bool,
    /// For a skill load waiting for approval: the fingerprint the person was shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bound: Option<String>,
    /// The person's approval also granted the skill's `allowed-tools`.
    #[serde(default)]
    grant_tools: bool,
    /// A person's reason for denying it, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    denial: Option<String>,
    /// What a person's approval of it is bound to (set when it waits for approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    binding: Option<Binding>,
    /// The tool's description and input schema as the person was shown them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shown: Option<(String, Value)>,
}

impl PendingCall {
    /// Paused for input nobody has given yet.
    fn waits_for_input(&self) -> bool {
        self.input.is_some() && !self.answered
    }
}

/// A call that paused for input: the input, and the answers callbacks gave.
type Paused = (PendingInput, Vec<(String, Value)>);

/// How one allowed call ended.
enum CallEnd {
    /// Its result for the model, and whether it failed.
    Done(String, bool),
    /// It waits for input no callback gave: the input, and the answers callbacks did
    /// give.
    Paused(PendingInput, Vec<(String, Value)>),
}

/// Everything a run is: kept in the store while it waits.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RunState {
    id: String,
    messages: Vec<Message>,
    pending: Vec<PendingCall>,
    results: Vec<Block>,
    events: Vec<Event>,
    steps: u32,
    /// Deferred tools a (emulated) tool search has loaded into the model's context.
    #[serde(default)]
    loaded: Vec<String>,
    /// Skills the run loaded, with the entries held while acting on them.
    #[serde(default)]
    held: Vec<HeldSkill>,
    /// Skill approvals given in this run.
    #[serde(default)]
    skill_approvals: Vec<SkillApproval>,
    /// Tools an approved skill's `allowed-tools` granted: (server, tool, skill uri).
    #[serde(default)]
    granted: Vec<(String, String, String)>,
    /// The suspension the run waits in, while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    suspension: Option<Suspension>,
    /// How many tool calls and model turns have completed: an error after a resume
    /// with nothing run since puts the run back in its suspension.
    #[serde(default)]
    ran: u64,
    /// The error that stopped a failed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure: Option<String>,
    /// Kept in the store at least once (a run that fails before its first save leaves
    /// nothing to retry).
    #[serde(skip)]
    persisted: bool,
    /// The policy the run goes on under (kept with it: a resume does not loosen it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<Policy>,
    /// That policy's gate, for this process, when it is not the agent's own.
    #[serde(skip)]
    gate: Option<Arc<Gate>>,
}

/// The mode, allow-list and step limit in force for a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Policy {
    mode: String,
    allow: Vec<String>,
    max_steps: u32,
}

/// What a suspended run waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Waits {
    /// A person's approval (or denial) of the first pending call.
    Approval,
    /// Answers to the input the first pending call asked for.
    Input,
}

/// One suspension of a run: its id, the decision it waits for, and of what kind.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Suspension {
    id: String,
    decision: String,
    waits: Waits,
    /// When decisions stop applying (milliseconds since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
}

/// A tool an approved skill's `allowed-tools` granted (same server, exact name).
fn granted(grants: &[(String, String, String)], tool: &ToolFacts) -> bool {
    grants
        .iter()
        .any(|(server, name, _)| *server == tool.server && *name == tool.name)
}

/// The name of the emulated tool search (for models without a native one).
const TOOL_SEARCH: &str = "tool_search";

/// Builds an [`Agent`].
pub struct AgentBuilder {
    model: Option<Arc<dyn Model>>,
    mode: Mode,
    allow: Vec<String>,
    servers: Vec<Mcp>,
    store: Arc<dyn RunStore>,
    max_steps: u32,
    system: Option<String>,
    on_event: Vec<EventFn>,
    on_input: Vec<InputFn>,
    defer: Option<Vec<String>>,
    skills: bool,
    skill_approvals: Vec<SkillApproval>,
    /// `mode`, `allow` or `max_steps` was called: this agent states a policy.
    policy_stated: bool,
    integrity: Option<IntegrityKey>,
    expiry: Option<std::time::Duration>,
    on_expiry: Expiry,
}

/// The key stored runs are MACed with (never stored, never shown).
#[derive(Clone)]
struct IntegrityKey(Arc<[u8]>);

impl fmt::Debug for IntegrityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IntegrityKey(<redacted>)")
    }
}

/// Where a run's MAC is kept in its stored state.
const INTEGRITY_FIELD: &str = "integrity";

impl IntegrityKey {
    fn mac(&self, run_id: &str, state: &Value) -> Result<hmac::Hmac<sha2::Sha256>> {
        use hmac::Mac as _;
        let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(&self.0)
            .map_err(|e| Error::config(format!("the integrity key cannot be used: {e}")))?;
        // Every field length-prefixed: two different runs never encode alike.
        for part in [
            b"mcp-agent run v1".as_slice(),
            run_id.as_bytes(),
            mcp_runtime::digest::canonical_json(state).as_bytes(),
        ] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        Ok(mac)
    }

    /// Adds the MAC of `state` (an object) to it.
    fn seal(&self, run_id: &str, state: &mut Value) -> Result<()> {
        use hmac::Mac as _;
        let tag = self.mac(run_id, state)?.finalize().into_bytes();
        if let Value::Object(m) = state {
            let tag = format!("hmac-sha256:{}", mcp_runtime::digest::hex(&tag));
            m.insert(INTEGRITY_FIELD.into(), tag.into());
        }
        Ok(())
    }

    /// Takes the MAC out of `state` and checks it (in constant time).
    fn open(&self, run_id: &str, state: &mut Value) -> Result<()> {
        use hmac::Mac as _;
        let tag = state
            .as_object_mut()
            .and_then(|m| m.remove(INTEGRITY_FIELD));
        let tag = tag
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|t| t.strip_prefix("hmac-sha256:"))
            .and_then(unhex);
        let mac = self.mac(run_id, state)?;
        let ok = tag.is_some_and(|t| mac.verify_slice(&t).is_ok());
        if ok {
            Ok(())
        } else {
            Err(Error::store(format!(
                "run {run_id} failed its integrity check: it was changed outside the agent, or kept without (or with another) integrity key; it is not used"
            )))
        }
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

impl fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("mode", &self.mode)
            .field("allow", &self.allow)
            .field("servers", &self.servers.len())
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// The model (required: there is no default).
    pub fn model(mut self, model: impl Model) -> Self {
        self.model = Some(Arc::new(model));
        self
    }
    /// The permission mode (default [`Mode::ReadOnly`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self.policy_stated = true;
        self
    }
    /// Tool names the mode allows (exact model-facing names; default none).
    pub fn allow<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allow.extend(names.into_iter().map(Into::into));
        self.policy_stated = true;
        self
    }
    /// Attaches a server (a declared struct derefs to its `Mcp`; clone it in).
    pub fn server(mut self, server: Mcp) -> Self {
        self.servers.push(server);
        self
    }
    /// Where suspended runs are kept (default: in memory).
    pub fn store(mut self, store: impl RunStore) -> Self {
        self.store = Arc::new(store);
        self
    }
    /// The most model turns one run may take (default 20).
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.max_steps = steps;
        self.policy_stated = true;
        self
    }
    /// Instructions for the model.
    pub fn system(mut self, text: impl Into<String>) -> Self {
        self.system = Some(text.into());
        self
    }
    /// Keeps these tools (model-facing names) out of the model's context until a tool
    /// search loads them, instead of what the servers' declarations defer. Models with
    /// a native tool search (Anthropic) get them flagged; for the others the agent
    /// offers a `tool_search` function that loads the tools matching a query.
    pub fn defer<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.defer = Some(names.into_iter().map(Into::into).collect());
        self
    }
    /// Called with each event of every run (the run's id, the event).
    pub fn on_event(mut self, f: impl Fn(&str, &Event) + Send + Sync + 'static) -> Self {
        self.on_event.push(Arc::new(f));
        self
    }
    /// Answers a server's requests for input (elicitation) during a run: return the
    /// answer, or `None` to leave it to a person — the run then suspends with
    /// [`Outcome::InputRequired`]. Callbacks are asked in the order added; the first
    /// answer wins. Without any, every request suspends the run.
    ///
    /// Suspending for input needs a 2026-07-28 server (its requests are stateless and
    /// can be answered from another process). Servers before 2026-07-28 ask over the
    /// live connection: their requests go to the attached `Mcp`'s own input handler.
    pub fn on_input<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(InputAsk) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Option<InputResponse>> + Send + 'static,
    {
        self.on_input.push(Arc::new(move |ask| Box::pin(f(ask))));
        self
    }
    /// The agent. Connections to the servers are made on first use and kept.
    /// Offers the skills of attached servers to the model (default: on). Off, no
    /// skill is listed or loaded.
    pub fn skills(mut self, on: bool) -> Self {
        self.skills = on;
        self
    }

    /// An approval of a skill given earlier (kept by the application, such as from an
    /// [`Event::SkillLoaded`] after a person approved): the skill loads without asking
    /// while its files are the ones approved.
    pub fn approve_skill(mut self, approval: SkillApproval) -> Self {
        self.skill_approvals.push(approval);
        self
    }

    /// How long a suspension waits for a decision (default: for ever). A decision
    /// after that is refused as stale; [`Agent::expire_due`] then gives the model an
    /// "expired, not run" result for the call and goes on, or ends the run (see
    /// [`on_expiry`](Self::on_expiry)).
    pub fn suspension_expiry(mut self, after: std::time::Duration) -> Self {
        self.expiry = Some(after);
        self
    }

    /// What an expired suspension does to its run (default [`Expiry::Continue`]).
    pub fn on_expiry(mut self, action: Expiry) -> Self {
        self.on_expiry = action;
        self
    }

    /// Protects stored runs against changes made outside the agent: each run is kept
    /// with an HMAC-SHA-256 of its state under this key (the key itself is never
    /// stored), and a run whose MAC does not match — its arguments rewritten, a later
    /// call pre-approved in the store, a run kept without the key — is refused with an
    /// error for which `is_store()` is true. Every process that resumes the runs needs
    /// the same key. Without a key the store is trusted: whoever can write it can
    /// change what a run does. (A MAC cannot tell an older copy of the same run from
    /// the current one: keep the store's own history out of reach too.)
    pub fn integrity_key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.integrity = Some(IntegrityKey(Arc::from(key.as_ref())));
        self
    }

    /// Builds the agent.
    pub fn build(self) -> Result<Agent> {
        if self.integrity.as_ref().is_some_and(|k| k.0.len() < 16) {
            return Err(Error::config(
                "the integrity key is too short: give at least 16 random bytes (32 recommended)",
            ));
        }
        let model = self
            .model
            .ok_or_else(|| Error::config("no model: set one (there is no default model)"))?;
        Ok(Agent {
            inner: Arc::new(AgentInner {
                model,
                gate: Arc::new(Gate::new(self.mode, self.allow)),
                policy_stated: self.policy_stated,
                integrity: self.integrity,
                expiry: self.expiry,
                on_expiry: self.on_expiry,
                servers: self.servers,
                store: self.store,
                max_steps: self.max_steps.max(1),
                system: self.system,
                on_event: self.on_event,
                on_input: self.on_input,
                defer: self.defer,
                skills: self.skills,
                skill_approvals: self.skill_approvals,
                loaded_skills: Default::default(),
            }),
        })
    }
}

/// How many progress events a run keeps per tool call.
pub const MAX_PROGRESS_KEPT: usize = 100;

/// An agent. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentInner>,
}

struct AgentInner {
    model: Arc<dyn Model>,
    gate: Arc<Gate>,
    /// The builder set the mode, allow-list or step limit: a resumed run may go on
    /// under this policy only where it is tighter than the run's own.
    policy_stated: bool,
    /// MACs stored runs, when set.
    integrity: Option<IntegrityKey>,
    /// How long a suspension waits for a decision.
    expiry: Option<std::time::Duration>,
    /// What an expired suspension does.
    on_expiry: Expiry,
    servers: Vec<Mcp>,
    store: Arc<dyn RunStore>,
    max_steps: u32,
    system: Option<String>,
    on_event: Vec<EventFn>,
    on_input: Vec<InputFn>,
    defer: Option<Vec<String>>,
    skills: bool,
    skill_approvals: Vec<SkillApproval>,
    /// Skills loaded in this process, by (server, uri): a file read reuses the load
    /// (its `SKILL.md` checked once) while the run holds the same entry.
    loaded_skills: std::sync::Mutex<HashMap<(String, String), mcp_runtime::LoadedSkill>>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("mode", self.inner.gate.mode())
            .field("servers", &self.inner.servers.len())
            .finish_non_exhaustive()
    }
}

/// A tool of an attached server, as the loop sees it.
#[derive(Clone)]
struct AgentTool {
    server: usize,
    facts: ToolFacts,
    spec: ToolSpec,
    /// The tool as its server's handle shapes it (digested only when an approval is
    /// bound or checked).
    def: Arc<mcp_runtime::McpTool>,
}

/// Ends the current turn of a run that will not go on: every call still pending gets
/// an error result saying `why`, and the turn's results join the transcript.
fn close_turn(state: &mut RunState, why: &str) {
    let mut results = std::mem::take(&mut state.results);
    for call in std::mem::take(&mut state.pending) {
        results.push(Block::ToolResult {
            id: call.id,
            content: json!({ "error": why }).to_string(),
            is_error: true,
        });
    }
    if !results.is_empty() {
        state.messages.push(Message {
            role: Role::Tool,
            content: results,
        });
    }
}

/// A fresh random id (96 bits, hex). A failed draw is an error, never a weak id.
fn random_id() -> Result<String> {
    let mut b = [0u8; 12];
    getrandom::getrandom(&mut b).map_err(|e| {
        Error::config(format!(
            "the system's random number generator failed ({e}); no id can be made"
        ))
    })?;
    Ok(mcp_runtime::digest::hex(&b))
}

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis().min(u64::MAX as u128) as u64)
        .unwrap_or(0)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Agent {
    /// Starts building an agent.
    pub fn builder() -> AgentBuilder {
        AgentBuilder {
            model: None,
            mode: Mode::ReadOnly,
            allow: Vec::new(),
            servers: Vec::new(),
            store: Arc::new(MemoryRunStore::default()),
            max_steps: 20,
            system: None,
            on_event: Vec::new(),
            on_input: Vec::new(),
            defer: None,
            skills: true,
            skill_approvals: Vec::new(),
            policy_stated: false,
            integrity: None,
            expiry: None,
            on_expiry: Expiry::Continue,
        }
    }

    /// Runs `prompt` until the model answers, a call needs a person, or the step limit.
    pub async fn run(&self, prompt: &str) -> Result<Outcome> {
        let mut messages = Vec::new();
        if let Some(s) = &self.inner.system {
            messages.push(Message::text(Role::System, s.clone()));
        }
        messages.push(Message::text(Role::User, prompt));
        let mut state = RunState {
            id: random_id()?,
            messages,
            pending: Vec::new(),
            results: Vec::new(),
            events: Vec::new(),
            steps: 0,
            loaded: Vec::new(),
            held: Vec::new(),
            skill_approvals: Vec::new(),
            granted: Vec::new(),
            suspension: None,
            ran: 0,
            failure: None,
            persisted: false,
            policy: Some(self.own_policy()),
            gate: None,
        };
        self.event(&mut state, Event::RunStarted);
        self.drive(state, None).await
    }

    /// Continues a suspended run with a person's decision on what it waits for — in
    /// this process or another (with the same store). `decision_id` is the `decision`
    /// of the [`Outcome`] that suspended the run: a decision applies to exactly that
    /// call of exactly that suspension, once. Anything else — the same decision again
    /// (a double click, a retried request), one for an earlier suspension of the run,
    /// an answer to a call that waits for approval or an approval of one that waits
    /// for input, a decision for a run that is not waiting — is refused with an error
    /// for which [`is_stale_decision`](Error::is_stale_decision) is true, and changes
    /// nothing. An error while the run goes on never leaves it stuck: see
    /// [`Event::RunFailed`] and [`retry`](Self::retry).
    pub async fn resume(
        &self,
        run_id: &str,
        decision_id: &str,
        decision: Decision,
    ) -> Result<Outcome> {
        let RunRecord {
            status,
            suspension: stored_suspension,
            state: stored,
            ..
        } = self.inner.store.load(run_id).await?.ok_or_else(|| {
            Error::not_suspended(format!("run {run_id} is unknown to the run store"))
        })?;
        let refuse = |reason: String, waiting: bool| {
            let event = Event::DecisionRefused {
                decision: decision_id.to_owned(),
                by: decision.by.clone(),
                reason: reason.clone(),
            };
            for f in &self.inner.on_event {
                f(run_id, &event);
            }
            Error::stale(format!("run {run_id}: {reason}"), waiting)
        };
        if status != RunStatus::Suspended {
            let status = match status {
                RunStatus::Running => "is running (decided already, or being resumed)",
                RunStatus::Finished => "has finished",
                RunStatus::Failed => "has failed (retry it)",
                RunStatus::Cancelled => "was cancelled",
                _ => "waits",
            };
            return Err(refuse(
                format!("the run {status}: decision {decision_id} applies to nothing"),
                false,
            ));
        }
        let mut state = self.read(run_id, stored)?;
        // The run as it waits, to put back if an error stops it before anything ran.
        let kept = state.clone();
        let Some(waiting) = state
            .suspension
            .clone()
            .filter(|s| stored_suspension.as_deref() == Some(s.id.as_str()))
        else {
            return Err(refuse(
                "the run waits in no suspension a decision can name (kept by an older version)"
                    .into(),
                false,
            ));
        };
        if waiting.decision != decision_id {
            return Err(refuse(
                format!(
                    "decision {decision_id} is not the one the run waits for (it was applied already, or belongs to an earlier suspension)"
                ),
                true,
            ));
        }
        if let Some(at) = waiting.expires_at.filter(|at| now_ms() >= *at) {
            return Err(refuse(
                format!(
                    "the suspension expired ({} ms since the epoch) before decision {decision_id} came; it no longer applies",
                    at
                ),
                false,
            ));
        }
        match (waiting.waits, decision.answering) {
            (Waits::Approval, true) => {
                return Err(refuse(
                    format!("decision {decision_id} waits for an approval or a denial, not for answers"),
                    true,
                ))
            }
            (Waits::Input, false) if decision.approved => {
                return Err(refuse(
                    format!("decision {decision_id} waits for input: resume it with Decision::answer (or deny, which declines)"),
                    true,
                ))
            }
            _ => {}
        }
        self.resume_policy(&mut state)?;
        // Atomic: of two resumes of this suspension, one gets the run.
        let Some(_) = self
            .inner
            .store
            .claim(run_id, Claim::Suspended(&waiting.id))
            .await?
        else {
            return Err(refuse(
                format!("decision {decision_id} was applied already"),
                false,
            ));
        };
        state.persisted = true;
        state.suspension = None;
        let Some(call) = state.pending.first_mut() else {
            return self
                .fail(
                    state,
                    Some(kept),
                    Error::store(format!("run {run_id} waits for nothing")),
                )
                .await;
        };
        let tool = call.name.clone();
        if waiting.waits == Waits::Input {
            let Some(input) = call.input.clone() else {
                let e = Error::store(format!("run {run_id} waits for input it does not have"));
                return self.fail(state, Some(kept), e).await;
            };
            let mut actions = Vec::new();
            for key in input.keys() {
                if call.answers.iter().any(|(k, _)| k == key) {
                    continue; // a callback answered it
                }
                let answer = decision
                    .answers
                    .iter()
                    .find(|(k, _)| k == key)
                    .filter(|_| decision.approved)
                    .map(|(_, a)| a.clone())
                    .unwrap_or(InputResponse::Decline);
                actions.push(answer.action().to_owned());
                call.answers.push((key.to_owned(), answer.to_value()));
            }
            call.answered = true;
            self.event(
                &mut state,
                Event::InputAnswered {
                    tool,
                    actions,
                    by: decision.by,
                    at: now(),
                },
            );
            return self.drive(state, Some(kept)).await;
        }
        call.approved = Some(decision.approved);
        call.grant_tools = decision.approved && decision.allowed_tools;
        let binding = call.binding.clone();
        if !decision.approved {
            call.denial = decision.message.map(|m| m.chars().take(4000).collect());
        }
        self.event(
            &mut state,
            Event::ApprovalDecided {
                tool,
                approved: decision.approved,
                by: decision.by,
                at: now(),
                binding,
            },
        );
        self.drive(state, Some(kept)).await
    }

    /// Continues a run an error stopped after something had run (status `failed`,
    /// see [`Event::RunFailed`]): from where it stopped, without running again the
    /// calls that finished. Of two retries one gets the run; a run that has not failed
    /// is refused with an error for which `is_not_suspended()` is true.
    pub async fn retry(&self, run_id: &str) -> Result<Outcome> {
        let Some(claimed) = self.inner.store.claim(run_id, Claim::Failed).await? else {
            return Err(Error::not_suspended(format!(
                "run {run_id} has not failed (it waits, runs, has finished, or is unknown)"
            )));
        };
        let prepared = self
            .read(run_id, claimed.state.clone())
            .and_then(|mut s| self.resume_policy(&mut s).map(|()| s));
        let mut state = match prepared {
            Ok(s) => s,
            Err(e) => {
                // Left as it was: failed, for a person to look at (unreadable) or for
                // an agent whose policy fits.
                let _ = self
                    .inner
                    .store
                    .save(&RunRecord {
                        status: RunStatus::Failed,
                        ..claimed
                    })
                    .await;
                return Err(e);
            }
        };
        state.failure = None;
        self.event(&mut state, Event::RunRetried);
        self.drive(state, None).await
    }

    /// The policy a resumed run goes on under: the one kept with it — unless this
    /// agent states its own (its builder set the mode, the allow-list or the step
    /// limit), which may only be tighter, and is then kept with the run. A looser one
    /// is an error naming what differs, and the run is not taken. A run kept under
    /// `ask` goes on under `approve` in an agent that states no policy (the callback
    /// is code of the agent that started it).
    fn resume_policy(&self, state: &mut RunState) -> Result<()> {
        let Some(kept) = state.policy.clone() else {
            return Ok(()); // kept by an older version: the agent's own
        };
        if self.inner.policy_stated {
            let mut looser = self.inner.gate.looser_than(&kept.mode, &kept.allow);
            if self.inner.max_steps > kept.max_steps {
                looser.push(format!(
                    "max_steps {} is more than {}",
                    self.inner.max_steps, kept.max_steps
                ));
            }
            if !looser.is_empty() {
                return Err(Error::config(format!(
                    "run {} goes on under mode `{}` with allow-list {:?} and max_steps {}; this agent's policy would loosen it ({}): resume it with an agent that states no policy, or a tighter one",
                    state.id,
                    kept.mode,
                    kept.allow,
                    kept.max_steps,
                    looser.join("; ")
                )));
            }
            state.gate = None;
            state.policy = Some(self.own_policy());
            return Ok(());
        }
        let mode = match kept.mode.as_str() {
            "ask" => Mode::Approve,
            other => Mode::parse(other).map_err(|e| {
                Error::store(format!("run {} keeps an unknown mode: {e}", state.id))
            })?,
        };
        state.gate = Some(Arc::new(Gate::new(mode, kept.allow.clone())));
        Ok(())
    }

    /// The policy this agent was built with.
    fn own_policy(&self) -> Policy {
        Policy {
            mode: self.inner.gate.mode().name().to_owned(),
            allow: self.inner.gate.allowed().map(str::to_owned).collect(),
            max_steps: self.inner.max_steps,
        }
    }

    /// The gate a run goes on under.
    fn gate(&self, state: &RunState) -> Arc<Gate> {
        state
            .gate
            .clone()
            .unwrap_or_else(|| self.inner.gate.clone())
    }

    /// The step limit a run goes on under.
    fn max_steps(&self, state: &RunState) -> u32 {
        state
            .policy
            .as_ref()
            .map_or(self.inner.max_steps, |p| p.max_steps)
    }

    /// What the suspended run `run_id` waits on — the ids a decision names, the server,
    /// tool and arguments, and the tool's definition as shown (or the input requests
    /// with their schemas) — for an application that never saw the [`Outcome`].
    /// `None` when the run does not wait.
    pub async fn pending(&self, run_id: &str) -> Result<Option<Pending>> {
        let Some(record) = self.inner.store.load(run_id).await? else {
            return Ok(None);
        };
        if record.status != RunStatus::Suspended {
            return Ok(None);
        }
        let state = self.read(run_id, record.state)?;
        let (Some(s), Some(call)) = (state.suspension.as_ref(), state.pending.first()) else {
            return Ok(None);
        };
        // What the person was shown: the last request for this call.
        let shown = state.events.iter().rev().find_map(|e| match e {
            Event::ApprovalRequested {
                server,
                tool,
                arguments,
                binding,
            } if *tool == call.name => Some((server.clone(), arguments.clone(), binding.clone())),
            _ => None,
        });
        let (server, arguments, waits) = match s.waits {
            Waits::Approval => {
                let (server, arguments, binding) =
                    shown.unwrap_or_else(|| (String::new(), call.arguments.clone(), None));
                let (description, input_schema) = match &call.shown {
                    Some((d, schema)) => (Some(d.clone()), Some(schema.clone())),
                    None => (None, None),
                };
                (
                    server,
                    arguments,
                    PendingWait::Approval {
                        binding,
                        description,
                        input_schema,
                    },
                )
            }
            Waits::Input => {
                let Some(input) = &call.input else {
                    return Err(Error::store(format!(
                        "run {run_id} waits for input it does not have"
                    )));
                };
                let given: Vec<&String> = call.answers.iter().map(|(k, _)| k).collect();
                let requests = input
                    .requests()
                    .map_err(|e| Error::store(format!("run {run_id}: {e}")))?
                    .into_iter()
                    .filter(|(k, _)| !given.contains(&k))
                    .collect();
                (
                    input.server().to_owned(),
                    call.arguments.clone(),
                    PendingWait::Input { requests },
                )
            }
        };
        Ok(Some(Pending {
            run_id: run_id.to_owned(),
            suspension: s.id.clone(),
            decision: s.decision.clone(),
            server,
            tool: call.name.clone(),
            arguments,
            waits,
        }))
    }

    /// Expires the suspensions whose time has passed (see
    /// [`AgentBuilder::suspension_expiry`]): for each, the call it waited on does not
    /// run — the model reads "expired, not run" — and the run goes on, or ends
    /// ([`Expiry::End`]); `Event::SuspensionExpired`. Returns what became of each run
    /// expired now (a run decided meanwhile is left to its decision). Call it from a
    /// timer; any process with the store may.
    pub async fn expire_due(&self) -> Result<Vec<(String, Result<Outcome>)>> {
        let mut out = Vec::new();
        let mut filter = crate::store::RunFilter::new()
            .status(RunStatus::Suspended)
            .limit(1000);
        // A page at a time (id order): runs expired on one page leave the listing,
        // and the cursor goes on past the last id seen.
        loop {
            let page = self.inner.store.list(&filter).await?;
            for run in page.runs {
                if let Some(done) = self.expire(&run.id).await.transpose() {
                    out.push((run.id, done));
                }
            }
            match page.next {
                Some(next) => filter = filter.cursor(next),
                None => return Ok(out),
            }
        }
    }

    /// Expires `run_id`'s suspension if its time has passed; `None` when it has not
    /// (or the run was decided meanwhile).
    async fn expire(&self, run_id: &str) -> Result<Option<Outcome>> {
        let Some(record) = self.inner.store.load(run_id).await? else {
            return Ok(None);
        };
        let mut state = self.read(run_id, record.state)?;
        let Some(s) = state
            .suspension
            .clone()
            .filter(|s| s.expires_at.is_some_and(|at| now_ms() >= at))
        else {
            return Ok(None);
        };
        // Before the claim: a policy this agent may not apply leaves the run as it is.
        self.resume_policy(&mut state)?;
        if self
            .inner
            .store
            .claim(run_id, Claim::Suspended(&s.id))
            .await?
            .is_none()
        {
            return Ok(None);
        }
        state.suspension = None;
        let Some(call) = (!state.pending.is_empty()).then(|| state.pending.remove(0)) else {
            return self
                .fail(
                    state,
                    None,
                    Error::store(format!("run {run_id} waits for nothing")),
                )
                .await
                .map(Some);
        };
        self.event(
            &mut state,
            Event::SuspensionExpired {
                suspension: s.id,
                decision: s.decision,
                tool: call.name.clone(),
            },
        );
        state.results.push(Block::ToolResult {
            id: call.id,
            content: json!({
                "error": format!("expired: nobody decided in time; `{}` was not run", call.name)
            })
            .to_string(),
            is_error: true,
        });
        if self.inner.on_expiry == Expiry::End {
            close_turn(
                &mut state,
                "not run: the run ended when a suspension expired",
            );
            self.event(&mut state, Event::RunFinished);
            self.save(&mut state, RunStatus::Finished).await?;
            return Ok(Some(Outcome::Expired {
                run_id: run_id.to_owned(),
            }));
        }
        self.drive(state, None).await.map(Some)
    }

    /// Cancels a run that waits (or failed): the calls it waited on do not run, the
    /// transcript records them as cancelled (so the model would read it), and the run
    /// ends `cancelled` (`Event::RunCancelled`). Of a cancel and a decision at once, one
    /// wins. A run that does not wait or fail is refused with `is_not_suspended()`.
    pub async fn cancel(&self, run_id: &str, by: &str) -> Result<()> {
        let record = self.inner.store.load(run_id).await?.ok_or_else(|| {
            Error::not_suspended(format!("run {run_id} is unknown to the run store"))
        })?;
        let status = record.status;
        let mut state = self.read(run_id, record.state)?;
        let claim = match (status, state.suspension.as_ref()) {
            (RunStatus::Suspended, Some(s)) => Claim::Suspended(&s.id),
            (RunStatus::Failed, _) => Claim::Failed,
            _ => {
                return Err(Error::not_suspended(format!(
                    "run {run_id} neither waits nor has failed: there is nothing to cancel"
                )))
            }
        };
        if self.inner.store.claim(run_id, claim).await?.is_none() {
            return Err(Error::not_suspended(format!(
                "run {run_id} was decided or cancelled meanwhile"
            )));
        }
        close_turn(
            &mut state,
            &format!("the run was cancelled by {by}; this call did not run"),
        );
        state.suspension = None;
        self.event(&mut state, Event::RunCancelled { by: by.to_owned() });
        self.save(&mut state, RunStatus::Cancelled).await
    }

    /// Forgets the run `run_id` (whatever it stands at); `false` when there was none.
    pub async fn delete(&self, run_id: &str) -> Result<bool> {
        self.inner.store.delete(run_id).await
    }

    /// Forgets the runs that ended (finished or cancelled) more than `age` ago; how
    /// many.
    pub async fn prune(&self, age: std::time::Duration) -> Result<u64> {
        let cutoff = crate::store::unix_now().saturating_sub(age.as_secs());
        self.inner.store.prune(cutoff).await
    }

    /// The runs of this agent's store that `filter` names, a page at a time.
    pub async fn runs(&self, filter: &crate::store::RunFilter) -> Result<crate::store::RunPage> {
        self.inner.store.list(filter).await
    }

    /// The background tasks a suspended run waits on (server, task id): calls a server
    /// runs as tasks that paused for input. They keep running on the server; resuming
    /// the run answers them and waits for their results. Listen to them with
    /// `Mcp::listen_for` to hear how they stand (the seed's `pending_tasks`).
    pub async fn pending_tasks(&self, run_id: &str) -> Result<Vec<(String, String)>> {
        let state = self.load(run_id).await?;
        Ok(state
            .pending
            .iter()
            .filter_map(|c| {
                let input = c.input.as_ref()?;
                Some((input.server().to_owned(), input.task_id()?.to_owned()))
            })
            .collect())
    }

    /// Stops every attached server.
    pub async fn close(&self) -> Result<()> {
        for s in &self.inner.servers {
            s.close().await?;
        }
        Ok(())
    }

    fn event(&self, state: &mut RunState, event: Event) {
        for f in &self.inner.on_event {
            f(&state.id, &event);
        }
        state.events.push(event);
    }

    /// The tools of every attached server; model-facing names must be unique.
    async fn tools(&self) -> Result<HashMap<String, AgentTool>> {
        let mut all: HashMap<String, AgentTool> = HashMap::new();
        for (i, server) in self.inner.servers.iter().enumerate() {
            for t in server.tools().await? {
                if let Some(other) = all.get(&t.name) {
                    return Err(Error::config(format!(
                        "two attached servers offer a tool named `{}`: {} and {}; give one a prefix",
                        t.name,
                        self.inner.servers[other.server].name(),
                        server.name()
                    )));
                }
                let facts = ToolFacts {
                    name: t.name.clone(),
                    server: server.name().to_owned(),
                    app_only: t.app_only,
                    requires_approval: t.requires_approval(),
                };
                let defer = match &self.inner.defer {
                    Some(names) => names.contains(&t.name),
                    None => t.deferred,
                };
                let spec = ToolSpec {
                    name: t.name.clone(),
                    description: t.description.clone().unwrap_or_default(),
                    input_schema: t.input_schema.clone(),
                    defer,
                };
                all.insert(
                    t.name.clone(),
                    AgentTool {
                        server: i,
                        facts,
                        spec,
                        def: Arc::new(t),
                    },
                );
            }
        }
        Ok(all)
    }

    async fn save(&self, state: &mut RunState, status: RunStatus) -> Result<()> {
        let mut state_json = serde_json::to_value(&*state)
            .map_err(|e| Error::store(format!("cannot encode the run: {e}")))?;
        if let Some(key) = &self.inner.integrity {
            key.seal(&state.id, &mut state_json)?;
        }
        let suspension = match status {
            RunStatus::Suspended => state.suspension.as_ref().map(|s| s.id.clone()),
            _ => None,
        };
        self.inner
            .store
            .save(&RunRecord {
                id: state.id.clone(),
                status,
                suspension,
                state: state_json,
            })
            .await?;
        state.persisted = true;
        Ok(())
    }

    /// Suspends the run: a new suspension, with an id of its own and the id of the
    /// decision it waits for, kept in the store.
    async fn suspend(&self, state: &mut RunState, waits: Waits) -> Result<Suspension> {
        let s = Suspension {
            id: random_id()?,
            decision: random_id()?,
            waits,
            expires_at: self
                .inner
                .expiry
                .map(|d| now_ms().saturating_add(d.as_millis().min(u64::MAX as u128) as u64)),
        };
        state.suspension = Some(s.clone());
        self.event(
            state,
            Event::RunSuspended {
                suspension: s.id.clone(),
                decision: s.decision.clone(),
            },
        );
        self.save(state, RunStatus::Suspended).await?;
        Ok(s)
    }

    /// The loop ([`Self::steps`]), and what an error leaves: never a run stuck in
    /// `running`. With nothing run since a resume, the run waits again in the
    /// suspension it was resumed from (`claimed`, as it was kept); otherwise it is kept
    /// `failed` with what ran and the error, for [`Self::retry`]. A run never saved
    /// leaves nothing behind.
    async fn drive(&self, mut state: RunState, claimed: Option<RunState>) -> Result<Outcome> {
        let ran = state.ran;
        match self.steps(&mut state).await {
            Ok(outcome) => Ok(outcome),
            Err(e) => {
                let claimed = claimed.filter(|_| state.ran == ran);
                self.fail(state, claimed, e).await
            }
        }
    }

    /// Records the error `e` that stopped the run, then returns it (see [`Self::drive`]).
    async fn fail(
        &self,
        mut state: RunState,
        claimed: Option<RunState>,
        e: Error,
    ) -> Result<Outcome> {
        let error: String = e.to_string().chars().take(1000).collect();
        if let Some(mut kept) = claimed {
            // Nothing ran: the same suspension, the same decision to make.
            self.event(
                &mut kept,
                Event::RunFailed {
                    error,
                    resumable: true,
                },
            );
            if let Err(store) = self.save(&mut kept, RunStatus::Suspended).await {
                tracing::error!(run = %state.id, error = %store, "the run could not be put back in its suspension");
            }
            return Err(e);
        }
        if !state.persisted {
            return Err(e);
        }
        state.suspension = None;
        state.failure = Some(error.clone());
        self.event(
            &mut state,
            Event::RunFailed {
                error,
                resumable: false,
            },
        );
        if let Err(store) = self.save(&mut state, RunStatus::Failed).await {
            tracing::error!(run = %state.id, error = %store, "the failed run could not be kept");
        }
        Err(e)
    }

    /// The loop: run the pending calls of the current turn, then ask the model again.
    async fn steps(&self, state: &mut RunState) -> Result<Outcome> {
        let tools = self.tools().await?;
        let mut skills = self.skills().await;
        loop {
            // A verdict already decided for the first pending call (while batching).
            let mut known: Option<Verdict> = None;
            while let Some(call) = state.pending.first().cloned() {
                // The emulated tool search runs here: it loads tools, it calls no server.
                if call.name == TOOL_SEARCH && !tools.contains_key(TOOL_SEARCH) {
                    let block = self.search_tools(state, &tools, &call);
                    state.results.push(block);
                    state.pending.remove(0);
                    continue;
                }
                if self.is_skill_call(&call.name, &tools) {
                    match self.skill_call(state, &mut skills, &tools).await? {
                        SkillStep::Done(block) => {
                            state.results.push(block);
                            state.pending.remove(0);
                            continue;
                        }
                        SkillStep::Suspend(outcome) => return Ok(outcome),
                    }
                }
                if call.waits_for_input() {
                    return self.suspend_for_input(state, call, &tools).await;
                }
                let tool = tools.get(&call.name);
                // An approval holds only for what the person saw: never a silent
                // retarget to another server, configuration, definition or arguments.
                if call.approved == Some(true) {
                    if let Some(why) = call.binding.as_ref().and_then(|b| {
                        let now = tool.map(|t| (&self.inner.servers[t.server], t));
                        b.changed(now, &call.arguments)
                    }) {
                        self.event(
                            state,
                            Event::DecisionVoided {
                                tool: call.name.clone(),
                                reason: why,
                            },
                        );
                        if let Some(c) = state.pending.first_mut() {
                            c.approved = None;
                            c.binding = None;
                            c.grant_tools = false;
                        }
                        known = None;
                        continue;
                    }
                }
                let verdict = match known.take() {
                    Some(v) => v,
                    None => {
                        let gate = self.gate(state);
                        self.verdict(&gate, &call, tool, &state.granted).await
                    }
                };
                let block = match verdict {
                    Verdict::Suspend => {
                        let Some(tool) = tool else {
                            return Err(Error::config("a suspended call names no tool"));
                        };
                        let server = tool.facts.server.clone();
                        let binding =
                            Binding::new(&self.inner.servers[tool.server], tool, &call.arguments);
                        if let Some(c) = state.pending.first_mut() {
                            c.binding = Some(binding.clone());
                            c.shown = Some((
                                tool.spec.description.clone(),
                                tool.spec.input_schema.clone(),
                            ));
                        }
                        self.event(
                            state,
                            Event::ApprovalRequested {
                                server: server.clone(),
                                tool: call.name.clone(),
                                arguments: call.arguments.clone(),
                                binding: Some(binding),
                            },
                        );
                        let s = self.suspend(state, Waits::Approval).await?;
                        return Ok(Outcome::ApprovalRequired {
                            run_id: state.id.clone(),
                            suspension: s.id,
                            decision: s.decision,
                            server,
                            tool: call.name,
                            arguments: call.arguments,
                        });
                    }
                    Verdict::Deny(reason) => {
                        self.event(
                            state,
                            Event::Denied {
                                tool: call.name.clone(),
                                reason: reason.clone(),
                            },
                        );
                        Block::ToolResult {
                            id: call.id.clone(),
                            content: json!({ "error": reason }).to_string(),
                            is_error: true,
                        }
                    }
                    Verdict::Allow => {
                        let Some(tool) = tool else {
                            return Err(Error::config("an allowed call names no tool"));
                        };
                        // The model may ask for several calls in one turn: the allowed
                        // ones that follow run together with this one, concurrently.
                        let mut batch = vec![(call, tool)];
                        while let Some(next) = state.pending.get(batch.len()) {
                            if (next.name == TOOL_SEARCH && !tools.contains_key(TOOL_SEARCH))
                                || next.waits_for_input()
                                || self.is_skill_call(&next.name, &tools)
                            {
                                break;
                            }
                            let t = tools.get(&next.name);
                            let gate = self.gate(state);
                            match (self.verdict(&gate, next, t, &state.granted).await, t) {
                                (Verdict::Allow, Some(t)) => batch.push((next.clone(), t)),
                                (v, _) => {
                                    known = Some(v);
                                    break;
                                }
                            }
                        }
                        let n = batch.len();
                        let ends = self.run_tools(state, batch).await;
                        // A call that paused for input stays pending, ahead of the rest.
                        let mut paused = Vec::new();
                        for (i, end) in ends.into_iter().enumerate() {
                            match end {
                                Ok(block) => state.results.push(block),
                                Err((input, answers)) => {
                                    let mut c = state.pending[i].clone();
                                    c.approved = Some(true);
                                    c.input = Some(input);
                                    c.answers = answers;
                                    c.answered = false;
                                    paused.push(c);
                                }
                            }
                        }
                        state.pending.splice(..n, paused);
                        continue;
                    }
                };
                state.results.push(block);
                state.pending.remove(0);
            }
            if !state.results.is_empty() {
                let results = std::mem::take(&mut state.results);
                state.messages.push(Message {
                    role: Role::Tool,
                    content: results,
                });
            }
            if state.steps >= self.max_steps(state) {
                self.event(state, Event::RunFinished);
                self.save(state, RunStatus::Finished).await?;
                return Ok(Outcome::StepLimit {
                    run_id: state.id.clone(),
                });
            }
            state.steps += 1;
            let mut offered = self.offered(&tools, state);
            offered.extend(self.skill_tools(&skills, &tools, state));
            let request = ChatRequest {
                messages: state.messages.clone(),
                tools: offered,
            };
            let answer = self.inner.model.complete(&request).await?;
            state.ran += 1;
            let calls = answer.message.tool_calls();
            let text = answer.message.joined_text();
            state.messages.push(answer.message);
            if calls.is_empty() {
                self.event(state, Event::RunFinished);
                self.save(state, RunStatus::Finished).await?;
                return Ok(Outcome::Finished {
                    run_id: state.id.clone(),
                    text,
                });
            }
            state.pending = calls
                .into_iter()
                .map(|(id, name, arguments)| PendingCall {
                    id,
                    name,
                    arguments,
                    approved: None,
                    input: None,
                    answers: Vec::new(),
                    answered: false,
                    bound: None,
                    grant_tools: false,
                    denial: None,
                    binding: None,
                    shown: None,
                })
                .collect();
            // Kept while the calls run: a crash loses at most this turn's results.
            self.save(state, RunStatus::Running).await?;
        }
    }

    /// Suspends the run on a call that waits for input.
    async fn suspend_for_input(
        &self,
        state: &mut RunState,
        call: PendingCall,
        tools: &HashMap<String, AgentTool>,
    ) -> Result<Outcome> {
        let Some(input) = call.input else {
            return Err(Error::store("a call waits for input it does not have"));
        };
        // Parsed when the call paused; a request that does not parse never pauses.
        let requests = input
            .requests()
            .map_err(|e| Error::store(format!("run {}: {e}", state.id)))?;
        let server = tools
            .get(&call.name)
            .map(|t| t.facts.server.clone())
            .unwrap_or_else(|| input.server().to_owned());
        let given: Vec<&String> = call.answers.iter().map(|(k, _)| k).collect();
        let requests: Vec<(String, InputRequest)> = requests
            .into_iter()
            .filter(|(k, _)| !given.contains(&k))
            .collect();
        self.event(
            state,
            Event::InputRequested {
                server: server.clone(),
                tool: call.name.clone(),
                // Server text: kept short in the run, like progress messages.
                messages: requests
                    .iter()
                    .map(|(_, r)| r.message.chars().take(1000).collect())
                    .collect(),
                task: input.task_id().map(str::to_owned),
            },
        );
        let s = self.suspend(state, Waits::Input).await?;
        Ok(Outcome::InputRequired {
            run_id: state.id.clone(),
            suspension: s.id,
            decision: s.decision,
            server,
            tool: call.name,
            arguments: call.arguments,
            requests,
        })
    }

    /// The tools the model is offered this turn: what the gate can allow; deferred
    /// ones flagged for a model with a native tool search, else left out until the
    /// emulated `tool_search` loads them (and that search offered while any remain).
    fn offered(&self, tools: &HashMap<String, AgentTool>, state: &RunState) -> Vec<ToolSpec> {
        let gate = self.gate(state);
        let mut v: Vec<&AgentTool> = tools
            .values()
            .filter(|t| gate.advertised(&t.facts) || granted(&state.granted, &t.facts))
            .collect();
        v.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        if self.inner.model.native_tool_search() {
            return v.into_iter().map(|t| t.spec.clone()).collect();
        }
        let mut offered: Vec<ToolSpec> = Vec::new();
        let mut hidden: Vec<&ToolSpec> = Vec::new();
        for t in v {
            if !t.spec.defer || state.loaded.contains(&t.spec.name) {
                let mut spec = t.spec.clone();
                spec.defer = false;
                offered.push(spec);
            } else {
                hidden.push(&t.spec);
            }
        }
        if !hidden.is_empty() && !tools.contains_key(TOOL_SEARCH) {
            let catalogue: Vec<String> = hidden
                .iter()
                .map(|t| format!("{}: {}", t.name, t.description.lines().next().unwrap_or("")))
                .collect();
            offered.push(ToolSpec {
                name: TOOL_SEARCH.into(),
                description: format!(
                    "Loads more tools: give words to search for (or exact names); the matching tools become callable. Available:\n{}",
                    catalogue.join("\n")
                ),
                input_schema: serde_json::json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
                defer: false,
            });
        }
        offered
    }

    /// The emulated tool search: loads the deferred tools matching the query's words.
    fn search_tools(
        &self,
        state: &mut RunState,
        tools: &HashMap<String, AgentTool>,
        call: &PendingCall,
    ) -> Block {
        let gate = self.gate(state);
        let query = call
            .arguments
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_lowercase();
        let words: Vec<&str> = query
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
            .collect();
        let mut found: Vec<Value> = Vec::new();
        let mut names: Vec<&String> = tools.keys().collect();
        names.sort();
        for name in names {
            let t = &tools[name];
            if !t.spec.defer || !gate.advertised(&t.facts) {
                continue;
            }
            let text = format!("{} {}", t.spec.name, t.spec.description).to_lowercase();
            if words.iter().any(|w| text.contains(w)) {
                if !state.loaded.contains(name) {
                    state.loaded.push(name.clone());
                }
                found.push(json!({"name": t.spec.name, "description": t.spec.description}));
            }
        }
        Block::ToolResult {
            id: call.id.clone(),
            content: json!({ "loaded": found }).to_string(),
            is_error: false,
        }
    }

    /// A call of the skill tools (when no server offers a tool of that name).
    fn is_skill_call(&self, name: &str, tools: &HashMap<String, AgentTool>) -> bool {
        self.inner.skills
            && (name == READ_SKILL || name == READ_SKILL_FILE)
            && !tools.contains_key(name)
    }

    /// The gate's verdict on one pending call (a person's decision, if recorded, wins;
    /// then a grant of an approved skill's `allowed-tools`).
    async fn verdict(
        &self,
        gate: &Gate,
        call: &PendingCall,
        tool: Option<&AgentTool>,
        grants: &[(String, String, String)],
    ) -> Verdict {
        match call.approved {
            Some(true) => Verdict::Allow,
            Some(false) => Verdict::Deny(match &call.denial {
                Some(why) => format!("a person denied `{}`: {why}", call.name),
                None => format!("a person denied `{}`", call.name),
            }),
            None if tool.is_some_and(|t| {
                granted(grants, &t.facts) && !t.facts.app_only && !t.facts.requires_approval
            }) =>
            {
                Verdict::Allow
            }
            None => {
                gate.decide(&call.name, tool.map(|t| &t.facts), &call.arguments)
                    .await
            }
        }
    }

    /// Runs allowed calls: one is awaited here, several run concurrently. Events and
    /// results keep the model's order. A call that paused for input gives its input
    /// (and the answers callbacks gave) instead of a result.
    async fn run_tools(
        &self,
        state: &mut RunState,
        batch: Vec<(PendingCall, &AgentTool)>,
    ) -> Vec<std::result::Result<Block, Paused>> {
        for (call, tool) in &batch {
            self.event(
                state,
                Event::BeforeToolCall {
                    server: tool.facts.server.clone(),
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                },
            );
        }
        let mut ends: Vec<Option<(CallEnd, Vec<Event>)>> = Vec::new();
        ends.resize_with(batch.len(), || None);
        if let [(call, tool)] = batch.as_slice() {
            ends[0] = Some(self.call_server(&state.id, tool, call).await);
        } else {
            // Dropping the run (a cancelled future) aborts the calls with the set.
            let mut set = tokio::task::JoinSet::new();
            for (i, (call, tool)) in batch.iter().enumerate() {
                let agent = self.clone();
                let (run, tool, call) = (state.id.clone(), (*tool).clone(), call.clone());
                set.spawn(async move { (i, agent.call_server(&run, &tool, &call).await) });
            }
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok((i, end)) => ends[i] = Some(end),
                    Err(e) => tracing::warn!(error = %e, "a tool call task failed"),
                }
            }
        }
        let mut out = Vec::with_capacity(batch.len());
        for ((call, tool), end) in batch.iter().zip(ends) {
            let (end, events) = end.unwrap_or_else(|| {
                (
                    CallEnd::Done(
                        json!({ "error": "the tool call did not complete" }).to_string(),
                        true,
                    ),
                    Vec::new(),
                )
            });
            // Already delivered to the callbacks live; kept with the run here.
            state.events.extend(events);
            state.ran += 1;
            match end {
                CallEnd::Done(content, is_error) => {
                    self.event(
                        state,
                        Event::AfterToolResult {
                            server: tool.facts.server.clone(),
                            tool: call.name.clone(),
                            is_error,
                        },
                    );
                    out.push(Ok(Block::ToolResult {
                        id: call.id.clone(),
                        content,
                        is_error,
                    }));
                }
                CallEnd::Paused(input, answers) => out.push(Err((input, answers))),
            }
        }
        out
    }

    /// Asks the `on_input` callbacks; the first answer wins.
    async fn ask_callbacks(&self, ask: InputAsk) -> Option<InputResponse> {
        for f in &self.inner.on_input {
            if let Some(answer) = f(ask.clone()).await {
                return Some(answer);
            }
        }
        None
    }

    /// One MCP call: its text for the model and whether it failed — or, when the server
    /// asks for input no callback gives, the input — with the events it produced on the
    /// way (progress, answers), delivered to the callbacks as they happen.
    async fn call_server(
        &self,
        run_id: &str,
        tool: &AgentTool,
        call: &PendingCall,
    ) -> (CallEnd, Vec<Event>) {
        let seen: Arc<std::sync::Mutex<Vec<Event>>> = Arc::default();
        let (sink, inner, run) = (seen.clone(), self.inner.clone(), run_id.to_owned());
        let (server_name, tool_name) = (tool.facts.server.clone(), call.name.clone());
        let base = RequestOptions::default()
            .pause_on_input()
            .with_progress(move |p| {
                let event = Event::ToolProgress {
                    server: server_name.clone(),
                    tool: tool_name.clone(),
                    progress: p.progress,
                    total: p.total,
                    message: p.message.as_ref().map(|m| m.chars().take(1000).collect()),
                };
                for f in &inner.on_event {
                    f(&run, &event);
                }
                let mut kept = lock(&sink);
                if kept.len() >= MAX_PROGRESS_KEPT {
                    kept.pop();
                }
                kept.push(event);
            });
        let server = &self.inner.servers[tool.server];
        let mut notes = Vec::new();
        // Answers a person gave on resume: they go with the first attempt.
        let mut answers = match (&call.input, call.answered) {
            (Some(input), true) => Some((input.clone(), call.answers.clone())),
            _ => None,
        };
        let mut end = CallEnd::Done(
            json!({ "error": format!("`{}` kept asking for input ({MAX_INPUT_ROUNDS} rounds)", call.name) })
                .to_string(),
            true,
        );
        for _ in 0..MAX_INPUT_ROUNDS {
            let mut options = base.clone();
            if let Some((input, given)) = answers.take() {
                let responses: Vec<(String, InputResponse)> = given
                    .iter()
                    .filter_map(|(k, v)| InputResponse::from_value(v).map(|r| (k.clone(), r)))
                    .collect();
                options = options.with_input_answers(input, responses);
            }
            let e = match server
                .call_with(&call.name, call.arguments.clone(), options)
                .await
            {
                Ok(r) => {
                    let mut text = r.text();
                    if text.is_empty() {
                        if let Some(s) = &r.structured_content {
                            text = s.to_string();
                        }
                    }
                    end = CallEnd::Done(text, r.is_error());
                    break;
                }
                Err(e) => e,
            };
            // A protocol failure is the model's to read too; the loop goes on.
            let Some(input) = e.pending_input() else {
                end = CallEnd::Done(json!({ "error": e.to_string() }).to_string(), true);
                break;
            };
            let requests = match input.requests() {
                Ok(r) => r,
                Err(why) => {
                    end = CallEnd::Done(json!({ "error": why.to_string() }).to_string(), true);
                    break;
                }
            };
            let mut given = Vec::new();
            for (key, request) in requests {
                let ask = InputAsk {
                    run_id: run_id.to_owned(),
                    tool: call.name.clone(),
                    key: key.clone(),
                    request,
                };
                if let Some(answer) = self.ask_callbacks(ask).await {
                    given.push((key, answer));
                }
            }
            if !given.is_empty() {
                let event = Event::InputAnswered {
                    tool: call.name.clone(),
                    actions: given.iter().map(|(_, a)| a.action().to_owned()).collect(),
                    by: "on_input".into(),
                    at: now(),
                };
                for f in &self.inner.on_event {
                    f(run_id, &event);
                }
                notes.push(event);
            }
            let given: Vec<(String, Value)> =
                given.into_iter().map(|(k, a)| (k, a.to_value())).collect();
            if given.len() == input.keys().count() {
                answers = Some((input.clone(), given));
                continue;
            }
            end = CallEnd::Paused(input.clone(), given);
            break;
        }
        let mut events = std::mem::take(&mut *lock(&seen));
        events.extend(notes);
        (end, events)
    }

    /// The events of a run, from the store.
    pub async fn events(&self, run_id: &str) -> Result<Vec<Event>> {
        Ok(self.load(run_id).await?.events)
    }

    async fn load(&self, run_id: &str) -> Result<RunState> {
        let record = self
            .inner
            .store
            .load(run_id)
            .await?
            .ok_or_else(|| Error::not_suspended(format!("no run {run_id}")))?;
        self.read(run_id, record.state)
    }

    /// A stored run's state, checked (its integrity, with a key) and parsed.
    fn read(&self, run_id: &str, mut state: Value) -> Result<RunState> {
        if let Some(key) = &self.inner.integrity {
            key.open(run_id, &mut state)?;
        } else if let Value::Object(m) = &mut state {
            m.remove(INTEGRITY_FIELD);
        }
        let mut state: RunState = serde_json::from_value(state)
            .map_err(|e| Error::store(format!("run {run_id} cannot be read: {e}")))?;
        if state.id != run_id {
            return Err(Error::store(format!(
                "the run kept under {run_id} says it is run {}: it is not used",
                state.id
            )));
        }
        state.persisted = true;
        Ok(state)
    }
}
