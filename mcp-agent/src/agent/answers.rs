//! Answers to a server's input requests, and what of them a run may keep.
//!
//! A run keeps a person's answers without the fields the request marks secret
//! (`writeOnly`, `format: "password"`), and of the answers `on_input` callbacks gave
//! only which keys they answered. What it may not keep waits in this process's memory
//! (the vault) until the call is sent; a run that goes on in another process — or
//! after this one restarted — asks the callbacks again, and a person again for a
//! secret it lacks.

use super::*;

/// The most answers the vault holds (the oldest go first).
const VAULT_CAPACITY: usize = 10_000;

/// The most bytes of answers the vault holds (the oldest go first).
const VAULT_BYTES: usize = 16 << 20;

/// The vault key of a call's withheld `requestState`.
const STATE: &str = "\u{0}requestState";

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
    fn vault_id(&mut self) -> Result<String> {
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
    entries: std::sync::Mutex<VaultEntries>,
}

#[derive(Default)]
struct VaultEntries {
    next: u64,
    bytes: usize,
    map: HashMap<(String, String, String), (u64, Value, usize)>,
}

impl VaultEntries {
    fn evict_oldest(&mut self) {
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

    fn retain(&mut self, keep: impl Fn(&(String, String, String)) -> bool) {
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
    fn put(&self, run: &str, vault: &str, key: &str, value: Value) {
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

    fn get(&self, run: &str, vault: &str, key: &str) -> Option<Value> {
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

impl Agent {
    /// Keeps a person's `answer` to the request under `key`: what the run keeps goes
    /// into `answers`, the secret fields into the vault. A request this code cannot
    /// read has every field of its answer taken as secret.
    pub(super) fn keep_person_answer(
        &self,
        run: &str,
        input: &PendingInput,
        key: &str,
        answer: &InputResponse,
        answers: &mut Answers,
    ) -> Result<()> {
        let mut wire = answer.to_value();
        let secret: Option<Vec<String>> = input
            .requests()
            .ok()
            .and_then(|r| r.into_iter().find(|(k, _)| k == key))
            .map(|(_, r)| r.secret_fields());
        let mut taken = Map::new();
        if let Some(content) = wire.get_mut("content").and_then(Value::as_object_mut) {
            let names: Vec<String> = match secret {
                Some(names) => names,
                None => content.keys().cloned().collect(),
            };
            for name in names {
                if let Some(v) = content.remove(&name) {
                    taken.insert(name, v);
                }
            }
        }
        if !taken.is_empty() {
            let id = answers.vault_id()?;
            answers
                .withheld
                .push((key.to_owned(), taken.keys().cloned().collect()));
            self.inner.vault.put(run, &id, key, Value::Object(taken));
        }
        answers.answers.push((key.to_owned(), wire));
        Ok(())
    }

    /// Keeps `given` (the answers callbacks gave) and the input's `requestState` when
    /// `withhold_state` (it may carry answers the run may not keep) in the vault, under
    /// `vault` (drawn before the call was sent): the run keeps only that they were
    /// given.
    pub(super) fn keep_in_vault(
        &self,
        run: &str,
        vault: &str,
        input: &mut PendingInput,
        given: &[(String, InputResponse)],
        withhold_state: bool,
    ) -> Answers {
        let mut answers = Answers::default();
        for (key, answer) in given {
            self.inner.vault.put(run, vault, key, answer.to_value());
            answers.callbacks.push(key.clone());
        }
        if withhold_state {
            if let Some(state) = input.take_request_state() {
                self.inner.vault.put(run, vault, STATE, state);
                answers.state_withheld = true;
            }
        }
        if !answers.callbacks.is_empty() || answers.state_withheld {
            answers.vault = Some(vault.to_owned());
        }
        answers
    }

    /// The answers to send for `input`: what the run kept with what the vault holds,
    /// and the callbacks asked again for a key whose answer the vault lacks (their
    /// actions are pushed to `asked`). An answer whose secret the vault lacks is
    /// dropped: the person is asked again.
    pub(super) async fn complete_answers(
        &self,
        (run, call): (&str, &PendingCall),
        mut input: PendingInput,
        kept: &Answers,
        asked: &mut Vec<String>,
    ) -> Result<Completed> {
        let id = kept.vault.clone().unwrap_or_default();
        if kept.state_withheld {
            match self.inner.vault.get(run, &id, STATE) {
                Some(state) => input.set_request_state(Some(state)),
                None => return Ok(Completed::StartOver),
            }
        }
        let mut ready = Vec::new();
        // What the run keeps if the call waits again: under a new vault id.
        let mut still = Answers::default();
        let mut moved: Vec<(String, Value)> = Vec::new();
        let requests = input.requests().unwrap_or_default();
        for (key, request) in requests {
            if let Some((_, stored)) = kept.answers.iter().find(|(k, _)| *k == key) {
                let withheld = kept
                    .withheld
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, n)| n.as_slice())
                    .unwrap_or_default();
                let mut wire = stored.clone();
                if !withheld.is_empty() {
                    let Some(Value::Object(secret)) = self.inner.vault.get(run, &id, &key) else {
                        continue; // kept by another process: asked again
                    };
                    if !withheld.iter().all(|n| secret.contains_key(n)) {
                        continue;
                    }
                    moved.push((key.clone(), Value::Object(secret.clone())));
                    if let Some(content) = wire.get_mut("content").and_then(Value::as_object_mut) {
                        content.extend(secret);
                    }
                }
                if let Some(r) = InputResponse::from_value(&wire) {
                    ready.push((key.clone(), r));
                    still.answers.push((key.clone(), stored.clone()));
                    if !withheld.is_empty() {
                        still.withheld.push((key, withheld.to_vec()));
                    }
                }
                continue;
            }
            if !kept.callbacks.contains(&key) {
                continue;
            }
            let held = self
                .inner
                .vault
                .get(run, &id, &key)
                .and_then(|v| InputResponse::from_value(&v));
            let answer = match held {
                Some(a) => Some(a),
                None => {
                    let ask = InputAsk {
                        run_id: run.to_owned(),
                        tool: call.name.clone(),
                        key: key.clone(),
                        request,
                    };
                    let a = self.ask_callbacks(ask).await;
                    if let Some(a) = &a {
                        asked.push(a.action().to_owned());
                    }
                    a
                }
            };
            if let Some(a) = answer {
                moved.push((key.clone(), a.to_value()));
                ready.push((key.clone(), a));
                still.callbacks.push(key);
            }
        }
        if ready.len() == input.keys().count() {
            return Ok(Completed::Ready(input, ready));
        }
        // Waits again: what the vault held moves to a new id (this round's).
        if !moved.is_empty() || kept.state_withheld {
            let new = still.vault_id()?;
            for (key, value) in moved {
                self.inner.vault.put(run, &new, &key, value);
            }
            if kept.state_withheld {
                if let Some(state) = input.take_request_state() {
                    self.inner.vault.put(run, &new, STATE, state);
                    still.state_withheld = true;
                }
            }
        }
        self.inner.vault.forget(run, kept);
        Ok(Completed::Missing(input, still))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
