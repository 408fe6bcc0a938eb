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

/// The answers a call that waits for input has been given so far, as its run keeps
/// them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Answers {
    /// A person's answers (wire form) by request key, the secret fields taken out.
    #[serde(default)]
    pub(super) answers: Vec<(String, Value)>,
    /// The secret fields taken out of a person's answer, by request key: their values
    /// are in this process's vault only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) withheld: Vec<(String, Vec<String>)>,
    /// Keys `on_input` callbacks answered: their answers are in this process's vault
    /// only (a callback is asked again where the vault lacks one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) callbacks: Vec<String>,
}

impl Answers {
    /// The key has an answer (a person's or a callback's).
    pub(super) fn has(&self, key: &str) -> bool {
        self.answers.iter().any(|(k, _)| k == key) || self.callbacks.iter().any(|k| k == key)
    }
}

/// Where answers a run may not keep wait, in this process, until their call is sent:
/// by (run, call, request key).
#[derive(Default)]
pub(super) struct Vault {
    entries: std::sync::Mutex<VaultEntries>,
}

#[derive(Default)]
struct VaultEntries {
    next: u64,
    map: HashMap<(String, String, String), (u64, Value)>,
}

impl Vault {
    fn put(&self, run: &str, call: &str, key: &str, value: Value) {
        let mut v = lock(&self.entries);
        if v.map.len() >= VAULT_CAPACITY {
            if let Some(oldest) = v
                .map
                .iter()
                .min_by_key(|(_, (n, _))| *n)
                .map(|(k, _)| k.clone())
            {
                v.map.remove(&oldest);
            }
        }
        let n = v.next;
        v.next += 1;
        v.map.insert(
            (run.to_owned(), call.to_owned(), key.to_owned()),
            (n, value),
        );
    }

    fn get(&self, run: &str, call: &str, key: &str) -> Option<Value> {
        let v = lock(&self.entries);
        v.map
            .get(&(run.to_owned(), call.to_owned(), key.to_owned()))
            .map(|(_, value)| value.clone())
    }

    /// Forgets what waits for a call (it was sent).
    pub(super) fn forget_call(&self, run: &str, call: &str) {
        lock(&self.entries)
            .map
            .retain(|(r, c, _), _| !(r == run && c == call));
    }

    /// Forgets what waits for a run (it ended).
    pub(super) fn forget_run(&self, run: &str) {
        lock(&self.entries).map.retain(|(r, _, _), _| r != run);
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        lock(&self.entries).map.len()
    }
}

impl Agent {
    /// Keeps a person's `answer` to the request under `key` of `call`: what the run
    /// keeps goes into `answers`, the secret fields into the vault. A request this
    /// code cannot read has every field of its answer taken as secret.
    pub(super) fn keep_person_answer(
        &self,
        (run, call): (&str, &str),
        input: &PendingInput,
        key: &str,
        answer: &InputResponse,
        answers: &mut Answers,
    ) {
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
            answers
                .withheld
                .push((key.to_owned(), taken.keys().cloned().collect()));
            self.inner.vault.put(run, call, key, Value::Object(taken));
        }
        answers.answers.push((key.to_owned(), wire));
    }

    /// Keeps an `on_input` callback's answer to the request under `key` of `call`:
    /// in the vault; the run keeps only that a callback answered.
    pub(super) fn keep_callback_answer(
        &self,
        (run, call): (&str, &str),
        key: &str,
        answer: &InputResponse,
        answers: &mut Answers,
    ) {
        self.inner.vault.put(run, call, key, answer.to_value());
        answers.callbacks.push(key.to_owned());
    }

    /// The answers to send for `input`: what the run kept with what the vault holds,
    /// and the callbacks asked again for a key whose answer the vault lacks. Also what
    /// the run keeps of them (an answer whose secret this process lacks is dropped:
    /// the person is asked again), and the actions of the answers callbacks gave now.
    pub(super) async fn complete_answers(
        &self,
        (run, call): (&str, &PendingCall),
        input: &PendingInput,
        kept: &Answers,
    ) -> (Vec<(String, InputResponse)>, Answers, Vec<String>) {
        let mut ready = Vec::new();
        let mut still = Answers::default();
        let mut asked = Vec::new();
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
                    let secret = self.inner.vault.get(run, &call.id, &key);
                    let Some(Value::Object(secret)) = secret else {
                        continue; // kept in another process: asked again
                    };
                    if !withheld.iter().all(|n| secret.contains_key(n)) {
                        continue;
                    }
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
                .get(run, &call.id, &key)
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
                        self.inner.vault.put(run, &call.id, &key, a.to_value());
                    }
                    a
                }
            };
            if let Some(a) = answer {
                ready.push((key.clone(), a));
                still.callbacks.push(key);
            }
        }
        (ready, still, asked)
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
