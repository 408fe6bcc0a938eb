//! The JSON the API answers with: runs, what they wait on, transcripts, events.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::agent::{Event, Pending, PendingWait, Principal, RunDetail};
use crate::model::Message;
use crate::store::RunStatus;

/// A run as every answer shows it: id, status, owner, labels, when it started, and
/// what it waits on (with what changed, from `events`).
pub(super) fn run(d: &RunDetail, events: &[Event]) -> Value {
    let why = changes(events);
    json!({
        "run": d.run_id,
        "status": status_name(d.status),
        "tenant": d.tenant,
        "started_by": principal(&d.started_by),
        "labels": d.labels,
        "created": created(d.started_at),
        "pending": d.pending.iter().map(|p| pending(p, &why)).collect::<Vec<_>>(),
    })
}

/// A status as the API names it.
pub(super) fn status_name(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Running => "running",
        RunStatus::Suspended => "suspended",
        RunStatus::Finished => "finished",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
    }
}

/// A status from its API name.
pub(super) fn status_of(name: &str) -> Option<RunStatus> {
    Some(match name {
        "running" => RunStatus::Running,
        "suspended" => RunStatus::Suspended,
        "finished" => RunStatus::Finished,
        "failed" => RunStatus::Failed,
        "cancelled" => RunStatus::Cancelled,
        _ => return None,
    })
}

pub(super) fn principal(p: &Option<Principal>) -> Value {
    match p {
        Some(p) => json!({ "id": p.id, "name": p.display_name() }),
        None => Value::Null,
    }
}

/// Milliseconds since the epoch as seconds (`null` for 0, "not recorded").
fn seconds(ms: u64) -> Value {
    if ms == 0 {
        Value::Null
    } else {
        json!(ms / 1000)
    }
}

/// Why each tool waits again, from a run's events: the last voided approval or
/// changed pinned tool of it not decided since, with what the person was shown before
/// (`{"reason", "before": {"description", "input_schema"}}`).
pub(super) fn changes(events: &[Event]) -> BTreeMap<String, Value> {
    let mut shown: BTreeMap<&str, Value> = BTreeMap::new();
    let mut why = BTreeMap::new();
    for e in events {
        match e {
            Event::ApprovalRequested {
                tool,
                description,
                input_schema,
                ..
            } => {
                let before = json!({ "description": description, "input_schema": input_schema });
                shown.insert(tool, before);
            }
            Event::DecisionVoided { tool, reason } => {
                let before = shown.get(tool.as_str()).cloned().unwrap_or(Value::Null);
                why.insert(tool.clone(), json!({ "reason": reason, "before": before }));
            }
            Event::PinnedToolChanged { tool, reason, .. } => {
                why.insert(tool.clone(), json!({ "reason": reason, "before": null }));
            }
            Event::ApprovalDecided { tool, .. } => {
                why.remove(tool);
            }
            _ => {}
        }
    }
    why
}

/// One call a run waits on, as the inbox shows it.
pub(super) fn pending(p: &Pending, changes: &BTreeMap<String, Value>) -> Value {
    let mut out = json!({
        "decision": p.decision,
        "suspension": p.suspension,
        "server": p.server,
        "tool": p.tool,
        "arguments": p.arguments,
        // Why it waits again, when its tool changed under an approval.
        "reason": changes.get(&p.tool).map(|c| c["reason"].clone()),
        "changed": changes.get(&p.tool),
        "expires": p.expires_at.map(|ms| ms / 1000),
        // The sub-agent's run the call belongs to (decided on as this run's).
        "sub_run": p.sub_run,
    });
    match &p.waits {
        PendingWait::Approval {
            binding,
            description,
            input_schema,
        } => {
            out["waits"] = json!("approval");
            out["description"] = json!(description);
            out["input_schema"] = json!(input_schema);
            out["binding"] = serde_json::to_value(binding).unwrap_or(Value::Null);
        }
        PendingWait::Input { requests } => {
            out["waits"] = json!("input");
            let messages: Vec<&str> = requests.iter().map(|(_, r)| r.message.as_str()).collect();
            out["description"] = json!(messages.join("\n"));
        }
    }
    out
}

/// A run's transcript, with the bytes of images, audio and files left out (their
/// type and size shown instead).
pub(super) fn transcript(messages: &[Message]) -> Value {
    let mut v = serde_json::to_value(messages).unwrap_or(Value::Null);
    strip_data(&mut v);
    v
}

fn strip_data(v: &mut Value) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(strip_data),
        Value::Object(map) => {
            if let Some(Value::String(data)) = map.get("data") {
                let bytes = data.len() / 4 * 3;
                map.remove("data");
                map.insert("bytes".into(), json!(bytes));
            }
            map.values_mut().for_each(strip_data);
        }
        _ => {}
    }
}

/// An event with its number.
pub(super) fn event(seq: u64, event: &Event) -> Value {
    let mut out = Map::new();
    out.insert("seq".into(), json!(seq));
    out.insert(
        "event".into(),
        serde_json::to_value(event).unwrap_or(Value::Null),
    );
    Value::Object(out)
}

pub(super) fn created(started_at: u64) -> Value {
    seconds(started_at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Block, Role};

    fn requested(tool: &str, description: &str) -> Event {
        Event::ApprovalRequested {
            server: "fs".into(),
            tool: tool.into(),
            arguments: json!({}),
            binding: None,
            decision: "d".into(),
            description: Some(description.into()),
            input_schema: Some(json!({"type": "object"})),
        }
    }

    #[test]
    fn a_call_asked_again_shows_what_it_was_before() {
        let decided = Event::ApprovalDecided {
            tool: "write".into(),
            approved: true,
            by: "ann".into(),
            at: 0,
            binding: None,
            decision: "d".into(),
            kind: "approve".into(),
            principal: None,
        };
        let voided = Event::DecisionVoided {
            tool: "write".into(),
            reason: "the tool's definition changed".into(),
        };
        let events = vec![
            requested("write", "Writes a file."),
            decided.clone(),
            voided,
            requested("write", "Writes a file, and mails it out."),
        ];
        let got = changes(&events);
        assert_eq!(got["write"]["reason"], "the tool's definition changed");
        assert_eq!(got["write"]["before"]["description"], "Writes a file.");
        // Decided again: nothing left to show.
        let mut events = events;
        events.push(decided);
        assert!(changes(&events).is_empty());
    }

    #[test]
    fn a_transcript_leaves_the_bytes_of_images_out() {
        let m = Message {
            role: Role::Tool,
            content: vec![Block::Image {
                media_type: "image/png".into(),
                data: "QUJD".repeat(100),
            }],
        };
        let v = transcript(&[m]);
        assert_eq!(v[0]["content"][0]["bytes"], 300);
        assert!(v[0]["content"][0].get("data").is_none(), "{v}");
    }
}
