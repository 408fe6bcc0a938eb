//! The model wires: one skeleton, one file per provider.
//!
//! What every wire shares lives in the skeleton's modules: the [`endpoint`] (where,
//! which model, the key, headers, the request settings and the builder methods every
//! wire has), the [`http`] client (bounded answers and event streams, one deadline per
//! answer), the [`skeleton`] that runs a turn on any wire, the error kinds
//! ([`errors`]), the wait a provider asks for before a retry ([`retry_after`]),
//! reading a provider's fields ([`fields`]) and scrubbing secrets ([`redact`]). A provider's file holds only what differs: its body, its headers,
//! its answer, how its stream is put together, its words for an error.
//!
//! The providers are listed here, one line each: a new one is one file implementing
//! [`skeleton::Wire`] and [`skeleton::Stream`] (with `settings!()` in its inherent
//! impl and a [`Model`](crate::Model) impl that calls [`skeleton::complete`]), and its
//! line below; the crate root re-exports what is listed here.

pub mod anthropic;
pub mod openai;
pub mod responses;

pub use anthropic::Messages;
pub use openai::ChatCompletions;
pub use responses::Responses;

pub(crate) mod endpoint;
pub(crate) mod errors;
pub(crate) mod fields;
pub(crate) mod http;
pub(crate) mod redact;
pub(crate) mod retry_after;
pub(crate) mod skeleton;
