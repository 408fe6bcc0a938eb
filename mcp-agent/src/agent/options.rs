//! What a run is started with beyond its input: who it belongs to (a tenant, the
//! person who started it, labels) and what it may spend. Kept with the run's state,
//! inside its integrity MAC.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A person (or a service) acting on runs: who started one, who decided a call. The
/// `id` is what authorization and filters compare; the `name` is for people to read.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Principal {
    /// The stable id the application knows this principal by (a user id, an email).
    pub id: String,
    /// A name to show (the id when none was given).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

impl Principal {
    /// A principal known by `id`, shown as `id`.
    pub fn new(id: impl Into<String>) -> Principal {
        Principal {
            id: id.into(),
            name: String::new(),
        }
    }

    /// The same principal, shown as `name`.
    pub fn named(mut self, name: impl Into<String>) -> Principal {
        self.name = name.into();
        self
    }

    /// The name to show: the display name, or the id when there is none.
    pub fn display_name(&self) -> &str {
        if self.name.is_empty() {
            &self.id
        } else {
            &self.name
        }
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Principal");
        d.field("id", &self.id);
        if !self.name.is_empty() {
            d.field("name", &self.name);
        }
        d.finish()
    }
}

impl From<&str> for Principal {
    fn from(id: &str) -> Principal {
        Principal::new(id)
    }
}

impl From<String> for Principal {
    fn from(id: String) -> Principal {
        Principal::new(id)
    }
}

impl From<&String> for Principal {
    fn from(id: &String) -> Principal {
        Principal::new(id.clone())
    }
}

/// What a run may spend before it ends with
/// [`Outcome::BudgetExceeded`](crate::Outcome): model calls, tokens, tool calls, and
/// wall-clock time. Every limit is off unless set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Budget {
    /// The most model calls (turns) the run may make, across resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_calls: Option<u32>,
    /// The most input tokens its model calls may read, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_tokens: Option<u64>,
    /// The most output tokens its model calls may write, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// The most tool calls the run may send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
    /// How long the run may take from its start, in milliseconds (time waiting for a
    /// person counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_ms: Option<u64>,
}

impl Budget {
    /// No limits.
    pub fn new() -> Budget {
        Budget::default()
    }

    /// At most `n` model calls.
    pub fn max_model_calls(mut self, n: u32) -> Budget {
        self.max_model_calls = Some(n);
        self
    }

    /// At most `n` input tokens, summed over the run's model calls.
    pub fn max_input_tokens(mut self, n: u64) -> Budget {
        self.max_input_tokens = Some(n);
        self
    }

    /// At most `n` output tokens, summed over the run's model calls.
    pub fn max_output_tokens(mut self, n: u64) -> Budget {
        self.max_output_tokens = Some(n);
        self
    }

    /// At most `n` tool calls.
    pub fn max_tool_calls(mut self, n: u32) -> Budget {
        self.max_tool_calls = Some(n);
        self
    }

    /// At most `d` of wall-clock time from the run's start.
    pub fn deadline(mut self, d: std::time::Duration) -> Budget {
        self.max_duration_ms = Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// No limit is set.
    pub fn is_unlimited(&self) -> bool {
        self == &Budget::default()
    }
}

/// What a run is started with beyond its input: its owner (a tenant, the principal
/// who started it, labels to find it by) and its [`Budget`]. Kept with the run
/// (inside its integrity MAC, when the agent has a key).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunOptions {
    /// The tenant the run belongs to (a team, a customer): the inbox filters by it,
    /// and standing allowances are scoped to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Who started the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_by: Option<Principal>,
    /// Labels to find the run by (`key → value`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// What the run may spend.
    #[serde(default, skip_serializing_if = "Budget::is_unlimited")]
    pub budget: Budget,
    /// The shape its final answer must take (a typed run): JSON matching a schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<super::output::OutputSpec>,
}

impl RunOptions {
    /// No owner, no labels, no limits.
    pub fn new() -> RunOptions {
        RunOptions::default()
    }

    /// The run belongs to `tenant`.
    pub fn tenant(mut self, tenant: impl Into<String>) -> RunOptions {
        self.tenant = Some(tenant.into());
        self
    }

    /// The run was started by `principal`.
    pub fn started_by(mut self, principal: impl Into<Principal>) -> RunOptions {
        self.started_by = Some(principal.into());
        self
    }

    /// The run carries the label `key = value`.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> RunOptions {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// The run may spend at most `budget`.
    pub fn budget(mut self, budget: Budget) -> RunOptions {
        self.budget = budget;
        self
    }

    /// The final answer must be JSON matching `spec`'s schema: checked, with repair
    /// rounds, ending in [`Outcome::InvalidOutput`](crate::Outcome::InvalidOutput)
    /// when the model cannot give one ([`Agent::run_typed`](crate::Agent::run_typed)
    /// sets it from a Rust type).
    pub fn output(mut self, spec: super::output::OutputSpec) -> RunOptions {
        self.output = Some(spec);
        self
    }

    /// Nothing is set.
    pub fn is_empty(&self) -> bool {
        self == &RunOptions::default()
    }
}

/// Which limit of a run's [`Budget`] was reached
/// ([`Outcome::BudgetExceeded`](crate::Outcome::BudgetExceeded)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BudgetLimit {
    /// [`Budget::max_model_calls`]: `model_calls`.
    ModelCalls,
    /// [`Budget::max_input_tokens`]: `input_tokens`.
    InputTokens,
    /// [`Budget::max_output_tokens`]: `output_tokens`.
    OutputTokens,
    /// [`Budget::max_tool_calls`]: `tool_calls`.
    ToolCalls,
    /// [`Budget::max_duration_ms`]: `deadline` (used and max in milliseconds).
    Deadline,
}

impl BudgetLimit {
    /// Its name: `model_calls`, `input_tokens`, `output_tokens`, `tool_calls` or
    /// `deadline`.
    pub fn as_str(&self) -> &'static str {
        match self {
            BudgetLimit::ModelCalls => "model_calls",
            BudgetLimit::InputTokens => "input_tokens",
            BudgetLimit::OutputTokens => "output_tokens",
            BudgetLimit::ToolCalls => "tool_calls",
            BudgetLimit::Deadline => "deadline",
        }
    }
}

impl fmt::Display for BudgetLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
