//! The session's state, one owner per concern, each with a small API: its fields are
//! private to this module, so the rest of `client/` goes through the methods.
//!
//! - [`Settings`]: what the builder fixed (immutable);
//! - [`Session`]: the negotiated server, the connect in progress, request ids;
//! - [`ListCache`]: lists and reads kept under the server's `ttlMs`;
//! - [`ProgressRegistry`]: the requests waiting for progress, and the callbacks for all;
//! - [`Listeners`]: the change callbacks, and the open `subscriptions/listen` requests;
//! - [`TaskWatch`]: who waits for a task's status, and which statuses were reported;
//! - [`InputRouting`]: who answers a server's requests for input, sampling and roots.
//!
//! The tool index (`index.rs`) and the skill file cache (`crate::skills`) are owners of
//! the same kind.

use super::change::{Change, ChangeCallback, ListenSlot, LogCallback, ProgressCallback};
use super::details::{ProtocolMode, ServerDetails};
use super::task_status::TaskState;
use crate::input::{InputHandler, InputKinds, RootsHandler, SamplingHandler};
use crate::jsonrpc::Id;
use crate::model::{LogLevel, Progress};
use mcp_runtime_core::lock;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// What the builder fixed; never changes.
pub(super) struct Settings {
    /// The host's name for the server (logs, errors, `Mcp-Name`).
    pub(super) name: String,
    pub(super) client_info: Value,
    pub(super) capabilities: Value,
    pub(super) timeout: Duration,
    pub(super) max_timeout: Duration,
    /// How long each request of the connect may wait (`ClientBuilder::connect_timeout`).
    pub(super) connect_timeout: Duration,
    pub(super) log_level: Option<LogLevel>,
    pub(super) protocol: ProtocolMode,
    /// Told of every log message the server sends.
    pub(super) on_log: Vec<LogCallback>,
}

/// The negotiated session: the server's details once connected, the one connect in
/// progress, whether the server ignores `server/discover`, and request ids.
pub(super) struct Session {
    details: Mutex<Option<Arc<ServerDetails>>>,
    connecting: tokio::sync::Mutex<()>,
    /// The server once left `server/discover` unanswered: later connects (after the
    /// process restarts) ask `initialize` first.
    ignores_discover: AtomicBool,
    reset: Notify,
    next_id: AtomicI64,
}

impl Session {
    #[inline]
    pub(super) fn new() -> Session {
        Session {
            details: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            ignores_discover: AtomicBool::new(false),
            reset: Notify::new(),
            next_id: AtomicI64::new(1),
        }
    }
    /// The server's details, once connected.
    #[inline]
    pub(super) fn details(&self) -> Option<Arc<ServerDetails>> {
        lock(&self.details).clone()
    }
    #[inline]
    pub(super) fn set(&self, details: Arc<ServerDetails>) {
        *lock(&self.details) = Some(details);
    }
    /// Forgets the session (the server or the transport ended it).
    #[inline]
    pub(super) fn forget(&self) {
        *lock(&self.details) = None;
    }
    /// Wakes those waiting for a reset (once what the session cached is forgotten too).
    #[inline]
    pub(super) fn announce_reset(&self) {
        self.reset.notify_waiters();
    }
    /// Resolves at the next reset.
    #[inline]
    pub(super) fn was_reset(&self) -> tokio::sync::futures::Notified<'_> {
        self.reset.notified()
    }
    /// Held while connecting: one connect at a time.
    #[inline]
    pub(super) async fn connecting(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.connecting.lock().await
    }
    #[inline]
    pub(super) fn ignores_discover(&self) -> bool {
        self.ignores_discover.load(Ordering::Relaxed)
    }
    #[inline]
    pub(super) fn note_ignores_discover(&self) {
        self.ignores_discover.store(true, Ordering::Relaxed);
    }
    /// A fresh JSON-RPC request id.
    #[inline]
    pub(super) fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}

struct CacheEntry {
    expires: Instant,
    value: Arc<Vec<Value>>,
}

/// Lists (all pages) and reads, kept while the server's `ttlMs` allows and until the
/// server announces a change. A change announced while a request ran makes its
/// answer stale already: [`mark`](Self::mark) before, [`put`](Self::put) with the mark,
/// and [`changed_since`](Self::changed_since) says whether a change touched one key.
#[derive(Default)]
pub(super) struct ListCache {
    entries: Mutex<HashMap<String, CacheEntry>>,
    generation: AtomicU64,
    changes: Mutex<Changes>,
}

/// The latest changes, by prefix, each with the generation it made: at most
/// [`Changes::KEPT`] prefixes (a server announcing updates of ever new resources
/// grows nothing); what is dropped counts as a change of everything.
#[derive(Default)]
struct Changes {
    latest: Vec<(String, u64)>,
    /// Changes up to this generation were dropped.
    dropped: u64,
}

impl Changes {
    const KEPT: usize = 16;

    fn note(&mut self, prefix: &str, generation: u64) {
        if let Some(i) = self.latest.iter().position(|(p, _)| p == prefix) {
            self.latest.remove(i);
        } else if self.latest.len() == Self::KEPT {
            let (_, oldest) = self.latest.remove(0);
            self.dropped = self.dropped.max(oldest);
        }
        self.latest.push((prefix.to_owned(), generation));
    }

    fn since(&self, key: &str, mark: u64) -> bool {
        self.dropped > mark
            || self
                .latest
                .iter()
                .any(|(p, g)| *g > mark && key.starts_with(p.as_str()))
    }
}

impl ListCache {
    /// Where the cache stands now, for a request about to start.
    #[inline]
    pub(super) fn mark(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
    #[inline]
    pub(super) fn get(&self, key: &str) -> Option<Arc<Vec<Value>>> {
        lock(&self.entries)
            .get(key)
            .filter(|e| e.expires > Instant::now())
            .map(|e| e.value.clone())
    }
    /// Keeps `value` for `ttl_ms`, unless something changed since `mark`.
    #[inline]
    pub(super) fn put(&self, key: String, mark: u64, ttl_ms: u64, value: Arc<Vec<Value>>) {
        let mut entries = lock(&self.entries);
        if self.generation.load(Ordering::Acquire) != mark {
            return;
        }
        entries.insert(
            key,
            CacheEntry {
                expires: Instant::now() + Duration::from_millis(ttl_ms),
                value,
            },
        );
    }
    #[inline]
    pub(super) fn clear(&self) {
        self.forget("");
    }
    /// Forgets what starts with `prefix`.
    #[inline]
    pub(super) fn forget(&self, prefix: &str) {
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        lock(&self.changes).note(prefix, generation);
        lock(&self.entries).retain(|k, _| !k.starts_with(prefix));
    }
    /// Whether a change announced since `mark` touched `key`.
    #[inline]
    pub(super) fn changed_since(&self, key: &str, mark: u64) -> bool {
        lock(&self.changes).since(key, mark)
    }
}

/// A request waiting for its progress: its own callback, and a wake-up that resets
/// its timeout.
pub(super) struct CallProgress {
    callback: Option<ProgressCallback>,
    pub(super) notify: Notify,
}

/// The requests waiting for progress, by token, and the callbacks for every request's
/// progress.
pub(super) struct ProgressRegistry {
    every: Vec<ProgressCallback>,
    /// Keyed by our own progress tokens: a fast hash.
    calls: Mutex<foldhash::HashMap<Id, Arc<CallProgress>>>,
}

impl ProgressRegistry {
    #[inline]
    pub(super) fn new(every: Vec<ProgressCallback>) -> ProgressRegistry {
        ProgressRegistry {
            every,
            calls: Mutex::new(foldhash::HashMap::default()),
        }
    }
    /// Someone wants every request's progress.
    #[inline]
    pub(super) fn wants_every(&self) -> bool {
        !self.every.is_empty()
    }
    /// Registers a request's token (until [`forget`](Self::forget)).
    #[inline]
    pub(super) fn register(
        &self,
        token: Id,
        callback: Option<ProgressCallback>,
    ) -> Arc<CallProgress> {
        let p = Arc::new(CallProgress {
            callback,
            notify: Notify::new(),
        });
        lock(&self.calls).insert(token, p.clone());
        p
    }
    #[inline]
    pub(super) fn forget(&self, token: &Id) {
        lock(&self.calls).remove(token);
    }
    /// Reports progress for `token`; false when no request waits for it.
    #[inline]
    pub(super) fn report(&self, token: &Id, progress: &Progress) -> bool {
        let Some(call) = lock(&self.calls).get(token).cloned() else {
            return false;
        };
        call.notify.notify_one();
        if let Some(cb) = &call.callback {
            cb(progress);
        }
        for cb in &self.every {
            cb(progress);
        }
        true
    }
}

/// The change callbacks, and the open `subscriptions/listen` requests by id.
pub(super) struct Listeners {
    on_change: Vec<ChangeCallback>,
    open: Mutex<HashMap<Id, ListenSlot>>,
}

impl Listeners {
    #[inline]
    pub(super) fn new(on_change: Vec<ChangeCallback>) -> Listeners {
        Listeners {
            on_change,
            open: Mutex::new(HashMap::new()),
        }
    }
    /// Tells every change callback.
    #[inline]
    pub(super) fn changed(&self, change: &Change) {
        for cb in &self.on_change {
            cb(change);
        }
    }
    #[inline]
    pub(super) fn open(&self, id: Id, slot: ListenSlot) {
        lock(&self.open).insert(id, slot);
    }
    #[inline]
    pub(super) fn close(&self, id: &Id) {
        lock(&self.open).remove(id);
    }
    /// The server acknowledged listen request `id`; false when none is open.
    #[inline]
    pub(super) fn acknowledged(&self, id: &Id, notifications: Value) -> bool {
        match lock(&self.open).get_mut(id).and_then(|s| s.ack.take()) {
            Some(ack) => {
                let _ = ack.send(notifications);
                true
            }
            None => false,
        }
    }
    /// The server ended listen request `id`.
    #[inline]
    pub(super) fn ended(&self, id: &Id) {
        let ended = lock(&self.open).get_mut(id).and_then(|s| s.ended.take());
        if let Some(ended) = ended {
            let _ = ended.send(());
        }
    }
}

/// Who waits for a task's status (woken when one arrives), and the last status
/// reported to the change callbacks per task, so a status pushed and also polled is
/// reported once.
#[derive(Default)]
pub(super) struct TaskWatch {
    waiters: Mutex<HashMap<String, Arc<Notify>>>,
    reported: Mutex<HashMap<String, (TaskState, Option<String>)>>,
}

impl TaskWatch {
    /// What wakes those waiting for task `id`.
    #[inline]
    pub(super) fn waiter(&self, id: &str) -> Arc<Notify> {
        lock(&self.waiters)
            .entry(id.to_owned())
            .or_default()
            .clone()
    }
    /// Wakes those waiting for task `id`.
    #[inline]
    pub(super) fn wake(&self, id: &str) {
        if let Some(n) = lock(&self.waiters).get(id) {
            n.notify_waiters();
        }
    }
    /// Nobody waits for task `id` any more (the last waiter left).
    #[inline]
    pub(super) fn forget_waiter(&self, id: &str, waiter: &Arc<Notify>) {
        let mut waiters = lock(&self.waiters);
        // Two references: the map's and the caller's.
        if waiters
            .get(id)
            .is_some_and(|n| Arc::ptr_eq(n, waiter) && Arc::strong_count(n) <= 2)
        {
            waiters.remove(id);
        }
    }
    /// True when this state and message of task `id` were not reported yet — or
    /// always, with `again` (after a reconnect) — and notes them as reported.
    #[inline]
    pub(super) fn is_news(
        &self,
        id: &str,
        state: TaskState,
        message: Option<String>,
        again: bool,
    ) -> bool {
        let now = (state, message);
        let mut reported = lock(&self.reported);
        if !again && reported.get(id) == Some(&now) {
            return false;
        }
        // Bounded: a long-lived client sees many tasks.
        if reported.len() >= 4096 {
            reported.clear();
        }
        reported.insert(id.to_owned(), now);
        true
    }
}

/// Who answers a server's requests: input from a person (elicitation), sampling,
/// roots; and how many rounds of input one request may take.
pub(super) struct InputRouting {
    pub(super) input: Option<Arc<dyn InputHandler>>,
    pub(super) kinds: InputKinds,
    pub(super) sampling: Option<Arc<dyn SamplingHandler>>,
    pub(super) roots: Option<Arc<dyn RootsHandler>>,
    pub(super) max_rounds: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task's wake-up handle is forgotten when its last waiter leaves, not before:
    /// a long-lived client that waits on many tasks keeps none of them.
    #[test]
    fn a_task_waiter_is_forgotten_when_the_last_waiter_leaves() {
        let watch = TaskWatch::default();
        let a = watch.waiter("t1");
        let b = watch.waiter("t1");
        assert!(Arc::ptr_eq(&a, &b), "waiters of one task share a handle");
        watch.forget_waiter("t1", &a);
        drop(a);
        assert_eq!(lock(&watch.waiters).len(), 1, "one waiter is left");
        watch.forget_waiter("t1", &b);
        drop(b);
        assert!(lock(&watch.waiters).is_empty());
    }

    #[test]
    fn a_task_status_is_news_once_unless_reported_again() {
        let watch = TaskWatch::default();
        assert!(watch.is_news("t", TaskState::Working, None, false));
        assert!(!watch.is_news("t", TaskState::Working, None, false));
        assert!(watch.is_news("t", TaskState::Working, Some("half".into()), false));
        assert!(watch.is_news("t", TaskState::Working, Some("half".into()), true));
    }

    #[test]
    fn a_list_answered_after_a_change_is_not_kept() {
        let cache = ListCache::default();
        let mark = cache.mark();
        cache.forget("tools/");
        cache.put(
            "tools/list".into(),
            mark,
            60_000,
            Arc::new(vec![Value::Null]),
        );
        assert!(cache.get("tools/list").is_none());
        let mark = cache.mark();
        cache.put(
            "tools/list".into(),
            mark,
            60_000,
            Arc::new(vec![Value::Null]),
        );
        assert!(cache.get("tools/list").is_some());
    }

    /// A change is news to the keys under its prefix only; changes of more prefixes
    /// than are kept count as changes of everything.
    #[test]
    fn a_change_is_news_to_its_own_lists() {
        let cache = ListCache::default();
        let mark = cache.mark();
        assert!(!cache.changed_since("tools/list", mark));
        cache.forget("prompts/");
        assert!(!cache.changed_since("tools/list", mark));
        assert!(cache.changed_since("prompts/list", mark));
        cache.forget("tools/");
        assert!(cache.changed_since("tools/list", mark));
        let later = cache.mark();
        assert!(!cache.changed_since("tools/list", later));
        for i in 0..Changes::KEPT {
            cache.forget(&format!("resources/read file:///{i}"));
        }
        assert!(
            !cache.changed_since("tools/list", later),
            "nothing dropped yet"
        );
        cache.forget("resources/read file:///more");
        assert!(cache.changed_since("tools/list", later), "a dropped change");
        let last = cache.mark();
        cache.clear();
        assert!(cache.changed_since("tools/list", last));
    }
}
