//! The checks every file read of a skill is held to (listed → size → digest → for
//! `SKILL.md` its frontmatter, field by field), and the frontmatter's YAML parser.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::entry::Skill;
use crate::digest::hex;
use crate::digest::sha256::sha256;
use crate::model::ReadResourceResult;

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
        let digest = format!("sha256:{}", hex(&sha256(&content.bytes)));
        if digest != file.digest {
            return Err(Mismatch(format!(
                "the digest of {shown} is not the one in the entry"
            )));
        }
    }
    if uri == entry.uri() {
        let text = std::str::from_utf8(content.bytes())
            .map_err(|_| Mismatch("SKILL.md is not UTF-8 text".into()))?;
        let (yaml, _) = split_frontmatter(text)
            .ok_or_else(|| Mismatch("SKILL.md does not begin with YAML frontmatter".into()))?;
        let parsed = parse_frontmatter(yaml).map_err(Mismatch)?;
        if let Some(field) = first_difference(&parsed, entry.frontmatter()) {
            return Err(Mismatch(format!(
                "the frontmatter of SKILL.md differs from the entry's (`{}`)",
                crate::text::clip(&field, 100)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(super) fn verify(
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
pub(super) fn parse_frontmatter(yaml: &str) -> std::result::Result<Map<String, Value>, String> {
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
