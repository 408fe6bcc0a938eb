//! A turn's tools and calls through the gate: the tools a run sees — listed from the
//! attached servers, offered to the model (deferred ones behind a tool search) — and
//! its calls, settled after a crash, voided when what was approved changed, allowed,
//! denied, or waiting for a person.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::gate::{Gate, ToolFacts, Verdict};
use crate::model::{Block, ToolSpec};

use super::decision::Binding;
use super::events::Event;
use super::handle::Agent;
use super::host::{repeat_is_harmless, valid_tool_name, AgentTool, ToolEntry};
use super::ids::random_id;
use super::policy::{outer_gates, stricter};
use super::run::error_result;
use super::skill_types::{granted, AgentSkill, SkillStep, READ_SKILL, READ_SKILL_FILE};
use super::state::{Awaiting, CallState, PendingCall, RunState};

/// The name of the emulated tool search (for models without a native one).
pub(super) const TOOL_SEARCH: &str = "tool_search";

impl Agent {
    /// The tools of the attached servers, by model-facing name, and the servers that
    /// could not list theirs. One server cannot stop the run: a server that is down or
    /// fails to list its tools is left out of this turn ([`Event::ServerUnavailable`];
    /// the model sees its tools gone) unless it is required
    /// ([`AgentBuilder::require_server`]); a tool whose name breaks the spec's rule, or
    /// that another server attached earlier already offers, is hidden
    /// ([`Event::ToolHidden`]).
    ///
    /// Listed again before every model turn: `announced` holds what this drive already
    /// reported, so a server that stays down, or a tool that stays hidden, is
    /// reported once.
    pub(super) async fn tools(
        &self,
        state: &mut RunState,
        announced: &mut Vec<String>,
    ) -> Result<(
        HashMap<String, AgentTool>,
        Vec<(String, mcp_runtime::Error)>,
    )> {
        let mut all: HashMap<String, AgentTool> = HashMap::new();
        let mut down = Vec::new();
        // The names a server that is down offered when last listed (or declares): no
        // server attached after it takes them meanwhile — an allow-list entry or an
        // approval meant for its tool never reaches another server's.
        let mut reserved: Vec<(String, String)> = Vec::new();
        let host = self.inner.servers.host().clone();
        for i in 0..host.count() {
            let server = host.name(i).to_owned();
            let listed = match host.tools(i).await {
                Ok(listed) => {
                    announced.retain(|k| *k != format!("down\u{0}{server}"));
                    // Once per agent and server: its changes are heard from now on.
                    let first = self.inner.servers.first_listing(&server);
                    if first {
                        host.follow_changes(i).await;
                    }
                    listed
                }
                Err(e) if self.inner.servers.is_required(&server) => return Err(e.into()),
                Err(e) => {
                    let mut names = self.inner.servers.known_names(&server);
                    names.extend(host.declared_tool_names(i));
                    reserved.extend(names.into_iter().map(|n| (n, server.clone())));
                    let error = crate::error::clip(&e.to_string(), 1000);
                    let key = format!("down\u{0}{server}");
                    if !announced.contains(&key) {
                        announced.push(key);
                        self.event(
                            state,
                            Event::ServerUnavailable {
                                server: server.clone(),
                                error,
                            },
                        );
                    }
                    down.push((server, e));
                    continue;
                }
            };
            // Built once per list: a turn that sees the same list shares its entries.
            let entries = match self.inner.servers.built(i, &listed) {
                Some(entries) => entries,
                None => {
                    self.inner
                        .servers
                        .listed(&server, listed.iter().map(|t| t.name.clone()).collect());
                    let entries: Vec<AgentTool> = listed
                        .iter()
                        .map(|t| {
                            ToolEntry::new(
                                i,
                                &server,
                                t,
                                self.inner.servers.deferred(&server, &t.name, t.deferred),
                            )
                        })
                        .collect();
                    self.inner.servers.keep_built(i, listed, entries.clone());
                    entries
                }
            };
            for entry in entries {
                let t = &entry.def;
                let hidden = if !valid_tool_name(&t.name) {
                    Some("its name breaks the MCP rule (1 to 128 characters of A-Z, a-z, 0-9, `_`, `.`, `-`)".to_owned())
                } else if let Some(other) = all.get(&t.name) {
                    Some(format!(
                        "server `{}`, attached earlier, offers a tool of the same name (give one a prefix)",
                        host.name(other.server)
                    ))
                } else {
                    reserved.iter().find(|(n, _)| *n == t.name).map(|(_, other)| {
                        format!(
                            "server `{other}`, attached earlier and unavailable now, offers a tool of the same name (give one a prefix)"
                        )
                    })
                };
                if let Some(reason) = hidden {
                    let name = crate::error::clip(&t.name, 200);
                    let tool = mcp_runtime_core::text::escape(&name, false).into_owned();
                    let key = format!("hidden\u{0}{server}\u{0}{tool}\u{0}{reason}");
                    if !announced.contains(&key) {
                        announced.push(key);
                        self.event(
                            state,
                            Event::ToolHidden {
                                server: server.clone(),
                                tool,
                                reason,
                            },
                        );
                    }
                    continue;
                }
                all.insert(t.name.clone(), entry.clone());
            }
        }
        Ok((all, down))
    }

    /// The tools the model is offered this turn: what the gate can allow; deferred
    /// ones flagged for a model with a native tool search, else left out until the
    /// emulated `tool_search` loads them (and that search offered while any remain).
    pub(super) fn offered(
        &self,
        tools: &HashMap<String, AgentTool>,
        state: &RunState,
    ) -> Vec<ToolSpec> {
        let gate = self.inner.policy.gate(state);
        let outer = outer_gates(state);
        let mut v: Vec<&AgentTool> = tools
            .values()
            .filter(|t| gate.advertised(&t.facts) || granted(&state.granted, &t.facts))
            .filter(|t| outer.iter().all(|g| g.advertised(&t.facts)))
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
    pub(super) fn search_tools(
        &self,
        state: &mut RunState,
        tools: &HashMap<String, AgentTool>,
        call: &PendingCall,
    ) -> Block {
        let gate = self.inner.policy.gate(state);
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
        let outer = outer_gates(state);
        let mut found: Vec<Value> = Vec::new();
        let mut names: Vec<&String> = tools.keys().collect();
        names.sort();
        for name in names {
            let t = &tools[name];
            if !t.spec.defer
                || !gate.advertised(&t.facts)
                || !outer.iter().all(|g| g.advertised(&t.facts))
            {
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
            parts: Vec::new(),
        }
    }

    /// A call of the skill tools (when no server offers a tool of that name).
    pub(super) fn is_skill_call(&self, name: &str, tools: &HashMap<String, AgentTool>) -> bool {
        self.inner.skills.enabled()
            && (name == READ_SKILL || name == READ_SKILL_FILE)
            && !tools.contains_key(name)
    }

    /// [`Event::ToolsChanged`] when the tools listed now differ from those before:
    /// names that came or went, and tools whose definition changed.
    pub(super) fn tools_changed(
        &self,
        state: &mut RunState,
        before: &HashMap<String, AgentTool>,
        now: &HashMap<String, AgentTool>,
    ) {
        let mut added: Vec<String> = now
            .keys()
            .filter(|n| !before.contains_key(*n))
            .cloned()
            .collect();
        let mut removed: Vec<String> = before
            .keys()
            .filter(|n| !now.contains_key(*n))
            .cloned()
            .collect();
        let mut changed: Vec<String> = now
            .iter()
            .filter(|(n, t)| {
                before.get(*n).is_some_and(|b| {
                    // The same entry (the same list) is unchanged, unread.
                    !Arc::ptr_eq(b, t)
                        && (b.facts.server != t.facts.server
                            || b.def.definition != t.def.definition
                            || b.spec != t.spec)
                })
            })
            .map(|(n, _)| n.clone())
            .collect();
        if added.is_empty() && removed.is_empty() && changed.is_empty() {
            return;
        }
        added.sort();
        removed.sort();
        changed.sort();
        self.event(
            state,
            Event::ToolsChanged {
                added,
                removed,
                changed,
            },
        );
    }

    /// The gate's verdict on a call not decided yet: a grant of an approved skill's
    /// `allowed-tools` allows it; otherwise the gate decides, and a need for approval
    /// is met by a person's "always allow" of the same tool in this run.
    pub(super) async fn verdict(
        &self,
        gate: &Gate,
        call: &PendingCall,
        tool: Option<&AgentTool>,
        state: &RunState,
    ) -> Verdict {
        // A declaration's approval predicates are evaluated for this call, now (they
        // may read the application's state).
        let facts = tool.map(|t| ToolFacts {
            requires_approval: t.def.requires_approval(),
            ..t.facts.clone()
        });
        let own = if facts
            .as_ref()
            .is_some_and(|f| granted(&state.granted, f) && !f.app_only && !f.requires_approval)
        {
            Verdict::Allow
        } else {
            gate.decide(&call.name, facts.as_ref(), &call.arguments)
                .await
        };
        // A person's "always" meets this run's own need for approval only.
        let mut verdict = match (own, tool) {
            (Verdict::Suspend, Some(t)) if self.always_allowed(state, t).await => Verdict::Allow,
            (v, _) => v,
        };
        // A sub-agent's run: its parent's policy (and theirs) must let the call too —
        // as it would be sent (an edit is decided on as edited).
        for outer in outer_gates(state) {
            if matches!(verdict, Verdict::Deny(_)) {
                break;
            }
            let arguments = match &verdict {
                Verdict::AllowEdited(edited) => edited.clone(),
                _ => call.arguments.clone(),
            };
            let theirs = outer.decide(&call.name, facts.as_ref(), &arguments).await;
            verdict = stricter(verdict, theirs);
        }
        verdict
    }

    /// A person allowed this tool for the rest of the run, as it is now: the same
    /// server, configured the same, the tool defined the same.
    async fn always_allowed(&self, state: &RunState, tool: &AgentTool) -> bool {
        if tool.facts.app_only {
            return false;
        }
        // The store's standing allowances, read once for the loop, when first needed.
        let standing = state.standing.get_or_init(|| self.standing()).await;
        if state.always.is_empty() && standing.is_empty() {
            return false;
        }
        let config = self.inner.servers.host().config_fingerprint(tool.server);
        let definition = tool.definition_digest().to_owned();
        // A standing allowance holds only in its own scope, and only for runs of
        // the tenant whose run granted it (runs with no tenant: only those).
        let tenant = &state.options.tenant;
        state
            .always
            .iter()
            .chain(
                standing
                    .iter()
                    .filter(|a| a.scope == *self.inner.policy.scope() && a.tenant == *tenant),
            )
            .any(|a| a.covers(&tool.facts, &config, &definition))
    }
}

impl Agent {
    /// Calls a process that stopped had sent without keeping their results: each
    /// ends with "outcome unknown" — or is sent again, to the same server, when its
    /// tool says a repeat is harmless, it is still the tool it was sent to (the same
    /// server, configured the same, the same definition and arguments), and the run's
    /// gate allows it now (under a policy tightened since, too; a need for a person is
    /// met by the approval it was sent under, which still holds).
    pub(super) async fn settle_unknown(
        &self,
        state: &mut RunState,
        tools: &HashMap<String, AgentTool>,
    ) {
        let mut i = 0;
        while i < state.pending.len() {
            let CallState::Executing {
                server,
                binding,
                approved,
                ..
            } = &state.pending[i].at
            else {
                i += 1;
                continue;
            };
            let (server, binding, approved) = (server.clone(), binding.clone(), *approved);
            let call = state.pending[i].clone();
            let name = call.name.clone();
            let mut resent = false;
            if let (Some(tool), Some(binding)) = (tools.get(&name), binding) {
                let now = (
                    self.inner.servers.host().config_fingerprint(tool.server),
                    tool,
                );
                if tool.facts.server == server
                    && repeat_is_harmless(tool)
                    && binding.changed(Some(now), &call.arguments).is_none()
                {
                    let gate = self.inner.policy.gate(state);
                    // The gate allows it, or wants a person, who approved it (the
                    // binding held: the approval still holds).
                    resent = match self.verdict(&gate, &call, Some(tool), state).await {
                        Verdict::Allow => true,
                        Verdict::Suspend => approved,
                        // Other arguments than were sent: not the same call.
                        Verdict::Deny(_) | Verdict::AllowEdited(_) => false,
                    };
                }
            }
            self.event(
                state,
                Event::OutcomeUnknown {
                    server: server.clone(),
                    tool: name.clone(),
                    resent,
                },
            );
            if resent {
                state.pending[i].at = CallState::Approved { person: None };
                i += 1;
                continue;
            }
            let call = state.pending.remove(i);
            state.results.push(error_result(
                call.id,
                format!("outcome unknown: `{name}` was sent to server `{server}`, but the agent stopped before its result was kept; it may or may not have taken effect, and it was not sent again"),
            ));
        }
    }

    /// Answered input calls about to be sent again: each goes only to the server and
    /// tool that asked (the same server, configured the same, the same definition and
    /// arguments), and only while the run's gate allows it now (a need for approval
    /// is met when a person had approved the call). Otherwise the call is voided —
    /// [`Event::DecisionVoided`], an error result for the model — and the answers and
    /// the server's state go nowhere.
    pub(super) async fn check_answered(
        &self,
        state: &mut RunState,
        tools: &HashMap<String, AgentTool>,
    ) {
        let mut i = 0;
        while i < state.pending.len() {
            let CallState::Answered { asker, .. } = &state.pending[i].at else {
                i += 1;
                continue;
            };
            let asker = asker.clone();
            let call = state.pending[i].clone();
            let why = match (asker, tools.get(&call.name)) {
                (None, _) => Some("the run keeps no record of the server that asked".to_owned()),
                (Some(_), None) => Some(format!(
                    "`{}` is no longer offered by any attached server",
                    call.name
                )),
                (Some(a), Some(tool)) => {
                    let now = (
                        self.inner.servers.host().config_fingerprint(tool.server),
                        tool,
                    );
                    match a.binding.changed(Some(now), &call.arguments) {
                        Some(changed) => Some(changed),
                        None => {
                            let gate = self.inner.policy.gate(state);
                            match self.verdict(&gate, &call, Some(tool), state).await {
                                Verdict::Allow => None,
                                Verdict::Suspend if a.approved => None,
                                Verdict::Suspend => Some(format!(
                                    "`{}` needs a person's approval under the run's policy now",
                                    call.name
                                )),
                                Verdict::Deny(reason) => Some(reason),
                                Verdict::AllowEdited(_) => Some(format!(
                                    "the ask callback would send `{}` with other arguments than were answered for",
                                    call.name
                                )),
                            }
                        }
                    }
                }
            };
            let Some(reason) = why else {
                i += 1;
                continue;
            };
            let call = state.pending.remove(i);
            self.event(
                state,
                Event::DecisionVoided {
                    tool: call.name.clone(),
                    reason: reason.clone(),
                },
            );
            state.results.push(error_result(
                call.id,
                format!("the input given for `{}` was not sent: {reason}", call.name),
            ));
        }
    }

    /// Takes each call of the turn that is not through the gate yet through it, in
    /// order: the emulated tool search and skill calls run here; a denied call ends
    /// with an error result; a call that needs a person waits for one. A skill load
    /// that waits for a person stops the gating: the calls after it may depend on
    /// what its approval grants.
    pub(super) async fn gate_turn(
        &self,
        state: &mut RunState,
        tools: &HashMap<String, AgentTool>,
        skills: &mut HashMap<String, AgentSkill>,
    ) -> Result<()> {
        let mut i = 0;
        while i < state.pending.len() {
            let call = state.pending[i].clone();
            if call.at.awaits_person() {
                i += 1;
                continue;
            }
            if call.name == TOOL_SEARCH
                && !tools.contains_key(TOOL_SEARCH)
                && matches!(call.at, CallState::New)
            {
                let block = self.search_tools(state, tools, &call);
                state.results.push(block);
                state.pending.remove(i);
                continue;
            }
            if self.is_skill_call(&call.name, tools) {
                match self.skill_call(state, i, skills, tools).await? {
                    SkillStep::Done(block) => {
                        state.results.push(block);
                        state.pending.remove(i);
                        continue;
                    }
                    SkillStep::Suspend => return Ok(()),
                }
            }
            let tool = tools.get(&call.name);
            // Arguments that break the tool's schema go nowhere: not to the gate's
            // callback, not to a person, not to the server; the model reads why. (A
            // call the mode can never allow is left to the gate's denial: no
            // invitation to fix and call again.)
            let edited = matches!(call.at, CallState::Approved { person: Some(_) });
            let allowable = tool.is_some_and(|t| {
                self.inner.policy.gate(state).advertised(&t.facts)
                    || granted(&state.granted, &t.facts)
            });
            if let (Some(t), CallState::New | CallState::Approved { person: Some(_) }, true) =
                (tool, &call.at, allowable)
            {
                if let Some(why) = self.invalid_arguments(state, t, &call.arguments, edited) {
                    self.end_call(state, i, why);
                    continue;
                }
            }
            match &call.at {
                CallState::New => {
                    let gate = self.inner.policy.gate(state);
                    let mut verdict = self.verdict(&gate, &call, tool, state).await;
                    // A pinned allow-listed tool runs on the allow-list alone only
                    // while it is as pinned.
                    if let (Verdict::Allow, Some(t), true) =
                        (&verdict, tool, self.inner.policy.pins_allow_list())
                    {
                        if gate.allowed().any(|n| n == call.name) {
                            if let Some(reason) = self.pin_changed(t).await? {
                                let event = Event::PinnedToolChanged {
                                    server: t.facts.server.clone(),
                                    tool: call.name.clone(),
                                    reason: reason.clone(),
                                };
                                self.event(state, event);
                                verdict = gate.decide_unpinned(&call.name, &reason);
                            }
                        }
                    }
                    match verdict {
                        Verdict::Allow => {
                            state.pending[i].at = CallState::Approved { person: None }
                        }
                        Verdict::Deny(reason) => {
                            self.deny(state, i, reason);
                            continue;
                        }
                        Verdict::Suspend => self.ask_approval(state, i, tool)?,
                        // The ask callback edited the arguments: checked against the
                        // schema like a person's edit, then sent.
                        Verdict::AllowEdited(arguments) => {
                            self.event(
                                state,
                                Event::Hook {
                                    hook: "ask".into(),
                                    tool: Some(call.name.clone()),
                                    outcome: "edit".into(),
                                    reason: None,
                                },
                            );
                            if let Some(why) = super::run::unsendable(&call.name, &arguments) {
                                self.end_call(state, i, why);
                                continue;
                            }
                            if let Some(t) = tool {
                                if let Some(why) =
                                    self.invalid_arguments(state, t, &arguments, true)
                                {
                                    self.end_call(state, i, why);
                                    continue;
                                }
                            }
                            state.pending[i].arguments = arguments;
                            state.pending[i].at = CallState::Approved { person: None };
                        }
                    }
                }
                CallState::Denied { message, .. } => {
                    let reason = match message {
                        Some(why) => format!("a person denied `{}`: {why}", call.name),
                        None => format!("a person denied `{}`", call.name),
                    };
                    self.deny(state, i, reason);
                    continue;
                }
                CallState::Approved { person: Some(_) } => {
                    // A person's approval meets a need for approval; the gate's
                    // denial still wins — of a policy tightened on resume, or of the
                    // arguments a person edited.
                    let gate = self.inner.policy.gate(state);
                    // A declaration's approval predicates evaluated now, as `verdict` does.
                    let facts = tool.map(|t| ToolFacts {
                        requires_approval: t.def.requires_approval(),
                        ..t.facts.clone()
                    });
                    let mut verdict = gate
                        .decide(&call.name, facts.as_ref(), &call.arguments)
                        .await;
                    // A sub-agent's run: the denials of the policies above it win too.
                    for outer in outer_gates(state) {
                        if matches!(verdict, Verdict::Deny(_)) {
                            break;
                        }
                        let theirs = outer
                            .decide(&call.name, facts.as_ref(), &call.arguments)
                            .await;
                        verdict = stricter(verdict, theirs);
                    }
                    if let Verdict::Deny(reason) = verdict {
                        self.deny(state, i, reason);
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }

    /// Ends call `i`, not sent, with `why` as its error result.
    fn end_call(&self, state: &mut RunState, i: usize, why: String) {
        let call = state.pending.remove(i);
        state.results.push(error_result(call.id, why));
    }

    /// Ends call `i` with an error result saying why it was denied.
    pub(super) fn deny(&self, state: &mut RunState, i: usize, reason: String) {
        let call = state.pending.remove(i);
        self.event(
            state,
            Event::Denied {
                tool: call.name.clone(),
                reason: reason.clone(),
            },
        );
        state.results.push(error_result(call.id, reason));
    }

    /// Call `i` waits for a person's approval, bound to what they are shown.
    pub(super) fn ask_approval(
        &self,
        state: &mut RunState,
        i: usize,
        tool: Option<&AgentTool>,
    ) -> Result<()> {
        let Some(tool) = tool else {
            return Err(Error::config("a call that needs approval names no tool"));
        };
        let call = &state.pending[i];
        let config = self.inner.servers.host().config_fingerprint(tool.server);
        let binding = Binding::new(config, tool, &call.arguments);
        let waiting = Awaiting {
            decision: random_id()?,
            server: tool.facts.server.clone(),
            binding: Some(binding.clone()),
            skill: None,
            arguments: call.arguments.clone(),
            description: Some(tool.spec.description.clone()),
            input_schema: Some(tool.spec.input_schema.clone()),
        };
        let event = Event::ApprovalRequested {
            server: waiting.server.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            binding: Some(binding),
            decision: waiting.decision.clone(),
            description: waiting.description.clone(),
            input_schema: waiting.input_schema.clone(),
        };
        state.pending[i].at = CallState::AwaitingApproval(Box::new(waiting));
        self.event(state, event);
        Ok(())
    }

    /// Voids the approvals whose binding no longer holds — the tool is gone, moved to
    /// another server, its definition or the server's configuration changed — with
    /// [`Event::DecisionVoided`]: the call goes through the gate again (a person is
    /// asked again). Never a silent retarget.
    pub(super) fn void_changed(&self, state: &mut RunState, tools: &HashMap<String, AgentTool>) {
        for i in 0..state.pending.len() {
            let call = &state.pending[i];
            let CallState::Approved { person: Some(p) } = &call.at else {
                continue;
            };
            let Some(binding) = &p.binding else { continue };
            let now = tools
                .get(&call.name)
                .map(|t| (self.inner.servers.host().config_fingerprint(t.server), t));
            if let Some(reason) = binding.changed(now, &call.arguments) {
                let tool = call.name.clone();
                state.pending[i].at = CallState::New;
                self.event(state, Event::DecisionVoided { tool, reason });
            }
        }
    }
}

impl Agent {
    /// The `before_call` hook on each call the gate let through and the hook has not
    /// seen: a refused call ends with the reason as its error result; a rewritten one
    /// goes back to the gate with its new arguments (true: the caller gates again).
    pub(super) fn hook_calls(
        &self,
        state: &mut RunState,
        tools: &HashMap<String, AgentTool>,
    ) -> bool {
        if self.inner.callbacks.hooks.before.is_none() {
            return false;
        }
        let mut regate = false;
        let mut i = 0;
        while i < state.pending.len() {
            let call = &state.pending[i];
            let (CallState::Approved { .. }, false, Some(tool)) =
                (&call.at, call.hooked, tools.get(&call.name))
            else {
                i += 1;
                continue;
            };
            let info = super::hooks::CallInfo {
                run_id: &state.id,
                server: &tool.facts.server,
                tool: &call.name,
                arguments: &call.arguments,
            };
            let Some((said, event)) = self.inner.callbacks.hooks.before(info) else {
                return regate;
            };
            self.event(state, event);
            state.pending[i].hooked = true;
            match said {
                super::hooks::BeforeCall::Refuse(why) => {
                    self.end_call(state, i, crate::error::clip(&why, 1000));
                    continue;
                }
                super::hooks::BeforeCall::Rewrite(arguments) => {
                    if let Some(why) = super::run::unsendable(&state.pending[i].name, &arguments) {
                        self.end_call(state, i, why);
                        continue;
                    }
                    state.pending[i].arguments = arguments;
                    state.pending[i].at = CallState::New;
                    regate = true;
                }
                _ => {}
            }
            i += 1;
        }
        regate
    }
}
