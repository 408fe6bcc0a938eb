//! How the agent retries a model call that failed for a while
//! ([`ModelError::is_transient`]): how many times, how long it waits (exponential
//! backoff with full jitter, or what the provider asked for), and the longest wait it
//! accepts from a provider.

use std::time::Duration;

use crate::model::ModelError;

/// How the agent retries a model call that failed with a rate limit, a server error, a
/// connection error or a timeout ([`ModelError::is_transient`]). On by default
/// ([`RetryPolicy::new`]: 3 retries, backoff from 500 ms doubling to at most 30 s,
/// full jitter, a provider's `Retry-After` honoured up to 60 s); set with
/// [`AgentBuilder::retry_policy`](crate::AgentBuilder::retry_policy), off with
/// [`RetryPolicy::none`].
///
/// A wait the provider asks for (`Retry-After`, `retry-after-ms`) is waited in full;
/// one longer than [`max_retry_after`](Self::max_retry_after) is not waited at all:
/// the call fails at once with an error that names the wait and the cap (a provider
/// cannot park a run for years). Every retry is an
/// [`Event::ModelRetried`](crate::Event::ModelRetried).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    max_retries: u32,
    base_delay: Duration,
    max_delay: Duration,
    max_retry_after: Duration,
    jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::new()
    }
}

/// What to do after a failed attempt.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Wait this long, then try again.
    Retry(Duration),
    /// Do not try again: the error stands.
    GiveUp,
    /// The provider asked for this wait, longer than the cap: the error stands, naming
    /// both.
    TooLong(Duration),
}

impl RetryPolicy {
    /// The default: 3 retries, backoff from 500 ms doubling to at most 30 s with full
    /// jitter, a provider's wait honoured up to 60 s.
    pub fn new() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            jitter: true,
        }
    }

    /// No retries: a failed model call fails the run at once (as
    /// [`Agent::retry`](crate::Agent::retry) then continues it).
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::new()
        }
    }

    /// At most `n` retries of one model call (so `n + 1` attempts).
    pub fn max_retries(mut self, n: u32) -> RetryPolicy {
        self.max_retries = n;
        self
    }

    /// The first backoff (doubled for each retry after it), when the provider asks
    /// for no wait.
    pub fn base_delay(mut self, d: Duration) -> RetryPolicy {
        self.base_delay = d;
        self
    }

    /// The longest backoff.
    pub fn max_delay(mut self, d: Duration) -> RetryPolicy {
        self.max_delay = d;
        self
    }

    /// The longest wait a provider may ask for (`Retry-After`); a longer one fails the
    /// call at once, naming it.
    pub fn max_retry_after(mut self, d: Duration) -> RetryPolicy {
        self.max_retry_after = d;
        self
    }

    /// Full jitter (each backoff drawn at random between zero and its ceiling; the
    /// default) or none (each backoff its ceiling). A provider's own wait is never
    /// jittered.
    pub fn jitter(mut self, on: bool) -> RetryPolicy {
        self.jitter = on;
        self
    }

    /// The most retries of one model call.
    pub fn retries(&self) -> u32 {
        self.max_retries
    }

    /// What to do after attempt `attempt` (1 for the first) failed with `e`.
    pub(super) fn next(&self, attempt: u32, e: &ModelError) -> Next {
        if !e.is_transient() || attempt > self.max_retries {
            return Next::GiveUp;
        }
        if let Some(wait) = e.retry_after() {
            return if wait > self.max_retry_after {
                Next::TooLong(wait)
            } else {
                Next::Retry(wait)
            };
        }
        let ceiling = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
            .min(self.max_delay);
        Next::Retry(if self.jitter {
            jittered(ceiling)
        } else {
            ceiling
        })
    }

    /// The error that stands when a provider asked for `wait`, longer than the cap.
    pub(super) fn too_long(&self, e: ModelError, wait: Duration) -> ModelError {
        let shown = if wait.as_secs() >= 1 {
            format!("{} s", wait.as_secs())
        } else {
            format!("{} ms", wait.as_millis())
        };
        e.final_because(&format!(
            "the provider asks to wait {shown} before trying again, longer than the retry policy's max_retry_after of {} s: not retried",
            self.max_retry_after.as_secs()
        ))
    }
}

/// A duration drawn at random between zero and `ceiling` (the ceiling itself when the
/// system has no randomness to give).
fn jittered(ceiling: Duration) -> Duration {
    let mut b = [0u8; 8];
    if getrandom::getrandom(&mut b).is_err() {
        return ceiling;
    }
    let fraction = (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64;
    ceiling.mul_f64(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_errors_are_retried_and_how_long_it_waits() {
        let p = RetryPolicy::new().jitter(false);
        let unavailable = ModelError::unavailable("HTTP 503");
        assert_eq!(
            p.next(1, &unavailable),
            Next::Retry(Duration::from_millis(500))
        );
        assert_eq!(p.next(2, &unavailable), Next::Retry(Duration::from_secs(1)));
        assert_eq!(p.next(3, &unavailable), Next::Retry(Duration::from_secs(2)));
        assert_eq!(p.next(4, &unavailable), Next::GiveUp);
        let many = RetryPolicy::new().jitter(false).max_retries(40);
        assert_eq!(
            many.next(40, &unavailable),
            Next::Retry(Duration::from_secs(30))
        );
        let asked = |s| ModelError::RateLimited {
            detail: "HTTP 429".into(),
            retry_after: Some(Duration::from_secs(s)),
        };
        assert_eq!(p.next(1, &asked(7)), Next::Retry(Duration::from_secs(7)));
        assert_eq!(
            p.next(1, &asked(999_999_999)),
            Next::TooLong(Duration::from_secs(999_999_999))
        );
        let e = p.too_long(asked(999_999_999), Duration::from_secs(999_999_999));
        assert!(!e.is_transient());
        assert!(e.to_string().contains("999999999 s"), "{e}");
        assert!(e.to_string().contains("max_retry_after of 60 s"), "{e}");
        for e in [
            ModelError::ContextTooLong { detail: "x".into() },
            ModelError::Unauthorized { detail: "x".into() },
            ModelError::Unsupported { detail: "x".into() },
            ModelError::Other { detail: "x".into() },
        ] {
            assert_eq!(p.next(1, &e), Next::GiveUp, "{e}");
        }
        assert_eq!(RetryPolicy::none().next(1, &unavailable), Next::GiveUp);
        for _ in 0..100 {
            let Next::Retry(d) = RetryPolicy::new().next(3, &unavailable) else {
                panic!("retried")
            };
            assert!(d <= Duration::from_secs(2));
        }
    }
}
