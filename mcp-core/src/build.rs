//! Snapshots that take effect however they arrive.
//!
//! A crate that declares servers with `#[mcp]` reads their snapshots (`.mcp/<name>.json`)
//! when it compiles. Cargo rebuilds it when a snapshot it read changes, and `mcp
//! snapshot` makes sure a new one is noticed; but a snapshot that arrives otherwise — a
//! `git pull` bringing a colleague's first snapshot, a copy, a hand edit of a file the
//! crate never read — needs this one line in the crate's `build.rs`:
//!
//! ```toml
//! [build-dependencies]
//! mcp-runtime-core = "0.1"
//! ```
//!
//! ```text
//! // build.rs
//! fn main() {
//!     mcp_runtime_core::build::track_snapshots();
//! }
//! ```
//!
//! It tells Cargo to run the build script again when the snapshot folder changes (or
//! appears), and stamps the crate with a digest of the snapshots
//! (`MCP_SNAPSHOT_STAMP`): a different stamp rebuilds the crate, so its declarations are
//! checked against the snapshots as they are now.

use std::path::{Path, PathBuf};

use crate::snapshot;

/// The environment variable the crate is stamped with.
pub const STAMP: &str = "MCP_SNAPSHOT_STAMP";

/// For a `build.rs`: reruns the build script when the crate's snapshot folder changes or
/// appears, and stamps the crate with a digest of the snapshots (see the module docs).
pub fn track_snapshots() {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    for line in directives(&manifest) {
        println!("{line}");
    }
}

/// What [`track_snapshots`] prints for the crate at `manifest`: the folder (or folders)
/// to watch, and the stamp.
pub fn directives(manifest: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let found = snapshot::dir_above(manifest);
    // The crate's own folder always (where a first snapshot would appear); the nearest
    // one above too, when that is another. A folder that is missing makes Cargo run
    // the script every build, which is what notices it appearing.
    let own = manifest.join(snapshot::DIR);
    out.push(format!("cargo:rerun-if-changed={}", own.display()));
    if let Some(dir) = &found {
        if *dir != own {
            out.push(format!("cargo:rerun-if-changed={}", dir.display()));
        }
    }
    let stamp = match &found {
        Some(dir) => format!("{:016x}", snapshot::fnv1a(snapshot::index(dir).as_bytes())),
        None => "none".to_owned(),
    };
    out.push(format!("cargo:rustc-env={STAMP}={stamp}"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_follows_the_snapshots() {
        let dir = std::env::temp_dir().join(format!("mcp-core-stamp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let stamp = |d: &Path| {
            directives(d)
                .into_iter()
                .find(|l| l.starts_with("cargo:rustc-env="))
                .unwrap()
        };
        let none = stamp(&dir);
        assert!(none.ends_with("=none"), "{none}");
        assert!(directives(&dir)[0].ends_with(".mcp"));
        std::fs::create_dir_all(dir.join(".mcp")).unwrap();
        std::fs::write(dir.join(".mcp/a.json"), "{}").unwrap();
        let one = stamp(&dir);
        assert_ne!(one, none);
        std::fs::write(dir.join(".mcp/a.json"), "{\"x\":1}").unwrap();
        assert_ne!(stamp(&dir), one, "a changed snapshot changes the stamp");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
