//! Small helpers of the agent's modules: ids and clocks.

use crate::error::{Error, Result};

#[cfg(test)]
thread_local! {
    /// Makes this thread's random draws fail (the OS has no entropy source).
    pub(super) static RANDOM_FAILS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A fresh random id (96 bits, hex). A failed draw is an error, never a weak id.
pub(super) fn random_id() -> Result<String> {
    #[cfg(test)]
    if RANDOM_FAILS.with(std::cell::Cell::get) {
        return Err(Error::config(
            "the system's random number generator failed (test); no id can be made",
        ));
    }
    let mut b = [0u8; 12];
    getrandom::getrandom(&mut b).map_err(|e| {
        Error::config(format!(
            "the system's random number generator failed ({e}); no id can be made"
        ))
    })?;
    Ok(mcp_runtime::digest::hex(&b))
}

/// Milliseconds since the epoch.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis().min(u64::MAX as u128) as u64)
        .unwrap_or(0)
}

pub(super) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
