//! The tools' argument schemas, checked before the gate: each `inputSchema` compiled
//! once per server, tool and schema (a server that changes a tool's schema gets it
//! compiled again), with the bounds of [`mcp_runtime::schema`] against hostile ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mcp_runtime::schema::{describe, Schema, SchemaError};
use mcp_runtime_core::lock;
use serde_json::Value;

use super::events::Event;
use super::handle::Agent;
use super::host::AgentTool;
use super::state::RunState;

/// The most compiled schemas kept (all are dropped when a new one would pass it).
const MAX_KEPT: usize = 4096;

type Compiled = Arc<Result<Schema, SchemaError>>;

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
    fn input(&self, server: usize, tool: &str, schema: &Value) -> Compiled {
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

impl Agent {
    /// Checks a call's arguments against its tool's `inputSchema`: `Some` with what
    /// the model reads when they do not match ([`Event::ArgumentsInvalid`]); `None`
    /// when they do, or when the schema cannot be checked ([`Event::SchemaUnchecked`]:
    /// the call goes on to the gate, and the server checks its own arguments).
    pub(super) fn invalid_arguments(
        &self,
        state: &mut RunState,
        tool: &AgentTool,
        arguments: &Value,
        edited: bool,
    ) -> Option<String> {
        let compiled =
            self.inner
                .schemas
                .input(tool.server, &tool.spec.name, &tool.spec.input_schema);
        let schema = match compiled.as_ref() {
            Ok(s) => s,
            Err(e) => {
                let event = Event::SchemaUnchecked {
                    server: tool.facts.server.clone(),
                    tool: tool.spec.name.clone(),
                    reason: format!("inputSchema: {}", e.reason()),
                };
                self.event(state, event);
                return None;
            }
        };
        let violations = describe(&schema.check(arguments).err()?);
        self.event(
            state,
            Event::ArgumentsInvalid {
                server: tool.facts.server.clone(),
                tool: tool.spec.name.clone(),
                violations: violations.clone(),
                edited,
            },
        );
        Some(if edited {
            format!(
                "the arguments a person edited for `{}` do not match its input schema, so it was not sent: {violations}",
                tool.spec.name
            )
        } else {
            format!(
                "the arguments do not match the input schema of `{}`, so nothing was sent: {violations}. Fix them and call again.",
                tool.spec.name
            )
        })
    }
}
