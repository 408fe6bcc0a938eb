//! The integrity key: stored runs MACed with HMAC-SHA-256.

use super::*;

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

impl IntegrityKey {
    pub(super) fn mac(&self, run_id: &str, state: &Value) -> Result<hmac::Hmac<sha2::Sha256>> {
        use hmac::Mac as _;
        let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(&self.0)
            .map_err(|e| Error::config(format!("the integrity key cannot be used: {e}")))?;
        // Every field length-prefixed: two different runs never encode alike.
        for part in [
            b"mcp-agent run v1".as_slice(),
            run_id.as_bytes(),
            mcp_runtime::digest::canonical_json(state).as_bytes(),
        ] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        Ok(mac)
    }

    /// Adds the MAC of `state` (an object) to it.
    pub(super) fn seal(&self, run_id: &str, state: &mut Value) -> Result<()> {
        use hmac::Mac as _;
        let tag = self.mac(run_id, state)?.finalize().into_bytes();
        if let Value::Object(m) = state {
            let tag = format!("hmac-sha256:{}", mcp_runtime::digest::hex(&tag));
            m.insert(INTEGRITY_FIELD.into(), tag.into());
        }
        Ok(())
    }

    /// Takes the MAC out of `state` and checks it (in constant time).
    pub(super) fn open(&self, run_id: &str, state: &mut Value) -> Result<()> {
        use hmac::Mac as _;
        let tag = state
            .as_object_mut()
            .and_then(|m| m.remove(INTEGRITY_FIELD));
        let tag = tag
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|t| t.strip_prefix("hmac-sha256:"))
            .and_then(unhex);
        let mac = self.mac(run_id, state)?;
        let ok = tag.is_some_and(|t| mac.verify_slice(&t).is_ok());
        if ok {
            Ok(())
        } else {
            Err(Error::store(format!(
                "run {run_id} failed its integrity check: it was changed outside the agent, or kept without (or with another) integrity key; it is not used"
            )))
        }
    }
}

pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}
