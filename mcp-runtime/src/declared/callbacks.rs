//! The callbacks a declaration holds: values computed per call or per request,
//! result wraps, input and change handlers, approval predicates, and the factories of
//! a custom transport and of OAuth settings. Type aliases only.

use std::sync::Arc;

use serde_json::Value;

use crate::client::Change;
use crate::error::Result;
use crate::input::{InputRequest, InputResponse};
use crate::model::{CallToolResult, Progress, Tool};
use crate::transport::{BoxFuture, Transport};

/// A value computed every time it is needed (a fixed argument, a header, a token).
pub(super) type Shared<T> = Arc<dyn Fn() -> T + Send + Sync>;
/// A wrap of a tool's results: the result and the call's arguments in, what the model
/// sees out.
pub(super) type WrapFn =
    Arc<dyn Fn(CallToolResult, Value) -> BoxFuture<'static, Result<CallToolResult>> + Send + Sync>;
/// An input handler of the declaration's own.
pub(super) type InputFn =
    Arc<dyn Fn(InputRequest) -> BoxFuture<'static, Option<InputResponse>> + Send + Sync>;
/// Which tools an approval covers, decided per call.
pub(super) type Predicate = Arc<dyn Fn(&Tool) -> bool + Send + Sync>;
/// Called with each change the server announces.
pub(super) type ChangeFn = Arc<dyn Fn(&Change) + Send + Sync>;
/// Called with each progress report.
pub(super) type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;
/// Makes a custom transport, on first use.
pub(super) type TransportFactory = Arc<dyn Fn() -> Result<Box<dyn Transport>> + Send + Sync>;
/// Makes the OAuth settings, on first use.
pub(super) type OAuthFactory = Arc<dyn Fn() -> Option<OAuthConfig> + Send + Sync>;
/// OAuth settings (HTTP only: without the `http` feature there are none to give).
#[cfg(feature = "oauth")]
pub(super) type OAuthConfig = crate::auth::OAuth;
#[cfg(not(feature = "oauth"))]
pub(super) type OAuthConfig = std::convert::Infallible;
