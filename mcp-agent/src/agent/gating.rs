//! A turn's calls through the gate: settled after a crash, voided when what was
//! approved changed, allowed, denied, or waiting for a person.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::gate::Verdict;

use super::decision::Binding;
use super::events::Event;
use super::handle::Agent;
use super::host::{repeat_is_harmless, AgentTool};
use super::ids::random_id;
use super::run::error_result;
use super::skill_types::{AgentSkill, SkillStep};
use super::state::{Awaiting, CallState, RunState};
use super::toolbox::TOOL_SEARCH;

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
                        Verdict::Deny(_) => false,
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
                    let verdict = gate
                        .decide(&call.name, tool.map(|t| &t.facts), &call.arguments)
                        .await;
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
