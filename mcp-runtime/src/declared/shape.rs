//! How a model sees a declared server's tools: shapes (rename, fixed arguments, wrap),
//! approvals, and what to do when the server drifts from its snapshot.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::callbacks::{Predicate, Shared, WrapFn};
use crate::error::Result;
use crate::model::CallToolResult;

/// A value sent for a fixed argument: the same every time, or computed per call.
#[derive(Clone)]
pub enum ArgValue {
    /// The same value every call.
    Fixed(Value),
    /// Computed for every call.
    Computed(Shared<Value>),
}

/// How to present one server tool: another name, another description, arguments the
/// model does not see (always sent), and a wrapper for its results.
#[derive(Clone)]
pub struct ToolShape {
    pub(super) name: String,
    pub(super) rename: Option<String>,
    pub(super) description: Option<String>,
    pub(super) fixed: Vec<(String, ArgValue)>,
    pub(super) wrap: Option<WrapFn>,
}

/// What to do when the live tool list differs from the committed snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DriftPolicy {
    /// Log a warning (the default).
    #[default]
    Warn,
    /// Fail with a configuration error.
    Error,
    /// Say nothing.
    Ignore,
}

/// Which tools need a person's approval before a call.
#[derive(Clone)]
pub(super) struct Approval {
    /// `None`: every tool.
    pub(super) names: Option<Vec<String>>,
    pub(super) predicate: Option<Predicate>,
}

impl fmt::Debug for ArgValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgValue::Fixed(v) => write!(f, "Fixed({v})"),
            ArgValue::Computed(_) => f.write_str("Computed"),
        }
    }
}

impl ArgValue {
    pub(super) fn get(&self) -> Value {
        match self {
            ArgValue::Fixed(v) => v.clone(),
            ArgValue::Computed(f) => f(),
        }
    }
}

impl fmt::Debug for ToolShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolShape")
            .field("name", &self.name)
            .field("rename", &self.rename)
            .field("description", &self.description)
            .field(
                "fixed",
                &self.fixed.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("wrap", &self.wrap.is_some())
            .finish()
    }
}

impl ToolShape {
    /// The fixed arguments as a tool's definition digest covers them, in declaration
    /// order: `{"name", "value"}` for a fixed value, `{"name", "computed": true}` for
    /// one computed per call (its value changes from call to call). `None` when there
    /// are none.
    pub(super) fn fixed_description(&self) -> Option<Arc<Value>> {
        if self.fixed.is_empty() {
            return None;
        }
        let described = self
            .fixed
            .iter()
            .map(|(name, v)| match v {
                ArgValue::Fixed(v) => serde_json::json!({"name": name, "value": v}),
                ArgValue::Computed(_) => serde_json::json!({"name": name, "computed": true}),
            })
            .collect();
        Some(Arc::new(Value::Array(described)))
    }

    /// Shapes the server tool `name`.
    pub fn new(name: impl Into<String>) -> Self {
        ToolShape {
            name: name.into(),
            rename: None,
            description: None,
            fixed: Vec::new(),
            wrap: None,
        }
    }
    /// The name the model sees (it calls the server's name). A renamed tool is not
    /// prefixed.
    pub fn rename(mut self, name: impl Into<String>) -> Self {
        self.rename = Some(name.into());
        self
    }
    /// What the model reads about the tool.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
    /// An argument removed from the model's view and always sent with this value.
    pub fn fixed_argument(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.fixed
            .push((name.into(), ArgValue::Fixed(value.into())));
        self
    }
    /// An argument removed from the model's view, its value computed for every call.
    pub fn fixed_argument_with(
        mut self,
        name: impl Into<String>,
        value: impl Fn() -> Value + Send + Sync + 'static,
    ) -> Self {
        self.fixed
            .push((name.into(), ArgValue::Computed(Arc::new(value))));
        self
    }
    /// Receives the server's result and the call's arguments; returns what the model
    /// sees.
    pub fn wrap<F, Fut>(mut self, wrap: F) -> Self
    where
        F: Fn(CallToolResult, Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<CallToolResult>> + Send + 'static,
    {
        self.wrap = Some(Arc::new(move |r, a| Box::pin(wrap(r, a))));
        self
    }
}
