//! Answers to a server's input requests as a run keeps them, and the vault: what a
//! run may not keep, held in this process's memory until its call is sent.

use std::collections::HashMap;

use mcp_runtime::{InputResponse, PendingInput};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::store::lock;

use super::ids::random_id;

/// The most answers the vault holds (the oldest go first).
pub(super) const VAULT_CAPACITY: usize = 10_000;

/// The most bytes of answers the vault holds (the oldest go first).
pub(super) const VAULT_BYTES: usize = 16 << 20;

/// The vault key of a call's withheld `requestState`.
pub(super) const STATE: &str = "\u{0}requestState";

/// The answers a call that waits for input has been given so far, as its run keeps
/// them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Answers {
    /// A person's answers (wire form) by request key, the secret fields taken out.
    #[serde(default)]
    pub(super) answers: Vec<(String, Value)>,
    /// The secret fields taken out of a person's answer, by request key: their values
    /// are in the vault only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) withheld: Vec<(String, Vec<String>)>,
    /// Keys `on_input` callbacks answered: their answers are in the vault only (a
    /// callback is asked again where the vault lacks one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) callbacks: Vec<String>,
    /// The server's `requestState` is in the vault only: it followed answers that
    /// may not be kept, and may carry them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) state_withheld: bool,
    /// The vault's random id for what it holds of these answers: drawn anew whenever
    /// they are put together again, so a process never sends what it held for an
    /// earlier round (or another call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) vault: Option<String>,
}

impl Answers {
    /// The key has an answer (a person's or a callback's).
    pub(super) fn has(&self, key: &str) -> bool {
        self.answers.iter().any(|(k, _)| k == key) || self.callbacks.iter().any(|k| k == key)
    }

    /// The vault id, drawn when there is none yet.
    pub(super) fn vault_id(&mut self) -> Result<String> {
        if let Some(id) = &self.vault {
            return Ok(id.clone());
        }
        let id = random_id()?;
        self.vault = Some(id.clone());
        Ok(id)
    }
}

/// What [`Agent::complete_answers`] found.
pub(super) enum Completed {
    /// Every request is answered: send these, with the input (its state restored).
    Ready(PendingInput, Vec<(String, InputResponse)>),
    /// Some answer is missing here (kept by another process): the call waits again,
    /// with what it still has.
    Missing(PendingInput, Answers),
    /// The server's state was kept by another process: the call starts over.
    StartOver,
}

/// Where answers a run may not keep wait, in memory, until their call is sent: by
/// (run, vault id, request key). One per [`Agent`] (and its clones).
#[derive(Default)]
pub(super) struct Vault {
    pub(super) entries: std::sync::Mutex<VaultEntries>,
}

#[derive(Default)]
pub(super) struct VaultEntries {
    pub(super) next: u64,
    pub(super) bytes: usize,
    pub(super) map: HashMap<(String, String, String), (u64, Value, usize)>,
}

impl VaultEntries {
    pub(super) fn evict_oldest(&mut self) {
        if let Some(oldest) = self
            .map
            .iter()
            .min_by_key(|(_, (n, _, _))| *n)
            .map(|(k, _)| k.clone())
        {
            if let Some((_, _, size)) = self.map.remove(&oldest) {
                self.bytes -= size;
            }
        }
    }

    pub(super) fn retain(&mut self, keep: impl Fn(&(String, String, String)) -> bool) {
        let mut freed = 0;
        self.map.retain(|k, (_, _, size)| {
            let kept = keep(k);
            if !kept {
                freed += *size;
            }
            kept
        });
        self.bytes -= freed;
    }
}

impl Vault {
    pub(super) fn put(&self, run: &str, vault: &str, key: &str, value: Value) {
        let size = value.to_string().len() + run.len() + vault.len() + key.len();
        let mut v = lock(&self.entries);
        let k = (run.to_owned(), vault.to_owned(), key.to_owned());
        if let Some((_, _, old)) = v.map.remove(&k) {
            v.bytes -= old;
        }
        while !v.map.is_empty() && (v.map.len() >= VAULT_CAPACITY || v.bytes + size > VAULT_BYTES) {
            v.evict_oldest();
        }
        let n = v.next;
        v.next += 1;
        v.bytes += size;
        v.map.insert(k, (n, value, size));
    }

    pub(super) fn get(&self, run: &str, vault: &str, key: &str) -> Option<Value> {
        let v = lock(&self.entries);
        v.map
            .get(&(run.to_owned(), vault.to_owned(), key.to_owned()))
            .map(|(_, value, _)| value.clone())
    }

    /// Forgets what it held for these answers (they were sent, or replaced).
    pub(super) fn forget(&self, run: &str, answers: &Answers) {
        if let Some(id) = &answers.vault {
            lock(&self.entries).retain(|(r, v, _)| !(r == run && v == id));
        }
    }

    /// Forgets what it held for a run (it ended, or was deleted).
    pub(super) fn forget_run(&self, run: &str) {
        lock(&self.entries).retain(|(r, _, _)| r != run);
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        lock(&self.entries).map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_keep_the_format_runs_were_kept_in() {
        // A call state kept before secrets were withheld reads as a person's answers.
        let old = json!({"answers": [["k", {"action": "accept", "content": {"name": "Ann"}}]]});
        let a: Answers = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(a.answers.len(), 1);
        assert!(a.has("k") && !a.has("j"));
        assert_eq!(serde_json::to_value(&a).unwrap(), old);
    }

    #[test]
    fn the_vault_is_bounded_and_forgets_the_oldest() {
        let v = Vault::default();
        for i in 0..VAULT_CAPACITY + 5 {
            v.put("r", &i.to_string(), "k", json!(i));
        }
        assert_eq!(v.len(), VAULT_CAPACITY);
        assert!(v.get("r", "0", "k").is_none());
        assert_eq!(
            v.get("r", &(VAULT_CAPACITY + 4).to_string(), "k"),
            Some(json!(VAULT_CAPACITY + 4))
        );
        v.forget_run("r");
        assert_eq!(v.len(), 0);
    }
}
