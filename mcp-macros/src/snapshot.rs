//! Finds and reads the committed snapshot of a server (`.mcp/<name>.json`). This is the
//! only place the macro reads the environment or the file system; it never touches the
//! network. The format itself is `mcp-runtime-core`'s, as the runtime's and the CLI's.

use std::path::{Path, PathBuf};

/// The snapshot format (`mcp-runtime-core`), the runtime's own.
use mcp_runtime_core::snapshot as format;

pub use format::{did_you_mean, Snapshot};

/// The file a declaration's build depends on when its server has no snapshot, so that
/// adding one rebuilds it: the nearest `.mcp/.index` (which `mcp snapshot` rewrites on
/// every change), else the crate's own `Cargo.toml` (which `mcp snapshot` touches when
/// it creates the first index).
pub fn watched_without_snapshot() -> Option<PathBuf> {
    if let Some(dir) = env("MCP_OFFLINE_DIR") {
        let index = Path::new(&dir).join(format::INDEX);
        if index.is_file() {
            return Some(index);
        }
    }
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    format::dir_above(&manifest)
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

/// Looks in `$MCP_OFFLINE_DIR`, then `<crate>/.mcp/`, then each parent folder's
/// `.mcp/` (the workspace's). `Ok(None)`: there is none, and the server is checked at
/// run time only.
pub fn find(name: &str) -> Result<Option<Found>, String> {
    let offline = env("MCP_OFFLINE_DIR").map(PathBuf::from);
    let path = match env("CARGO_MANIFEST_DIR") {
        Some(manifest) => format::locate(name, offline.as_deref(), Path::new(&manifest)),
        None => offline
            .map(|d| d.join(format!("{name}.json")))
            .filter(|p| p.is_file()),
    };
    path.map(read).transpose()
}

fn read(path: PathBuf) -> Result<Found, String> {
    let snapshot = Snapshot::read(&path).map_err(|e| e.to_string())?;
    Ok(Found { path, snapshot })
}
