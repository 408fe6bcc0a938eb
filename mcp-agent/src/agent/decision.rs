//! What a run ends with ([`Outcome`]), what a person decides ([`Decision`]), what a decision is bound to ([`Binding`]) and what a suspended run waits on ([`Pending`]).

use std::fmt;
use std::sync::Arc;

use mcp_runtime::{BoxFuture, InputRequest, InputResponse};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::gate::ToolFacts;
use crate::model::Usage;

use super::clock::now;
use super::host::AgentTool;
use super::options::{BudgetLimit, Principal};

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
        /// The tokens the run took so far (every model call of it, follow-ups too).
        usage: Usage,
    },
    /// The model's answer was cut at its output limit (`max_tokens`, a `length`
    /// stop): not taken as complete, its tool calls not run. The run is finished; a
    /// [`follow_up`](crate::Agent::follow_up) ("go on") continues it.
    Truncated {
        /// The run.
        run_id: String,
        /// The text it had written.
        text: String,
        /// The tokens the run took so far.
        usage: Usage,
    },
    /// A tool call waits for a person: [`Agent::resume`](crate::Agent::resume) with the decision id and the
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
        /// Every call the suspension waits on, this one first: the calls of one model
        /// turn that need a person are decided together (each by its own decision id,
        /// in one resume or several; the run goes on once all are decided).
        calls: Vec<Pending>,
        /// When the suspension expires undecided (milliseconds since the epoch),
        /// `None` when it waits for ever.
        expires_at: Option<u64>,
        /// The tokens the run took so far.
        usage: Usage,
    },
    /// A tool call waits for input a server asked for and no `on_input` callback
    /// answered: [`Agent::resume`](crate::Agent::resume) with [`Decision::answer`] (or a denial, which
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
        /// Every call the suspension waits on, this one first (see
        /// [`Outcome::ApprovalRequired`]).
        calls: Vec<Pending>,
        /// When the suspension expires undecided (milliseconds since the epoch),
        /// `None` when it waits for ever.
        expires_at: Option<u64>,
        /// The tokens the run took so far.
        usage: Usage,
    },
    /// The final answer was not accepted: a typed run's did not match its schema
    /// after the repair rounds it was given, or the application's `check_answer`
    /// hook failed it. The run is finished (a [`follow_up`](crate::Agent::follow_up)
    /// may ask again).
    InvalidOutput {
        /// The run.
        run_id: String,
        /// The model's last answer, as it gave it.
        text: String,
        /// What is wrong with it: not JSON, or the violations (path and rule).
        reason: String,
        /// The tokens the run took so far.
        usage: Usage,
    },
    /// The run took as many model turns as allowed without finishing.
    StepLimit {
        /// The run.
        run_id: String,
        /// The tokens the run took so far.
        usage: Usage,
    },
    /// Nobody decided before the suspension expired, and the agent ends such runs
    /// ([`Expiry::End`]): the call did not run.
    Expired {
        /// The run.
        run_id: String,
        /// The tokens the run took so far.
        usage: Usage,
    },
    /// A limit of the run's [`Budget`](crate::Budget) was reached: the run is
    /// finished; the calls of its turn not sent yet were not sent (the model reads
    /// why, should a [`follow_up`](crate::Agent::follow_up) go on).
    BudgetExceeded {
        /// The run.
        run_id: String,
        /// Which limit.
        limit: BudgetLimit,
        /// What the run had used of it (calls, tokens, or milliseconds since its
        /// start).
        used: u64,
        /// The limit.
        max: u64,
        /// The tokens the run took so far.
        usage: Usage,
    },
}

impl Outcome {
    /// The run it is of.
    pub fn run_id(&self) -> &str {
        match self {
            Outcome::Finished { run_id, .. }
            | Outcome::Truncated { run_id, .. }
            | Outcome::ApprovalRequired { run_id, .. }
            | Outcome::InputRequired { run_id, .. }
            | Outcome::InvalidOutput { run_id, .. }
            | Outcome::StepLimit { run_id, .. }
            | Outcome::Expired { run_id, .. }
            | Outcome::BudgetExceeded { run_id, .. } => run_id,
        }
    }

    /// The tokens the run took so far, as the provider reported them (every model call
    /// of the run, follow-ups included).
    pub fn usage(&self) -> Usage {
        match self {
            Outcome::Finished { usage, .. }
            | Outcome::Truncated { usage, .. }
            | Outcome::ApprovalRequired { usage, .. }
            | Outcome::InputRequired { usage, .. }
            | Outcome::InvalidOutput { usage, .. }
            | Outcome::StepLimit { usage, .. }
            | Outcome::Expired { usage, .. }
            | Outcome::BudgetExceeded { usage, .. } => *usage,
        }
    }
}

/// What happens to a run whose suspension expired undecided
/// ([`AgentBuilder::suspension_expiry`](crate::AgentBuilder::suspension_expiry), [`Agent::expire_due`](crate::Agent::expire_due)).
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

/// A person's decision on one suspended call: approve, deny (with a message the model
/// reads), edit its arguments, or answer the input it waits for. Who decided (a
/// [`Principal`]: id and display name) is kept in the run's events, and the agent's
/// [`authorize`](crate::AgentBuilder::authorize) callback is asked whether they may.
#[derive(Clone, Debug)]
pub struct Decision {
    pub(super) principal: Principal,
    pub(super) kind: DecisionKind,
    pub(super) allowed_tools: bool,
    pub(super) always: Option<Always>,
}

/// What a [`Decision`] decides. Its `Debug` shows an answer's keys and actions, never
/// what was answered (a password, a token).
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum DecisionKind {
    /// Run the call. (A call that waits for input refuses it: answer it, or deny.)
    Approve,
    /// Do not run it: the model gets an error result, with the message when there is
    /// one. For a call that waits for input: every request is declined.
    Deny {
        /// Why, for the model to read.
        message: Option<String>,
    },
    /// Run it with these arguments instead. The edited call goes through the gate
    /// again (a denial wins); the approval is bound to the edited arguments.
    Edit {
        /// The arguments to run it with.
        arguments: Value,
    },
    /// Answers to the input a call waits for, by request key (a request left
    /// unanswered is declined).
    Answer {
        /// The answers.
        answers: Vec<(String, InputResponse)>,
    },
}

impl fmt::Debug for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecisionKind::Approve => f.write_str("Approve"),
            DecisionKind::Deny { message } => {
                f.debug_struct("Deny").field("message", message).finish()
            }
            DecisionKind::Edit { arguments } => f
                .debug_struct("Edit")
                .field("arguments", arguments)
                .finish(),
            DecisionKind::Answer { answers } => {
                let shown: Vec<(&str, &str)> = answers
                    .iter()
                    .map(|(k, a)| (k.as_str(), a.action()))
                    .collect();
                f.debug_struct("Answer")
                    .field("answers", &shown)
                    .finish_non_exhaustive()
            }
        }
    }
}

/// How far "always allow this tool" reaches ([`Decision::always`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Always {
    /// The rest of this run: later calls of the same tool, on the same server, as
    /// defined now, run without asking.
    Run,
    /// Every run of the agents that share this store, from now on: a standing
    /// [`Allowance`], kept in the store (see [`Agent::allowances`](crate::Agent::allowances)).
    Agent,
}

impl Decision {
    fn new(who: impl Into<Principal>, kind: DecisionKind) -> Self {
        Decision {
            principal: who.into(),
            kind,
            allowed_tools: false,
            always: None,
        }
    }
    /// Approve, by `who`.
    pub fn approve(who: impl Into<Principal>) -> Self {
        Decision::new(who, DecisionKind::Approve)
    }
    /// Deny, by `who`. For a call that waits for input: every request is declined.
    pub fn deny(who: impl Into<Principal>) -> Self {
        Decision::new(who, DecisionKind::Deny { message: None })
    }
    /// Approve the call with other arguments, by `who`: the edited call goes through
    /// the gate again, and the approval is bound to these arguments.
    pub fn edit(who: impl Into<Principal>, arguments: Value) -> Self {
        Decision::new(who, DecisionKind::Edit { arguments })
    }
    /// Answers the input a call waits for, by `who`: one answer per request key of
    /// [`Outcome::InputRequired`] (a request left unanswered is declined).
    pub fn answer<I, K>(who: impl Into<Principal>, answers: I) -> Self
    where
        I: IntoIterator<Item = (K, InputResponse)>,
        K: Into<String>,
    {
        Decision::new(
            who,
            DecisionKind::Answer {
                answers: answers.into_iter().map(|(k, a)| (k.into(), a)).collect(),
            },
        )
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
        if let DecisionKind::Deny { message: m } = &mut self.kind {
            *m = Some(message.into());
        }
        self
    }
    /// For an approval (or an edit): also allow later calls of this tool without
    /// asking, as far as `scope` reaches — while the tool is the same (server, its
    /// configuration, the tool's definition); a changed tool asks again. The gate's
    /// denials still win.
    pub fn always(mut self, scope: Always) -> Self {
        self.always = Some(scope);
        self
    }
    /// Who decided, as shown (the principal's display name).
    pub fn by(&self) -> &str {
        self.principal.display_name()
    }
    /// Who decided.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }
    /// What was decided.
    pub fn kind(&self) -> &DecisionKind {
        &self.kind
    }
    /// It lets the call run (an approval or an edit).
    pub fn approves(&self) -> bool {
        matches!(self.kind, DecisionKind::Approve | DecisionKind::Edit { .. })
    }
    /// The name of its kind, as events keep it.
    pub(super) fn kind_name(&self) -> &'static str {
        match (&self.kind, self.always) {
            (DecisionKind::Approve, Some(Always::Run)) => "approve_always_run",
            (DecisionKind::Approve, Some(Always::Agent)) => "approve_always_agent",
            (DecisionKind::Approve, None) => "approve",
            (DecisionKind::Deny { .. }, _) => "deny",
            (DecisionKind::Edit { .. }, Some(Always::Run)) => "edit_always_run",
            (DecisionKind::Edit { .. }, Some(Always::Agent)) => "edit_always_agent",
            (DecisionKind::Edit { .. }, None) => "edit",
            (DecisionKind::Answer { .. }, _) => "answer",
        }
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
    /// The server's configuration ([`Mcp::config_fingerprint_keyed`](mcp_runtime::Mcp::config_fingerprint_keyed),
    /// keyed with a key derived from the integrity key, or none): how it is started or
    /// reached — with the names of its environment variables and headers and a keyed
    /// digest of their values, never a value.
    pub server_config: String,
    /// The tool's model-facing name.
    pub tool: String,
    /// The tool's definition ([`mcp_runtime::McpTool::definition_digest`]): name,
    /// title, description, input and output schemas, annotations, and the arguments
    /// its declaration fixes.
    pub definition: String,
    /// The arguments the person saw.
    pub arguments: String,
}

impl Binding {
    /// What an approval of calling `tool` (of the server `server`) with `arguments`
    /// is bound to.
    pub(super) fn new(server_config: String, tool: &AgentTool, arguments: &Value) -> Binding {
        Binding {
            server: tool.facts.server.clone(),
            server_config,
            tool: tool.facts.name.clone(),
            definition: tool.definition_digest().to_owned(),
            arguments: mcp_runtime::digest::sha256_json(arguments),
        }
    }

    /// What differs now, if anything: the live tool of that name (with its server),
    /// and the arguments.
    pub(super) fn changed(
        &self,
        now: Option<(String, &AgentTool)>,
        arguments: &Value,
    ) -> Option<String> {
        let Some((server_config, t)) = now else {
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
        // The tool's own change first (it says most), then the server's.
        if t.definition_digest() != self.definition {
            return Some(format!(
                "the definition of `{}` changed (title, description, schemas, annotations or fixed arguments)",
                self.tool
            ));
        }
        if server_config != self.server_config {
            return Some(format!(
                "server `{}` is now started or reached differently",
                self.server
            ));
        }
        if mcp_runtime::digest::sha256_json(arguments) != self.arguments {
            return Some(format!("the arguments of `{}` changed", self.tool));
        }
        None
    }
}

/// What a suspended run waits on ([`Agent::pending`](crate::Agent::pending)), for an application that did not
/// see the [`Outcome`] (an approval inbox): the ids a decision names, and what the
/// person decides on.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Pending {
    /// The run.
    pub run_id: String,
    /// The suspension it waits in.
    pub suspension: String,
    /// The decision it waits for ([`Agent::resume`](crate::Agent::resume) names it).
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
    /// The tenant the run belongs to (from its sealed state).
    pub tenant: Option<String>,
    /// Who started the run (from its sealed state).
    pub started_by: Option<Principal>,
    /// When its suspension expires undecided (milliseconds since the epoch; see
    /// [`AgentBuilder::suspension_expiry`](crate::AgentBuilder::suspension_expiry)),
    /// for a countdown; `None` when it waits for ever.
    pub expires_at: Option<u64>,
    /// The sub-agent's run the call belongs to, when a sub-agent tool of `run_id`
    /// ([`Agent::as_tool`](crate::Agent::as_tool)) made it: a decision on it is given
    /// to `run_id` like any other, and reaches the sub-agent's run.
    pub sub_run: Option<String>,
}

/// One page of an approval inbox ([`Agent::inbox`](crate::Agent::inbox)): what the
/// suspended runs of one page of a listing wait on.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct InboxPage {
    /// The calls waiting for a person, run by run (in id order), call by call.
    pub pending: Vec<Pending>,
    /// Give it to [`RunFilter::cursor`](crate::store::RunFilter::cursor) for the next
    /// page; `None` on the last.
    pub next: Option<String>,
}

/// What a suspended call waits for.
#[derive(Clone, Debug, PartialEq)]
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

/// A decision the agent asks its [`authorize`](crate::AgentBuilder::authorize)
/// callback about before applying it: who decides, what, and on which call of which
/// run (the run's owner read from its sealed state, never from a store's columns).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DecisionAsk {
    /// Who decides.
    pub principal: Principal,
    /// What is decided: `approve`, `deny`, `edit`, `answer`, or one of those with
    /// `_always_run` / `_always_agent`.
    pub kind: String,
    /// The call decided on (its run, suspension, decision id, tool, arguments — and
    /// the run's tenant and who started it).
    pub pending: Pending,
    /// The run's labels.
    pub labels: std::collections::BTreeMap<String, String>,
}

pub(super) type AuthorizeFn = Arc<dyn Fn(DecisionAsk) -> BoxFuture<'static, bool> + Send + Sync>;

pub(super) type InputFn =
    Arc<dyn Fn(InputAsk) -> BoxFuture<'static, Option<InputResponse>> + Send + Sync>;

/// A person's "always allow this tool" for every run of the agents that share this
/// store ([`Always::Agent`]): the tool on that server, configured and defined as when
/// it was allowed — a changed tool or server asks again. It meets a need for approval;
/// the gate's denials still win. With an integrity key it is kept MACed, and one
/// changed in the store is ignored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Allowance {
    /// Its id ([`Agent::revoke_allowance`](crate::Agent::revoke_allowance)).
    pub id: String,
    /// The server's name.
    pub server: String,
    /// The server's configuration (as in [`Binding::server_config`]).
    pub server_config: String,
    /// The tool's model-facing name.
    pub tool: String,
    /// The tool's definition digest.
    pub definition: String,
    /// Who allowed it.
    pub by: String,
    /// When (seconds since the epoch).
    pub at: u64,
    /// The scope it holds in ([`AgentBuilder::scope`](crate::AgentBuilder::scope)):
    /// only an agent of the same scope uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The tenant whose run granted it: it covers only runs of that tenant (one
    /// granted in a run with no tenant covers only runs with no tenant). Sealed with
    /// the allowance: a store's writer cannot widen it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

impl Allowance {
    /// The allowance of the tool a binding names, by `by`, in `scope`, for runs of
    /// `tenant`.
    pub(super) fn new(
        b: &Binding,
        by: &str,
        scope: Option<String>,
        tenant: Option<String>,
    ) -> Allowance {
        // The tenant is part of the id only when there is one: allowances granted
        // before runs had tenants keep theirs.
        let id = match &tenant {
            None => mcp_runtime::digest::sha256_json(&json!([
                b.server,
                b.server_config,
                b.tool,
                b.definition,
                scope
            ])),
            Some(t) => mcp_runtime::digest::sha256_json(&json!([
                b.server,
                b.server_config,
                b.tool,
                b.definition,
                scope,
                t
            ])),
        };
        Allowance {
            id,
            server: b.server.clone(),
            server_config: b.server_config.clone(),
            tool: b.tool.clone(),
            definition: b.definition.clone(),
            by: by.to_owned(),
            at: now(),
            scope,
            tenant,
        }
    }

    /// It allows `tool` of its server, configured (`config`) and defined
    /// (`definition`) as when it was allowed.
    pub(super) fn covers(&self, tool: &ToolFacts, config: &str, definition: &str) -> bool {
        self.server == tool.server
            && self.tool == tool.name
            && self.server_config == config
            && self.definition == definition
    }
}
