//! The integrity key: stored runs MACed with HMAC-SHA-256.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::error::{Error, Result};

/// The key stored runs are MACed with (never stored, never shown).
#[derive(Clone)]
pub(super) struct IntegrityKey(pub(super) Arc<[u8]>);

impl fmt::Debug for IntegrityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IntegrityKey(<redacted>)")
    }
}

/// Where a run's MAC is kept in its stored state.
pub(super) const INTEGRITY_FIELD: &str = "integrity";

/// What a MAC is of: a stored run, or a standing allowance (never taken for the other).
#[derive(Clone, Copy, Debug)]
pub(super) enum Sealed {
    Run,
    Allowance,
    /// An entry of a run's sent ledger.
    Ledger,
    /// A pinned definition of an allow-listed tool.
    Pin,
}

impl Sealed {
    fn domain(self) -> &'static [u8] {
        match self {
            // v2: the state it covers holds the save counter and the saved status.
            Sealed::Run => b"mcp-agent run v2",
            // v2: an allowance carries its scope.
            Sealed::Allowance => b"mcp-agent allowance v2",
            Sealed::Ledger => b"mcp-agent ledger v1",
            Sealed::Pin => b"mcp-agent pin v1",
        }
    }
    fn name(self) -> &'static str {
        match self {
            Sealed::Run => "run",
            Sealed::Allowance => "allowance",
            Sealed::Ledger => "a ledger entry of run",
            Sealed::Pin => "pin",
        }
    }
}

impl IntegrityKey {
    pub(super) fn mac(
        &self,
        what: Sealed,
        id: &str,
        state: &Value,
    ) -> Result<hmac::Hmac<sha2::Sha256>> {
        use hmac::Mac as _;
        let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(&self.0)
            .map_err(|e| Error::config(format!("the integrity key cannot be used: {e}")))?;
        // Every field length-prefixed: two different runs never encode alike.
        for part in [
            what.domain(),
            id.as_bytes(),
            mcp_runtime::digest::canonical_json(state).as_bytes(),
        ] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        Ok(mac)
    }

    /// Adds the MAC of `state` (an object) to it.
    pub(super) fn seal(&self, what: Sealed, id: &str, state: &mut Value) -> Result<()> {
        use hmac::Mac as _;
        let tag = self.mac(what, id, state)?.finalize().into_bytes();
        if let Value::Object(m) = state {
            let tag = format!("hmac-sha256:{}", mcp_runtime::digest::hex(&tag));
            m.insert(INTEGRITY_FIELD.into(), tag.into());
        }
        Ok(())
    }

    /// A key of its own for `purpose`, derived from this one (HMAC-SHA-256 of the
    /// purpose): the integrity key itself is used for nothing else.
    pub(super) fn derive(&self, purpose: &[u8]) -> Result<Vec<u8>> {
        use hmac::Mac as _;
        let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(&self.0)
            .map_err(|e| Error::config(format!("the integrity key cannot be used: {e}")))?;
        mac.update(purpose);
        Ok(mac.finalize().into_bytes().to_vec())
    }

    /// The MAC of `value` (`hmac-sha256:` and hex).
    pub(super) fn tag(&self, what: Sealed, id: &str, value: &Value) -> Result<String> {
        use hmac::Mac as _;
        let tag = self.mac(what, id, value)?.finalize().into_bytes();
        Ok(format!("hmac-sha256:{}", mcp_runtime::digest::hex(&tag)))
    }

    /// Whether `tag` is the MAC of `value` (checked in constant time).
    pub(super) fn verify(&self, what: Sealed, id: &str, value: &Value, tag: &str) -> Result<bool> {
        use hmac::Mac as _;
        let tag = tag.strip_prefix("hmac-sha256:").and_then(unhex);
        let mac = self.mac(what, id, value)?;
        Ok(tag.is_some_and(|t| mac.verify_slice(&t).is_ok()))
    }

    /// Takes the MAC out of `state` and checks it (in constant time).
    pub(super) fn open(&self, what: Sealed, id: &str, state: &mut Value) -> Result<()> {
        use hmac::Mac as _;
        let tag = state
            .as_object_mut()
            .and_then(|m| m.remove(INTEGRITY_FIELD));
        let tag = tag
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|t| t.strip_prefix("hmac-sha256:"))
            .and_then(unhex);
        let mac = self.mac(what, id, state)?;
        let ok = tag.is_some_and(|t| mac.verify_slice(&t).is_ok());
        if ok {
            Ok(())
        } else {
            Err(Error::store(format!(
                "{} {id} failed its integrity check: it was changed outside the agent, or kept without (or with another) integrity key; it is not used",
                what.name()
            )))
        }
    }
}

pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}
