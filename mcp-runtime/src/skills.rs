//! Skills served over MCP (the `io.modelcontextprotocol/skills` extension, SEP-2640):
//! the entry a server lists for each skill, and the checks every file read is held to.
//!
//! A skill is a directory of files, at least a `SKILL.md` whose YAML frontmatter holds
//! its `name` and `description`. A server that declares the extension lists
//! [`Skill`] entries (`skills/list`, [`Client::skills`](crate::Client::skills)),
//! each a complete manifest of the skill's files with their sizes and SHA-256 digests.
//! Nothing is fetched ahead of need: [`Client::load_skill`](crate::Client::load_skill)
//! reads `SKILL.md` when the skill is loaded, and [`LoadedSkill::read`] a supporting
//! file when it is read. Every read is checked, in order: the file is listed in the
//! held entry → its size → its digest → (for `SKILL.md`) its frontmatter, field by
//! field, against the entry's. On any failure the content is not used, nothing more is
//! read, the entry is refreshed with `skills/get`, and the outcome says the skill
//! changed and needs re-approval ([`LoadOutcome::Changed`]).
//!
//! Digests come from the same server as the content: a match shows consistency, not
//! trust. Skill content is untrusted model input.
//!
//! Behind the `skills` feature (on by default); without it only the extension's
//! identifier and limits are here. The types are in this module's files (the entry,
//! the checks, a loaded skill, the file cache); what needs a session (`skills/list`,
//! `skills/get`, reading and checking a file) is in the client
//! (`client/skills.rs`), which a [`LoadedSkill`] reads through.

#[cfg(feature = "skills")]
mod cache;
#[cfg(feature = "skills")]
mod content;
#[cfg(feature = "skills")]
mod entry;
mod extension;
#[cfg(feature = "skills")]
mod loaded;

#[cfg(feature = "skills")]
pub(crate) use cache::FileCache;
#[cfg(feature = "skills")]
pub use content::SkillContent;
#[cfg(feature = "skills")]
pub(crate) use content::{check, extract, fuzzing_frontmatter, Mismatch};
#[cfg(feature = "skills")]
pub use entry::{Skill, SkillFile, SkillResources};
pub use extension::{MAX_SKILL_BYTES, MAX_SKILL_FILES, SKILLS_EXTENSION};
#[cfg(feature = "skills")]
pub(crate) use loaded::SkillFiles;
#[cfg(feature = "skills")]
pub use loaded::{LoadOutcome, LoadedSkill};

#[cfg(feature = "skills")]
#[cfg(test)]
mod tests;
