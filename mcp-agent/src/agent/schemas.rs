//! The tools' argument schemas, checked before the gate: arguments that break a
//! tool's `inputSchema` go nowhere, and the model reads why.

use mcp_runtime::schema::describe;
use serde_json::Value;

use super::events::Event;
use super::handle::Agent;
use super::host::AgentTool;
use super::state::RunState;

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
                "the edited arguments for `{}` (a person's or the ask callback's) do not match its input schema, so it was not sent: {violations}",
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
