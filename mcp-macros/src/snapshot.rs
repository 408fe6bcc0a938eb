//! Finds and reads the committed snapshot of a server (`.mcp/<name>.json`). This is the
//! only place the macro reads the environment or the file system; it never touches the
//! network. The format and the lookup are `mcp-runtime-core`'s, as the runtime's, the
//! `build.rs` helper's and the CLI's: the lookup stays inside the project (up to the
//! nearest VCS or workspace root, else the crate's own folder) and skips a `.mcp/`
//! folder another user owns or could write to.

use std::path::{Path, PathBuf};

/// The snapshot format (`mcp-runtime-core`), the runtime's own.
use mcp_runtime_core::snapshot as format;

pub use format::{did_you_mean, Skipped, Snapshot};

/// The file a declaration's build depends on when its server has no snapshot, so that
/// adding one rebuilds it: the nearest usable `.mcp/.index` in the project (which `mcp
/// snapshot` rewrites on every change), else the crate's own `Cargo.toml` (which `mcp
/// snapshot` touches when it creates the first index).
pub fn watched_without_snapshot() -> Option<PathBuf> {
    if let Some(dir) = env("MCP_OFFLINE_DIR") {
        let index = Path::new(&dir).join(format::INDEX);
        if index.is_file() {
            return Some(index);
        }
    }
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    format::Project::of(&manifest)
        .snapshot_dir()
        .path
        .map(|d| d.join(format::INDEX))
        .filter(|i| i.is_file())
        .or_else(|| Some(manifest.join("Cargo.toml")).filter(|m| m.is_file()))
}

/// A snapshot and where it was found (the generated code includes the file, so a
/// changed snapshot rebuilds the crate).
pub struct Found {
    pub path: PathBuf,
    pub snapshot: Snapshot,
}

fn env(key: &str) -> Option<String> {
    #[allow(clippy::disallowed_methods)]
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// Looks in `$MCP_OFFLINE_DIR` (a folder named explicitly: used as it is), then in the
/// project's `.mcp/` folders from the crate's up to the project root. `Ok(None)`:
/// there is none, and the server is checked at run time only. The second value: the
/// unsafe folders passed over that held a snapshot of this name (to warn about).
pub fn find(name: &str) -> (Result<Option<Found>, String>, Vec<Skipped>) {
    let offline = env("MCP_OFFLINE_DIR")
        .map(|d| PathBuf::from(d).join(format!("{name}.json")))
        .filter(|p| p.is_file());
    if let Some(path) = offline {
        return (read(path).map(Some), Vec::new());
    }
    let Some(manifest) = env("CARGO_MANIFEST_DIR") else {
        return (Ok(None), Vec::new());
    };
    let found = format::Project::of(Path::new(&manifest)).locate(name);
    (found.path.map(read).transpose(), found.skipped)
}

fn read(path: PathBuf) -> Result<Found, String> {
    let snapshot = Snapshot::read(&path).map_err(|e| e.to_string())?;
    Ok(Found { path, snapshot })
}
