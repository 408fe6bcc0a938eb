//! The committed snapshot of a server (`.mcp/<name>.json`): what `mcp snapshot`
//! writes, what `#[mcp]` reads at compile time to check tool names and generate typed
//! methods, and what a declared server compares the live tool list with.
//!
//! This module is the **one owner** of that format. It needs only `std` and
//! `serde_json`; the runtime, the macro crate and the CLI all use it, so they can never
//! disagree about it.
//!
//! ```json
//! { "format": 1, "name": "files", "server": {"command": ["npx", "…"]},
//!   "tools": [ … ], "prompts": [ … ], "resourceTemplates": [ … ] }
//! ```
//!
//! Lists are sorted (tools and prompts by `name`, templates by `uriTemplate`) and items
//! kept exactly as the server sent them, so a refreshed snapshot diffs cleanly.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

mod lookup;

pub use lookup::{check_folder, project_root, Found, Project, Skipped, DIR};

/// The format version this code writes and reads.
pub const FORMAT: u64 = 1;

/// What went wrong with a snapshot file.
#[derive(Debug)]
pub struct SnapshotError {
    path: Option<PathBuf>,
    problem: String,
}

impl SnapshotError {
    fn new(path: Option<&Path>, problem: impl Into<String>) -> Self {
        SnapshotError {
            path: path.map(Path::to_path_buf),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "the snapshot {} {}", p.display(), self.problem),
            None => write!(f, "the snapshot {}", self.problem),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// One server's snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The server's name (the file is `<name>.json`).
    pub name: String,
    /// How to reach it: `{"url": …}` or `{"command": [program, args…]}`.
    pub server: Value,
    /// Its tools, as listed (sorted by name).
    pub tools: Vec<Value>,
    /// Its prompts (sorted by name).
    pub prompts: Vec<Value>,
    /// Its resource templates (sorted by `uriTemplate`).
    pub resource_templates: Vec<Value>,
}

fn sorted(mut items: Vec<Value>, key: &str) -> Vec<Value> {
    items.sort_by(|a, b| a[key].as_str().cmp(&b[key].as_str()));
    items
}

impl Snapshot {
    /// A snapshot of what a server offers now (the lists are sorted here).
    pub fn new(
        name: impl Into<String>,
        server: Value,
        tools: Vec<Value>,
        prompts: Vec<Value>,
        resource_templates: Vec<Value>,
    ) -> Self {
        Snapshot {
            name: name.into(),
            server,
            tools: sorted(tools, "name"),
            prompts: sorted(prompts, "name"),
            resource_templates: sorted(resource_templates, "uriTemplate"),
        }
    }

    /// Reads a snapshot's text. A missing `format` is read as 1 (the first files had
    /// none); a newer format is an error that says to update.
    pub fn parse(text: &str) -> Result<Self, SnapshotError> {
        Self::parse_at(text, None)
    }

    fn parse_at(text: &str, path: Option<&Path>) -> Result<Self, SnapshotError> {
        let refresh = "; refresh it with `mcp snapshot`";
        let v: Value = serde_json::from_str(text)
            .map_err(|e| SnapshotError::new(path, format!("is not valid JSON ({e}){refresh}")))?;
        let Value::Object(mut m) = v else {
            return Err(SnapshotError::new(
                path,
                format!("is not a JSON object{refresh}"),
            ));
        };
        match m.get("format") {
            None => {}
            Some(f) if f.as_u64() == Some(FORMAT) => {}
            Some(f) => match f.as_u64() {
                Some(n) if n > FORMAT => {
                    return Err(SnapshotError::new(
                        path,
                        format!("has format {n}, newer than this version reads ({FORMAT}); update mcp-runtime and the mcp command"),
                    ))
                }
                _ => {
                    return Err(SnapshotError::new(
                        path,
                        format!("has an unknown format {f}{refresh}"),
                    ))
                }
            },
        }
        let mut list = |key: &str, required: bool| -> Result<Vec<Value>, SnapshotError> {
            match m.remove(key) {
                Some(Value::Array(items)) => Ok(items),
                None if !required => Ok(Vec::new()),
                None => Err(SnapshotError::new(
                    path,
                    format!("has no `{key}` list{refresh}"),
                )),
                Some(_) => Err(SnapshotError::new(
                    path,
                    format!("has a `{key}` that is not a list{refresh}"),
                )),
            }
        };
        let tools = list("tools", true)?;
        let prompts = list("prompts", false)?;
        let resource_templates = list("resourceTemplates", false)?;
        let name = m
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                path.and_then(|p| p.file_stem())
                    .and_then(|s| s.to_str())
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        Ok(Snapshot {
            name,
            server: m.remove("server").unwrap_or(Value::Null),
            tools,
            prompts,
            resource_templates,
        })
    }

    /// Reads the snapshot file at `path`.
    pub fn read(path: &Path) -> Result<Self, SnapshotError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SnapshotError::new(Some(path), format!("cannot be read: {e}")))?;
        Self::parse_at(&text, Some(path))
    }

    /// The file's JSON.
    pub fn to_value(&self) -> Value {
        json!({
            "format": FORMAT,
            "name": self.name,
            "server": self.server,
            "tools": self.tools,
            "prompts": self.prompts,
            "resourceTemplates": self.resource_templates,
        })
    }

    /// The file's text: pretty JSON with a final newline.
    pub fn to_json(&self) -> String {
        let mut text =
            serde_json::to_string_pretty(&self.to_value()).unwrap_or_else(|_| "{}".to_owned());
        text.push('\n');
        text
    }

    /// Writes the snapshot to `path`, atomically (a temporary file renamed over it).
    pub fn write(&self, path: &Path) -> Result<(), SnapshotError> {
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, self.to_json())
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| SnapshotError::new(Some(path), format!("cannot be written: {e}")))
    }

    /// The names of its tools.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
    }
}

/// The file in `.mcp/` that changes whenever a snapshot there is added, changed or
/// removed (`mcp snapshot` keeps it). A crate declaring a server that has no snapshot
/// yet depends on it, so adding one takes effect on the next build.
pub const INDEX: &str = ".index";

/// The index of the snapshots in `dir`: one line per `<name>.json`, with a hash of its
/// contents, sorted.
pub fn index(dir: &Path) -> String {
    let mut lines: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().to_str()?.to_owned();
            let name = file.strip_suffix(".json")?.to_owned();
            let bytes = std::fs::read(e.path()).ok()?;
            Some(format!("{name} {:016x}", fnv1a(&bytes)))
        })
        .collect();
    lines.sort();
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// FNV-1a, 64 bits: enough to tell one snapshot's text from another's.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The closest candidate to `name`, when close enough to be a typo (for "did you
/// mean …?" hints, at compile time and at run time alike).
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    /// Edit distance counting a swap of neighbours as one edit (optimal string
    /// alignment), so `ulr` is one edit from `url`.
    fn distance(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        for (j, cell) in d[0].iter_mut().enumerate() {
            *cell = j;
        }
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (d[i - 1][j] + 1)
                    .min(d[i][j - 1] + 1)
                    .min(d[i - 1][j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(d[i - 2][j - 2] + 1);
                }
                d[i][j] = v;
            }
        }
        d[a.len()][b.len()]
    }
    candidates
        .into_iter()
        .map(|c| (distance(name, c), c))
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 3).max(1) && *d < name.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_round_trips_and_its_format_is_checked() {
        let s = Snapshot::new(
            "py",
            json!({"url": "http://127.0.0.1:1/mcp"}),
            vec![json!({"name": "b"}), json!({"name": "a"})],
            Vec::new(),
            Vec::new(),
        );
        assert_eq!(s.tool_names().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(Snapshot::parse(&s.to_json()).unwrap(), s);
        let newer = s.to_json().replace("\"format\": 1", "\"format\": 2");
        let e = Snapshot::parse(&newer).unwrap_err().to_string();
        assert!(e.contains("newer"), "{e}");
        let e = Snapshot::parse("{\"format\": 1}").unwrap_err().to_string();
        assert!(e.contains("no `tools` list"), "{e}");
        assert!(Snapshot::parse("[]").is_err());
        // The first files had no `format`.
        assert!(Snapshot::parse("{\"tools\": []}").is_ok());
    }

    #[test]
    fn typos_get_a_hint() {
        assert_eq!(
            did_you_mean("list_isues", ["list_issues", "get_issue"]),
            Some("list_issues")
        );
        assert_eq!(did_you_mean("ulr", ["url", "command"]), Some("url"));
        assert_eq!(did_you_mean("zzz", ["list_issues"]), None);
    }
}
