//! The tool index: the one place that knows, per tool, what a call needs besides its
//! name and arguments — the `Mcp-Param-*` headers its arguments are mirrored into
//! (2026-07-28 over HTTP), its MCP Apps UI resource, and whether it must run as a task
//! (2025-11-25). It is filled by `tools/list` (or seeded from a declaration's snapshot)
//! and never fetched in the middle of a `tools/call`: a call on a fresh session goes
//! out at once, with what the index knows. A server that wanted headers it did not get
//! answers `-32020` and the call fails saying to list the tools; a 2025-11-25 tool that
//! runs only as a task, which the index did not know, is refused (`-32601`) the same
//! way. A declared server's tools carry their entry ([`ToolEntry`]) themselves,
//! resolved when they were listed: their calls do not look the index up at all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::model::{CallToolResult, OutputCheck, Tool};
use crate::protocol::TaskSupport;
use crate::transport::headers::{self, ParamHeader};
use mcp_runtime_core::lock;

/// What the index keeps of one tool: what a call of it needs besides its name and
/// arguments.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ToolEntry {
    /// The arguments mirrored into `Mcp-Param-*` headers.
    pub(super) headers: Vec<ParamHeader>,
    /// Its MCP Apps UI resource.
    pub(super) ui_resource: Option<String>,
    /// Its `execution.taskSupport` (2025-11-25).
    pub(super) task_support: TaskSupport,
    /// Its `outputSchema`, compiled when first needed.
    pub(super) output: Option<Arc<OutputSchema>>,
}

/// A tool's `outputSchema`, compiled on the first result it checks (a server listing
/// many tools costs nothing until they are called).
#[derive(Debug)]
pub(crate) struct OutputSchema {
    raw: Value,
    #[cfg(feature = "schema")]
    compiled: std::sync::OnceLock<Result<crate::schema::Schema, crate::schema::SchemaError>>,
}

impl PartialEq for OutputSchema {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl OutputSchema {
    fn new(raw: Value) -> OutputSchema {
        OutputSchema {
            raw,
            #[cfg(feature = "schema")]
            compiled: std::sync::OnceLock::new(),
        }
    }

    /// Checks a result's `structuredContent` against the schema.
    pub(crate) fn check(&self, result: &CallToolResult) -> OutputCheck {
        if result.is_error {
            return OutputCheck::Unchecked;
        }
        #[cfg(feature = "schema")]
        {
            let schema = match self
                .compiled
                .get_or_init(|| crate::schema::Schema::new(&self.raw))
            {
                Ok(s) => s,
                Err(e) => return OutputCheck::Unusable(e.reason().to_owned()),
            };
            let Some(structured) = &result.structured_content else {
                let why = "the tool declares an outputSchema and returned no structuredContent";
                return OutputCheck::Mismatch {
                    reason: why.into(),
                    rules: why.into(),
                };
            };
            match schema.check(structured) {
                Ok(()) => OutputCheck::Matched,
                Err(v) => OutputCheck::Mismatch {
                    reason: crate::schema::describe(&v),
                    rules: crate::schema::describe_rules(&v),
                },
            }
        }
        #[cfg(not(feature = "schema"))]
        {
            let _ = &self.raw;
            OutputCheck::Unchecked
        }
    }
}

impl ToolEntry {
    /// What a call of `tool` needs, from its definition. With `mirror_headers`, an
    /// invalid `x-mcp-header` annotation is an error saying why.
    fn of(tool: &Tool, mirror_headers: bool) -> Result<ToolEntry, String> {
        let headers = if mirror_headers {
            headers::param_headers(&tool.input_schema)?
        } else {
            Vec::new()
        };
        Ok(ToolEntry {
            headers,
            ui_resource: tool.ui_resource_uri(),
            output: tool
                .output_schema
                .clone()
                .map(|s| Arc::new(OutputSchema::new(s))),
            task_support: TaskSupport::parse(
                tool.extra
                    .get("execution")
                    .and_then(|e| e.get("taskSupport"))
                    .and_then(Value::as_str),
            ),
        })
    }

    /// What a call of a declared server's `tool` needs, from its definition (a listed
    /// one or a snapshot's). Its header mirrors are kept when the annotations are valid
    /// and sent only over a transport that mirrors arguments into headers; a tool
    /// with invalid ones is left out of a mirroring transport's list, and has none.
    pub(crate) fn of_definition(tool: &Tool) -> ToolEntry {
        ToolEntry::of(tool, true)
            .or_else(|_| ToolEntry::of(tool, false))
            .unwrap_or_default()
    }

    /// The `Mcp-Param-*` headers of a call with `arguments`.
    pub(super) fn header_values(&self, arguments: &Value) -> Vec<(String, String)> {
        self.headers
            .iter()
            .filter_map(|h| {
                headers::header_value(arguments, &h.path)
                    .map(|v| (format!("Mcp-Param-{}", h.name), v))
            })
            .collect()
    }
}

/// How a `tools/call` of a 2025-11-25 server that runs tools as tasks was sent when
/// the session did not know the tool's task support.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Guess {
    /// The session knew it (or the server runs no tasks).
    Known,
    /// As a plain call: the tool may run only as a task.
    Plain,
    /// As a task (`start`): the tool may not run as one.
    AsTask,
}

/// Where the index's entries came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// Nothing yet.
    Empty,
    /// A declaration's snapshot: what the server offered when it was taken.
    Snapshot,
    /// The server's own `tools/list`.
    Listed,
    /// What a list or a snapshot said before the server announced a change (or the
    /// session ended): still the best guess, until the next list replaces it.
    Stale,
}

/// The tool index of one session.
#[derive(Debug)]
pub(super) struct ToolIndex {
    state: Mutex<(Source, HashMap<String, ToolEntry>)>,
}

impl Default for ToolIndex {
    fn default() -> Self {
        ToolIndex {
            state: Mutex::new((Source::Empty, HashMap::new())),
        }
    }
}

impl ToolIndex {
    /// Fills the index from a tool list the server sent. With `mirror_headers`, a tool
    /// with an invalid `x-mcp-header` is left out (of the index and of what is
    /// returned), with a warning naming it.
    pub(super) fn fill(&self, server: &str, tools: Vec<Tool>, mirror_headers: bool) -> Vec<Tool> {
        let (kept, map) = entries(server, tools, mirror_headers);
        *lock(&self.state) = (Source::Listed, map);
        kept
    }

    /// Seeds the index from a snapshot, unless it knows something already.
    pub(super) fn seed(&self, server: &str, tools: &[Tool], mirror_headers: bool) {
        let mut state = lock(&self.state);
        if state.0 != Source::Empty {
            return;
        }
        let (_, map) = entries(server, tools.to_vec(), mirror_headers);
        *state = (Source::Snapshot, map);
    }

    /// True once the server's own tool list filled the index (and no change was
    /// announced since).
    #[cfg(test)]
    pub(super) fn is_listed(&self) -> bool {
        lock(&self.state).0 == Source::Listed
    }

    /// True while it knows nothing at all (no list, no snapshot).
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        lock(&self.state).0 == Source::Empty
    }

    /// What the index knows of `tool`, if anything.
    #[cfg(test)]
    pub(super) fn get(&self, tool: &str) -> Option<ToolEntry> {
        lock(&self.state).1.get(tool).cloned()
    }

    /// The tool's task support, if the index knows the tool.
    pub(super) fn task_support(&self, tool: &str) -> Option<TaskSupport> {
        lock(&self.state).1.get(tool).map(|e| e.task_support)
    }

    /// The tool's `outputSchema`, if the index knows one.
    pub(super) fn output(&self, tool: &str) -> Option<Arc<OutputSchema>> {
        lock(&self.state).1.get(tool)?.output.clone()
    }

    /// The tool's MCP Apps UI resource, if the index knows one.
    pub(super) fn ui_resource(&self, tool: &str) -> Option<String> {
        lock(&self.state).1.get(tool)?.ui_resource.clone()
    }

    /// The `Mcp-Param-*` headers of a call of `tool` with `arguments`, from what the
    /// index knows (none when it knows nothing of the tool).
    pub(super) fn param_headers(&self, tool: &str, arguments: &Value) -> Vec<(String, String)> {
        let state = lock(&self.state);
        state
            .1
            .get(tool)
            .map(|e| e.header_values(arguments))
            .unwrap_or_default()
    }

    /// The server's tools changed, or the session ended: what the index knows stays
    /// as a guess (a wrong header guess is answered `-32020`, and the call fails saying
    /// to list the tools) until the next list replaces it.
    pub(super) fn stale(&self) {
        let mut state = lock(&self.state);
        if state.0 != Source::Empty {
            state.0 = Source::Stale;
        }
    }
}

fn entries(
    server: &str,
    tools: Vec<Tool>,
    mirror_headers: bool,
) -> (Vec<Tool>, HashMap<String, ToolEntry>) {
    let mut map = HashMap::with_capacity(tools.len());
    let mut kept = Vec::with_capacity(tools.len());
    for tool in tools {
        match ToolEntry::of(&tool, mirror_headers) {
            Ok(entry) => {
                map.insert(tool.name.clone(), entry);
                kept.push(tool);
            }
            Err(why) => {
                tracing::warn!(server = %server, tool = %tool.name, "left out a tool with an invalid x-mcp-header: {why}");
            }
        }
    }
    (kept, map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(v: Value) -> Tool {
        serde_json::from_value(v).expect("a tool")
    }

    #[test]
    fn a_listed_index_is_not_replaced_by_a_snapshot_and_clears() {
        let region = tool(json!({
            "name": "query",
            "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"}}},
            "execution": {"taskSupport": "required"}
        }));
        let index = ToolIndex::default();
        assert!(index.get("query").is_none() && index.is_empty());
        index.seed("s", std::slice::from_ref(&region), true);
        assert!(!index.is_listed());
        assert_eq!(
            index.param_headers("query", &json!({"region": "eu"})),
            [("Mcp-Param-Region".to_owned(), "eu".to_owned())]
        );
        let kept = index.fill(
            "s",
            vec![tool(
                json!({"name": "other", "inputSchema": {"type": "object"}}),
            )],
            true,
        );
        assert_eq!(kept.len(), 1);
        assert!(index.is_listed());
        assert!(index.get("query").is_none(), "the server's list wins");
        index.seed("s", std::slice::from_ref(&region), true);
        assert!(
            index.get("query").is_none(),
            "a snapshot never replaces a list"
        );
        index.stale();
        assert!(!index.is_listed() && !index.is_empty());
        assert!(index.get("other").is_some(), "a stale entry stays a guess");
        index.seed("s", &[region], true);
        assert!(index.get("query").is_none(), "nor a stale list");
    }

    #[test]
    fn an_invalid_header_annotation_leaves_the_tool_out_only_when_mirrored() {
        let bad = tool(json!({
            "name": "bad",
            "inputSchema": {"type": "object", "properties": {
                "n": {"type": "number", "x-mcp-header": "N"}}}
        }));
        let index = ToolIndex::default();
        assert!(index.fill("s", vec![bad.clone()], true).is_empty());
        assert!(index.get("bad").is_none());
        assert_eq!(index.fill("s", vec![bad], false).len(), 1);
        assert_eq!(
            index.get("bad").map(|e| e.task_support),
            Some(TaskSupport::Forbidden)
        );
    }
}
