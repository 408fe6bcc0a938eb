//! The agent's one error type.

use std::fmt;

use crate::model::ModelError;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What stopped a run. Opaque: ask it with the `is_*` predicates. A denied or failed
/// tool call is not an error (the model gets an error result and the loop goes on).
pub struct Error {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Model(ModelError),
    Mcp(mcp_runtime::Error),
    /// Servers that failed to stop, by name (at least one).
    Closing(Vec<(String, mcp_runtime::Error)>),
    Store(String, Option<Box<dyn std::error::Error + Send + Sync>>),
    /// Another process holds the run now.
    LeaseLost(String),
    /// The stored run is older than what its ledger records (put back from a copy).
    RolledBack(String),
    /// The run was deleted while this process held it.
    Deleted(String),
    Config(String),
    NotSuspended(String),
    /// A decision its principal may not make (the `authorize` callback said no).
    Unauthorized(String),
    /// A decision that does not apply to what the run waits for now; `waiting` when
    /// the run still waits (for another decision).
    Stale {
        detail: String,
        waiting: bool,
    },
}

impl Error {
    pub(crate) fn store(detail: impl Into<String>) -> Self {
        Error {
            kind: Kind::Store(detail.into(), None),
        }
    }
    /// A store error caused by `source` (kept for [`std::error::Error::source`]).
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn store_from(
        detail: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error {
            kind: Kind::Store(detail.into(), Some(Box::new(source))),
        }
    }
    /// The servers that failed to stop, each with why.
    pub(crate) fn closing(failed: Vec<(String, mcp_runtime::Error)>) -> Self {
        Error {
            kind: Kind::Closing(failed),
        }
    }
    pub(crate) fn lease_lost(detail: impl Into<String>) -> Self {
        Error {
            kind: Kind::LeaseLost(detail.into()),
        }
    }
    pub(crate) fn rolled_back(detail: impl Into<String>) -> Self {
        Error {
            kind: Kind::RolledBack(detail.into()),
        }
    }
    pub(crate) fn deleted(detail: impl Into<String>) -> Self {
        Error {
            kind: Kind::Deleted(detail.into()),
        }
    }
    pub(crate) fn config(detail: impl Into<String>) -> Self {
        Error {
            kind: Kind::Config(detail.into()),
        }
    }
    pub(crate) fn not_suspended(detail: impl Into<String>) -> Self {
        Error {
            kind: Kind::NotSuspended(detail.into()),
        }
    }
    pub(crate) fn unauthorized(detail: impl Into<String>) -> Self {
        Error {
            kind: Kind::Unauthorized(detail.into()),
        }
    }
    pub(crate) fn stale(detail: impl Into<String>, waiting: bool) -> Self {
        Error {
            kind: Kind::Stale {
                detail: detail.into(),
                waiting,
            },
        }
    }

    /// The model call failed (see [`model_error`](Self::model_error)).
    pub fn is_model(&self) -> bool {
        matches!(self.kind, Kind::Model(_))
    }
    /// The model provider's error, for a model failure.
    pub fn model_error(&self) -> Option<&ModelError> {
        match &self.kind {
            Kind::Model(e) => Some(e),
            _ => None,
        }
    }
    /// Listing an attached server's tools failed (a tool call that fails is not an
    /// error), or stopping servers did ([`Agent::close`](crate::Agent::close)).
    pub fn is_mcp(&self) -> bool {
        matches!(self.kind, Kind::Mcp(_) | Kind::Closing(_))
    }
    /// The run store failed (or refused a change: see
    /// [`is_lease_lost`](Self::is_lease_lost)).
    pub fn is_store(&self) -> bool {
        matches!(
            self.kind,
            Kind::Store(..) | Kind::LeaseLost(_) | Kind::RolledBack(_) | Kind::Deleted(_)
        )
    }
    /// The stored run is older than what its sent ledger records: a copy of it was put
    /// back (a restored backup, a rolled-back store). It is refused — by resume,
    /// retry, recover and `recover_stale` — so no approved call runs twice and no spent
    /// decision applies again; an [`Event::RunRolledBack`](crate::Event::RunRolledBack)
    /// says so. Cancel or delete it.
    pub fn is_rolled_back(&self) -> bool {
        matches!(self.kind, Kind::RolledBack(_))
    }
    /// The run was deleted ([`Agent::delete`](crate::Agent::delete)) while this
    /// process held it: its save is refused and the run stays deleted.
    pub fn is_deleted(&self) -> bool {
        matches!(self.kind, Kind::Deleted(_))
    }
    /// This process no longer holds the run: its lease ended and another process
    /// recovered the run ([`Agent::recover`](crate::Agent::recover)), or claimed it
    /// again. What this process did since is not kept; the holder goes on.
    pub fn is_lease_lost(&self) -> bool {
        matches!(self.kind, Kind::LeaseLost(_))
    }
    /// The agent is configured in a way that cannot work.
    pub fn is_config(&self) -> bool {
        matches!(self.kind, Kind::Config(_))
    }
    /// A resume of a run that is not waiting for a decision (decided already — by a
    /// concurrent resume, say — finished, or unknown), or a retry of a run that has
    /// not failed.
    pub fn is_not_suspended(&self) -> bool {
        matches!(
            self.kind,
            Kind::NotSuspended(_) | Kind::Stale { waiting: false, .. }
        )
    }
    /// A decision that does not apply to what the run waits for now, refused without
    /// changing anything: one already applied (a double click, a retry, a concurrent
    /// person), one for an earlier suspension of the run, one of the other kind (an
    /// answer to a call that waits for approval, or an approval to one that waits for
    /// input), or one for a run that is not waiting at all.
    pub fn is_stale_decision(&self) -> bool {
        matches!(self.kind, Kind::Stale { .. })
    }
    /// A decision refused because its principal may not make it (the agent's
    /// [`authorize`](crate::AgentBuilder::authorize) callback said no): nothing
    /// changed, the run still waits in the same suspension.
    pub fn is_unauthorized(&self) -> bool {
        matches!(self.kind, Kind::Unauthorized(_))
    }
}

impl From<ModelError> for Error {
    fn from(e: ModelError) -> Self {
        Error {
            kind: Kind::Model(e),
        }
    }
}

impl From<mcp_runtime::Error> for Error {
    fn from(e: mcp_runtime::Error) -> Self {
        Error { kind: Kind::Mcp(e) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Model(e) => write!(f, "{e}"),
            Kind::Mcp(e) => write!(f, "an MCP server: {e}"),
            Kind::Closing(failed) => {
                let n = failed.len();
                write!(
                    f,
                    "{n} MCP server{} failed to stop",
                    if n == 1 { "" } else { "s" }
                )?;
                for (i, (server, e)) in failed.iter().enumerate() {
                    write!(f, "{} `{server}`: {e}", if i == 0 { ":" } else { ";" })?;
                }
                Ok(())
            }
            Kind::Store(d, _) | Kind::LeaseLost(d) | Kind::RolledBack(d) | Kind::Deleted(d) => {
                write!(f, "the run store: {d}")
            }
            Kind::Config(d) => write!(f, "agent configuration: {d}"),
            Kind::NotSuspended(d) => write!(f, "{d}"),
            Kind::Unauthorized(d) => write!(f, "a decision not authorized, refused: {d}"),
            Kind::Stale { detail, .. } => write!(f, "a stale decision, refused: {detail}"),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.kind, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::Model(e) => Some(e),
            Kind::Mcp(e) => Some(e),
            Kind::Closing(failed) => failed.first().map(|(_, e)| e as _),
            Kind::Store(_, Some(e)) => Some(&**e),
            _ => None,
        }
    }
}

/// At most `n` characters of `s`.
pub(crate) fn clip(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}
