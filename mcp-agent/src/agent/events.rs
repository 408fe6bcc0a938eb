//! What happens in a run, in order: the events callbacks get and the run keeps.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::Usage;

use super::decision::Binding;
use super::options::{BudgetLimit, Principal};

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
    /// at most [`MAX_PROGRESS_KEPT`](crate::MAX_PROGRESS_KEPT) of them per call (the latest last); callbacks see
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
        /// The decision that names this call ([`Agent::resume`](crate::Agent::resume)).
        #[serde(default)]
        decision: String,
        /// The tool's description as the person is shown it (absent for a skill load,
        /// and in events kept before this was recorded): what changed when a call is
        /// asked again because its tool changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// The tool's input schema as the person is shown it (as `description`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_schema: Option<Value>,
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
        /// its configuration, the tool's definition and the arguments are these (for
        /// an edit: the edited arguments).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        binding: Option<Binding>,
        /// The decision's id.
        #[serde(default)]
        decision: String,
        /// What was decided: `approve`, `deny`, `edit`, `approve_always_run` or
        /// `edit_always_run` (the tool is allowed for the rest of the run).
        #[serde(default)]
        kind: String,
        /// Who decided: id and display name (`by` is the display name). Absent in
        /// events kept before decisions carried a principal.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        principal: Option<Principal>,
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
    /// An allow-listed tool's definition or server changed since it was pinned
    /// ([`AgentBuilder::pin_allow_list`](crate::AgentBuilder::pin_allow_list)): the
    /// allow-list no longer lets it run alone — a person is asked (`approve`), or it
    /// is denied.
    PinnedToolChanged {
        /// The server.
        server: String,
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
        /// The person who answered: id and display name (`by` is the display name);
        /// absent for a callback's answers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        principal: Option<Principal>,
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
    /// The run stopped to wait for decisions or for input.
    RunSuspended {
        /// The suspension's id.
        #[serde(default)]
        suspension: String,
        /// The decisions it waits for, one per call (what a resume names).
        #[serde(default)]
        decisions: Vec<String>,
        /// When it expires undecided (milliseconds since the epoch), if ever.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at: Option<u64>,
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
        /// Who decided: id and display name (`by` is the display name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        principal: Option<Principal>,
    },
    /// A decision was refused because the agent's
    /// [`authorize`](crate::AgentBuilder::authorize) callback did not allow its
    /// principal to make it (or could not say). Nothing changed: the run still waits
    /// in the same suspension, and the decision is not spent. Delivered to the
    /// `on_event` callbacks (the run's log is not written: nothing was claimed).
    DecisionUnauthorized {
        /// The decision the resume named.
        decision: String,
        /// The tool of the call it was for.
        tool: String,
        /// Who tried to decide.
        principal: Principal,
        /// The principal's display name.
        by: String,
    },
    /// An error stopped the run. When nothing had run since it was resumed it waits
    /// again for the same decision (`resumable`); otherwise it is `failed`, keeping
    /// what ran, and [`Agent::retry`](crate::Agent::retry) continues it.
    RunFailed {
        /// What went wrong.
        error: String,
        /// The run waits again in the suspension it was resumed from.
        resumable: bool,
    },
    /// A failed run was taken up again ([`Agent::retry`](crate::Agent::retry)).
    RunRetried,
    /// The run was moved to the policy of the agent now running it
    /// ([`Agent::adopt_policy`](crate::Agent::adopt_policy)): a person chose to let it go
    /// on under a looser one (a new release's).
    PolicyAdopted {
        /// Who moved it (the principal's id).
        by: String,
        /// What the new policy allows that the run's did not (allow-list entries
        /// added, a freer mode, a higher step limit); empty when it loosens nothing.
        loosened: Vec<String>,
    },
    /// The tools the attached servers offer changed during the run (a server's
    /// `list_changed`, a server down or back): the model is offered the new list from
    /// its next turn; the gate and a decision's binding apply to it.
    ToolsChanged {
        /// Model-facing names that came.
        added: Vec<String>,
        /// Names that went.
        removed: Vec<String>,
        /// Names whose definition (or server) changed.
        changed: Vec<String>,
    },
    /// A finished run was given more input ([`Agent::follow_up`](crate::Agent::follow_up)): the conversation
    /// goes on.
    RunContinued,
    /// A suspension expired with no decision: the call it waited on did not run.
    SuspensionExpired {
        /// The suspension.
        suspension: String,
        /// The decision nobody made.
        decision: String,
        /// The tool.
        tool: String,
    },
    /// The run was cancelled ([`Agent::cancel`](crate::Agent::cancel)); the calls it waited on did not run.
    RunCancelled {
        /// Who cancelled it.
        by: String,
    },
    /// The model answered (the answer is kept with the run).
    ModelAnswered {
        /// The model turn (1 for the first).
        step: u32,
        /// How many tool calls it asked for (0: a final answer).
        tool_calls: u32,
        /// The tokens the call took, when the provider says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// Why the model stopped, when not a final answer or tool calls (`length`: cut
        /// at its output limit).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop: Option<String>,
    },
    /// A run whose process stopped working on it (its lease ended) was taken over
    /// ([`Agent::recover`](crate::Agent::recover)).
    RunRecovered,
    /// A run was refused because it is older than what its sent ledger records: a
    /// copy of it was put back in the store (a restored backup, a rolled-back
    /// database). Nothing of it ran.
    RunRolledBack {
        /// The save counter of the run as kept.
        kept: u64,
        /// The newest save counter its ledger records.
        ledger: u64,
    },
    /// A call had been sent when the run's process stopped, and its result was never
    /// kept: it may or may not have taken effect. It is not sent again — the model
    /// reads "outcome unknown" — unless the tool's annotations say it is idempotent
    /// or read-only, it is still the same tool of the same server, configured the
    /// same, with the same arguments, and the run's gate allows it now (`resent`).
    /// Also recorded when the sent ledger shows a call about to be sent was sent
    /// already (never sent twice).
    OutcomeUnknown {
        /// The server it was sent to.
        server: String,
        /// The tool.
        tool: String,
        /// Sent again (the tool says a repeat is harmless).
        resent: bool,
    },
    /// An attached server is down, or could not list its tools: its tools are left out
    /// of this turn (a server made required stops the run instead).
    ServerUnavailable {
        /// The server.
        server: String,
        /// Why (at most 1000 characters).
        error: String,
    },
    /// A tool of a server is not offered: its name breaks the MCP rule, or a server
    /// attached earlier offers one of the same name.
    ToolHidden {
        /// The server that offers it.
        server: String,
        /// Its name (escaped, at most 200 characters).
        tool: String,
        /// Why.
        reason: String,
    },
    /// A model call failed for a while ([`ModelError::is_transient`](crate::ModelError::is_transient)) and is tried
    /// again after `delay_ms`, under the agent's
    /// [`RetryPolicy`](crate::RetryPolicy).
    ModelRetried {
        /// The attempt that failed (1 for the first).
        attempt: u32,
        /// How long the agent waits before the next attempt (milliseconds): the
        /// provider's `Retry-After`, or the backoff.
        delay_ms: u64,
        /// What the failed attempt said (at most 1000 characters).
        error: String,
    },
    /// A limit of the run's [`Budget`](crate::Budget) was reached: the run ends
    /// ([`Outcome::BudgetExceeded`](crate::Outcome::BudgetExceeded)); no model call or
    /// tool call is made after it.
    BudgetExceeded {
        /// Which limit.
        limit: BudgetLimit,
        /// What the run had used of it (calls, tokens, or milliseconds since its start).
        used: u64,
        /// The limit.
        max: u64,
    },
    /// The model's arguments for a call do not match the tool's `inputSchema`: the
    /// call was not sent, nor put to the gate or a person; the model reads the
    /// violations as the call's error result and may call again.
    ArgumentsInvalid {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The violations (each its path and rule), as the model reads them.
        violations: String,
        /// The arguments were a person's edit (an approval that changed them): the
        /// call is not sent, and the model reads why.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        edited: bool,
    },
    /// A tool's schema cannot be checked (it refers outside itself, or breaks a
    /// bound against hostile schemas): its arguments, or its structured output, went
    /// unchecked. The call went on through the gate as usual.
    SchemaUnchecked {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// A call of a sub-agent tool ([`Agent::as_tool`](crate::Agent::as_tool)) handed
    /// its task to the sub-agent's run `run`, which now stands at `status`:
    /// `suspended` (its calls wait for a person: they are listed with this run's),
    /// `finished`, or how else it ended. Once it ended, what it spent — counted
    /// against this run's budget too.
    SubAgent {
        /// The sub-agent tool.
        tool: String,
        /// The sub-agent's run (in the sub-agent's store; its own events are there).
        run: String,
        /// Where it stands.
        status: String,
        /// The tokens its model calls took, once it ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// Its model calls, once it ended.
        #[serde(default)]
        model_calls: u64,
        /// Its tool calls, once it ended.
        #[serde(default)]
        tool_calls: u64,
    },
    /// A tool's `structuredContent` does not match its `outputSchema` (or is missing):
    /// the model reads the result with a note saying so.
    OutputMismatch {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The violations.
        reason: String,
    },
    /// A typed run's answer did not match its schema: the model is asked again
    /// (`repair`), or the run ends with [`Outcome::InvalidOutput`](crate::Outcome::InvalidOutput).
    OutputInvalid {
        /// What is wrong (not JSON, or the violations).
        reason: String,
        /// The model is asked again.
        repair: bool,
    },
    /// An application hook's word (`before_call`: `continue`, `rewrite`, `refuse`;
    /// `after_call`: `unchanged`, `changed`, `panicked`; `check_answer`: `accept`,
    /// `retry`, `fail`).
    Hook {
        /// Which hook.
        hook: String,
        /// The tool, for a call's hooks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        /// What it said.
        outcome: String,
        /// Its reason, when it gave one (at most 1000 characters kept).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The older part of the transcript was summarised into one message
    /// ([`Compaction`](crate::Compaction)): what was compacted is kept here.
    Compacted {
        /// The messages the summary replaced, as they were.
        messages: Vec<crate::model::Message>,
        /// The summary that replaced them.
        summary: String,
        /// The transcript's estimate (tokens) before.
        estimate_before: u64,
        /// After.
        estimate_after: u64,
    },
    /// The run ended.
    RunFinished,
    /// A piece of the text the model streams as it answers. Delivered live only — to
    /// a started run's [`RunHandle::events`](crate::RunHandle::events) while the
    /// model streams (the endpoint streams: `streaming(true)` or `on_text`) — never
    /// kept in the run's log nor given to `on_event`; the whole answer is in the
    /// transcript, and its [`Event::ModelAnswered`] is kept.
    TextDelta {
        /// The text.
        text: String,
    },
}

pub(super) type EventFn = Arc<dyn Fn(&str, &Event) + Send + Sync>;
