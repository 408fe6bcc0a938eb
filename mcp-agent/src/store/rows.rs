//! How the SQL stores' rows read: a run, its lease columns, an event, an allowance, a
//! ledger entry — each checked, since a row is whatever the database holds.

use serde_json::Value;

use super::contract::{
    sql_int, Blob, Durability, Lease, LedgerEntry, RunRecord, RunStatus, Transcript,
};
use crate::error::{Error, Result};

/// How long a due run whose row does not read is left before a claim looks at it
/// again (milliseconds): one bad row never stops the claims of the others.
pub(super) const UNREADABLE_BACK_OFF_MS: i64 = 60_000;

/// A stored ledger entry's JSON.
pub(super) fn ledger_entry(text: &str) -> Result<LedgerEntry> {
    serde_json::from_str(text)
        .map_err(|e| Error::store(format!("a stored ledger entry cannot be read: {e}")))
}

/// A run as a row gives it: id, status, suspension, state, lease owner, lease end,
/// its transcript's first entry and one past its last.
pub(super) type Row = (
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// A stored transcript bound (a row made before transcripts were kept apart has none:
/// 0).
fn bound(n: Option<i64>) -> u64 {
    n.unwrap_or(0).max(0) as u64
}

pub(super) fn record(
    (id, status, suspension, state, owner, until, from, to): Row,
) -> Result<RunRecord> {
    Ok(RunRecord {
        id,
        status: RunStatus::parse(&status)
            .ok_or_else(|| Error::store(format!("unknown run status `{status}`")))?,
        suspension,
        state: serde_json::from_str(&state)
            .map_err(|e| Error::store(format!("a stored run cannot be read: {e}")))?,
        transcript: Transcript::new(bound(from), bound(to), Vec::new()),
        blobs: Vec::new(),
        events: Vec::new(),
        durability: Durability::Flushed,
        ledger: Vec::new(),
        first: false,
        lease: owner.map(|owner| Lease {
            owner,
            until: until.unwrap_or(0).max(0) as u64,
        }),
    })
}

/// The lease columns of a record: owner, end.
pub(super) fn lease_columns(lease: &Option<Lease>) -> (Option<String>, Option<i64>) {
    match lease {
        Some(l) => (Some(l.owner.clone()), Some(sql_int(l.until))),
        None => (None, None),
    }
}

/// A stored event's JSON.
pub(super) fn event_value(text: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| Error::store(format!("a stored event cannot be read: {e}")))
}

/// A stored event's number and JSON, as a row gives them (a number below 1 is not
/// one a store gives).
pub(super) fn numbered_event(seq: i64, text: &str) -> Result<(u64, Value)> {
    let seq = u64::try_from(seq)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| Error::store(format!("a stored event has the number {seq}")))?;
    Ok((seq, event_value(text)?))
}

/// A stored allowance's JSON.
pub(super) fn allowance_value(text: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| Error::store(format!("a stored allowance cannot be read: {e}")))
}

/// `run` with its transcript entries and blobs, as the store's rows give them (each
/// entry's JSON; each blob's digest and data).
pub(super) fn with_log<E: AsRef<str>>(
    mut run: RunRecord,
    entries: impl IntoIterator<Item = E>,
    blobs: impl IntoIterator<Item = (String, String)>,
) -> Result<RunRecord> {
    for e in entries {
        run.transcript.entries.push(
            serde_json::from_str(e.as_ref()).map_err(|e| {
                Error::store(format!("a stored transcript entry cannot be read: {e}"))
            })?,
        );
    }
    run.blobs = blobs.into_iter().map(|(d, v)| Blob::new(d, v)).collect();
    Ok(run)
}

/// The transcript entries of a save, as the stores keep them (JSON text), with the
/// number of the first.
pub(super) fn log_entries(t: &Transcript) -> (i64, Vec<String>) {
    (
        sql_int(t.first_entry()),
        t.entries.iter().map(Value::to_string).collect(),
    )
}
