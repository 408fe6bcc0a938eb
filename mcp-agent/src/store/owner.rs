//! Who a run belongs to, as a store keeps it beside the state for listing: the
//! tenant, the id of the principal who started it, its labels and the tokens it
//! spent — read from the run's state (`options`, `usage`) at every save. The state
//! stays the truth (the agent checks it against its integrity MAC); these columns
//! only find runs.

use std::collections::BTreeMap;

use serde_json::Value;

use super::contract::{sql_int, RunStatus, RunSummary};

/// The owner columns of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Owner {
    pub(super) tenant: Option<String>,
    pub(super) started_by: Option<String>,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
}

impl Owner {
    /// The columns of a run state (JSON as the agent saves it): missing or odd
    /// fields are empty.
    pub(super) fn of(state: &Value) -> Owner {
        let options = state.get("options");
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let labels = options
            .and_then(|o| o.get("labels"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let tokens = |name: &str| {
            state
                .get("usage")
                .and_then(|u| u.get(name))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        Owner {
            tenant: text(options.and_then(|o| o.get("tenant"))),
            started_by: text(
                options
                    .and_then(|o| o.get("started_by"))
                    .and_then(|p| p.get("id")),
            ),
            labels,
            input_tokens: tokens("input_tokens"),
            output_tokens: tokens("output_tokens"),
        }
    }

    /// The summary of run `id` with these owner columns.
    pub(super) fn summary(
        self,
        id: String,
        status: RunStatus,
        suspension: Option<String>,
        updated_at: u64,
    ) -> RunSummary {
        RunSummary::new(id, status, suspension, updated_at)
            .with_owner(self.tenant, self.started_by, self.labels)
            .with_usage(self.input_tokens, self.output_tokens)
    }

    /// The labels as a column keeps them (a JSON object).
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(super) fn labels_json(&self) -> String {
        labels_json(&self.labels)
    }

    /// The token counts as SQL integers.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(super) fn tokens(&self) -> (i64, i64) {
        (sql_int(self.input_tokens), sql_int(self.output_tokens))
    }
}

/// Labels as JSON text (an object).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(super) fn labels_json(labels: &BTreeMap<String, String>) -> String {
    serde_json::to_string(labels).unwrap_or_else(|_| "{}".to_owned())
}

/// Labels as a column gives them back: a JSON object of strings (none when the
/// column is empty). The column is a copy kept for filtering (the run's sealed state
/// holds the labels): one that does not read lists the run without labels, with a
/// warning, rather than failing the whole page.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(super) fn labels_from(text: Option<&str>) -> BTreeMap<String, String> {
    match text {
        None | Some("") => BTreeMap::new(),
        Some(t) => serde_json::from_str(t).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "a stored run's labels column cannot be read; listed without labels");
            BTreeMap::new()
        }),
    }
}
