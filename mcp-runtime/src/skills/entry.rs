//! A skill's entry (`skills/list`, `skills/get`): checked when received, the files it
//! lists, the references it resolves within its directory, and the fingerprint an
//! approval binds to.

use std::collections::HashSet;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::extension::{MAX_SKILL_BYTES, MAX_SKILL_FILES};
use crate::digest::hex;
use crate::digest::sha256::Sha256;

/// One file of a skill's manifest: its URI, SHA-256 digest (`sha256:<64 hex>`) and
/// size in bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFile {
    /// The file's resource URI.
    pub uri: String,
    /// `sha256:` and 64 lowercase hex digits of the file's bytes.
    pub digest: String,
    /// The length of the file's bytes.
    pub size: u64,
}

/// What a skill entry says of its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkillResources {
    /// Every file of the skill, each once, `SKILL.md` included.
    Manifest(Vec<SkillFile>),
    /// `"dynamic"`: generated content without stable digests. Only the frontmatter of
    /// `SKILL.md` can be checked.
    Dynamic,
}

/// A skill a server serves: the entry of `skills/list` or `skills/get`, checked when
/// it was received (a `SKILL.md` URI whose last path segment is the frontmatter's
/// `name`, a `description`, and a well-formed manifest or `"dynamic"`).
///
/// Within one server a skill is named by its [`uri`](Self::uri); across servers by the
/// pair (server, uri). Serializes to the wire shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Skill {
    uri: String,
    frontmatter: Map<String, Value>,
    resources: SkillResources,
}

impl Skill {
    /// Checks a wire entry. The error says what is wrong with it.
    pub fn from_value(v: Value) -> std::result::Result<Skill, String> {
        let Value::Object(mut o) = v else {
            return Err("a skill entry is not an object".into());
        };
        let uri = match o.remove("uri") {
            Some(Value::String(u)) if !u.is_empty() => u,
            _ => return Err("a skill entry without a `uri`".into()),
        };
        let at = |what: String| format!("skill {}: {what}", crate::text::clip(&uri, 200));
        if !plain_uri(&uri) {
            return Err(at("its `uri` has whitespace or control characters".into()));
        }
        let root =
            root_of(&uri).ok_or_else(|| at("its `uri` does not end in `/SKILL.md`".into()))?;
        let frontmatter = match o.remove("frontmatter") {
            Some(Value::Object(f)) => f,
            _ => return Err(at("no `frontmatter` object".into())),
        };
        let name = match frontmatter.get("name") {
            Some(Value::String(n)) if !n.is_empty() => n,
            _ => return Err(at("its frontmatter has no `name`".into())),
        };
        if !matches!(frontmatter.get("description"), Some(Value::String(_))) {
            return Err(at("its frontmatter has no `description`".into()));
        }
        let last = root.rsplit('/').next().unwrap_or(root);
        if last != name {
            return Err(at(format!(
                "its path ends in `{}`, not in its name `{}`",
                crate::text::clip(last, 100),
                crate::text::clip(name, 100)
            )));
        }
        let resources = match o.remove("resources") {
            Some(Value::String(s)) if s == "dynamic" => SkillResources::Dynamic,
            Some(Value::Array(items)) => {
                let mut files = Vec::with_capacity(items.len().min(MAX_SKILL_FILES + 1));
                let mut seen = HashSet::new();
                for item in items {
                    let f: SkillFile = serde_json::from_value(item)
                        .map_err(|e| at(format!("a malformed `resources` entry: {e}")))?;
                    if !plain_uri(&f.uri) {
                        return Err(at(format!(
                            "it lists {}, a URI with whitespace or control characters",
                            crate::text::clip(&f.uri, 200)
                        )));
                    }
                    if !is_digest(&f.digest) {
                        return Err(at(format!(
                            "the digest of {} is not `sha256:` and 64 lowercase hex digits",
                            crate::text::clip(&f.uri, 200)
                        )));
                    }
                    if f.uri != uri && !within(root, &f.uri) {
                        return Err(at(format!(
                            "it lists {}, which is outside the skill's directory",
                            crate::text::clip(&f.uri, 200)
                        )));
                    }
                    if !seen.insert(f.uri.clone()) {
                        return Err(at(format!(
                            "it lists {} twice",
                            crate::text::clip(&f.uri, 200)
                        )));
                    }
                    files.push(f);
                }
                if !seen.contains(&uri) {
                    return Err(at("its `resources` do not list its SKILL.md".into()));
                }
                SkillResources::Manifest(files)
            }
            Some(_) => return Err(at("`resources` is neither a list nor \"dynamic\"".into())),
            None => return Err(at("no `resources`".into())),
        };
        Ok(Skill {
            uri,
            frontmatter,
            resources,
        })
    }

    /// The entry in its wire shape.
    pub fn to_value(&self) -> Value {
        let resources = match &self.resources {
            SkillResources::Dynamic => Value::String("dynamic".into()),
            SkillResources::Manifest(files) => {
                serde_json::to_value(files).unwrap_or(Value::Array(Vec::new()))
            }
        };
        let mut o = Map::new();
        o.insert("uri".into(), Value::String(self.uri.clone()));
        o.insert(
            "frontmatter".into(),
            Value::Object(self.frontmatter.clone()),
        );
        o.insert("resources".into(), resources);
        Value::Object(o)
    }

    /// The URI of its `SKILL.md`, which names the skill on its server.
    pub fn uri(&self) -> &str {
        &self.uri
    }
    /// Its name (frontmatter `name`; also the last segment of its path). Not unique:
    /// two skills may share a name.
    pub fn name(&self) -> &str {
        self.frontmatter
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
    /// What it is for (frontmatter `description`), as the server wrote it.
    pub fn description(&self) -> &str {
        self.frontmatter
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
    /// The `SKILL.md` frontmatter, as the entry renders it.
    pub fn frontmatter(&self) -> &Map<String, Value> {
        &self.frontmatter
    }
    /// The `allowed-tools` the skill asks for. A request for permissions, never a
    /// grant: honour it only when the user approved that grant for this skill.
    pub fn allowed_tools(&self) -> Option<&str> {
        self.frontmatter
            .get("allowed-tools")
            .and_then(Value::as_str)
    }
    /// Its files.
    pub fn resources(&self) -> &SkillResources {
        &self.resources
    }
    /// True when its content is generated (`"dynamic"`): not content-bound.
    pub fn is_dynamic(&self) -> bool {
        matches!(self.resources, SkillResources::Dynamic)
    }
    /// The manifest entry for `uri`, when listed.
    pub fn file(&self, uri: &str) -> Option<&SkillFile> {
        match &self.resources {
            SkillResources::Manifest(files) => files.iter().find(|f| f.uri == uri),
            SkillResources::Dynamic => None,
        }
    }
    /// The skill's root directory: its `SKILL.md` URI without `/SKILL.md`.
    pub fn root(&self) -> &str {
        root_of(&self.uri).unwrap_or(&self.uri)
    }

    /// The URI a reference in the skill names: a path relative to the skill's root
    /// (`references/FORMS.md`, `./scripts/x.py`) or an absolute URI within the skill.
    /// `None` for anything that leaves the skill's directory (`..`, another skill,
    /// another scheme).
    pub fn resolve(&self, reference: &str) -> Option<String> {
        let root = self.root();
        if reference.contains("://") {
            return (reference == self.uri || within(root, reference)).then(|| reference.into());
        }
        let mut parts = Vec::new();
        for seg in reference.split(['/', '\\']) {
            match seg {
                "" | "." => {}
                s if !plain_segment(s) => return None,
                s => parts.push(s),
            }
        }
        if parts.is_empty() || reference.starts_with(['/', '\\']) {
            return None;
        }
        Some(format!("{root}/{}", parts.join("/")))
    }

    /// Which per-skill limit (512 files, 16 MiB) the entry exceeds, if any — from the
    /// entry alone, before anything is fetched. A skill that exceeds one is declined
    /// ([`LoadOutcome::Declined`](super::LoadOutcome::Declined)).
    pub fn exceeded_limit(&self) -> Option<String> {
        let SkillResources::Manifest(files) = &self.resources else {
            return None;
        };
        if files.len() > MAX_SKILL_FILES {
            return Some(format!(
                "it has {} files, more than the {MAX_SKILL_FILES} a host must accept",
                files.len()
            ));
        }
        let total = files.iter().fold(0u64, |sum, f| sum.saturating_add(f.size));
        if total > MAX_SKILL_BYTES {
            return Some(format!(
                "its files total {total} bytes, more than the {MAX_SKILL_BYTES} (16 MiB) a host must accept"
            ));
        }
        None
    }

    /// What an approval of this skill binds to: a digest of its URI, its frontmatter
    /// (what the person saw, `allowed-tools` included; checked against `SKILL.md` on
    /// load) and its files' `{uri, digest}` set. A changed set or frontmatter gives
    /// another fingerprint, which revokes the approval.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::default();
        // Every field length-prefixed: two different skills never encode alike.
        let mut field = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_be_bytes());
            h.update(bytes);
        };
        field(b"mcp skill fingerprint v1");
        field(self.uri.as_bytes());
        field(canonical(&Value::Object(self.frontmatter.clone())).as_bytes());
        match &self.resources {
            SkillResources::Manifest(files) => {
                let mut pairs: Vec<(&str, &str)> = files
                    .iter()
                    .map(|f| (f.uri.as_str(), f.digest.as_str()))
                    .collect();
                pairs.sort_unstable();
                field(&(pairs.len() as u64).to_be_bytes());
                for (uri, digest) in pairs {
                    field(uri.as_bytes());
                    field(digest.as_bytes());
                }
            }
            SkillResources::Dynamic => field(b"dynamic"),
        }
        format!("sha256:{}", hex(&h.finalize()))
    }
}

impl Serialize for Skill {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Skill {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Skill::from_value(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// JSON with object keys sorted at every level (a stable text to hash).
fn canonical(v: &Value) -> String {
    crate::digest::canonical_json(v)
}

/// A URI without whitespace or control characters (nothing that could forge a line in
/// a log, a prompt or a fingerprint).
fn plain_uri(uri: &str) -> bool {
    !uri.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn root_of(uri: &str) -> Option<&str> {
    uri.strip_suffix("/SKILL.md").filter(|r| {
        let path = r.split_once("://").map_or(*r, |(_, p)| p);
        !path.is_empty()
    })
}

/// `uri` is below the directory `root` (not `root` itself, no `..` segments in any
/// spelling).
fn within(root: &str, uri: &str) -> bool {
    uri.strip_prefix(root)
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .split(['/', '\\'])
                    .all(|s| !s.is_empty() && s != "." && plain_segment(s))
        })
}

/// A path segment that names a file or folder and nothing else, however a server
/// decodes it: percent-decoded until it no longer changes (`%252e` → `%2e` → `.`), it
/// is not `.` or `..`, and holds no separator (`/`, `\`), NUL or control character.
/// A segment that keeps changing, or does not decode to UTF-8, is not plain.
fn plain_segment(seg: &str) -> bool {
    let mut s = seg.to_owned();
    for _ in 0..4 {
        let Some(decoded) = percent_decoded(&s) else {
            return false;
        };
        if decoded == s {
            return s != "."
                && s != ".."
                && !s.contains(['/', '\\'])
                && !s.chars().any(char::is_control);
        }
        s = decoded;
    }
    false
}

/// `s` with each `%XX` replaced by its byte; `None` when the bytes are not UTF-8. A `%`
/// not followed by two hex digits stays as it is.
fn percent_decoded(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}
