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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::{model::ReadResourceResult, Error, Result};

/// The extension's identifier.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";
/// The most files a skill may list that every host must accept (`SKILL.md` included).
pub const MAX_SKILL_FILES: usize = 512;
/// The largest total size of a skill's files every host must accept: 16 MiB.
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;

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
    /// ([`LoadOutcome::Declined`]).
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
        let mut h = Sha256::new();
        // Every field length-prefixed: two different skills never encode alike.
        let mut field = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_be_bytes());
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

/// The verified content of one file of a loaded skill.
#[derive(Clone, Debug)]
pub struct SkillContent {
    /// The file's URI.
    pub uri: String,
    /// Its MIME type, when the server gave one.
    pub mime_type: Option<String>,
    bytes: Arc<[u8]>,
    is_text: bool,
}

impl SkillContent {
    /// The bytes that were verified.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// The content as text, when the server sent it as text (or a blob that is UTF-8).
    pub fn text(&self) -> Option<&str> {
        let t = std::str::from_utf8(&self.bytes).ok()?;
        (self.is_text || !t.contains('\0')).then_some(t)
    }
}

/// A skill that was loaded: its `SKILL.md` verified against the entry held since,
/// through which the skill's other files are read (from its own server, each checked
/// against the same entry). Cheap to clone; clones share the acting window.
///
/// After a failed check the skill is revoked: every later read fails without
/// touching the server, until the skill is loaded again (after re-approval).
#[derive(Clone)]
pub struct LoadedSkill {
    pub(crate) client: crate::Client,
    pub(crate) entry: Arc<Skill>,
    pub(crate) text: Arc<str>,
    pub(crate) body_at: usize,
    pub(crate) revoked: Arc<AtomicBool>,
    /// Bytes read of a dynamic skill (which has no manifest to count), held to
    /// [`MAX_SKILL_BYTES`].
    pub(crate) retrieved: Arc<AtomicU64>,
}

impl std::fmt::Debug for LoadedSkill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedSkill")
            .field("server", &self.client.name())
            .field("uri", &self.entry.uri)
            .field("revoked", &self.is_revoked())
            .finish_non_exhaustive()
    }
}

impl LoadedSkill {
    /// The entry the skill was loaded from, held while acting on it.
    pub fn skill(&self) -> &Skill {
        &self.entry
    }
    /// The name of the server it came from (the client's host-assigned name).
    pub fn server(&self) -> &str {
        self.client.name()
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
        match &self.entry.resources {
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
                crate::text::clip(&self.entry.uri, 200)
            )));
        };
        let outcome = self.client.read_skill_file(&self.entry, &uri).await?;
        match &outcome {
            LoadOutcome::Changed { .. } => self.revoked.store(true, Ordering::Release),
            LoadOutcome::Done(c) if self.entry.is_dynamic() => {
                let len = c.bytes.len() as u64;
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

/// Why a read failed its check (host-side: not a protocol error).
pub(crate) struct Mismatch(pub(crate) String);

/// The bytes `read` returned for `uri`: the UTF-8 of text, the decoded bytes of a blob.
pub(crate) fn extract(
    uri: &str,
    read: &ReadResourceResult,
) -> std::result::Result<SkillContent, Mismatch> {
    let shown = crate::text::clip(uri, 200);
    let content = match read.contents.as_slice() {
        [one] => one,
        many => many
            .iter()
            .find(|c| c.uri == uri)
            .ok_or_else(|| Mismatch(format!("the server sent no content for {shown}")))?,
    };
    let (bytes, is_text): (Arc<[u8]>, bool) = match (&content.text, &content.blob) {
        (Some(t), _) => (Arc::from(t.as_bytes()), true),
        (None, Some(_)) => (
            Arc::from(
                content
                    .blob_bytes()
                    .ok_or_else(|| Mismatch(format!("{shown}: the blob is not valid base64")))?,
            ),
            false,
        ),
        (None, None) => return Err(Mismatch(format!("{shown}: neither text nor blob"))),
    };
    Ok(SkillContent {
        uri: uri.to_owned(),
        mime_type: content.mime_type.clone(),
        bytes,
        is_text,
    })
}

/// Checks a file's content against the held `entry`, in order: listed → size →
/// digest → (for `SKILL.md`) frontmatter.
pub(crate) fn check(entry: &Skill, content: &SkillContent) -> std::result::Result<(), Mismatch> {
    let uri = content.uri.as_str();
    let shown = crate::text::clip(uri, 200);
    if !entry.is_dynamic() {
        let file = entry
            .file(uri)
            .ok_or_else(|| Mismatch(format!("{shown} is not listed in the skill's entry")))?;
        if content.bytes.len() as u64 != file.size {
            return Err(Mismatch(format!(
                "{shown} is {} bytes, the entry says {}",
                content.bytes.len(),
                file.size
            )));
        }
        let digest = format!("sha256:{}", hex(&Sha256::digest(&content.bytes)));
        if digest != file.digest {
            return Err(Mismatch(format!(
                "the digest of {shown} is not the one in the entry"
            )));
        }
    }
    if uri == entry.uri {
        let text = std::str::from_utf8(content.bytes())
            .map_err(|_| Mismatch("SKILL.md is not UTF-8 text".into()))?;
        let (yaml, _) = split_frontmatter(text)
            .ok_or_else(|| Mismatch("SKILL.md does not begin with YAML frontmatter".into()))?;
        let parsed = parse_frontmatter(yaml).map_err(Mismatch)?;
        if let Some(field) = first_difference(&parsed, &entry.frontmatter) {
            return Err(Mismatch(format!(
                "the frontmatter of SKILL.md differs from the entry's (`{}`)",
                crate::text::clip(&field, 100)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
fn verify(
    entry: &Skill,
    uri: &str,
    read: &ReadResourceResult,
) -> std::result::Result<SkillContent, Mismatch> {
    if !entry.is_dynamic() && entry.file(uri).is_none() {
        return Err(Mismatch(format!(
            "{uri} is not listed in the skill's entry"
        )));
    }
    let content = extract(uri, read)?;
    check(entry, &content)?;
    Ok(content)
}

/// `SKILL.md` split into its YAML frontmatter and the rest, from the byte offset the
/// instructions start at: `(yaml, body_at)`.
pub(crate) fn split_frontmatter(text: &str) -> Option<(&str, usize)> {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    let offset = text.len() - t.len();
    let first_end = t.find('\n')?;
    if t[..first_end].trim_end_matches('\r') != "---" {
        return None;
    }
    let mut at = first_end + 1;
    while at <= t.len() {
        let end = t[at..].find('\n').map_or(t.len(), |i| at + i);
        let line = t[at..end].trim_end_matches('\r');
        if line == "---" || line == "..." {
            let body = (end + 1).min(t.len());
            return Some((&t[first_end + 1..at], offset + body));
        }
        if end == t.len() {
            break;
        }
        at = end + 1;
    }
    None
}

/// What `crate::fuzzing` reaches: the frontmatter split off and parsed, as a read of
/// `SKILL.md` does.
pub(crate) fn fuzzing_frontmatter(
    text: &str,
) -> Option<std::result::Result<Map<String, Value>, String>> {
    split_frontmatter(text).map(|(yaml, _)| parse_frontmatter(yaml))
}

/// The frontmatter as JSON, YAML 1.2 core schema (`yes` is a string, as the reference
/// host reads it), with a budget against alias bombs.
fn parse_frontmatter(yaml: &str) -> std::result::Result<Map<String, Value>, String> {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = 100_000;
    budget.max_total_scalar_bytes = 1 << 20;
    options.budget = Some(budget);
    match serde_saphyr::from_str_with_options::<Value>(yaml, options) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("the frontmatter of SKILL.md is not a mapping".into()),
        Err(e) => Err(format!(
            "the frontmatter of SKILL.md is not valid YAML: {}",
            crate::text::clip(&e.to_string(), 300)
        )),
    }
}

/// The first field where two frontmatters differ (numbers compare by value: YAML's
/// `1.0` is JSON's `1`), or `None` when they are the same.
fn first_difference(a: &Map<String, Value>, b: &Map<String, Value>) -> Option<String> {
    for (k, va) in a {
        match b.get(k) {
            Some(vb) if same(va, vb) => {}
            _ => return Some(k.clone()),
        }
    }
    b.keys().find(|k| !a.contains_key(*k)).cloned()
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => first_difference(x, y).is_none(),
        _ => a == b,
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

fn hex(bytes: &[u8]) -> String {
    crate::digest::hex(bytes)
}

/// Verified files of one server's skills, served again while the held entry's digest
/// for the file is unchanged. Bounded (oldest out first).
#[derive(Default)]
pub(crate) struct FileCache {
    files: HashMap<String, (String, SkillContent)>,
    order: VecDeque<String>,
    bytes: usize,
}

/// What the cache of one client may hold.
const CACHE_BYTES: usize = 32 * 1024 * 1024;

impl FileCache {
    pub(crate) fn get(&self, uri: &str, digest: &str) -> Option<SkillContent> {
        self.files
            .get(uri)
            .filter(|(d, _)| d == digest)
            .map(|(_, c)| c.clone())
    }

    pub(crate) fn put(&mut self, digest: &str, content: &SkillContent) {
        let len = content.bytes.len();
        if len > CACHE_BYTES / 4 {
            return;
        }
        if let Some((_, old)) = self.files.remove(&content.uri) {
            self.bytes -= old.bytes.len();
            self.order.retain(|u| u != &content.uri);
        }
        while self.bytes + len > CACHE_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((_, old)) = self.files.remove(&oldest) {
                self.bytes -= old.bytes.len();
            }
        }
        self.bytes += len;
        self.order.push_back(content.uri.clone());
        self.files
            .insert(content.uri.clone(), (digest.to_owned(), content.clone()));
    }
}

#[cfg(test)]
mod tests;
