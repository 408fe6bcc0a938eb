//! What a save appends beside a run's small state: its transcript (a log of entries,
//! of which the run is a range) and the large values it refers to by digest (blobs).

use serde_json::Value;

/// A run's transcript as a store keeps it: a log of JSON entries numbered from 0, of
/// which the run's transcript is the entries `from..to`. A save appends; a save that
/// starts a new log segment (`from` moved past the old one, after the agent compacted
/// the conversation: see [`starts_segment`](Transcript::starts_segment)) lets the
/// store forget the entries before `from`, and carries every blob the run still
/// refers to: the store forgets the run's other blobs.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Transcript {
    /// The number of the transcript's first entry.
    pub from: u64,
    /// One past the number of its last entry.
    pub to: u64,
    /// On a save: the entries numbered `to - entries.len()` up to `to` (what the save
    /// appends; an entry kept under one of those numbers is replaced). On a load:
    /// every entry `from..to`, in order.
    pub entries: Vec<Value>,
}

impl Transcript {
    /// A transcript `from..to` with these entries (see [`Transcript::entries`]).
    pub fn new(from: u64, to: u64, entries: Vec<Value>) -> Transcript {
        Transcript { from, to, entries }
    }

    /// The number of the first entry of `entries`.
    pub fn first_entry(&self) -> u64 {
        self.to.saturating_sub(self.entries.len() as u64)
    }

    /// True when the store forgets, with this save, the run's entries before `from`
    /// and its blobs this save does not carry: it writes a new segment whole, from
    /// `from` (past 0) on.
    pub fn starts_segment(&self) -> bool {
        self.from > 0 && !self.entries.is_empty() && self.first_entry() == self.from
    }
}

/// A large value a run refers to by its digest (`sha256:` and hex of its bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Blob {
    /// `sha256:` and the hex SHA-256 of `data`.
    pub digest: String,
    /// The value.
    pub data: String,
}

impl Blob {
    /// A blob (the agent checks the digest when it reads one).
    pub fn new(digest: String, data: String) -> Blob {
        Blob { digest, data }
    }
}
