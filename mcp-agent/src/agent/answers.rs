//! Answers to a server's input requests, and what of them a run may keep.
//!
//! A run keeps a person's answers without the fields the request marks secret
//! (`writeOnly`, `format: "password"`), and of the answers `on_input` callbacks gave
//! only which keys they answered. What it may not keep waits in this process's memory
//! (the vault) until the call is sent; a run that goes on in another process — or
//! after this one restarted — asks the callbacks again, and a person again for a
//! secret it lacks.

use mcp_runtime::{InputResponse, PendingInput};
use serde_json::{Map, Value};

use crate::error::Result;

use super::decision::InputAsk;
use super::handle::Agent;
use super::state::PendingCall;
use super::vault::{Answers, Completed, STATE};

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
                    let a = self.inner.callbacks.ask(ask).await;
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
