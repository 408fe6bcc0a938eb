//! The extension's identifier and the per-skill limits every host must accept: what
//! a build without the `skills` feature still names (a client or server declaring the
//! extension).

/// The extension's identifier.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";
/// The most files a skill may list that every host must accept (`SKILL.md` included).
pub const MAX_SKILL_FILES: usize = 512;
/// The largest total size of a skill's files every host must accept: 16 MiB.
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;
