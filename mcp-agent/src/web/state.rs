//! What every handler of the inbox router shares.

use std::sync::Arc;

use super::options::WebOptions;
use crate::agent::{Agent, Principal};

/// What every handler shares.
#[derive(Clone)]
pub(super) struct Web {
    pub(super) agent: Agent,
    pub(super) options: WebOptions,
    /// The key the CSRF tokens are made with (random, per router; `None` when the
    /// system could not draw one: no token is made, none accepted).
    pub(super) csrf_key: Option<Arc<[u8; 32]>>,
}

impl Web {
    pub(super) fn tenants_of(&self, who: &Principal) -> Vec<String> {
        self.options
            .tenants
            .as_ref()
            .map(|f| f(who))
            .unwrap_or_default()
    }

    /// Whether `who`, working for `tenants`, may see (and decide on) a run of
    /// `tenant` started by `started_by`.
    pub(super) fn may_see(
        who: &Principal,
        tenants: &[String],
        tenant: Option<&str>,
        started_by: Option<&str>,
    ) -> bool {
        started_by == Some(who.id.as_str())
            || tenant.is_some_and(|t| tenants.iter().any(|m| m == t))
    }
}
