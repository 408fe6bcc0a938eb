//! A loaded skill: its verified `SKILL.md`, the entry held since, and its other files
//! read through it; what a load or a read comes to.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::content::{split_frontmatter, SkillContent};
use super::entry::{Skill, SkillFile, SkillResources};
use super::extension::MAX_SKILL_BYTES;
use crate::error::{Error, Result};
use mcp_runtime_core::BoxFuture;

/// A skill that was loaded: its `SKILL.md` verified against the entry held since,
/// through which the skill's other files are read (from its own server, each checked
/// against the same entry). Cheap to clone; clones share the acting window.
///
/// After a failed check the skill is revoked: every later read fails without
/// touching the server, until the skill is loaded again (after re-approval).
#[derive(Clone)]
pub struct LoadedSkill {
    files: Arc<dyn SkillFiles>,
    entry: Arc<Skill>,
    text: Arc<str>,
    body_at: usize,
    revoked: Arc<AtomicBool>,
    /// Bytes read of a dynamic skill (which has no manifest to count), held to
    /// [`MAX_SKILL_BYTES`].
    retrieved: Arc<AtomicU64>,
}

/// Where a loaded skill's files come from and are checked: its own server's session
/// (the client implements it, `client/skills.rs`), so that the skill types here never
/// name the client.
pub(crate) trait SkillFiles: Send + Sync {
    /// The server's host-assigned name.
    fn server(&self) -> &str;
    /// Reads one file of `entry` from the server and checks it against `entry` (a
    /// failed check refreshes the entry: [`LoadOutcome::Changed`]).
    fn read_checked<'a>(
        &'a self,
        entry: &'a Skill,
        uri: &'a str,
    ) -> BoxFuture<'a, Result<LoadOutcome<SkillContent>>>;
}

impl std::fmt::Debug for LoadedSkill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedSkill")
            .field("server", &self.files.server())
            .field("uri", &self.entry.uri())
            .field("revoked", &self.is_revoked())
            .finish_non_exhaustive()
    }
}

impl LoadedSkill {
    /// A skill whose `SKILL.md` (`text`, of `skill_md_bytes` bytes) was read from
    /// `files` and checked against `entry`.
    pub(crate) fn new(
        files: Arc<dyn SkillFiles>,
        entry: Skill,
        text: Arc<str>,
        skill_md_bytes: u64,
    ) -> LoadedSkill {
        let body_at = split_frontmatter(&text).map_or(0, |(_, at)| at);
        LoadedSkill {
            files,
            entry: Arc::new(entry),
            text,
            body_at,
            revoked: Arc::new(AtomicBool::new(false)),
            retrieved: Arc::new(AtomicU64::new(skill_md_bytes)),
        }
    }

    /// The entry the skill was loaded from, held while acting on it.
    pub fn skill(&self) -> &Skill {
        &self.entry
    }
    /// The name of the server it came from (the client's host-assigned name).
    pub fn server(&self) -> &str {
        self.files.server()
    }
    /// The whole `SKILL.md`, verified.
    pub fn text(&self) -> &str {
        &self.text
    }
    /// `SKILL.md` after its frontmatter: the instructions.
    pub fn instructions(&self) -> &str {
        self.text.get(self.body_at..).unwrap_or_default()
    }
    /// True after a check failed: the skill changed and needs re-approval.
    pub fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::Acquire)
    }
    /// The files of the skill (from the held entry; `None` for a dynamic skill).
    pub fn files(&self) -> Option<&[SkillFile]> {
        match self.entry.resources() {
            SkillResources::Manifest(files) => Some(files),
            SkillResources::Dynamic => None,
        }
    }

    /// Reads one of the skill's files, by a path relative to its root
    /// (`references/FORMS.md`) or by URI, from the skill's own server, and checks it
    /// against the held entry: listed → size → digest. A file that is not listed is
    /// refused without a request. A reference that leaves the skill's directory is
    /// refused too ([`Error::is_config`]), without revoking the skill. On a failed
    /// check the skill is revoked, the entry is refreshed with `skills/get`, and the
    /// outcome is [`LoadOutcome::Changed`]; a dynamic skill read past 16 MiB is
    /// [`LoadOutcome::Declined`].
    pub async fn read(&self, path: &str) -> Result<LoadOutcome<SkillContent>> {
        if self.is_revoked() {
            return Ok(LoadOutcome::Changed {
                why: "an earlier read failed its check; load the skill again after re-approval"
                    .into(),
                refreshed: None,
            });
        }
        let Some(uri) = self.entry.resolve(path) else {
            // Not a change of the skill: a reference that leaves it (`..`, another
            // skill, another scheme). Refused; the skill stays loaded.
            return Err(Error::config(format!(
                "`{}` is not a file of skill {}: a reference must stay within the skill's directory",
                crate::text::clip(path, 200),
                crate::text::clip(self.entry.uri(), 200)
            )));
        };
        let outcome = self.files.read_checked(&self.entry, &uri).await?;
        match &outcome {
            LoadOutcome::Changed { .. } => self.revoked.store(true, Ordering::Release),
            LoadOutcome::Done(c) if self.entry.is_dynamic() => {
                let len = c.bytes().len() as u64;
                let total = self.retrieved.fetch_add(len, Ordering::AcqRel) + len;
                if total > MAX_SKILL_BYTES {
                    return Ok(LoadOutcome::Declined {
                        why: "what was read of this dynamic skill passed 16 MiB".into(),
                    });
                }
            }
            _ => {}
        }
        Ok(outcome)
    }
}

/// What loading a skill ([`Client::load_skill`](crate::Client::load_skill)) or
/// reading one of its files ([`LoadedSkill::read`]) came to. A skill that changed or
/// is too large is not an error: it is an outcome the host acts on (ask for
/// re-approval, tell the model).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum LoadOutcome<T = LoadedSkill> {
    /// Loaded (or read), and checked against the held entry.
    Done(T),
    /// A file did not match the entry the skill was loaded (or is being loaded) from:
    /// unlisted, size, digest, or a `SKILL.md` frontmatter that differs. Nothing of it
    /// was used; the skill changed and needs re-approval.
    Changed {
        /// What did not match.
        why: String,
        /// The skill's entry as `skills/get` gave it after the failed check, when the
        /// server answered.
        refreshed: Option<Skill>,
    },
    /// Not loaded because of what its entry says: it exceeds a per-skill limit (512
    /// files, 16 MiB), checked before anything is fetched.
    Declined {
        /// Which limit.
        why: String,
    },
}

impl<T> LoadOutcome<T> {
    /// The skill (or file), if it loaded.
    pub fn done(self) -> Option<T> {
        self.loaded::<()>().ok()
    }
    /// The skill (or file) if it loaded, else the same outcome for another result type.
    #[allow(clippy::result_large_err)] // the other outcome, as it was: rare, not copied
    pub fn loaded<U>(self) -> std::result::Result<T, LoadOutcome<U>> {
        match self {
            LoadOutcome::Done(t) => Ok(t),
            LoadOutcome::Changed { why, refreshed } => Err(LoadOutcome::Changed { why, refreshed }),
            LoadOutcome::Declined { why } => Err(LoadOutcome::Declined { why }),
        }
    }
    /// True when the skill changed and needs re-approval.
    pub fn is_changed(&self) -> bool {
        matches!(self, LoadOutcome::Changed { .. })
    }
    /// True when the skill was declined for a limit.
    pub fn is_declined(&self) -> bool {
        matches!(self, LoadOutcome::Declined { .. })
    }
}

impl<T> std::fmt::Display for LoadOutcome<T> {
    /// `loaded`, or why not, for a log or a model (the caller adds the skill's URI).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadOutcome::Done(_) => f.write_str("loaded"),
            LoadOutcome::Changed { why, .. } => write!(
                f,
                "the skill changed and needs re-approval: {why}; its content was not used"
            ),
            LoadOutcome::Declined { why } => write!(f, "the skill was not loaded: {why}"),
        }
    }
}
