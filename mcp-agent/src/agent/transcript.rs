//! A run's transcript as kept: appended message by message (a save writes only the
//! messages since the last, never the conversation again), under a running digest
//! that the state — and so its MAC — carries; and the large values of the transcript
//! and of the turn's results (an image, a long tool result) kept once each, referred
//! to by their SHA-256.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};
use crate::model::Message;
use crate::store::{Blob, RunRecord, Transcript};

/// A value at least this long (bytes) is kept once, apart, and referred to.
pub(super) const BLOB_MIN: usize = 4096;

/// What the state says of its transcript (under the state's MAC): the log entries
/// `from..from + len`, and the running digest of those entries.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Mark {
    #[serde(default)]
    pub(super) from: u64,
    #[serde(default)]
    pub(super) len: u64,
    /// `sha256:` hex of the chain: each entry's canonical JSON hashed with the
    /// digest before it (empty for an empty transcript).
    #[serde(default)]
    pub(super) digest: String,
}

/// What this process knows the store holds of a run's transcript for sure (not
/// kept): as of its last flushed save. A deferred save's entries and blobs are sent
/// again by the next save — a database that lost the deferred commit (PostgreSQL
/// restarted within its WAL flush) then still gets all of them, never a gap.
#[derive(Clone, Debug, Default)]
pub(super) struct Kept {
    /// The mark those entries were saved with.
    pub(super) mark: Mark,
    /// How many of the run's messages (the first ones) the store holds, as the
    /// entries `mark.from..`.
    pub(super) messages: usize,
    /// The blobs the store holds for the run.
    pub(super) blobs: HashSet<String>,
    /// The messages were rewritten (a compaction): the next save starts a new segment.
    pub(super) rewritten: bool,
}

/// What one save writes of the transcript, and the mark the state is saved with.
pub(super) struct Appended {
    pub(super) mark: Mark,
    pub(super) transcript: Transcript,
    pub(super) blobs: Vec<Blob>,
    /// How many messages the store holds once the save is kept.
    pub(super) messages: usize,
    /// The blobs the store holds once the save is kept: for a new segment, only
    /// this save's (it carries every blob the run refers to).
    pub(super) held: HashSet<String>,
}

/// The next link of the chain: `previous` and one entry.
fn chain(previous: &str, entry: &Value) -> String {
    let mut h = Sha256::new();
    h.update(b"mcp-agent transcript v1\0");
    h.update(previous.as_bytes());
    h.update(b"\0");
    h.update(mcp_runtime::digest::canonical_json(entry).as_bytes());
    format!("sha256:{}", mcp_runtime::digest::hex(&h.finalize()))
}

/// The digest a blob is referred to by.
fn blob_digest(data: &str) -> String {
    format!(
        "sha256:{}",
        mcp_runtime::digest::hex(&Sha256::digest(data.as_bytes()))
    )
}

/// The field of a block (as JSON) that may hold a large value.
fn large_field(block: &serde_json::Map<String, Value>) -> Option<&'static str> {
    match block.get("type").and_then(Value::as_str)? {
        "tool_result" => Some("content"),
        "image" | "audio" | "file" => Some("data"),
        _ => None,
    }
}

/// Moves the large values of `blocks` (JSON blocks, their results' parts included)
/// out, each replaced by `{"blob": digest}` (a string field never holds an object, so
/// a reference is never taken for a value); those the store does not hold yet go to
/// `out`.
pub(super) fn extern_blocks(
    blocks: &mut [Value],
    held: &HashSet<String>,
    out: &mut Vec<Blob>,
    fresh: &mut HashSet<String>,
) {
    for block in blocks {
        let Value::Object(m) = block else { continue };
        if let Some(field) = large_field(m) {
            if let Some(Value::String(text)) = m.get_mut(field) {
                if text.len() >= BLOB_MIN {
                    let data = std::mem::take(text);
                    let digest = blob_digest(&data);
                    if !held.contains(&digest) && fresh.insert(digest.clone()) {
                        out.push(Blob::new(digest.clone(), data));
                    }
                    m.insert(field.into(), serde_json::json!({ "blob": digest }));
                }
            }
        }
        if let Some(Value::Array(parts)) = m.get_mut("parts") {
            extern_blocks(parts, held, out, fresh);
        }
    }
}

/// Puts the large values back into `blocks` (see [`extern_blocks`]): each from
/// `blobs`, checked against its digest (once).
pub(super) fn intern_blocks(
    run: &str,
    blocks: &mut [Value],
    blobs: &HashMap<&str, &str>,
    checked: &mut HashSet<String>,
) -> Result<()> {
    for block in blocks {
        let Value::Object(m) = block else { continue };
        if let Some(field) = large_field(m) {
            let digest = m
                .get(field)
                .and_then(|v| v.get("blob"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let Some(digest) = digest {
                let data = blobs.get(digest.as_str()).ok_or_else(|| {
                    Error::store(format!(
                        "run {run}: a value its transcript refers to ({digest}) is not in the store"
                    ))
                })?;
                if !checked.contains(&digest) {
                    if blob_digest(data) != digest {
                        return Err(Error::store(format!(
                            "run {run}: a value kept for it ({digest}) is not the one referred to (changed outside the agent); the run is not used"
                        )));
                    }
                    checked.insert(digest.clone());
                }
                m.insert(field.into(), Value::String((*data).to_owned()));
            }
        }
        if let Some(Value::Array(parts)) = m.get_mut("parts") {
            intern_blocks(run, parts, blobs, checked)?;
        }
    }
    Ok(())
}

/// What a save of `messages` writes, given what the store holds for sure (`kept`):
/// the messages not kept yet, appended (or, after a rewrite, all of them in a new
/// segment after the old one, with every large value they refer to), their large
/// values apart. `results` (the state's results, as JSON) refer to theirs too.
pub(super) fn append(kept: &Kept, messages: &[Message], results: &mut [Value]) -> Result<Appended> {
    let rewrite = kept.rewritten || messages.len() < kept.messages;
    let none = HashSet::new();
    let (mut mark, start, held) = if rewrite {
        let from = kept.mark.from + kept.mark.len;
        let mark = Mark {
            from,
            len: 0,
            digest: String::new(),
        };
        (mark, 0, &none)
    } else {
        (kept.mark.clone(), kept.messages, &kept.blobs)
    };
    let mut entries = Vec::with_capacity(messages.len() - start);
    let (mut blobs, mut fresh) = (Vec::new(), HashSet::new());
    for m in &messages[start..] {
        let mut v = serde_json::to_value(m)
            .map_err(|e| Error::store(format!("cannot encode the transcript: {e}")))?;
        if let Some(Value::Array(blocks)) = v.get_mut("content") {
            extern_blocks(blocks, held, &mut blobs, &mut fresh);
        }
        mark.digest = chain(&mark.digest, &v);
        entries.push(v);
    }
    extern_blocks(results, held, &mut blobs, &mut fresh);
    mark.len = messages.len() as u64;
    let to = mark.from + mark.len;
    let mut held = held.clone();
    if rewrite {
        held.clear();
    }
    held.extend(fresh);
    Ok(Appended {
        transcript: Transcript::new(mark.from, to, entries),
        mark,
        blobs,
        messages: messages.len(),
        held,
    })
}

/// The messages a stored run's transcript holds, checked: the bounds are those its
/// state was saved with, the entries chain to the digest under its MAC, every large
/// value is the one referred to. With what the store holds of it.
pub(super) fn read(
    record: &RunRecord,
    mark: &Mark,
    blobs: &HashMap<&str, &str>,
    checked: &mut HashSet<String>,
) -> Result<(Vec<Message>, Kept)> {
    let run = record.id.as_str();
    let t = &record.transcript;
    if t.from != mark.from || t.to != mark.from + mark.len || t.entries.len() as u64 != mark.len {
        return Err(Error::store(format!(
            "run {run}: the store holds its transcript as entries {}..{} ({} read), and its state was saved with {}..{}; it is not used",
            t.from,
            t.to,
            t.entries.len(),
            mark.from,
            mark.from + mark.len
        )));
    }
    let mut digest = String::new();
    let mut messages = Vec::with_capacity(t.entries.len());
    for entry in &t.entries {
        digest = chain(&digest, entry);
        let mut entry = entry.clone();
        if let Some(Value::Array(blocks)) = entry.get_mut("content") {
            intern_blocks(run, blocks, blobs, checked)?;
        }
        messages.push(
            serde_json::from_value(entry).map_err(|e| {
                Error::store(format!("run {run}: its transcript cannot be read: {e}"))
            })?,
        );
    }
    if digest != mark.digest {
        return Err(Error::store(format!(
            "run {run}: its transcript is not the one its state was saved with (changed outside the agent, or put back from another copy); it is not used"
        )));
    }
    let kept = Kept {
        mark: mark.clone(),
        messages: messages.len(),
        blobs: record.blobs.iter().map(|b| b.digest.clone()).collect(),
        rewritten: false,
    };
    Ok((messages, kept))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Block, Role};

    fn big(n: usize) -> String {
        "x".repeat(n)
    }

    #[test]
    fn a_save_appends_only_what_is_new_and_keeps_a_large_value_once() {
        let mut messages = vec![Message::text(Role::User, "hi")];
        let mut kept = Kept::default();
        let first = append(&kept, &messages, &mut []).unwrap();
        assert_eq!(first.transcript.entries.len(), 1);
        assert_eq!((first.transcript.from, first.transcript.to), (0, 1));
        kept.messages = first.messages;
        kept.mark = first.mark.clone();
        messages.push(Message {
            role: Role::Tool,
            content: vec![Block::tool_result("c1", big(BLOB_MIN), false)],
        });
        let second = append(&kept, &messages, &mut []).unwrap();
        assert_eq!(second.transcript.entries.len(), 1);
        assert_eq!(second.transcript.first_entry(), 1);
        assert_eq!(second.blobs.len(), 1);
        let entry = second.transcript.entries[0].to_string();
        assert!(entry.contains("\"blob\":\"sha256:") && entry.len() < 200);
        // Held already: referred to, not written again.
        kept.messages = second.messages;
        kept.mark = second.mark.clone();
        kept.blobs = second.held.clone();
        messages.push(Message {
            role: Role::Tool,
            content: vec![Block::tool_result("c2", big(BLOB_MIN), false)],
        });
        let third = append(&kept, &messages, &mut []).unwrap();
        assert!(third.blobs.is_empty());
        // Read back: the same messages.
        let all: Vec<Value> = first
            .transcript
            .entries
            .iter()
            .chain(&second.transcript.entries)
            .chain(&third.transcript.entries)
            .cloned()
            .collect();
        let mut record = RunRecord {
            id: "r".into(),
            status: crate::store::RunStatus::Running,
            suspension: None,
            state: Value::Null,
            lease: None,
            transcript: Transcript::new(0, 3, all),
            blobs: second.blobs.clone(),
            events: Vec::new(),
            durability: crate::store::Durability::Flushed,
            ledger: Vec::new(),
            first: false,
        };
        let map: HashMap<&str, &str> = record
            .blobs
            .iter()
            .map(|b| (b.digest.as_str(), b.data.as_str()))
            .collect();
        let (back, _) = read(&record, &third.mark, &map, &mut HashSet::new()).unwrap();
        assert_eq!(back, messages);
        // An entry changed in the store is found.
        record.transcript.entries[0] =
            serde_json::to_value(Message::text(Role::User, "ho")).unwrap();
        let e = read(&record, &third.mark, &map, &mut HashSet::new()).unwrap_err();
        assert!(
            e.to_string()
                .contains("not the one its state was saved with"),
            "{e}"
        );
        // A blob changed in the store is found.
        record.transcript.entries[0] = first.transcript.entries[0].clone();
        let bad: HashMap<&str, &str> = map.keys().map(|k| (*k, "other")).collect();
        let e = read(&record, &third.mark, &bad, &mut HashSet::new()).unwrap_err();
        assert!(e.to_string().contains("is not the one referred to"), "{e}");
    }

    #[test]
    fn a_rewrite_starts_a_new_segment_after_the_old_one() {
        let big = Message {
            role: Role::Tool,
            content: vec![Block::tool_result("c1", big(BLOB_MIN), false)],
        };
        let messages = vec![Message::text(Role::User, "a"), big.clone()];
        let first = append(&Kept::default(), &messages, &mut []).unwrap();
        assert_eq!(first.blobs.len(), 1);
        let kept = Kept {
            mark: first.mark.clone(),
            messages: 2,
            blobs: first.held.clone(),
            rewritten: true,
        };
        // The new segment carries the blob it still refers to (the store forgets the
        // others), though the store held it.
        let summary = vec![Message::text(Role::User, "summary"), big];
        let next = append(&kept, &summary, &mut []).unwrap();
        assert_eq!((next.transcript.from, next.transcript.to), (2, 4));
        assert!(next.transcript.starts_segment());
        assert_eq!(next.transcript.entries.len(), 2);
        assert_eq!(next.blobs.len(), 1);
        assert_eq!(next.held.len(), 1);
    }
}
