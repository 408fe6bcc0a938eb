//! What every model wire is configured with: the [`Endpoint`] (where, which model,
//! the key, streaming, headers, the pooled client), the request [`Settings`], and the
//! builder methods every wire has ([`settings!`](settings)).

use std::sync::Arc;

use mcp_runtime::Secret;
use serde_json::{json, Value};

use super::http::{other, HttpClient};
use crate::model::{ChatRequest, ModelError, Role, ToolChoice};

/// A request's headers: plain ones and secret ones.
pub(crate) type Headers<'a> = (Vec<(&'a str, &'a str)>, Vec<(&'a str, &'a Secret)>);

/// Called with each piece of streamed text.
pub(crate) type TextFn = Arc<dyn Fn(&str) + Send + Sync>;

/// What every wire is configured with: where, which model, the key, streaming, the
/// request settings, and the pooled client. The model is chosen by configuration only:
/// there is no default.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<Secret>,
    pub stream: bool,
    pub on_text: Option<TextFn>,
    pub http: HttpClient,
    pub settings: Settings,
    /// Extra headers sent with every request (their values are scrubbed from errors
    /// too).
    pub headers: Vec<(String, String)>,
    /// Extra headers whose values are secrets (sent marked sensitive).
    pub secret_headers: Vec<(String, Secret)>,
    /// Query parameters added to every request's URL.
    pub query: Vec<(String, String)>,
    /// Why the base URL needs [`allow_insecure`](Self::allow_insecure): plain `http://`
    /// to another machine.
    pub insecure: Option<String>,
    /// The caller allowed plain `http://` to another machine.
    pub allow_insecure: bool,
}

/// What a request asks of the model, on either wire (each sends what it has).
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub stop: Vec<String>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    /// Fields merged into every request body, last (a provider's own options).
    pub extra_body: serde_json::Map<String, Value>,
}

impl Settings {
    /// Sets `temperature` and `top_p` in `body`, when given (both wires name them so).
    pub fn sampling(&self, body: &mut Value) {
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(p) = self.top_p {
            body["top_p"] = json!(p);
        }
    }

    /// The tool choice for `request`: a forced choice holds for the turn that answers
    /// the person; once tool results came back the model may answer in text (else it
    /// never could).
    pub fn tool_choice_for(&self, request: &ChatRequest) -> ToolChoice {
        let answering_results = request
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Tool);
        match self.tool_choice.clone().unwrap_or_default() {
            ToolChoice::Required | ToolChoice::Tool(_) if answering_results => ToolChoice::Auto,
            other => other,
        }
    }
}

impl Endpoint {
    /// `e` without any secret or header value this endpoint sends in its text.
    pub fn redact(&self, e: ModelError) -> ModelError {
        let secrets = self.secrets();
        if secrets.is_empty() {
            return e;
        }
        e.redacted(&secrets)
    }

    /// Every secret and header value this endpoint sends: none may come back in an
    /// error.
    pub fn secrets(&self) -> Vec<&str> {
        let mut secrets: Vec<&str> = Vec::new();
        if let Some(k) = &self.api_key {
            secrets.push(k.expose());
        }
        secrets.extend(self.secret_headers.iter().map(|(_, v)| v.expose()));
        secrets.extend(self.headers.iter().map(|(_, v)| v.as_str()));
        secrets
    }

    /// Checks the URL (https, or http to this machine — or to another, once allowed
    /// with [`allow_insecure`](Self::allow_insecure)) and that a model is named.
    pub fn new(base_url: String, model: String) -> Result<Self, ModelError> {
        let base_url = base_url.trim_end_matches('/').to_owned();
        if base_url.contains(['?', '#']) {
            return Err(other(
                "the model's base URL has a query or fragment: give query parameters with .query(name, value)".into(),
            ));
        }
        let (http, insecure) = match HttpClient::new(&base_url) {
            Ok(http) => (http, None),
            Err(e) => {
                // Plain http to another machine: allowed only when asked for.
                let as_https = base_url
                    .strip_prefix("http://")
                    .map(|r| format!("https://{r}"));
                match as_https {
                    Some(u) if mcp_runtime_core::url_rule::check(&u).is_ok() => {
                        (HttpClient::pool()?, Some(e.to_string()))
                    }
                    _ => return Err(e),
                }
            }
        };
        if model.trim().is_empty() {
            return Err(other(
                "no model id: name one (there is no default model)".into(),
            ));
        }
        Ok(Endpoint {
            base_url,
            model,
            api_key: None,
            stream: false,
            on_text: None,
            http,
            settings: Settings::default(),
            headers: Vec::new(),
            secret_headers: Vec::new(),
            query: Vec::new(),
            insecure,
            allow_insecure: false,
        })
    }

    /// The URL of `path` (`/chat/completions`, …) with the query parameters; refused
    /// for plain `http://` to another machine unless allowed — nothing is sent, the
    /// API key least of all.
    pub fn url(&self, path: &str) -> Result<String, ModelError> {
        if let (Some(why), false) = (&self.insecure, self.allow_insecure) {
            return Err(other(format!(
                "{why}; to send to a model server on another machine in clear (the API key and every prompt with it), call allow_insecure_http()"
            )));
        }
        let mut url = format!("{}{path}", self.base_url);
        if !self.query.is_empty() {
            let mut q = form_urlencoded::Serializer::new(String::new());
            for (k, v) in &self.query {
                q.append_pair(k, v);
            }
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&q.finish());
        }
        Ok(url)
    }

    /// The extra headers of every request: plain ones and secret ones.
    pub fn extra_headers(&self) -> Headers<'_> {
        (
            self.headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            self.secret_headers
                .iter()
                .map(|(k, v)| (k.as_str(), v))
                .collect(),
        )
    }

    /// Merges the extra body fields into `body`.
    pub fn finish_body(&self, body: &mut Value) {
        if let Some(b) = body.as_object_mut() {
            for (k, v) in &self.settings.extra_body {
                b.insert(k.clone(), v.clone());
            }
        }
    }

    /// Streams answers and hands each piece of text to `f`.
    pub fn on_text(&mut self, f: impl Fn(&str) + Send + Sync + 'static) {
        self.stream = true;
        self.on_text = Some(Arc::new(f));
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field(
                "base_url",
                &mcp_runtime_core::url_rule::redact(&self.base_url),
            )
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("stream", &self.stream)
            .finish()
    }
}

/// The builder methods every wire shares (it has an `endpoint: Endpoint`).
macro_rules! settings {
    () => {
        /// The API key, sent as the wire's credential header (never logged, never in
        /// errors).
        pub fn api_key(mut self, key: impl Into<String>) -> Self {
            self.endpoint.api_key = Some(mcp_runtime::Secret::new(key.into()));
            self
        }

        /// Streams answers: the same answer, read as it is generated.
        pub fn streaming(mut self, on: bool) -> Self {
            self.endpoint.stream = on;
            self
        }

        /// Streams answers and calls `f` with each piece of text as it arrives.
        pub fn on_text(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
            self.endpoint.on_text(f);
            self
        }

        /// How long one model call may take, its whole answer included (default 5
        /// minutes).
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.endpoint.http.set_timeout(timeout);
            self
        }

        /// The sampling temperature.
        pub fn temperature(mut self, t: f64) -> Self {
            self.endpoint.settings.temperature = Some(t);
            self
        }

        /// Nucleus sampling: the probability mass to sample from.
        pub fn top_p(mut self, p: f64) -> Self {
            self.endpoint.settings.top_p = Some(p);
            self
        }

        /// The most tokens one answer may take. An answer cut there ends the run as
        /// [`Outcome::Truncated`](crate::Outcome::Truncated), never taken as complete.
        pub fn max_tokens(mut self, n: u32) -> Self {
            self.endpoint.settings.max_tokens = Some(n);
            self
        }

        /// Stop sequences: the answer ends before any of them.
        pub fn stop<I, S>(mut self, sequences: I) -> Self
        where
            I: IntoIterator<Item = S>,
            S: Into<String>,
        {
            self.endpoint.settings.stop = sequences.into_iter().map(Into::into).collect();
            self
        }

        /// Which tools the model may or must call (default
        /// [`ToolChoice::Auto`](crate::model::ToolChoice::Auto), sent whenever tools are
        /// offered).
        pub fn tool_choice(mut self, choice: crate::model::ToolChoice) -> Self {
            self.endpoint.settings.tool_choice = Some(choice);
            self
        }

        /// Whether one answer may ask for several tool calls (the provider's default
        /// when not set).
        pub fn parallel_tool_calls(mut self, on: bool) -> Self {
            self.endpoint.settings.parallel_tool_calls = Some(on);
            self
        }

        /// A header sent with every request (OpenRouter's `HTTP-Referer`, …). Its
        /// value is scrubbed from errors like a secret's.
        pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.endpoint.headers.push((name.into(), value.into()));
            self
        }

        /// A header whose value is a credential (Azure OpenAI's `api-key`): sent marked
        /// sensitive, never logged, scrubbed from errors.
        pub fn secret_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.endpoint
                .secret_headers
                .push((name.into(), mcp_runtime::Secret::new(value.into())));
            self
        }

        /// A query parameter on every request's URL (Azure OpenAI's `api-version`).
        pub fn query(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.endpoint.query.push((name.into(), value.into()));
            self
        }

        /// Fields merged into every request body, last: a provider's own options this
        /// crate has no method for. A JSON object; anything else is ignored.
        pub fn extra_body(mut self, fields: serde_json::Value) -> Self {
            if let serde_json::Value::Object(m) = fields {
                self.endpoint.settings.extra_body.extend(m);
            }
            self
        }

        /// Allows a plain `http://` base URL on another machine (a model server on
        /// your network). Everything goes in clear — prompts, results, the API key.
        /// Without it such a URL is refused before anything is sent (`http://` to this
        /// machine needs nothing).
        pub fn allow_insecure_http(mut self) -> Self {
            self.endpoint.allow_insecure = true;
            self
        }
    };
}

pub(crate) use settings;
