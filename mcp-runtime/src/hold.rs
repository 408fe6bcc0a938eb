//! A request's hold on its timeouts: while some code deep inside a transport waits on
//! a person (an OAuth sign-in in a browser), the session must not time the request out.
//! Below the transports and auth, so both can use it without importing each other.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// While held, the session does not time out the request it belongs to (see
/// [`RequestContext::hold`](crate::transport::RequestContext::hold)).
#[derive(Clone, Debug, Default)]
pub struct Hold(Arc<AtomicUsize>);

impl Hold {
    /// Holds the request's timeouts until the guard is dropped.
    pub fn hold(&self) -> HoldGuard {
        self.0.fetch_add(1, Ordering::AcqRel);
        HoldGuard(self.0.clone())
    }

    /// True while a guard is alive.
    pub fn is_held(&self) -> bool {
        self.0.load(Ordering::Acquire) > 0
    }
}

/// Releases a [`Hold`] when dropped.
#[derive(Debug)]
pub struct HoldGuard(Arc<AtomicUsize>);

impl Drop for HoldGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

tokio::task_local! {
    /// The hold of the request a transport is working on, for code deep inside it.
    static CURRENT_HOLD: Hold;
}

/// Runs `f` with `hold` as the current request's hold.
#[cfg(feature = "http")]
pub(crate) async fn with_hold<F: std::future::Future>(hold: Hold, f: F) -> F::Output {
    CURRENT_HOLD.scope(hold, f).await
}

/// Holds the current request's timeouts (when there is a current request).
#[cfg(feature = "oauth")]
pub(crate) fn hold_request() -> Option<HoldGuard> {
    CURRENT_HOLD.try_with(Hold::hold).ok()
}
