//! Standing allowances: "always allow this tool" for every run of the agents that share
//! a store ([`Always::Agent`]), kept in the store, bound to the tool as it was allowed.

use serde_json::Value;

use crate::error::{Error, Result};

use super::decision::Allowance;
use super::handle::Agent;
use super::integrity::{Sealed, INTEGRITY_FIELD};
use super::pins::PIN_PREFIX;

impl Agent {
    /// The standing allowances kept in this agent's store ([`Always::Agent`](crate::Always::Agent)) for
    /// its scope ([`AgentBuilder::scope`](crate::AgentBuilder::scope)). With an
    /// integrity key, one that fails its check is left out (and logged).
    pub async fn allowances(&self) -> Result<Vec<Allowance>> {
        let mut out = Vec::new();
        // Pinned definitions are kept beside the allowances: not allowances.
        for (id, kept) in self
            .kept(Sealed::Allowance, |id| !id.starts_with(PIN_PREFIX))
            .await?
        {
            match serde_json::from_value::<Allowance>(kept) {
                // Another scope's allowances are not this agent's.
                Ok(a) if a.id == id && a.scope != *self.inner.policy.scope() => {}
                Ok(a) if a.id == id => out.push(a),
                _ => {
                    tracing::warn!(allowance = %id, "a standing allowance cannot be read; it is ignored")
                }
            }
        }
        Ok(out)
    }

    /// The records kept beside the standing allowances whose id `wanted` takes, each
    /// checked against its MAC as `what` (with an integrity key; one that fails is
    /// left out, and logged) and without it: (id, record).
    pub(super) async fn kept(
        &self,
        what: Sealed,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Vec<(String, Value)>> {
        let mut out = Vec::new();
        for mut kept in self.inner.books.store().allowances().await? {
            let id = kept
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if !wanted(&id) {
                continue;
            }
            if self.opened(what, &id, &mut kept) {
                out.push((id, kept));
            }
        }
        Ok(out)
    }

    /// Checks a record kept beside the allowances against its MAC as `what` (with an
    /// integrity key) and takes the MAC out; `false` (logged) when it fails.
    pub(super) fn opened(&self, what: Sealed, id: &str, kept: &mut Value) -> bool {
        if let Some(key) = self.inner.books.integrity() {
            if let Err(e) = key.open(what, id, kept) {
                tracing::warn!(error = %e, "a kept record is ignored");
                return false;
            }
        } else if let Value::Object(m) = kept {
            m.remove(INTEGRITY_FIELD);
        }
        true
    }

    /// Withdraws the standing allowance `id`; `false` when there was none.
    pub async fn revoke_allowance(&self, id: &str) -> Result<bool> {
        self.inner.books.store().delete_allowance(id).await
    }

    /// Keeps a standing allowance (MACed, with an integrity key).
    pub(super) async fn keep_allowance(&self, a: &Allowance) -> Result<()> {
        let mut kept = serde_json::to_value(a)
            .map_err(|e| Error::store(format!("cannot encode an allowance: {e}")))?;
        if let Some(key) = self.inner.books.integrity() {
            key.seal(Sealed::Allowance, &a.id, &mut kept)?;
        }
        self.inner.books.store().save_allowance(&a.id, &kept).await
    }

    /// The standing allowances a run sees now; when the store cannot say, none (calls
    /// ask, as without them).
    pub(super) async fn standing(&self) -> Vec<Allowance> {
        match self.allowances().await {
            Ok(all) => all,
            Err(e) => {
                tracing::warn!(error = %e, "standing allowances could not be read: calls that need approval ask");
                Vec::new()
            }
        }
    }
}
