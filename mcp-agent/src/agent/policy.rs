//! What an agent allows: its gate, whether its builder stated a policy, its limits,
//! and the allowances it keeps — and the policy a resumed run goes on under.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::gate::{Gate, Mode, Verdict};

use super::state::{CallState, Policy, RunState};

/// How much a run may do: turns, calls, result sizes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// The most model turns one run may take.
    pub(super) max_steps: u32,
    /// The most calls of one run on servers at once.
    pub(super) calls_in_flight: usize,
    /// The most tool calls of one model turn that run.
    pub(super) calls_per_turn: usize,
    /// The most bytes of a tool result's text the model is sent.
    pub(super) max_result_size: usize,
}

impl Limits {
    /// The limits of an agent whose builder says nothing.
    pub(super) fn default_limits() -> Limits {
        Limits {
            max_steps: 20,
            calls_in_flight: 16,
            calls_per_turn: 128,
            max_result_size: crate::content::DEFAULT_MAX_RESULT_SIZE,
        }
    }

    /// Each limit at least 1.
    fn at_least_one(self) -> Limits {
        Limits {
            max_steps: self.max_steps.max(1),
            calls_in_flight: self.calls_in_flight.max(1),
            calls_per_turn: self.calls_per_turn.max(1),
            max_result_size: self.max_result_size.max(1),
        }
    }
}

/// The agent's policy: the gate, its limits, and how far approvals reach.
pub(super) struct AgentPolicy {
    gate: Arc<Gate>,
    /// The builder set the mode, allow-list or step limit: a resumed run may go on
    /// under this policy only where it is tighter than the run's own.
    stated: bool,
    limits: Limits,
    reach: Reach,
}

/// How far an agent's approvals reach (see [`AgentPolicy`]).
#[derive(Clone, Debug, Default)]
pub(super) struct Reach {
    /// The scope of the standing allowances this agent keeps and uses.
    pub(super) scope: Option<String>,
    /// A run's `Always::Run` decisions last through its follow-ups.
    pub(super) always_outlives_run: bool,
    /// Allow-listed tools are pinned on first use.
    pub(super) pin_allow_list: bool,
}

impl AgentPolicy {
    /// The policy of `gate` and `limits` (each at least 1); `stated` when the builder
    /// set the mode, the allow-list or the step limit.
    pub(super) fn new(gate: Gate, stated: bool, limits: Limits, reach: Reach) -> AgentPolicy {
        AgentPolicy {
            gate: Arc::new(gate),
            stated,
            limits: limits.at_least_one(),
            reach,
        }
    }

    /// The gate this agent was built with.
    pub(super) fn own_gate(&self) -> &Gate {
        &self.gate
    }

    /// The gate a run goes on under.
    pub(super) fn gate(&self, state: &RunState) -> Arc<Gate> {
        state.gate.clone().unwrap_or_else(|| self.gate.clone())
    }

    /// The step limit a run goes on under.
    pub(super) fn max_steps(&self, state: &RunState) -> u32 {
        state
            .policy
            .as_ref()
            .map_or(self.limits.max_steps, |p| p.max_steps)
    }

    /// The most calls of one run on servers at once.
    pub(super) fn calls_in_flight(&self) -> usize {
        self.limits.calls_in_flight
    }

    /// The most tool calls of one model turn that run.
    pub(super) fn calls_per_turn(&self) -> usize {
        self.limits.calls_per_turn
    }

    /// The most bytes of a tool result's text the model is sent.
    pub(super) fn max_result_size(&self) -> usize {
        self.limits.max_result_size
    }

    /// The scope of the standing allowances this agent keeps and uses.
    pub(super) fn scope(&self) -> &Option<String> {
        &self.reach.scope
    }

    /// Whether a run's `Always::Run` decisions last through its follow-ups.
    pub(super) fn always_outlives_run(&self) -> bool {
        self.reach.always_outlives_run
    }

    /// Whether allow-listed tools are pinned on first use.
    pub(super) fn pins_allow_list(&self) -> bool {
        self.reach.pin_allow_list
    }

    /// The policy this agent was built with, as a run keeps it.
    pub(super) fn own(&self) -> Policy {
        Policy {
            mode: self.gate.mode().name().to_owned(),
            allow: self.gate.allowed().map(str::to_owned).collect(),
            max_steps: self.limits.max_steps,
        }
    }

    /// What this agent's policy allows that `kept` does not: a freer mode, allow-list
    /// entries added, a higher step limit (empty when it is as tight or tighter).
    pub(super) fn loosens(&self, kept: &Policy) -> Vec<String> {
        let mut looser = self.gate.looser_than(&kept.mode, &kept.allow);
        if self.limits.max_steps > kept.max_steps {
            looser.push(format!(
                "max_steps {} is more than {}",
                self.limits.max_steps, kept.max_steps
            ));
        }
        looser
    }

    /// Puts a resumed run under the policy it goes on under: the one kept with it —
    /// unless this agent states its own (its builder set the mode, the allow-list or
    /// the step limit), which may only be tighter, and is then kept with the run. A
    /// looser one is an error naming what differs, and the run is not taken. A run
    /// kept under `ask` goes on under `approve` in an agent that states no policy (the
    /// callback is code of the agent that started it).
    pub(super) fn resume(&self, state: &mut RunState) -> Result<()> {
        let Some(kept) = state.policy.clone() else {
            return Ok(()); // kept by an older version: the agent's own
        };
        if self.stated {
            let looser = self.loosens(&kept);
            if !looser.is_empty() {
                return Err(Error::config(format!(
                    "run {} goes on under mode `{}` with allow-list {:?} and max_steps {}; this agent's policy would loosen it ({}): resume it with an agent that states no policy, or a tighter one, or move it to this policy with Agent::adopt_policy",
                    state.id,
                    kept.mode,
                    kept.allow,
                    kept.max_steps,
                    looser.join("; ")
                )));
            }
            state.gate = None;
            state.policy = Some(self.own());
            // Calls the run's gate had allowed go through this (tighter) one again:
            // its denials win, and what it wants a person for waits for one.
            for call in &mut state.pending {
                if matches!(call.at, CallState::Approved { person: None }) {
                    call.at = CallState::New;
                }
            }
            return Ok(());
        }
        let mode = match kept.mode.as_str() {
            "ask" => Mode::Approve,
            other => other.parse::<Mode>().map_err(|e| {
                Error::store(format!("run {} keeps an unknown mode: {e}", state.id))
            })?,
        };
        state.gate = Some(Arc::new(Gate::new(mode, kept.allow.clone())));
        Ok(())
    }
}

/// The gates a sub-agent's run goes on under beside its own: its parent's policy (and
/// theirs, up the chain) — live when this process started it, else built from what
/// the run keeps (`ask` goes on as `approve`: the callback was the parent agent's
/// code; a mode this code does not know allows nothing).
pub(super) fn outer_gates(state: &RunState) -> Vec<Arc<Gate>> {
    if !state.outer.is_empty() {
        return state.outer.clone();
    }
    let Some(parent) = &state.parent else {
        return Vec::new();
    };
    parent
        .policies
        .iter()
        .map(|p| {
            let mode = match p.mode.as_str() {
                "ask" => Ok(Mode::Approve),
                other => other.parse::<Mode>(),
            };
            Arc::new(match mode {
                Ok(mode) => Gate::new(mode, p.allow.clone()),
                Err(_) => Gate::new(Mode::ReadOnly, Vec::<String>::new()),
            })
        })
        .collect()
}

/// The stricter of two verdicts on one call: a denial wins, then a need for a person;
/// an edit stands when the other allows.
pub(super) fn stricter(own: Verdict, outer: Verdict) -> Verdict {
    match (own, outer) {
        (Verdict::Deny(why), _) => Verdict::Deny(why),
        (_, Verdict::Deny(why)) => Verdict::Deny(format!("the parent run's policy: {why}")),
        (Verdict::Suspend, _) | (_, Verdict::Suspend) => Verdict::Suspend,
        // The outer gate decided on the call as the inner one edited it: its own edit
        // is the last word.
        (_, Verdict::AllowEdited(v)) | (Verdict::AllowEdited(v), _) => Verdict::AllowEdited(v),
        _ => Verdict::Allow,
    }
}
