//! Why a command failed, and the exit code that tells a script: 1 the tool returned an
//! error result (or a snapshot is out of date), 2 usage, 3 connection or protocol
//! failure, 4 authorization needed, 130 interrupted.

use std::fmt;

/// The exit codes.
pub mod code {
    /// The tool returned an error result; a snapshot is out of date; a local file
    /// could not be written.
    pub const FAILED: u8 = 1;
    /// The command line, a name or a configuration file is wrong.
    pub const USAGE: u8 = 2;
    /// The server could not be reached or broke the protocol.
    pub const SERVER: u8 = 3;
    /// The server wants authorization.
    pub const AUTH: u8 = 4;
    /// Ctrl-C.
    pub const INTERRUPTED: u8 = 130;
}

/// A failed command: what to say, and how to exit.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What to say (may quote a server: printed escaped).
    pub message: String,
}

impl Failure {
    /// A failure with `code`.
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// A usage error.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(code::USAGE, message)
    }

    /// Ctrl-C.
    pub fn interrupted(what: &str) -> Failure {
        Failure::new(code::INTERRUPTED, format!("interrupted; {what}"))
    }

    /// A runtime error for the server `name`, with what to do about it.
    pub fn server(name: &str, e: mcp_runtime::Error) -> Failure {
        if e.is_unauthorized() {
            let var = token_var(name);
            return Failure::new(
                code::AUTH,
                format!("{e}\nthe server wants authorization: run `mcp login {name}` (or set {var} to a bearer token)"),
            );
        }
        if e.is_cancelled() {
            return Failure::interrupted("the server was told to stop");
        }
        if e.is_config() {
            return Failure::usage(e.to_string());
        }
        // What a stdio server wrote to stderr before it ended: shown to the person
        // who started it (it stays out of the error's Display, which apps log).
        let tail = e
            .server_stderr()
            .map(|lines| {
                let lines: Vec<String> = lines.lines().map(|l| format!("    {l}")).collect();
                format!("\nthe last lines it wrote to stderr:\n{}", lines.join("\n"))
            })
            .unwrap_or_default();
        Failure::new(code::SERVER, format!("{e}{tail}"))
    }
}

/// The variable a bearer token for the server `name` is read from.
pub fn token_var(name: &str) -> String {
    format!("MCP_TOKEN_{}", name.to_ascii_uppercase().replace('-', "_"))
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::new(code::FAILED, e.to_string())
    }
}

impl From<mcp_runtime::snapshot::SnapshotError> for Failure {
    fn from(e: mcp_runtime::snapshot::SnapshotError) -> Failure {
        Failure::usage(e.to_string())
    }
}

impl From<mcp_runtime_core::config::ConfigError> for Failure {
    fn from(e: mcp_runtime_core::config::ConfigError) -> Failure {
        Failure::usage(e.to_string())
    }
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Failure {
        Failure::new(
            code::SERVER,
            format!("cannot show the server's answer: {e}"),
        )
    }
}
