//! The tools' argument schemas, compiled: each `inputSchema` once per server, tool and
//! schema (a server that changes a tool's schema gets it compiled again), with the
//! bounds of [`mcp_runtime::schema`] against hostile ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mcp_runtime::schema::{Schema, SchemaError};
use mcp_runtime_core::lock;
use serde_json::Value;

/// The most compiled schemas kept (all are dropped when a new one would pass it).
const MAX_KEPT: usize = 4096;

pub(super) type Compiled = Arc<Result<Schema, SchemaError>>;

/// The compiled input schemas, by server and tool.
#[derive(Default)]
pub(super) struct Schemas {
    map: Mutex<HashMap<(usize, String), (Value, Compiled)>>,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schemas").finish_non_exhaustive()
    }
}

impl Schemas {
    /// Tool `tool` of server `server`'s input schema, compiled.
    pub(super) fn input(&self, server: usize, tool: &str, schema: &Value) -> Compiled {
        let key = (server, tool.to_owned());
        if let Some((raw, compiled)) = lock(&self.map).get(&key) {
            if raw == schema {
                return compiled.clone();
            }
        }
        let compiled: Compiled = Arc::new(Schema::new(schema));
        let mut map = lock(&self.map);
        if map.len() >= MAX_KEPT {
            map.clear();
        }
        map.insert(key, (schema.clone(), compiled.clone()));
        compiled
    }
}
