//! Finds and reads the committed snapshot of a server (`.mcp/<name>.json`). This is the
//! only place the macro reads the environment or the file system; it never touches the
//! network.

use std::path::{Path, PathBuf};

use serde_json::Value;

pub struct Snapshot {
    pub path: PathBuf,
    pub tools: Vec<Value>,
}

fn env(key: &str) -> Option<String> {
    #[allow(clippy::disallowed_methods)]
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// Looks in `$MCP_OFFLINE_DIR`, then `<crate>/.mcp/`, then each parent folder's
/// `.mcp/` (the workspace's). `Ok(None)`: there is none, and the server is checked at
/// run time only.
pub fn find(name: &str) -> Result<Option<Snapshot>, String> {
    let file = format!("{name}.json");
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = env("MCP_OFFLINE_DIR") {
        candidates.push(Path::new(&dir).join(&file));
    }
    if let Some(manifest) = env("CARGO_MANIFEST_DIR") {
        for dir in Path::new(&manifest).ancestors() {
            candidates.push(dir.join(".mcp").join(&file));
        }
    }
    let Some(path) = candidates.into_iter().find(|p| p.is_file()) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read the snapshot {}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "the snapshot {} is not valid JSON ({e}); refresh it with `mcp snapshot`",
            path.display()
        )
    })?;
    let tools = v
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| {
            format!(
                "the snapshot {} has no `tools` list; refresh it with `mcp snapshot`",
                path.display()
            )
        })?;
    Ok(Some(Snapshot { path, tools }))
}
