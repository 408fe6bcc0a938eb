//! The two small things every async module needs, at the bottom of the crate: a boxed
//! future and a lock that outlives a panic.

/// A boxed, sendable future: what transport and handler methods return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Locks `m`, going on past a panic of another holder: the state a mutex guards in
/// these crates is kept consistent between statements, so a poisoned lock is not a
/// reason to fail every later caller.
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
