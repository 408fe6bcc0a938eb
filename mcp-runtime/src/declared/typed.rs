//! Typed results for the per-tool methods `#[mcp]` generates from a snapshot.

use std::sync::{Arc, Mutex, OnceLock};

use super::builder::McpBuilder;
use super::connect::Connect;
use super::mcp::{Mcp, Spec};
use super::shape::DriftPolicy;
use crate::model::CallToolResult;

/// A tool result with its structured output read as `T` (generated typed methods
/// return it).
#[derive(Clone, Debug)]
pub struct Typed<T> {
    /// The whole result.
    pub result: CallToolResult,
    /// `structuredContent` as `T`, when the tool returned it, it matched the tool's
    /// `outputSchema` (or was not checked: `result.output_check`), and it reads as `T`.
    pub output: Option<T>,
}

impl<T> Typed<T> {
    /// True when the tool ran and failed.
    pub fn is_error(&self) -> bool {
        self.result.is_error()
    }
    /// The text blocks, joined by newlines.
    pub fn text(&self) -> String {
        self.result.text()
    }
}

impl McpBuilder {
    /// Builds, deferring any configuration error to first use (for generated code,
    /// whose constructors cannot fail).
    #[doc(hidden)]
    pub fn build_or_defer(self) -> Mcp {
        let name = self.name.clone();
        match self.build() {
            Ok(m) => m,
            Err(e) => {
                let client = OnceLock::new();
                let _ = client.set(Err(e.config_detail()));
                Mcp {
                    spec: Arc::new(Spec {
                        name,
                        connect: Connect::Missing,
                        client: Mutex::new(None),
                        only: None,
                        except: Vec::new(),
                        prefix: None,
                        shapes: Vec::new(),
                        local: Vec::new(),
                        approvals: Arc::new(Vec::new()),
                        defer: None,
                        snapshot: None,
                        declared: Vec::new(),
                        drift: DriftPolicy::Ignore,
                        oauth_with: None,
                    }),
                    client: Arc::new(client),
                    tools: Arc::new(Mutex::new(None)),
                }
            }
        }
    }
}
