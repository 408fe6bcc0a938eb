//! Facts of the protocol itself, at the bottom of the crate: versions and eras, the
//! `_meta` keys of 2026-07-28, extension names, JSON-RPC error codes, and what each
//! method does (retried with input? reports progress?). Everything else builds on these;
//! this module imports nothing from the rest of the crate.

/// The newest protocol version, the stateless 2026-07-28 revision.
pub const LATEST_PROTOCOL_VERSION: &str = "2026-07-28";
/// Modern (stateless, per-request `_meta`) versions this client speaks, newest first.
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];
/// Legacy (`initialize` handshake) versions this client speaks, newest first.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The two eras of the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28 and later: no handshake; version and capabilities on every request.
    Modern,
    /// 2025-11-25 and earlier: `initialize` handshake, server-to-client requests.
    Legacy,
}

/// `_meta` keys of a 2026-07-28 request and result.
pub(crate) mod meta {
    pub(crate) const VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub(crate) const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub(crate) const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub(crate) const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    pub(crate) const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
}

/// The tasks extension of 2026-07-28.
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The MCP Apps extension.
pub(crate) const APPS_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// JSON-RPC error codes the client sends or acts on.
pub(crate) mod code {
    /// The method does not exist (or is not offered).
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    /// The params are wrong.
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    /// Something broke on the answering side.
    pub(crate) const INTERNAL_ERROR: i64 = -32603;
    /// 2026-07-28: the `Mcp-*` headers do not match the body.
    pub(crate) const HEADER_MISMATCH: i64 = -32020;
    /// No protocol version in common.
    pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;
    /// The same, as drafts of 2026-07-28 numbered it.
    pub(crate) const UNSUPPORTED_VERSION_DRAFT: i64 = -32004;
    /// A resource that does not exist (servers before 2026-07-28).
    pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;
    /// The same, as drafts of 2026-07-28 numbered it.
    pub(crate) const HEADER_MISMATCH_DRAFT: i64 = -32001;
}

/// What a request method does, as far as the session cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Method {
    /// A 2026-07-28 server may answer it with `input_required`: the request is sent
    /// again with the answers (so its params are kept).
    pub(crate) input_rounds: bool,
    /// It always carries a progress token (progress keeps it from timing out).
    pub(crate) progress: bool,
}

impl Method {
    /// The facts of `method`.
    pub(crate) fn of(method: &str) -> Method {
        match method {
            "tools/call" => Method {
                input_rounds: true,
                progress: true,
            },
            "prompts/get" | "resources/read" => Method {
                input_rounds: true,
                progress: false,
            },
            _ => Method {
                input_rounds: false,
                progress: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_calls_prompts_and_reads_take_input_rounds() {
        for m in ["tools/call", "prompts/get", "resources/read"] {
            assert!(Method::of(m).input_rounds, "{m}");
        }
        for m in ["tools/list", "tasks/get", "ping", "server/discover"] {
            assert_eq!(
                Method::of(m),
                Method {
                    input_rounds: false,
                    progress: false
                },
                "{m}"
            );
        }
        assert!(Method::of("tools/call").progress);
    }
}
