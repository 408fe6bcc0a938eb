//! How the inbox router finds who is asking and what they may see.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;

use crate::agent::Principal;

/// The most bytes a request body may have, unless [`WebOptions::max_body`] says
/// otherwise (64 KiB).
pub const DEFAULT_MAX_BODY: usize = 64 * 1024;

type PrincipalFn = dyn Fn(&Parts) -> Option<Principal> + Send + Sync;
type TenantsFn = dyn Fn(&Principal) -> Vec<String> + Send + Sync;

/// How the inbox router finds who is asking and what they may see.
#[derive(Clone)]
pub struct WebOptions {
    pub(super) principal: Option<Arc<PrincipalFn>>,
    pub(super) tenants: Option<Arc<TenantsFn>>,
    pub(super) max_body: usize,
}

impl fmt::Debug for WebOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebOptions")
            .field("principal", &self.principal.is_some())
            .field("tenants", &self.tenants.is_some())
            .field("max_body", &self.max_body)
            .finish()
    }
}

impl Default for WebOptions {
    fn default() -> Self {
        WebOptions::new()
    }
}

impl WebOptions {
    /// No principal extractor yet (every request is refused with `401` until one is
    /// given), no tenants, bodies up to [`DEFAULT_MAX_BODY`].
    pub fn new() -> WebOptions {
        WebOptions {
            principal: None,
            tenants: None,
            max_body: DEFAULT_MAX_BODY,
        }
    }

    /// Who is asking, from the request's head (the application's session, a
    /// proxy's authenticated header): `None` refuses the request with `401`.
    pub fn principal(
        mut self,
        f: impl Fn(&Parts) -> Option<Principal> + Send + Sync + 'static,
    ) -> WebOptions {
        self.principal = Some(Arc::new(f));
        self
    }

    /// The tenants a principal works for: it sees (and may start runs in, and decide
    /// on) their runs, besides the runs it started itself. None by default.
    pub fn tenants(
        mut self,
        f: impl Fn(&Principal) -> Vec<String> + Send + Sync + 'static,
    ) -> WebOptions {
        self.tenants = Some(Arc::new(f));
        self
    }

    /// The most bytes a request body may have (a larger one is refused with `413`).
    pub fn max_body(mut self, bytes: usize) -> WebOptions {
        self.max_body = bytes;
        self
    }
}
