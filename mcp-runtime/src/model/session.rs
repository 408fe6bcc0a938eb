//! What a session says about itself, apart from tools, prompts and resources: who each
//! side is (implementation info), what a server can do (its capabilities), progress and
//! log levels.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Name, version and description of a client or server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Implementation {
    /// Programmatic name.
    #[serde(default)]
    pub name: String,
    /// Version string.
    #[serde(default)]
    pub version: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Website.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
    /// Fields this crate does not model.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Progress a server reports while it works on a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// How far along (increases every time).
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// What is happening.
    pub message: Option<String>,
}

/// A log message a server sent (`notifications/message`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LogMessage {
    /// How severe it is (`None` for a level the protocol does not name).
    pub level: Option<LogLevel>,
    /// Which part of the server wrote it.
    pub logger: Option<String>,
    /// What it says: any JSON, most often a string.
    pub data: serde_json::Value,
}

/// The protocol's log levels, from least to most severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Notice.
    Notice,
    /// Warning.
    Warning,
    /// Error.
    Error,
    /// Critical.
    Critical,
    /// Alert.
    Alert,
    /// Emergency.
    Emergency,
}

impl LogLevel {
    /// Every level, least severe first.
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// The protocol's name for the level (`mcp_runtime_core::protocol::LOG_LEVELS`, which the
    /// `#[mcp]` macro checks `log_level` against).
    pub fn as_str(self) -> &'static str {
        // The variants are declared in the protocol's order, least severe first.
        crate::protocol::LOG_LEVELS[self as usize]
    }
}

impl std::str::FromStr for LogLevel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        LogLevel::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| {
                Error::config(format!(
                    "unknown MCP log level `{s}`; use one of debug, info, notice, warning, error, critical, alert, emergency"
                ))
            })
    }
}

/// What the server can do, as it said when the session started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerCapabilities(pub Value);

impl ServerCapabilities {
    fn flag(&self, area: &str, key: Option<&str>) -> bool {
        match self.0.get(area) {
            None | Some(Value::Null) => false,
            Some(v) => match key {
                None => true,
                Some(k) => v.get(k).and_then(Value::as_bool).unwrap_or(false),
            },
        }
    }
    /// The server offers tools.
    pub fn tools(&self) -> bool {
        self.flag("tools", None)
    }
    /// The server offers prompts.
    pub fn prompts(&self) -> bool {
        self.flag("prompts", None)
    }
    /// The server offers resources.
    pub fn resources(&self) -> bool {
        self.flag("resources", None)
    }
    /// The server completes arguments.
    pub fn completions(&self) -> bool {
        self.flag("completions", None)
    }
    /// The server sends log messages.
    pub fn logging(&self) -> bool {
        self.flag("logging", None)
    }
    /// The server announces changes to its tool list.
    pub fn tools_list_changed(&self) -> bool {
        self.flag("tools", Some("listChanged"))
    }
    /// The server announces changes to its prompt list.
    pub fn prompts_list_changed(&self) -> bool {
        self.flag("prompts", Some("listChanged"))
    }
    /// The server announces changes to its resource list.
    pub fn resources_list_changed(&self) -> bool {
        self.flag("resources", Some("listChanged"))
    }
    /// The server lets clients subscribe to resource changes.
    pub fn resources_subscribe(&self) -> bool {
        self.flag("resources", Some("subscribe"))
    }
    /// The settings the server declared for an extension (`capabilities.extensions`),
    /// when it declared it.
    pub fn extension(&self, name: &str) -> Option<&Value> {
        self.0.get("extensions").and_then(|e| e.get(name))
    }
    /// The extensions the server supports (`capabilities.extensions`).
    pub fn extensions(&self) -> Vec<String> {
        self.0
            .get("extensions")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }
}
