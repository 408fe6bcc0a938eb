//! Small helpers of the OAuth modules, at the very bottom of `auth/`: encoding,
//! randomness (failing closed), time, hashing.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;

use crate::error::{Error, Result};

pub(super) fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `n` random bytes, base64url. A failed draw (no entropy source) is an error — never
/// a predictable value: `state`, PKCE verifiers, `jti`s and file names depend on it.
pub(super) fn random(n: usize) -> Result<String> {
    let mut buf = vec![0u8; n];
    fill_random(&mut buf)?;
    Ok(b64url(&buf))
}

/// Fills `buf` from the operating system's random source, or fails.
pub(super) fn fill_random(buf: &mut [u8]) -> Result<()> {
    #[cfg(test)]
    if super::tests::RANDOM_FAILS.with(std::cell::Cell::get) {
        return Err(Error::config(
            "the system's random number generator failed (test): nothing that needs a random value can be made",
        ));
    }
    getrandom::getrandom(buf).map_err(|e| {
        Error::config(format!(
            "the system's random number generator failed ({e}): nothing that needs a random value can be made"
        ))
    })
}

pub(super) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(super) fn sha256(data: &[u8]) -> Vec<u8> {
    use sha2::Digest as _;
    sha2::Sha256::digest(data).to_vec()
}
