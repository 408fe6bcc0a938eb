//! What the agent keeps standing in the store's allowance table: standing allowances
//! — "always allow this tool" for every run of the agents that share a store
//! ([`Always::Agent`]), bound to the tool as it was allowed — and pinned definitions
//! of allow-listed tools ([`AgentBuilder::pin_allow_list`](crate::AgentBuilder::pin_allow_list)):
//! trust on first use, kept under the integrity MAC. A tool whose definition or
//! server changed since it was pinned is no longer allowed by the allow-list alone.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

use super::clock::now;
use super::decision::Allowance;
use super::handle::Agent;
use super::host::AgentTool;
use super::integrity::{Sealed, INTEGRITY_FIELD};

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

/// The definition an allow-listed tool had when it was first used
/// ([`AgentBuilder::pin_allow_list`](crate::AgentBuilder::pin_allow_list)): its
/// server, the server's configuration and the tool's definition digest. Kept in the
/// store beside the standing allowances (MACed, with an integrity key).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Pin {
    /// Its id ([`Agent::unpin`]); `pin:` and a digest of scope, server and tool.
    pub id: String,
    /// The server's name.
    pub server: String,
    /// The server's configuration when pinned.
    pub server_config: String,
    /// The tool's model-facing name.
    pub tool: String,
    /// The tool's definition digest when pinned.
    pub definition: String,
    /// When it was pinned (seconds since the epoch).
    pub at: u64,
    /// The agent's scope ([`AgentBuilder::scope`](crate::AgentBuilder::scope)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// Where pins' ids begin (the allowances' are `sha256:` digests).
pub(super) const PIN_PREFIX: &str = "pin:";

impl Agent {
    /// The pinned definitions of allow-listed tools, for this agent's scope. With an
    /// integrity key, one that fails its check is left out (and logged) — and a call
    /// of its tool is then refused, as for a changed definition.
    pub async fn pins(&self) -> Result<Vec<Pin>> {
        let mut out = Vec::new();
        for (id, kept) in self
            .kept(Sealed::Pin, |id| id.starts_with(PIN_PREFIX))
            .await?
        {
            match serde_json::from_value::<Pin>(kept) {
                Ok(p) if p.id == id && p.scope == *self.inner.policy.scope() => out.push(p),
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!(pin = %id, "a pinned tool definition cannot be read; it is ignored")
                }
            }
        }
        Ok(out)
    }

    /// Forgets a pin: the next call of its tool pins the definition in force then.
    /// `false` when there was none.
    pub async fn unpin(&self, id: &str) -> Result<bool> {
        if !id.starts_with(PIN_PREFIX) {
            return Ok(false);
        }
        self.inner.books.store().delete_allowance(id).await
    }

    /// With pinning on, for a call the allow-list allows: `None` when `tool` is as
    /// pinned (or is pinned now, on its first use), else what changed.
    pub(super) async fn pin_changed(&self, tool: &AgentTool) -> Result<Option<String>> {
        let server = tool.facts.server.clone();
        let config = self.inner.servers.host().config_fingerprint(tool.server);
        let definition = tool.definition_digest().to_owned();
        let id = format!(
            "{PIN_PREFIX}{}",
            mcp_runtime::digest::sha256_json(&serde_json::json!([
                *self.inner.policy.scope(),
                server,
                tool.facts.name
            ]))
        );
        // One read of the store: this tool's pin, if kept. A pin kept but unreadable
        // (its MAC fails) is not a first use.
        let kept = self
            .inner
            .books
            .store()
            .allowances()
            .await?
            .into_iter()
            .find(|v| v.get("id").and_then(Value::as_str) == Some(id.as_str()));
        let stored = kept.is_some();
        let pinned = kept.and_then(|mut v| {
            self.opened(Sealed::Pin, &id, &mut v)
                .then(|| serde_json::from_value::<Pin>(v).ok())
                .flatten()
                .filter(|p| p.id == id && p.scope == *self.inner.policy.scope())
        });
        match pinned {
            Some(p) if p.server_config != config => Ok(Some(format!(
                "server `{server}` is started or reached differently than when `{}` was pinned",
                tool.facts.name
            ))),
            Some(p) if p.definition != definition => Ok(Some(format!(
                "the definition of `{}` changed since it was pinned",
                tool.facts.name
            ))),
            Some(_) => Ok(None),
            None if stored => Ok(Some(format!(
                "the pinned definition of `{}` failed its integrity check",
                tool.facts.name
            ))),
            None => {
                let pin = Pin {
                    id: id.clone(),
                    server,
                    server_config: config,
                    tool: tool.facts.name.clone(),
                    definition,
                    at: now(),
                    scope: self.inner.policy.scope().clone(),
                };
                let mut value = serde_json::to_value(&pin)
                    .map_err(|e| Error::store(format!("cannot encode a pin: {e}")))?;
                if let Some(key) = self.inner.books.integrity() {
                    key.seal(Sealed::Pin, &id, &mut value)?;
                }
                self.inner.books.store().save_allowance(&id, &value).await?;
                Ok(None)
            }
        }
    }
}
