//! The agent layer of the MCP client toolkit: a model, attached MCP servers, and a tool
//! loop in which **every MCP call is gated, fail-closed**, and a call that needs a
//! person **suspends the run durably**, to be resumed in this process or another.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use mcp_agent::{Agent, ChatCompletions, Decision, Mode, Outcome, SqliteRunStore};
//! use mcp_runtime::Mcp;
//!
//! let files = Mcp::builder("fs")
//!     .command(["npx", "-y", "@modelcontextprotocol/server-filesystem", "/data"])
//!     .build()?;
//! let agent = Agent::builder()
//!     .model(ChatCompletions::new("http://localhost:11434/v1", std::env::var("AGENT_MODEL")?)?)
//!     .mode(Mode::Approve)                                 // allow-listed tools run; others wait for a person
//!     .allow(["read_text_file", "list_directory"])         // exact names; empty means none
//!     .server(files)
//!     .store(SqliteRunStore::open(".mcp-agent/runs.sqlite3")?)
//!     .build()?;
//! match agent.run("Tidy the notes folder").await? {
//!     Outcome::Finished { text, .. } => println!("{text}"),
//!     Outcome::ApprovalRequired { run_id, tool, decision, .. } => {
//!         println!("suspended run={run_id} tool={tool} decision={decision}");
//!         // later, anywhere with the same store: a decision names what it decides
//!         agent.resume(&run_id, &decision, Decision::approve("ann")).await?;
//!     }
//!     other => println!("{other:?}"),
//! }
//! agent.close().await?;
//! # Ok(()) }
//! ```
//!
//! * [`gate`] — the permission modes and the allow-list, and what a model is offered.
//! * [`model`] — the provider-neutral transcript and the [`Model`] trait;
//!   [`ChatCompletions`] speaks the OpenAI-compatible wire, [`Messages`] Anthropic's.
//! * [`store`] — where suspended runs wait: memory, or a SQLite file.
//!
//! MCP tool *effects* are not sandboxed: the gate decides whether a call may run; what
//! the server then does is the server's. Allow write tools deliberately.
#![deny(missing_docs)]

mod agent;
mod content;
mod error;
pub mod function;
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
pub mod model;
pub mod store;
#[cfg(feature = "web")]
pub mod web;
mod wire;

pub use agent::{
    Agent, AgentBuilder, Allowance, Always, AnswerCheck, BeforeCall, Binding, Budget, BudgetLimit,
    CallInfo, CallResult, Compaction, Conversation, Decision, DecisionAsk, DecisionKind, Event,
    Expiry, InboxPage, InputAsk, Outcome, OutputSpec, Pending, PendingWait, Pin, Principal,
    RetryPolicy, RunDetail, RunEvent, RunEvents, RunHandle, RunOptions, SkillApproval,
    TypedOutcome, Worker, WorkerOptions, DEFAULT_REPAIRS, MAX_ANSWER_RETRIES, MAX_PROGRESS_KEPT,
};
pub use content::{trim_to, Input, DEFAULT_MAX_RESULT_SIZE, MAX_IMAGE_SIZE};
pub use error::{Error, Result};
pub use function::FunctionTool;
pub use gate::{Asked, Gate, Mode, ParseModeError, Verdict};
pub use mcp_runtime as runtime;
/// Attaches a server in one line, checked at compile time (see [`attach`](mcp_runtime_macros::attach)):
/// `mcp!(fs, command("npx", "-y", "@modelcontextprotocol/server-filesystem", "/data"))`.
pub use mcp_runtime_macros::attach as mcp;
pub use model::{stream_text, Model, ModelError, OutputFormat, ToolChoice, Usage, OUTPUT_TOOL};
#[cfg(feature = "postgres")]
pub use store::PostgresRunStore;
#[cfg(feature = "sqlite")]
pub use store::SqliteRunStore;
pub use store::{
    Blob, Claim, Durability, Lease, LedgerEntry, LedgerKind, MemoryRunStore, RunFilter, RunPage,
    RunRecord, RunStatus, RunStore, RunSummary, Transcript, EVENTS_MAX_WAIT, EVENTS_POLL,
    MAX_EVENTS_PAGE,
};
// The model wires: each module at the root, and its type (the list is in `wire`).
pub use wire::{anthropic, openai, responses, ChatCompletions, Messages, Responses};

/// The Rust blocks of the README and the guides, compiled (and run, unless `no_run`)
/// as doc tests, so they cannot drift from the API.
#[cfg(doctest)]
mod doc_files {
    #[doc = include_str!("../../README.md")]
    struct Readme;
    #[doc = include_str!("../../docs/agent.md")]
    struct Agent;
    #[doc = include_str!("../../docs/apps.md")]
    struct Apps;
    #[doc = include_str!("../../docs/declaring-servers.md")]
    struct DeclaringServers;
    #[doc = include_str!("../../docs/http.md")]
    struct Http;
    #[doc = include_str!("../../docs/oauth.md")]
    struct OAuth;
    #[doc = include_str!("../../docs/runtime.md")]
    struct Runtime;
    #[doc = include_str!("../../docs/skills.md")]
    struct Skills;
    #[doc = include_str!("../../docs/tasks.md")]
    struct Tasks;
}

/// The names most agent programs use, for one `use mcp_agent::prelude::*;` (with the
/// runtime's `Mcp`).
pub mod prelude {
    #[cfg(feature = "sqlite")]
    pub use crate::SqliteRunStore;
    pub use crate::{
        mcp, Agent, ChatCompletions, Decision, Error, Messages, Mode, Model, Outcome, Result,
    };
    pub use mcp_runtime::Mcp;
}
