//! Fresh random ids (of runs, suspensions, decisions, leases).

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
