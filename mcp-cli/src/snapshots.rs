//! `mcp snapshot`: writes and checks the snapshots `#[mcp(...)]` reads.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ArgMatches;
use mcp_runtime::snapshot::{self, Snapshot};
use serde_json::Value;

use crate::failure::{code, Failure};
use crate::server::{self, Options, Resolved};
use crate::show::{say, shown};

fn snapshot_dir(m: &ArgMatches, create: bool) -> Result<PathBuf, Failure> {
    if let Some(d) = m.get_one::<String>("dir") {
        return server::named_dir(d);
    }
    let project = server::project(m)?;
    let found = project.snapshot_dir();
    server::warn_skipped(&found);
    if let Some(dir) = found.path {
        return Ok(dir);
    }
    if create {
        return Ok(project.start().join(snapshot::DIR));
    }
    let hint = server::outside_hint(
        &project,
        snapshot::Project::unbounded(project.start()).snapshot_dir(),
    );
    Err(Failure::usage(format!(
        "no usable .mcp/ folder from here up to the project root {}; add a server with `mcp snapshot NAME --url URL`, `mcp snapshot NAME -- COMMAND`, or `mcp snapshot NAME` for a server in .mcp.json / .vscode/mcp.json{hint}",
        server::root_shown(&project)
    )))
}

/// What a server offers now, in snapshot form.
async fn capture(m: &ArgMatches, r: &Resolved) -> Result<Snapshot, Failure> {
    let c = server::client(m, r, Options::default())?;
    let fail = |e| Failure::server(&r.name, e);
    let details = c.connect().await.map_err(fail)?;
    let tools = c.tools().await.map_err(fail)?;
    let prompts = if details.capabilities.prompts() {
        c.prompts().await.map_err(fail)?
    } else {
        Vec::new()
    };
    let templates = if details.capabilities.resources() {
        c.resource_templates().await.map_err(fail)?
    } else {
        Vec::new()
    };
    c.close().await.map_err(fail)?;
    Ok(Snapshot::new(
        &r.name,
        r.stored.clone(),
        tools
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?,
        prompts
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?,
        templates
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?,
    ))
}

/// `mcp snapshot [NAME] [--check]`.
pub async fn snapshot(m: &ArgMatches) -> Result<ExitCode, Failure> {
    let check = m.get_flag("check");
    let named = m.get_one::<String>("name").cloned();
    let adding = m.contains_id("url") || m.contains_id("command") || m.contains_id("config");
    if adding && named.is_none() {
        return Err(Failure::usage(
            "name the server to add: `mcp snapshot NAME --url URL` (or -- COMMAND…, --config FILE)",
        ));
    }
    // A name with no snapshot yet: its server comes from a configuration file.
    let dir = snapshot_dir(m, adding || named.is_some())?;
    let names: Vec<String> = match &named {
        Some(n) => vec![n.clone()],
        None => {
            let mut names: Vec<String> = std::fs::read_dir(&dir)?
                .flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|f| f.strip_suffix(".json"))
                        .map(str::to_owned)
                })
                .collect();
            names.sort();
            names
        }
    };
    if names.is_empty() {
        return Err(Failure::usage(format!(
            "no snapshots in {}",
            shown(&dir.display().to_string())
        )));
    }
    // The folder holding `.mcp/`, which a snapshot's configuration file is relative to.
    let base = std::path::absolute(&dir)?
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    let mut stale = 0;
    // The exit code: the worst failure among the servers (one failing does not stop
    // the others).
    let mut worst: Option<Failure> = None;
    for name in names {
        let path = dir.join(format!("{name}.json"));
        let attempt = async {
            let old = if path.exists() {
                Some(Snapshot::read(&path)?)
            } else {
                None
            };
            let resolved = match &old {
                Some(o) if !adding => server::from_stored(&name, o.server.clone(), &base)?,
                _ => {
                    let mut r = server::resolve(m)?;
                    if let Some(file) = r.stored.get("config").and_then(Value::as_str) {
                        r.stored = serde_json::json!({ "config": server::stored_config(Path::new(file), &base)? });
                    }
                    r
                }
            };
            let new = capture(m, &resolved).await?;
            Ok::<_, Failure>((old, new))
        };
        let (old, new) = match attempt.await {
            Ok(both) => both,
            Err(e) => {
                eprintln!("mcp: {name}: {}", crate::show::shown_lines(&e.message));
                if worst.as_ref().is_none_or(|w| e.code > w.code) {
                    worst = Some(e);
                }
                continue;
            }
        };
        let same = old.as_ref() == Some(&new);
        if check {
            if same {
                say!("{name}: up to date");
            } else {
                say!("{name}: out of date; run `mcp snapshot {name}`");
                stale += 1;
            }
        } else {
            std::fs::create_dir_all(&dir)?;
            new.write(&path)?;
            let tools = new.tools.len();
            say!(
                "{name}: {} ({tools} tools){}",
                path.display(),
                if same {
                    ", unchanged".to_owned()
                } else {
                    format!("; {}", shown(&changes(old.as_ref(), &new)))
                }
            );
        }
    }
    if !check && dir.is_dir() {
        reindex(&dir)?;
    }
    if let Some(w) = worst {
        return Err(Failure::new(
            w.code,
            "some servers could not be snapshotted (above)",
        ));
    }
    Ok(if stale == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(code::FAILED)
    })
}

/// What changed from the old snapshot to the new one, in a line.
fn changes(old: Option<&Snapshot>, new: &Snapshot) -> String {
    let Some(old) = old else {
        return "new".to_owned();
    };
    let by_name = |s: &Snapshot| -> std::collections::BTreeMap<String, Value> {
        s.tools
            .iter()
            .filter_map(|t| Some((t.get("name")?.as_str()?.to_owned(), t.clone())))
            .collect()
    };
    let (before, after) = (by_name(old), by_name(new));
    let added: Vec<&str> = after
        .keys()
        .filter(|k| !before.contains_key(*k))
        .map(String::as_str)
        .collect();
    let removed: Vec<&str> = before
        .keys()
        .filter(|k| !after.contains_key(*k))
        .map(String::as_str)
        .collect();
    let changed: Vec<&str> = after
        .iter()
        .filter(|(k, v)| before.get(*k).is_some_and(|b| b != *v))
        .map(|(k, _)| k.as_str())
        .collect();
    let mut parts = Vec::new();
    for (what, names) in [("added", added), ("removed", removed), ("changed", changed)] {
        if !names.is_empty() {
            parts.push(format!("tools {what}: {}", names.join(", ")));
        }
    }
    if old.prompts != new.prompts {
        parts.push("prompts changed".to_owned());
    }
    if old.resource_templates != new.resource_templates {
        parts.push("resource templates changed".to_owned());
    }
    if old.server != new.server {
        parts.push("connection changed".to_owned());
    }
    if parts.is_empty() {
        "rewritten".to_owned()
    } else {
        parts.join("; ")
    }
}

/// Rewrites `.mcp/.index`, which crates declaring a server without a snapshot depend
/// on, so an added, changed or removed snapshot takes effect on their next build. The
/// first time, those crates depended on their `Cargo.toml` instead: it is touched.
fn reindex(dir: &Path) -> Result<(), Failure> {
    let path = dir.join(snapshot::INDEX);
    let text = snapshot::index(dir);
    let existed = path.exists();
    if existed && std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
        return Ok(());
    }
    std::fs::write(&path, text)?;
    if !existed {
        if let Some(root) = dir.parent() {
            touch_manifests(root, 0);
        }
    }
    Ok(())
}

/// Marks every package's `Cargo.toml` under `root` as modified (build outputs,
/// hidden folders and `node_modules` skipped).
fn touch_manifests(root: &Path, depth: usize) {
    if depth > 6 {
        return;
    }
    let manifest = root.join("Cargo.toml");
    if manifest.is_file() {
        if let Ok(f) = std::fs::File::options().append(true).open(&manifest) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
    }
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            touch_manifests(&entry.path(), depth + 1);
        }
    }
}
