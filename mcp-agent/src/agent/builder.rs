//! Building an [`Agent`].

use std::fmt;
use std::sync::Arc;

use mcp_runtime::{InputResponse, Mcp};

use crate::error::{Error, Result};
use crate::gate::{Gate, Mode};
use crate::model::{Message, Model};
use crate::store::{MemoryRunStore, RunStore};

use super::attached::{Attached, Deferral};
use super::bookkeeping::Bookkeeping;
use super::callbacks::{Callbacks, ContextFn};
use super::decision::{AuthorizeFn, DecisionAsk, Expiry, InputAsk, InputFn};
use super::events::{Event, EventFn};
use super::handle::{Agent, AgentInner};
use super::hooks::{AnswerCheck, BeforeCall, CallInfo, CallResult};
use super::host::{Host, Servers};
use super::integrity::IntegrityKey;
use super::policy::{AgentPolicy, Limits, Reach};
use super::retry_policy::RetryPolicy;
use super::skill_registry::SkillRegistry;
use super::skill_types::SkillApproval;
use super::vault::Vault;

/// Builds an [`Agent`].
pub struct AgentBuilder {
    model: Option<Arc<dyn Model>>,
    mode: Mode,
    allow: Vec<String>,
    servers: Vec<Mcp>,
    functions: Vec<crate::FunctionTool>,
    store: Arc<dyn RunStore>,
    limits: Limits,
    required: Vec<String>,
    system: Option<String>,
    on_event: Vec<EventFn>,
    on_input: Vec<InputFn>,
    on_context: Option<ContextFn>,
    authorize: Option<AuthorizeFn>,
    hooks: super::hooks::Hooks,
    compaction: Option<super::compaction::Compaction>,
    trace_content: bool,
    defer: Vec<(String, Deferral)>,
    skills: bool,
    skill_approvals: Vec<SkillApproval>,
    /// `mode`, `allow` or `max_steps` was called: this agent states a policy.
    policy_stated: bool,
    integrity: Option<IntegrityKey>,
    expiry: Option<std::time::Duration>,
    on_expiry: Expiry,
    lease: std::time::Duration,
    reach: Reach,
    /// The servers the loop calls, when not the attached ones (the loop's unit tests).
    host: Option<Arc<dyn Host>>,
    retry: RetryPolicy,
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
    /// Attaches a server: a `Mcp`, or a struct `#[mcp]` declares (by value or by
    /// reference; the agent holds a clone of its handle).
    pub fn server(mut self, server: impl Into<Mcp>) -> Self {
        self.servers.push(server.into());
        self
    }
    /// Gives the model a tool implemented in Rust ([`FunctionTool`](crate::FunctionTool)),
    /// gated like the servers' tools under the server name
    /// [`FUNCTIONS`](crate::function::FUNCTIONS).
    pub fn tool(mut self, tool: crate::FunctionTool) -> Self {
        self.functions.push(tool);
        self
    }
    /// Where suspended runs are kept (default: in memory).
    pub fn store(mut self, store: impl RunStore) -> Self {
        self.store = Arc::new(store);
        self
    }
    /// The most model turns one run may take (default 20).
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.limits.max_steps = steps;
        self.policy_stated = true;
        self
    }
    /// Makes the server `name` required: when it is down or cannot list its tools, the
    /// run stops with that error (and is put back, or kept `failed`) instead of going
    /// on without its tools, as it does for any other server.
    pub fn require_server(mut self, name: impl Into<String>) -> Self {
        self.required.push(name.into());
        self
    }
    /// The most calls of one run that are on servers at once (default 16): the calls
    /// of a turn run together up to this many, the others wait for a free place.
    pub fn max_calls_in_flight(mut self, n: usize) -> Self {
        self.limits.calls_in_flight = n;
        self
    }
    /// The most tool calls one model turn may ask for (default 128): the calls past it
    /// do not run, and the model reads why.
    pub fn max_calls_per_turn(mut self, n: usize) -> Self {
        self.limits.calls_per_turn = n;
        self
    }
    /// The most bytes of one tool result's text the model is sent (default
    /// [`DEFAULT_MAX_RESULT_SIZE`](crate::DEFAULT_MAX_RESULT_SIZE)): a longer one is cut
    /// and the model reads a note with its original size. Images attach up to
    /// [`MAX_IMAGE_SIZE`](crate::MAX_IMAGE_SIZE) each.
    pub fn max_result_size(mut self, bytes: usize) -> Self {
        self.limits.max_result_size = bytes;
        self
    }
    /// How a model call that failed for a while (a rate limit, a server error, a
    /// connection error, a timeout) is tried again (default [`RetryPolicy::new`]: 3
    /// retries with backoff; [`RetryPolicy::none`] for none).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }
    /// Instructions for the model.
    pub fn system(mut self, text: impl Into<String>) -> Self {
        self.system = Some(text.into());
        self
    }
    /// For the attached server named `server`, keeps these of its tools (model-facing
    /// names; an empty list: every tool of the server) out of the model's context until
    /// a tool search loads them, instead of what the server's declaration defers — the
    /// seed's per-chat `with_mcp(server, defer: …)`. An empty list means every tool,
    /// as in a declaration's `defer`. Models with a native tool search (Anthropic) get
    /// them flagged; for the others the agent offers a `tool_search` function that
    /// loads the tools matching a query. Other servers keep their declarations.
    pub fn defer<I, S>(mut self, server: impl Into<String>, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        let deferral = if names.is_empty() {
            Deferral::All
        } else {
            Deferral::Only(names)
        };
        let server = server.into();
        self.defer.retain(|(s, _)| *s != server);
        self.defer.push((server, deferral));
        self
    }
    /// For the attached server named `server`, defers none of its tools, whatever its
    /// declaration defers.
    pub fn defer_none(mut self, server: impl Into<String>) -> Self {
        let server = server.into();
        self.defer.retain(|(s, _)| *s != server);
        self.defer.push((server, Deferral::None));
        self
    }
    /// Called before every model call with the messages about to be sent — a copy:
    /// the run keeps its whole transcript — to trim or summarise them for the model's
    /// context ([`trim_to`](crate::trim_to) keeps them within a size). Without it the
    /// whole transcript is sent (each tool result cut at
    /// [`max_result_size`](Self::max_result_size)).
    pub fn on_context(mut self, f: impl Fn(&mut Vec<Message>) + Send + Sync + 'static) -> Self {
        self.on_context = Some(Arc::new(f));
        self
    }
    /// Tool spans carry each call's arguments and result
    /// (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`). Off by default: they
    /// may hold personal data; secrets the agent is configured with never appear in
    /// spans either way.
    pub fn trace_content(mut self, on: bool) -> Self {
        self.trace_content = on;
        self
    }
    /// Called with each call the gate let through (a person's approval included),
    /// before it is sent: [`BeforeCall::Continue`] sends it;
    /// [`BeforeCall::Rewrite`] replaces its arguments — checked against the tool's
    /// schema and put through the gate again, so a person who must approve sees the
    /// rewritten call; [`BeforeCall::Refuse`] does not send it, and the model reads
    /// the reason. Called once per call (a rewritten call is not hooked again). A hook
    /// that panics refuses its call; the run goes on.
    pub fn before_call(
        mut self,
        f: impl Fn(CallInfo<'_>) -> BeforeCall + Send + Sync + 'static,
    ) -> Self {
        self.hooks.before = Some(Arc::new(f));
        self
    }
    /// Called with each tool result before the model reads it (and before the run
    /// keeps it): what it returns is what the model reads and the store keeps — to
    /// redact, cut or transform. Images of the result are kept as they are. A hook
    /// that panics withholds the result (the model reads that it failed).
    pub fn after_call(
        mut self,
        f: impl Fn(CallInfo<'_>, CallResult) -> CallResult + Send + Sync + 'static,
    ) -> Self {
        self.hooks.after = Some(Arc::new(f));
        self
    }
    /// Called with the run's id and its final answer (a typed run's, once it matched
    /// its schema): [`AnswerCheck::Accept`] finishes the run;
    /// [`AnswerCheck::Retry`] sends the model back with the reason (at most
    /// [`MAX_ANSWER_RETRIES`](crate::MAX_ANSWER_RETRIES) times in a row);
    /// [`AnswerCheck::Fail`] finishes it with
    /// [`Outcome::InvalidOutput`](crate::Outcome::InvalidOutput). A hook that panics
    /// fails the answer.
    pub fn check_answer(
        mut self,
        f: impl Fn(&str, &str) -> AnswerCheck + Send + Sync + 'static,
    ) -> Self {
        self.hooks.answer = Some(Arc::new(f));
        self
    }
    /// Compacts long transcripts: past the setting's token estimate, the older part
    /// of a run's transcript is summarised (by the model, or the application's
    /// function) into one message before the next model call — a tool call never
    /// separated from its result, the system prompt and the turn being worked on kept
    /// — and the run's log keeps what was compacted ([`Event::Compacted`]). Off by
    /// default (the whole transcript is sent; [`on_context`](Self::on_context) trims
    /// only what one request sends).
    pub fn compaction(mut self, compaction: super::compaction::Compaction) -> Self {
        self.compaction = Some(compaction);
        self
    }
    /// Called with each event of every run (the run's id, the event).
    pub fn on_event(mut self, f: impl Fn(&str, &Event) + Send + Sync + 'static) -> Self {
        self.on_event.push(Arc::new(f));
        self
    }
    /// Answers a server's requests for input (elicitation) during a run: return the
    /// answer, or `None` to leave it to a person — the run then suspends with
    /// [`Outcome::InputRequired`](crate::Outcome::InputRequired). Callbacks are asked in the order added; the first
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
    /// Who may decide what: asked before any decision is applied ([`Agent::resume`],
    /// [`Agent::decide`]) with the principal, the decision's kind and the call it is
    /// for (its run's tenant, who started it and labels, read from the run's sealed
    /// state). `false` refuses it: nothing changes (the run still waits in the same
    /// suspension; the decision is not spent and may still be made by someone
    /// allowed), the resume fails with an error for which
    /// [`is_unauthorized`](crate::Error::is_unauthorized) is true, and the `on_event`
    /// callbacks hear [`Event::DecisionUnauthorized`]. In a batch, one refusal
    /// refuses all. Without it, anyone may decide (as before). It may be async (a
    /// database lookup); an application that cannot tell should return `false`.
    ///
    /// [`Agent::resume`]: crate::Agent::resume
    /// [`Agent::decide`]: crate::Agent::decide
    pub fn authorize<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(DecisionAsk) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = bool> + Send + 'static,
    {
        self.authorize = Some(Arc::new(move |ask| Box::pin(f(ask))));
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

    /// How long this process's hold on a run it works on lasts without renewal
    /// (default 60 s; at least 100 ms). It is renewed every third of that while the
    /// run is worked on; a run whose process died is left `running` until its lease
    /// ends, and then [`Agent::recover`] (or [`Agent::recover_stale`]) in any process
    /// takes it over. A process whose lease was taken over can no longer save the run
    /// ([`Error::is_lease_lost`]). Machines that share a store need clocks that agree
    /// to well within this.
    pub fn lease(mut self, lease: std::time::Duration) -> Self {
        self.lease = lease.max(std::time::Duration::from_millis(100));
        self
    }

    /// Protects stored runs against changes made outside the agent: each run is kept
    /// with an HMAC-SHA-256 of its state — with its save counter and the status it
    /// was saved with — under this key (the key itself is never stored), and so is
    /// each entry of its sent ledger and each standing allowance. A run whose MAC does
    /// not match — its arguments rewritten, a later call pre-approved in the store, a
    /// row mixed from two saves, a run kept without the key — is refused with an
    /// error for which `is_store()` is true; an older copy put back is refused by its
    /// ledger (`is_rolled_back()`). Every process that resumes the runs needs the same
    /// key. Without a key the store is trusted: whoever can write it can change what a
    /// run does.
    pub fn integrity_key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.integrity = Some(IntegrityKey(Arc::from(key.as_ref())));
        self
    }

    /// The scope of the standing allowances this agent keeps and uses (a tenant, an
    /// organisation — whatever the application separates): an
    /// [`Always::Agent`](crate::Always::Agent) given through this agent carries it
    /// (inside its MAC, with an integrity key), and only allowances of this scope meet
    /// a need for approval here. Agents without a scope share the allowances without
    /// one. Default: none.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.reach.scope = Some(scope.into());
        self
    }

    /// Pins the definition of every allow-listed tool on its first use (trust on
    /// first use): the server, its configuration and the tool's definition digest,
    /// kept in the store (MACed, with an integrity key; [`Agent::pins`],
    /// [`Agent::unpin`]). A later call of that tool whose definition or server
    /// changed since — a rug pull — is no longer allowed by the allow-list alone:
    /// under [`Mode::Approve`] a person is asked, in every other mode it is denied;
    /// [`Event::PinnedToolChanged`](crate::Event::PinnedToolChanged) says so either way.
    /// The pin stays as it was until [`Agent::unpin`] forgets it.
    pub fn pin_allow_list(mut self) -> Self {
        self.reach.pin_allow_list = true;
        self
    }

    /// Lets a run's [`Always::Run`](crate::Always::Run) decisions last through its
    /// follow-ups ([`Agent::follow_up`]). By default they end when the run finishes:
    /// a follow-up — whoever sends it — asks again.
    pub fn run_allowances_outlive_the_run(mut self) -> Self {
        self.reach.always_outlives_run = true;
        self
    }

    /// The loop calls this host instead of the attached servers.
    #[cfg(test)]
    pub(super) fn host(mut self, host: Arc<dyn Host>) -> Self {
        self.host = Some(host);
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
        check_collisions(&self.servers, &self.functions)?;
        for (server, _) in &self.defer {
            if !self.servers.iter().any(|s| s.name() == server) {
                return Err(Error::config(format!(
                    "`defer` names server `{server}`, which is not attached"
                )));
            }
        }
        // Configuration fingerprints digest values keyed (never the integrity key
        // itself); without an integrity key, unkeyed.
        let fingerprint_key = match &self.integrity {
            Some(key) => key.derive(b"mcp-agent configuration fingerprint v1")?,
            None => Vec::new(),
        };
        let sub_agents = self
            .functions
            .iter()
            .filter_map(|f| Some((f.name.clone(), f.delegate.clone()?)))
            .collect();
        let host: Arc<dyn Host> = match self.host {
            Some(host) => host,
            None => Arc::new(Servers(
                self.servers.clone(),
                self.functions,
                fingerprint_key,
                Default::default(),
                self.servers.iter().map(|_| Default::default()).collect(),
            )),
        };
        Ok(Agent {
            inner: Arc::new(AgentInner {
                model,
                system: self.system,
                trace_content: self.trace_content,
                policy: AgentPolicy::new(
                    Gate::new(self.mode, self.allow),
                    self.policy_stated,
                    self.limits,
                    self.reach,
                ),
                books: Bookkeeping::new(
                    self.store,
                    self.integrity,
                    self.lease,
                    self.expiry,
                    self.on_expiry,
                ),
                servers: Attached::new(self.servers, host, self.required, self.defer, sub_agents),
                callbacks: Arc::new({
                    let mut callbacks = Callbacks::new(
                        self.on_event,
                        self.on_input,
                        self.on_context,
                        self.authorize,
                    );
                    callbacks.hooks = self.hooks;
                    callbacks
                }),
                skills: SkillRegistry::new(self.skills, self.skill_approvals),
                vault: Vault::default(),
                retry: self.retry,
                schemas: Default::default(),
                compaction: self.compaction,
            }),
        })
    }
}

impl Agent {
    /// Starts building an agent.
    pub fn builder() -> AgentBuilder {
        AgentBuilder {
            model: None,
            mode: Mode::ReadOnly,
            allow: Vec::new(),
            servers: Vec::new(),
            functions: Vec::new(),
            store: Arc::new(MemoryRunStore::default()),
            limits: Limits::default_limits(),
            system: None,
            on_event: Vec::new(),
            on_input: Vec::new(),
            authorize: None,
            hooks: Default::default(),
            compaction: None,
            on_context: None,
            trace_content: false,
            defer: Vec::new(),
            skills: true,
            skill_approvals: Vec::new(),
            policy_stated: false,
            integrity: None,
            expiry: None,
            on_expiry: Expiry::Continue,
            lease: std::time::Duration::from_secs(60),
            reach: Reach::default(),
            host: None,
            required: Vec::new(),
            retry: RetryPolicy::new(),
        }
    }
}

/// Collisions the configuration alone makes certain: two servers of one name (events,
/// approvals and allowances name servers), or one tool name two servers' declarations
/// both give the model (from their snapshots or `only` lists). Collisions that appear
/// only when the servers answer hide the later server's tool instead.
fn check_collisions(servers: &[Mcp], functions: &[crate::FunctionTool]) -> Result<()> {
    use crate::function::FUNCTIONS;
    let mut problems = Vec::new();
    let mut names: Vec<(&str, String)> = Vec::new();
    let mut offered: Vec<(&str, Vec<String>)> = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        if servers[..i].iter().any(|o| o.name() == s.name()) {
            problems.push(format!(
                "two servers are named `{}`: give each attached server its own name",
                s.name()
            ));
            continue;
        }
        if s.name() == FUNCTIONS && !functions.is_empty() {
            problems.push(format!(
                "a server is named `{FUNCTIONS}`, the name of the agent's function tools: name it otherwise"
            ));
        }
        offered.push((s.name(), s.declared_tool_names().unwrap_or_default()));
    }
    offered.push((
        FUNCTIONS,
        functions.iter().map(|f| f.name.clone()).collect(),
    ));
    for (server, tools) in offered {
        for tool in tools {
            if let Some((other, _)) = names.iter().find(|(_, n)| *n == tool) {
                problems.push(if *other == server {
                    format!("`{server}` offers two tools named `{tool}`")
                } else {
                    format!(
                        "`{server}` and `{other}` both offer a tool named `{tool}`: give one of them a `prefix` (or rename the tool)"
                    )
                });
            }
            names.push((server, tool));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::config(problems.join("; ")))
    }
}
