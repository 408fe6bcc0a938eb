//! Requests a server makes of the client: input from a person (elicitation), a model
//! completion (sampling) and the client's roots.
//!
//! Both protocol eras share these handlers: servers before 2026-07-28 send
//! `elicitation/create` as a JSON-RPC request; 2026-07-28 servers return an
//! `input_required` result that the session answers and retries.

use std::future::Future;

use serde_json::{json, Map, Value};

use crate::error::Error;
use crate::jsonrpc::ErrorObject;
/// What a person did with a request for input (`accept`, `decline`, `cancel`).
pub use mcp_runtime_core::protocol::InputAction;
use mcp_runtime_core::BoxFuture;

/// The kinds of input requests a client accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputKinds {
    /// Forms with a `requestedSchema`.
    pub form: bool,
    /// A URL for the person to open.
    pub url: bool,
}

impl InputKinds {
    /// Both forms and URLs (the default once a handler is set).
    pub const ALL: InputKinds = InputKinds {
        form: true,
        url: true,
    };
    /// Forms only.
    pub const FORM: InputKinds = InputKinds {
        form: true,
        url: false,
    };
    /// URLs only.
    pub const URL: InputKinds = InputKinds {
        form: false,
        url: true,
    };
    /// None: the client declares no elicitation capability and declines at once
    /// anything a server asks anyway, so a call never waits on an answer that will not
    /// come.
    pub const NONE: InputKinds = InputKinds {
        form: false,
        url: false,
    };

    /// True when no kind is accepted.
    pub fn is_none(self) -> bool {
        !self.form && !self.url
    }

    pub(crate) fn capability(self) -> Option<Value> {
        if self.is_none() {
            return None;
        }
        let mut m = Map::new();
        if self.form {
            m.insert("form".into(), json!({}));
        }
        if self.url {
            m.insert("url".into(), json!({}));
        }
        Some(Value::Object(m))
    }
}

/// What the server asks for.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum InputKind {
    /// Fill in a form. `schema` is the `requestedSchema`: a flat object of primitive
    /// properties (strings, numbers, booleans, enums), with `default`s.
    Form {
        /// The requested schema.
        schema: Value,
    },
    /// Open a URL (for a sign-in, a payment…). Accepting means the person agreed to open
    /// it, not that they finished.
    Url {
        /// The URL to show and open. Show its full domain before opening it.
        url: String,
        /// The server's id for this elicitation (servers before 2026-07-28).
        elicitation_id: Option<String>,
    },
}

/// A server's request for input from a person.
#[derive(Clone, Debug, PartialEq)]
pub struct InputRequest {
    /// The name of the server asking (show it to the person).
    pub server: String,
    /// What the server says it needs.
    pub message: String,
    /// What to fill in or open.
    pub kind: InputKind,
}

impl InputRequest {
    pub(crate) fn from_params(server: &str, params: &Value) -> Result<Self, String> {
        let message = params
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mode = params.get("mode").and_then(Value::as_str).unwrap_or("form");
        let kind = match mode {
            "form" => InputKind::Form {
                schema: params
                    .get("requestedSchema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            },
            "url" => InputKind::Url {
                url: params
                    .get("url")
                    .and_then(Value::as_str)
                    .ok_or("url-mode elicitation without a url")?
                    .to_owned(),
                elicitation_id: params
                    .get("elicitationId")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            },
            other => return Err(format!("unknown elicitation mode `{other}`")),
        };
        Ok(InputRequest {
            server: server.to_owned(),
            message,
            kind,
        })
    }

    /// True for a form request.
    pub fn is_form(&self) -> bool {
        matches!(self.kind, InputKind::Form { .. })
    }

    /// The form fields that hold a secret: those whose schema says `writeOnly: true`
    /// or `format: "password"`. Show them masked; keep their answers out of logs and
    /// stores (the agent keeps them in memory only).
    pub fn secret_fields(&self) -> Vec<String> {
        let InputKind::Form { schema } = &self.kind else {
            return Vec::new();
        };
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return Vec::new();
        };
        props
            .iter()
            .filter(|(_, p)| {
                p.get("writeOnly").and_then(Value::as_bool) == Some(true)
                    || p.get("format").and_then(Value::as_str) == Some("password")
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The values of a form's `default`s, as an answer would carry them.
    pub fn defaults(&self) -> Map<String, Value> {
        let mut out = Map::new();
        if let InputKind::Form { schema } = &self.kind {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, p) in props {
                    if let Some(d) = p.get("default") {
                        out.insert(k.clone(), d.clone());
                    }
                }
            }
        }
        out
    }
}

/// The answer to an [`InputRequest`].
#[derive(Clone, Debug, PartialEq)]
pub enum InputResponse {
    /// The person answered: the form's values (empty for a URL request).
    Accept(Map<String, Value>),
    /// The person said no.
    Decline,
    /// The person dismissed the request without deciding.
    Cancel,
}

impl InputResponse {
    /// Accepts with the given values (a JSON object; anything else is sent as no values).
    pub fn accept(values: Value) -> Self {
        match values {
            Value::Object(m) => InputResponse::Accept(m),
            _ => InputResponse::Accept(Map::new()),
        }
    }

    /// The answer as the protocol carries it (`{"action": …, "content": …}`).
    pub fn to_value(&self) -> Value {
        match self {
            InputResponse::Accept(content) => {
                json!({"action": InputAction::Accept.as_str(), "content": content})
            }
            other => json!({ "action": other.action() }),
        }
    }
}

impl InputResponse {
    /// Reads an answer as the protocol carries it (see [`to_value`](Self::to_value));
    /// `None` for anything else.
    pub fn from_value(v: &Value) -> Option<Self> {
        match InputAction::of(v.get("action")?.as_str()?)? {
            InputAction::Accept => Some(InputResponse::Accept(
                v.get("content")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
            )),
            InputAction::Decline => Some(InputResponse::Decline),
            InputAction::Cancel => Some(InputResponse::Cancel),
        }
    }

    /// `accept`, `decline` or `cancel`.
    pub fn action(&self) -> &'static str {
        self.kind().as_str()
    }

    /// What the person did.
    pub fn kind(&self) -> InputAction {
        match self {
            InputResponse::Accept(_) => InputAction::Accept,
            InputResponse::Decline => InputAction::Decline,
            InputResponse::Cancel => InputAction::Cancel,
        }
    }
}

/// Answers a server's requests for input from a person.
#[diagnostic::on_unimplemented(
    note = "an input handler is an `async` closure `|request: InputRequest| async {{ InputResponse::Decline }}` or a type implementing `InputHandler`"
)]
pub trait InputHandler: Send + Sync + 'static {
    /// Asks the person and returns their answer.
    fn handle(&self, request: InputRequest) -> BoxFuture<'static, InputResponse>;
}

impl<F, Fut> InputHandler for F
where
    F: Fn(InputRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = InputResponse> + Send + 'static,
{
    fn handle(&self, request: InputRequest) -> BoxFuture<'static, InputResponse> {
        Box::pin(self(request))
    }
}

/// Answers `sampling/createMessage` (deprecated by the protocol, still used by older
/// servers): given the request's params, return a `CreateMessageResult` object.
pub trait SamplingHandler: Send + Sync + 'static {
    /// Runs the completion.
    fn create_message(&self, params: Value) -> BoxFuture<'static, Result<Value, ErrorObject>>;
}

impl<F, Fut> SamplingHandler for F
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ErrorObject>> + Send + 'static,
{
    fn create_message(&self, params: Value) -> BoxFuture<'static, Result<Value, ErrorObject>> {
        Box::pin(self(params))
    }
}

/// A root the client exposes to a server (deprecated by the protocol).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Root {
    /// A `file://` URI.
    pub uri: String,
    /// A name for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Answers `roots/list`.
pub trait RootsHandler: Send + Sync + 'static {
    /// The roots to expose.
    fn roots(&self) -> BoxFuture<'static, Vec<Root>>;
}

impl RootsHandler for Vec<Root> {
    fn roots(&self) -> BoxFuture<'static, Vec<Root>> {
        let r = self.clone();
        Box::pin(async move { r })
    }
}

/// What a call that leaves input to its caller came to
/// ([`CallTool::pause_on_input`](crate::CallTool::pause_on_input),
/// [`McpTool::call_pausing`](crate::McpTool::call_pausing),
/// [`Task::wait_pausing`](crate::client::Task::wait_pausing)): the tool's result, or the
/// input a 2026-07-28 server asked for. Needing input is not an error: the same call,
/// made again [`with_input_answers`](crate::RequestOptions::with_input_answers), goes
/// on — later, in another process if need be.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CallOutcome<T = crate::model::CallToolResult> {
    /// The call ended: its result.
    Done(T),
    /// The server asked for input; nothing of the call's result is known yet. Boxed:
    /// a call that ends moves only its result through the call's layers.
    NeedsInput(Box<PendingInput>),
}

impl<T> CallOutcome<T> {
    /// The result, if the call ended.
    pub fn done(self) -> Option<T> {
        match self {
            CallOutcome::Done(t) => Some(t),
            CallOutcome::NeedsInput(_) => None,
        }
    }
    /// The input asked for, if the call waits for it.
    pub fn needs_input(&self) -> Option<&PendingInput> {
        match self {
            CallOutcome::Done(_) => None,
            CallOutcome::NeedsInput(p) => Some(p),
        }
    }
}

/// What a request that takes no outcome ends with: its result. Input left to the
/// caller cannot come back here — only the options of calls that return a
/// [`CallOutcome`] leave input to the caller — and is an error if it does.
pub(crate) fn ended<T>(server: &str, method: &str, outcome: CallOutcome<T>) -> crate::Result<T> {
    match outcome {
        CallOutcome::Done(t) => Ok(t),
        CallOutcome::NeedsInput(_) => Err(Error::unsupported(format!(
            "{server} asked for input that `{method}` leaves to its caller, and the caller takes no outcome"
        ))),
    }
}

/// Input a 2026-07-28 server asked for that a call left to its caller (a
/// [`CallOutcome::NeedsInput`]): the requests, and what the server needs back to go
/// on. It serializes, so it can wait in
/// a store and be answered in another process with
/// [`RequestOptions::with_input_answers`](crate::RequestOptions::with_input_answers).
///
/// The server's `requestState` is opaque and kept as sent; servers may seal it to
/// their own process, in which case a restarted server asks again.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PendingInput {
    server: String,
    /// The `inputRequests` object as the server sent it.
    requests: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<Value>,
    /// The background task waiting for the input (tasks extension), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task: Option<String>,
}

impl PendingInput {
    pub(crate) fn new(
        server: &str,
        requests: Value,
        state: Option<Value>,
        task: Option<String>,
    ) -> Self {
        PendingInput {
            server: server.to_owned(),
            requests: match requests {
                Value::Object(m) => m,
                _ => Map::new(),
            },
            state,
            task,
        }
    }

    /// The server that asked.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The requests, by the server's key for each. Only elicitations are requests a
    /// person answers; anything else (a request this client cannot parse) is an error
    /// naming the key, for which `is_invalid_response()` is true.
    pub fn requests(&self) -> crate::Result<Vec<(String, InputRequest)>> {
        let mut out = Vec::with_capacity(self.requests.len());
        for (key, req) in &self.requests {
            let method = req.get("method").and_then(Value::as_str).unwrap_or("");
            if method != crate::protocol::Method::ElicitationCreate.as_str() {
                return Err(crate::Error::invalid_response(format!(
                    "{} asked for `{method}` under `{key}`, which a person cannot answer",
                    self.server
                )));
            }
            let params = req.get("params").unwrap_or(&Value::Null);
            let r = InputRequest::from_params(&self.server, params).map_err(|e| {
                crate::Error::invalid_response(format!(
                    "{} asked for input under `{key}`: {e}",
                    self.server
                ))
            })?;
            out.push((key.clone(), r));
        }
        Ok(out)
    }

    /// The keys of the requests.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.requests.keys().map(String::as_str)
    }

    /// The id of the background task that waits for the input, when the call became a
    /// task (its answers go to the task, and waiting goes on from there).
    pub fn task_id(&self) -> Option<&str> {
        self.task.as_deref()
    }

    pub(crate) fn state(&self) -> Option<&Value> {
        self.state.as_ref()
    }

    /// Takes the server's opaque `requestState` out, to keep it elsewhere: a server
    /// that asks in several rounds may carry earlier answers in it (secrets included)
    /// unencrypted. Put it back with [`set_request_state`](Self::set_request_state)
    /// before answering; answered without it, the server starts its questions over.
    pub fn take_request_state(&mut self) -> Option<Value> {
        self.state.take()
    }

    /// Puts the server's `requestState` back (see
    /// [`take_request_state`](Self::take_request_state)).
    pub fn set_request_state(&mut self, state: Option<Value>) {
        self.state = state;
    }
}

/// Answers to a [`PendingInput`], to send with the retried call or to its task.
#[derive(Clone, Debug)]
pub(crate) struct InputAnswers {
    pub(crate) pending: PendingInput,
    pub(crate) responses: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_fields_are_write_only_or_password_fields() {
        let request = InputRequest::from_params(
            "s",
            &json!({"message": "sign in", "requestedSchema": {"type": "object", "properties": {
                "user": {"type": "string"},
                "password": {"type": "string", "format": "password"},
                "pin": {"type": "string", "writeOnly": true},
                "email": {"type": "string", "format": "email", "writeOnly": false}
            }}}),
        )
        .unwrap();
        let mut secret = request.secret_fields();
        secret.sort();
        assert_eq!(secret, ["password", "pin"]);
        let url =
            InputRequest::from_params("s", &json!({"mode": "url", "url": "https://a.example"}))
                .unwrap();
        assert!(url.secret_fields().is_empty());
    }
}
