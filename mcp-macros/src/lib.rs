//! `#[mcp(...)]`: declare an MCP server once on a struct and use it as an object.
//!
//! Use it through `mcp_runtime::mcp`. The macro parses the declaration into a model
//! (`parse`), checks it — against the committed snapshot of the server's tools when
//! there is one (`snapshot`, `check`) — reporting every error at once at the offending
//! token, then expands (`expand`). On errors the struct is re-emitted unchanged next to
//! the errors, so the rest of the crate still sees it.
#![deny(missing_docs)]

use proc_macro::TokenStream;

mod attach;
mod check;
mod ctxt;
mod expand;
mod parse;
mod schema;
mod snapshot;
/// The runtime's URL rule (https, or http to this machine only), from `mcp-runtime-core`, so the
/// compile-time check and the runtime never disagree.
use mcp_runtime_core::url_rule;

/// Declares an MCP server on a struct whose fields are its inputs. See the
/// `mcp-runtime` documentation and `docs/declaring-servers.md`.
#[proc_macro_attribute]
pub fn mcp(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::mcp(attr.into(), item.into()).into()
}

/// Attaches a server in one line (used as `mcp_agent::mcp!`), in the words of `#[mcp]`
/// with any expression as a value: `mcp!(name, command("npx", "-y", "pkg", dir),
/// env(LOG = "warn"), directory = "…")` for stdio, `mcp!(name, url = "…", header("X-Org",
/// org), bearer_token = value_or_closure)` for HTTP; `timeout`, `prefix`, `only`,
/// `except`, `requires_approval` and `defer` for either. Checked at compile time;
/// evaluates to `Result<Mcp, Error>`.
#[proc_macro]
pub fn attach(input: TokenStream) -> TokenStream {
    attach::attach(input.into()).into()
}
