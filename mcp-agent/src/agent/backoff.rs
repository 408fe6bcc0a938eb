//! When a failed run is retried by a worker: which errors are transient (worth a
//! retry later) and how long to wait before each attempt.

use crate::error::Error;

use super::clock::now_ms;

/// The most retries workers make of one run after transient errors (a person's
/// [`Agent::retry`](crate::Agent::retry) starts the count again).
pub(super) const MAX_RETRIES: u32 = 5;

/// The wait before the first retry; each next one waits twice as long, at most
/// [`MAX_WAIT_MS`].
const FIRST_WAIT_MS: u64 = 2_000;

/// The longest wait before a retry.
const MAX_WAIT_MS: u64 = 5 * 60 * 1000;

/// Whether `e` may pass if the run is tried again later: the model provider limited
/// the rate or failed otherwise (a 5xx, a connection, a timeout), a server could not
/// be reached or did not answer in time, the store was down a moment. Refused
/// credentials, a transcript too long, something a wire cannot carry, a
/// configuration, a run held by another process or put back from a copy are
/// permanent: never retried.
pub(super) fn transient(e: &Error) -> bool {
    if let Some(m) = e.model_error() {
        // The one rule of what a model error is worth trying again (the loop's own
        // retries use it too).
        return m.is_transient();
    }
    if e.is_mcp() {
        let source = std::error::Error::source(e);
        return source
            .and_then(|s| s.downcast_ref::<mcp_runtime::Error>())
            .is_some_and(|m| m.is_transport() || m.is_timeout());
    }
    e.is_store() && !e.is_lease_lost() && !e.is_rolled_back() && !e.is_deleted()
}

/// When a worker retries a run that failed with `e` after `retries` retries
/// (milliseconds since the epoch); `None` when it does not (a permanent error, or
/// retries used up).
pub(super) fn retry_at(e: &Error, retries: u32) -> Option<u64> {
    if retries >= MAX_RETRIES || !transient(e) {
        return None;
    }
    let wait = FIRST_WAIT_MS
        .saturating_mul(1u64 << retries.min(20))
        .min(MAX_WAIT_MS);
    Some(now_ms().saturating_add(wait))
}
