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
//!
//! It reads the snapshots the `#[mcp]` macro reads: the same lookup
//! ([`snapshot::Project`]), which stays inside the project (up to the nearest VCS or
//! workspace root) and skips a `.mcp/` folder another user owns or could write to,
//! with a Cargo warning saying what to fix.
//!
//! What it prints is Cargo's to read, one directive a line (`cargo::` syntax; Cargo
//! splits at line breaks and reads a value to the end of its line, so `cargo:` text
//! inside a path is only part of the value). A path Cargo would read differently from
//! the file system — one with a line break (which would start a directive of its own)
//! or one that is not UTF-8 — is not watched, and a warning says so.

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
/// to watch, the stamp, and a warning for each folder skipped or not watched. Every
/// entry is one line that starts with `cargo::`.
pub fn directives(manifest: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let found = snapshot::Project::of(manifest).snapshot_dir();
    for skipped in &found.skipped {
        out.push(warning(&skipped.to_string()));
    }
    // The crate's own folder always (where a first snapshot would appear); the nearest
    // usable one above too, when that is another. A folder that is missing makes Cargo
    // run the script every build, which is what notices it appearing.
    let own = manifest.join(snapshot::DIR);
    watch(&mut out, &own);
    if let Some(dir) = &found.path {
        if *dir != own {
            watch(&mut out, dir);
        }
    }
    let stamp = match &found.path {
        Some(dir) => format!("{:016x}", snapshot::fnv1a(snapshot::index(dir).as_bytes())),
        None => "none".to_owned(),
    };
    out.push(format!("cargo::rustc-env={STAMP}={stamp}"));
    out
}

/// `cargo::rerun-if-changed=PATH`, when Cargo reads `PATH` back as it is: Cargo splits
/// its input at `\n` and reads the value up to the end of the line (the paths here end
/// in `.mcp`, so the whitespace it trims there is never theirs).
fn watch(out: &mut Vec<String>, path: &Path) {
    let problem = match path.to_str() {
        None => Some("it is not UTF-8"),
        Some(p) if p.contains(['\n', '\r']) => {
            Some("it has a line break, which would end the directive")
        }
        Some(p) => {
            out.push(format!("cargo::rerun-if-changed={p}"));
            None
        }
    };
    if let Some(problem) = problem {
        out.push(warning(&format!(
            "mcp-runtime-core: not watching the snapshot folder {:?}: {problem}; a snapshot that arrives there takes effect on the next change to the crate (or move the crate to a plainer path)",
            path
        )));
    }
}

/// A Cargo warning of one line: control characters (line breaks among them) escaped.
fn warning(text: &str) -> String {
    format!("cargo::warning={}", crate::text::escape_controls(text))
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
                .find(|l| l.starts_with("cargo::rustc-env="))
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

    /// Every entry is one directive as Cargo reads it: one line, starting `cargo::`.
    fn one_line_each(lines: &[String]) {
        for l in lines {
            assert!(!l.contains(['\n', '\r']), "{l:?}");
            assert!(l.starts_with("cargo::"), "{l:?}");
            let key = l["cargo::".len()..].split('=').next().unwrap();
            assert!(
                ["rerun-if-changed", "rustc-env", "warning"].contains(&key),
                "{l:?}"
            );
        }
    }

    #[test]
    fn a_path_cannot_inject_a_directive() {
        let base = std::env::temp_dir().join(format!("mcp-core-inject-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        // A line break followed by a directive of its own, in the crate's path.
        let evil =
            base.join("x\ncargo::rustc-env=MCP_SNAPSHOT_STAMP=forged\ncargo::rustc-link-arg=-evil");
        std::fs::create_dir_all(evil.join(".mcp")).unwrap();
        std::fs::write(evil.join(".mcp/a.json"), "{}").unwrap();
        let lines = directives(&evil);
        one_line_each(&lines);
        assert!(
            !lines
                .iter()
                .any(|l| l.starts_with("cargo::rerun-if-changed")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("cargo::warning=") && l.contains("line break")),
            "{lines:?}"
        );
        let stamps: Vec<_> = lines
            .iter()
            .filter(|l| l.starts_with("cargo::rustc-env="))
            .collect();
        assert_eq!(stamps.len(), 1, "{lines:?}");
        assert!(!stamps[0].contains("forged"), "{lines:?}");
        // The positive control: the same printed without the check is two directives.
        let naive = format!("cargo::rerun-if-changed={}", evil.join(".mcp").display());
        assert!(naive
            .lines()
            .any(|l| l.starts_with("cargo::rustc-link-arg")));

        // `cargo:` text inside one line is only part of the value: watched as it is.
        let odd = base.join("y cargo:rustc-env=X=1 cargo::warning=hi");
        std::fs::create_dir_all(&odd).unwrap();
        let lines = directives(&odd);
        one_line_each(&lines);
        assert_eq!(
            lines[0],
            format!("cargo::rerun-if-changed={}", odd.join(".mcp").display())
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[cfg(unix)]
    #[test]
    fn an_unsafe_snapshot_folder_is_skipped_with_a_warning() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("mcp-core-unsafe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".mcp")).unwrap();
        std::fs::write(dir.join(".mcp/a.json"), "{}").unwrap();
        std::fs::set_permissions(dir.join(".mcp"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let lines = directives(&dir);
        assert!(!lines.last().unwrap().ends_with("=none"), "{lines:?}");
        std::fs::set_permissions(dir.join(".mcp"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let lines = directives(&dir);
        one_line_each(&lines);
        assert!(lines.last().unwrap().ends_with("=none"), "{lines:?}");
        assert!(
            lines[0].starts_with("cargo::warning=") && lines[0].contains("chmod go-w"),
            "{lines:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
