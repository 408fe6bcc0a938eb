//! Facts of the protocol itself, at the bottom of the crate: versions and eras, the
//! `_meta` keys of 2026-07-28, extension names, JSON-RPC error codes, and what each
//! method does (retried with input? reports progress?). Everything else builds on these;
//! this module imports nothing.

/// The newest protocol version, the stateless 2026-07-28 revision.
pub const LATEST_PROTOCOL_VERSION: &str = "2026-07-28";
/// Modern (stateless, per-request `_meta`) versions this client speaks, newest first.
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];
/// Legacy (`initialize` handshake) versions this client speaks, newest first.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The log levels of `logging/setLevel` and `notifications/message`, least severe
/// first (the syslog levels of RFC 5424).
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The two eras of the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28 and later: no handshake; version and capabilities on every request.
    Modern,
    /// 2025-11-25 and earlier: `initialize` handshake, server-to-client requests.
    Legacy,
}

/// `_meta` keys of a 2026-07-28 request and result.
pub mod meta {
    /// The protocol version of the request.
    pub const VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's capabilities.
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The client's name and version.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The log level the client asks for.
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// The server's name and version (in a result).
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
}

/// The tasks extension of 2026-07-28.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The MCP Apps extension.
pub const APPS_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// JSON-RPC error codes the client sends or acts on.
pub mod code {
    /// The method does not exist (or is not offered).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params are wrong.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Something broke on the answering side.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// 2026-07-28: the `Mcp-*` headers do not match the body.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// No protocol version in common.
    pub const UNSUPPORTED_VERSION: i64 = -32022;
    /// The same, as drafts of 2026-07-28 numbered it.
    pub const UNSUPPORTED_VERSION_DRAFT: i64 = -32004;
    /// A resource that does not exist (servers before 2026-07-28).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// The same, as drafts of 2026-07-28 numbered it.
    pub const HEADER_MISMATCH_DRAFT: i64 = -32001;
}

/// The methods of the protocol: requests either side sends and the notifications the
/// client sends or reads. Every method name the crates use is spelled here, once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Method {
    /// `initialize`: the handshake of 2025-11-25 and earlier.
    Initialize,
    /// `server/discover`: what a 2026-07-28 server offers.
    ServerDiscover,
    /// `ping`.
    Ping,
    /// `tools/list`.
    ToolsList,
    /// `tools/call`.
    ToolsCall,
    /// `prompts/list`.
    PromptsList,
    /// `prompts/get`.
    PromptsGet,
    /// `resources/list`.
    ResourcesList,
    /// `resources/templates/list`.
    ResourceTemplatesList,
    /// `resources/read`.
    ResourcesRead,
    /// `resources/directory/read` (the skills extension).
    ResourcesDirectoryRead,
    /// `resources/subscribe`.
    ResourcesSubscribe,
    /// `resources/unsubscribe`.
    ResourcesUnsubscribe,
    /// `completion/complete`.
    CompletionComplete,
    /// `logging/setLevel`.
    LoggingSetLevel,
    /// `subscriptions/listen` (2026-07-28 change streams).
    SubscriptionsListen,
    /// `tasks/get`.
    TasksGet,
    /// `tasks/result`.
    TasksResult,
    /// `tasks/list`.
    TasksList,
    /// `tasks/cancel`.
    TasksCancel,
    /// `tasks/update`.
    TasksUpdate,
    /// `sampling/createMessage` (server to client).
    SamplingCreateMessage,
    /// `elicitation/create` (server to client).
    ElicitationCreate,
    /// `roots/list` (server to client).
    RootsList,
    /// `notifications/initialized`.
    Initialized,
    /// `notifications/cancelled`.
    Cancelled,
    /// `notifications/progress`.
    Progress,
    /// `notifications/message` (a log message).
    LogMessage,
    /// `notifications/tools/list_changed`.
    ToolsListChanged,
    /// `notifications/prompts/list_changed`.
    PromptsListChanged,
    /// `notifications/resources/list_changed`.
    ResourcesListChanged,
    /// `notifications/resources/updated`.
    ResourceUpdated,
    /// `notifications/roots/list_changed`.
    RootsListChanged,
    /// `notifications/tasks/status`.
    TaskStatus,
    /// `notifications/subscriptions/acknowledged`.
    SubscriptionsAcknowledged,
}

impl Method {
    /// Every method, for lookups by name.
    pub const ALL: [Method; 35] = [
        Method::Initialize,
        Method::ServerDiscover,
        Method::Ping,
        Method::ToolsList,
        Method::ToolsCall,
        Method::PromptsList,
        Method::PromptsGet,
        Method::ResourcesList,
        Method::ResourceTemplatesList,
        Method::ResourcesRead,
        Method::ResourcesDirectoryRead,
        Method::ResourcesSubscribe,
        Method::ResourcesUnsubscribe,
        Method::CompletionComplete,
        Method::LoggingSetLevel,
        Method::SubscriptionsListen,
        Method::TasksGet,
        Method::TasksResult,
        Method::TasksList,
        Method::TasksCancel,
        Method::TasksUpdate,
        Method::SamplingCreateMessage,
        Method::ElicitationCreate,
        Method::RootsList,
        Method::Initialized,
        Method::Cancelled,
        Method::Progress,
        Method::LogMessage,
        Method::ToolsListChanged,
        Method::PromptsListChanged,
        Method::ResourcesListChanged,
        Method::ResourceUpdated,
        Method::RootsListChanged,
        Method::TaskStatus,
        Method::SubscriptionsAcknowledged,
    ];

    /// The method's name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Initialize => "initialize",
            Method::ServerDiscover => "server/discover",
            Method::Ping => "ping",
            Method::ToolsList => "tools/list",
            Method::ToolsCall => "tools/call",
            Method::PromptsList => "prompts/list",
            Method::PromptsGet => "prompts/get",
            Method::ResourcesList => "resources/list",
            Method::ResourceTemplatesList => "resources/templates/list",
            Method::ResourcesRead => "resources/read",
            Method::ResourcesDirectoryRead => "resources/directory/read",
            Method::ResourcesSubscribe => "resources/subscribe",
            Method::ResourcesUnsubscribe => "resources/unsubscribe",
            Method::CompletionComplete => "completion/complete",
            Method::LoggingSetLevel => "logging/setLevel",
            Method::SubscriptionsListen => "subscriptions/listen",
            Method::TasksGet => "tasks/get",
            Method::TasksResult => "tasks/result",
            Method::TasksList => "tasks/list",
            Method::TasksCancel => "tasks/cancel",
            Method::TasksUpdate => "tasks/update",
            Method::SamplingCreateMessage => "sampling/createMessage",
            Method::ElicitationCreate => "elicitation/create",
            Method::RootsList => "roots/list",
            Method::Initialized => "notifications/initialized",
            Method::Cancelled => "notifications/cancelled",
            Method::Progress => "notifications/progress",
            Method::LogMessage => "notifications/message",
            Method::ToolsListChanged => "notifications/tools/list_changed",
            Method::PromptsListChanged => "notifications/prompts/list_changed",
            Method::ResourcesListChanged => "notifications/resources/list_changed",
            Method::ResourceUpdated => "notifications/resources/updated",
            Method::RootsListChanged => "notifications/roots/list_changed",
            Method::TaskStatus => "notifications/tasks/status",
            Method::SubscriptionsAcknowledged => "notifications/subscriptions/acknowledged",
        }
    }

    /// The method of this name, if the protocol has one.
    pub fn of(name: &str) -> Option<Method> {
        Some(match name {
            "initialize" => Method::Initialize,
            "server/discover" => Method::ServerDiscover,
            "ping" => Method::Ping,
            "tools/list" => Method::ToolsList,
            "tools/call" => Method::ToolsCall,
            "prompts/list" => Method::PromptsList,
            "prompts/get" => Method::PromptsGet,
            "resources/list" => Method::ResourcesList,
            "resources/templates/list" => Method::ResourceTemplatesList,
            "resources/read" => Method::ResourcesRead,
            "resources/directory/read" => Method::ResourcesDirectoryRead,
            "resources/subscribe" => Method::ResourcesSubscribe,
            "resources/unsubscribe" => Method::ResourcesUnsubscribe,
            "completion/complete" => Method::CompletionComplete,
            "logging/setLevel" => Method::LoggingSetLevel,
            "subscriptions/listen" => Method::SubscriptionsListen,
            "tasks/get" => Method::TasksGet,
            "tasks/result" => Method::TasksResult,
            "tasks/list" => Method::TasksList,
            "tasks/cancel" => Method::TasksCancel,
            "tasks/update" => Method::TasksUpdate,
            "sampling/createMessage" => Method::SamplingCreateMessage,
            "elicitation/create" => Method::ElicitationCreate,
            "roots/list" => Method::RootsList,
            "notifications/initialized" => Method::Initialized,
            "notifications/cancelled" => Method::Cancelled,
            "notifications/progress" => Method::Progress,
            "notifications/message" => Method::LogMessage,
            "notifications/tools/list_changed" => Method::ToolsListChanged,
            "notifications/prompts/list_changed" => Method::PromptsListChanged,
            "notifications/resources/list_changed" => Method::ResourcesListChanged,
            "notifications/resources/updated" => Method::ResourceUpdated,
            "notifications/roots/list_changed" => Method::RootsListChanged,
            "notifications/tasks/status" => Method::TaskStatus,
            "notifications/subscriptions/acknowledged" => Method::SubscriptionsAcknowledged,
            _ => return None,
        })
    }

    /// A 2026-07-28 server may answer it with `input_required`: the request is sent
    /// again with the answers (so its params are kept).
    pub const fn input_rounds(self) -> bool {
        matches!(
            self,
            Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead
        )
    }

    /// It always carries a progress token (progress keeps it from timing out).
    pub const fn progress(self) -> bool {
        matches!(self, Method::ToolsCall)
    }

    /// A notification (no answer), not a request.
    pub const fn is_notification(self) -> bool {
        self.as_str().as_bytes()[0] == b'n'
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a person did with a request for input: the `action` of an elicitation's
/// answer, in both eras.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputAction {
    /// Answered, with the values asked for.
    Accept,
    /// Said no.
    Decline,
    /// Dismissed the request without deciding.
    Cancel,
}

impl InputAction {
    /// The action a wire value names; `None` for a value the protocol does not define.
    pub fn of(value: &str) -> Option<InputAction> {
        match value {
            "accept" => Some(InputAction::Accept),
            "decline" => Some(InputAction::Decline),
            "cancel" => Some(InputAction::Cancel),
            _ => None,
        }
    }

    /// The wire value.
    pub const fn as_str(self) -> &'static str {
        match self {
            InputAction::Accept => "accept",
            InputAction::Decline => "decline",
            InputAction::Cancel => "cancel",
        }
    }
}

/// How a tool may be run as a task (`execution.taskSupport`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TaskSupport {
    /// It cannot be run as a task (the default).
    #[default]
    Forbidden,
    /// It may be run either way.
    Optional,
    /// It must be run as a task.
    Required,
}

impl TaskSupport {
    /// What a tool's `execution.taskSupport` value says; a value the protocol does not
    /// define is `Forbidden` (nothing is assumed of it).
    pub fn parse(value: Option<&str>) -> TaskSupport {
        match value {
            Some("required") => TaskSupport::Required,
            Some("optional") => TaskSupport::Optional,
            _ => TaskSupport::Forbidden,
        }
    }

    /// The wire value.
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_calls_prompts_and_reads_take_input_rounds() {
        for m in Method::ALL {
            let rounds = matches!(m.as_str(), "tools/call" | "prompts/get" | "resources/read");
            assert_eq!(m.input_rounds(), rounds, "{m}");
            assert_eq!(m.progress(), m.as_str() == "tools/call", "{m}");
        }
    }

    #[test]
    fn every_method_is_found_by_its_name_and_only_by_it() {
        for m in Method::ALL {
            assert_eq!(Method::of(m.as_str()), Some(m));
            assert_eq!(
                m.is_notification(),
                m.as_str().starts_with("notifications/")
            );
        }
        assert_eq!(Method::of("tools/call "), None);
        assert_eq!(Method::of("Tools/call"), None);
    }

    #[test]
    fn task_support_reads_only_the_protocols_words() {
        assert_eq!(TaskSupport::parse(Some("required")), TaskSupport::Required);
        assert_eq!(TaskSupport::parse(Some("optional")), TaskSupport::Optional);
        assert_eq!(TaskSupport::parse(Some("REQUIRED")), TaskSupport::Forbidden);
        assert_eq!(TaskSupport::parse(None), TaskSupport::Forbidden);
    }
}
