//! Deploys: moving a waiting (or failed) run to the policy of the agent running now
//! ([`Agent::adopt_policy`]), explicitly and evented.

use crate::error::{Error, Result};
use crate::store::{Claim, RunRecord, RunStatus};

use super::events::Event;
use super::handle::Agent;
use super::options::Principal;

impl Agent {
    /// Moves a run that waits (or failed) to this agent's policy — its mode,
    /// allow-list and step limit — on `principal`'s word, and returns what that
    /// loosens (empty when nothing). A run keeps the policy it started with: an agent
    /// whose builder states a looser one (a new release with one more allow-list entry,
    /// a higher step limit) refuses to go on with it until this is called. The run's
    /// events record who moved it and what loosened ([`Event::PolicyAdopted`]); it
    /// waits (or stays failed) as before, for the same decisions. A run that neither
    /// waits nor failed is refused with an error for which `is_not_suspended()` is
    /// true; one being decided at the same moment may be refused the same way.
    pub async fn adopt_policy(
        &self,
        run_id: &str,
        principal: impl Into<Principal>,
    ) -> Result<Vec<String>> {
        let principal = principal.into();
        let record = self.inner.books.record(run_id).await?;
        let was = record.status;
        let claim = match (was, record.suspension.as_deref()) {
            (RunStatus::Suspended, Some(s)) => Claim::Suspended(s),
            (RunStatus::Failed, _) => Claim::Failed,
            _ => {
                return Err(Error::not_suspended(format!(
                    "run {run_id} neither waits nor has failed: it has no policy to move"
                )))
            }
        };
        let Some((claimed, lease)) = self.inner.books.claim(run_id, claim).await? else {
            return Err(Error::not_suspended(format!(
                "run {run_id} moved on meanwhile (decided, cancelled or retried)"
            )));
        };
        let back = |r| RunRecord { status: was, ..r };
        let mut state = match self.inner.books.read(&claimed) {
            Ok(state) => state,
            Err(e) => {
                self.inner.books.put_back(run_id, back(claimed)).await;
                return Err(e);
            }
        };
        if let Err(e) = self.check_ledger(&mut state).await {
            self.inner.books.put_back(run_id, back(claimed)).await;
            return Err(e);
        }
        state.lease = Some(lease);
        let loosened = match &state.policy {
            Some(kept) => self.inner.policy.loosens(kept),
            None => Vec::new(),
        };
        state.policy = Some(self.inner.policy.own());
        state.gate = None;
        self.event(
            &mut state,
            Event::PolicyAdopted {
                by: principal.id.clone(),
                loosened: loosened.clone(),
            },
        );
        self.save(&mut state, was).await?;
        Ok(loosened)
    }
}
