//! Lists (all pages), their cache under the server's `ttlMs`, invalidation on list
//! changes, and per-tool facts (headers, UI resources).

use super::handle::Inner;
use super::options::RequestOptions;
use crate::error::{Error, Result};
use crate::model::Tool;
use crate::protocol::Method;
use serde_json::{Map, Value};
use std::hash::BuildHasher;
use std::sync::Arc;

pub(super) fn typed_items<T: serde::de::DeserializeOwned>(
    server: &str,
    what: &str,
    items: &[Value],
) -> Vec<T> {
    items
        .iter()
        .filter_map(|v| match serde_json::from_value::<T>(v.clone()) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(server, error = %e, "skipped a malformed {what} in the server's list");
                None
            }
        })
        .collect()
}

/// How many times a list is read when the server keeps changing it meanwhile.
const LIST_ATTEMPTS: u32 = 4;
/// The most pages one listing follows.
const MAX_PAGES: usize = 10_000;
/// The most items one listing holds (all pages together).
const MAX_LIST_ITEMS: usize = 100_000;

/// The field that names an item of a list: two items with the same one are the same.
fn identity(key: &str) -> Option<&'static str> {
    match key {
        "tools" | "prompts" => Some("name"),
        "resources" => Some("uri"),
        "resourceTemplates" => Some("uriTemplate"),
        _ => None,
    }
}

/// The items of a list, each once: a server whose pages overlap (its list moved
/// between them) lists an item twice; the first is kept.
fn distinct(server: &str, method: &str, key: &str, mut items: Vec<Value>) -> Vec<Value> {
    let Some(field) = identity(key) else {
        return items;
    };
    let keep: Vec<bool> = {
        let mut seen = std::collections::HashSet::with_capacity(items.len());
        items
            .iter()
            .map(|item| {
                item.get(field)
                    .and_then(Value::as_str)
                    .is_none_or(|id| seen.insert(id))
            })
            .collect()
    };
    let dropped = keep.iter().filter(|k| !**k).count();
    if dropped > 0 {
        tracing::warn!(
            server,
            method,
            dropped,
            "the server listed items more than once; each is kept once"
        );
        let mut keep = keep.into_iter();
        items.retain(|_| keep.next().unwrap_or(true));
    }
    items
}

pub(super) fn ttl_of(v: &Value) -> u64 {
    v.get("ttlMs").and_then(Value::as_u64).unwrap_or(0)
}

impl Inner {
    pub(super) async fn list_tools(self: &Arc<Self>) -> Result<Vec<Tool>> {
        let items = self.list(Method::ToolsList.as_str(), "tools").await?;
        let tools: Vec<Tool> = typed_items(&self.settings.name, "tool", &items);
        Ok(self.tool_index.fill(
            &self.settings.name,
            tools,
            self.transport.mirrors_param_headers(),
        ))
    }

    /// The `Mcp-Param-*` headers for a call, from the tool index: never listed here
    /// (a server that wanted headers it did not get answers `-32020`, and the call
    /// fails saying to list the tools).
    pub(super) fn param_headers(&self, tool: &str, arguments: &Value) -> Vec<(String, String)> {
        if !self.transport.mirrors_param_headers() {
            return Vec::new();
        }
        self.tool_index.param_headers(tool, arguments)
    }

    pub(super) fn reset(&self) {
        self.session.forget();
        self.invalidate_all();
        self.session.announce_reset();
    }

    pub(super) fn invalidate_all(&self) {
        self.lists.clear();
        self.tool_index.stale();
    }

    pub(super) fn invalidate(&self, prefix: &str) {
        self.lists.forget(prefix);
    }

    /// The UI resource (MCP Apps) of a tool, from the tool index (the last tool list,
    /// or a declaration's snapshot): never listed here.
    pub(super) fn ui_resource_of(&self, tool: &str) -> Option<String> {
        self.tool_index.ui_resource(tool)
    }

    pub(super) async fn list(self: &Arc<Self>, method: &str, key: &str) -> Result<Arc<Vec<Value>>> {
        if let Some(hit) = self.lists.get(method) {
            return Ok(hit);
        }
        // A list the server changed (and said so) while its pages were read may hold
        // an item twice or miss one: read it again, a bounded number of times.
        let mut attempt = 1;
        loop {
            let generation = self.lists.mark();
            let (items, ttl) = self.pages(method, Map::new(), key).await?;
            if attempt < LIST_ATTEMPTS && self.lists.changed_since(method, generation) {
                tracing::debug!(server = %self.settings.name, method, attempt, "the list changed while it was read; reading it again");
                attempt += 1;
                continue;
            }
            let items = Arc::new(distinct(&self.settings.name, method, key, items));
            if ttl > 0 {
                self.lists
                    .put(method.to_owned(), generation, ttl, items.clone());
            }
            return Ok(items);
        }
    }

    /// Every page of a paginated request (`params` plus each `cursor`): the items under
    /// `key`, and the shortest `ttlMs` of the pages.
    pub(super) async fn pages(
        self: &Arc<Self>,
        method: &str,
        params: Map<String, Value>,
        key: &str,
    ) -> Result<(Vec<Value>, u64)> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        // The cursors seen, hashed (a hostile server's long cursors are not kept).
        let mut cursors = std::collections::HashSet::new();
        let hasher = foldhash::quality::RandomState::default();
        let mut ttl: Option<u64> = None;
        let mut pages = 0usize;
        loop {
            let mut params = params.clone();
            if let Some(c) = &cursor {
                params.insert("cursor".into(), Value::String(c.clone()));
            }
            let mut v = self
                .call(method, params, &RequestOptions::default())
                .await?;
            let page_ttl = ttl_of(&v);
            ttl = Some(ttl.map_or(page_ttl, |t| t.min(page_ttl)));
            match v.get_mut(key).map(Value::take) {
                Some(Value::Array(page)) if items.len() + page.len() > MAX_LIST_ITEMS => {
                    return Err(Error::invalid_response(format!(
                        "`{method}` lists more than {MAX_LIST_ITEMS} items"
                    )))
                }
                Some(Value::Array(page)) => items.extend(page),
                None | Some(Value::Null) => {}
                Some(_) => {
                    return Err(Error::invalid_response(format!(
                        "`{method}` result `{key}` is not an array"
                    )))
                }
            }
            pages += 1;
            match v.get("nextCursor") {
                // An empty string is a valid cursor: only its absence ends the list.
                Some(Value::String(next)) => {
                    if !cursors.insert(hasher.hash_one(next)) || pages >= MAX_PAGES {
                        return Err(Error::invalid_response(format!(
                            "`{method}` pagination does not end (a cursor repeats, or more than {MAX_PAGES} pages)"
                        )));
                    }
                    cursor = Some(next.clone());
                }
                _ => break,
            }
        }
        Ok((items, ttl.unwrap_or(0)))
    }
}
