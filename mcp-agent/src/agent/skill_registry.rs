//! An agent's skills: whether they are offered at all, the approvals it was given,
//! and the skills loaded in this process (a file read reuses a load).

use std::collections::HashMap;
use std::sync::Mutex;

use mcp_runtime::skills::{LoadedSkill, Skill};

use crate::store::lock;

use super::skill_types::SkillApproval;

/// The skills of an agent.
pub(super) struct SkillRegistry {
    /// Skills of attached servers are offered to the model.
    enabled: bool,
    /// Approvals given to the builder (kept by the application).
    approvals: Vec<SkillApproval>,
    /// Skills loaded in this process, by (server, uri): a file read reuses the load
    /// (its `SKILL.md` checked once) while the run holds the same entry.
    loaded: Mutex<HashMap<(String, String), LoadedSkill>>,
}

impl SkillRegistry {
    /// Skills offered (`enabled`), with these approvals given in advance.
    pub(super) fn new(enabled: bool, approvals: Vec<SkillApproval>) -> SkillRegistry {
        SkillRegistry {
            enabled,
            approvals,
            loaded: Mutex::default(),
        }
    }

    /// Whether skills are offered at all.
    pub(super) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether an approval was given in advance (or in the run: `in_run`).
    pub(super) fn any_approval(&self, in_run: &[SkillApproval]) -> bool {
        !self.approvals.is_empty() || !in_run.is_empty()
    }

    /// The approval, given in advance or in the run (`in_run`), that covers `skill` of
    /// `server` as it is now.
    pub(super) fn approval<'a>(
        &'a self,
        server: &str,
        skill: &Skill,
        in_run: &'a [SkillApproval],
    ) -> Option<&'a SkillApproval> {
        self.approvals
            .iter()
            .chain(in_run.iter())
            .find(|a| a.covers(server, skill))
    }

    /// The load of `skill` of `server` this process holds, while it is of the same
    /// entry and not revoked.
    pub(super) fn reuse(&self, server: &str, skill: &Skill) -> Option<LoadedSkill> {
        lock(&self.loaded)
            .get(&(server.to_owned(), skill.uri().to_owned()))
            .filter(|l| l.skill() == skill && !l.is_revoked())
            .cloned()
    }

    /// Keeps a load of skill `uri` of `server`, for the reads that follow.
    pub(super) fn keep(&self, server: &str, uri: &str, loaded: &LoadedSkill) {
        lock(&self.loaded).insert((server.to_owned(), uri.to_owned()), loaded.clone());
    }

    /// Forgets the load of skill `uri` of `server` (it changed).
    pub(super) fn forget(&self, server: &str, uri: &str) {
        lock(&self.loaded).remove(&(server.to_owned(), uri.to_owned()));
    }
}
