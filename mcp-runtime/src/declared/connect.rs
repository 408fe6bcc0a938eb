//! How a declared server is reached: the connection ([`Connect`]) and the
//! per-connection configuration many servers share ([`Context`]).

use std::time::Duration;

use super::callbacks::TransportFactory;

/// How to reach the server.
pub(super) enum Connect {
    #[cfg(feature = "stdio")]
    Stdio(Box<crate::transport::stdio::StdioConfig>),
    #[cfg(feature = "http")]
    Http(Box<crate::transport::http::HttpConfig>),
    Custom(TransportFactory),
    Missing,
}

impl Connect {
    pub(super) fn is_stdio(&self) -> bool {
        #[cfg(feature = "stdio")]
        if let Connect::Stdio(_) = self {
            return true;
        }
        false
    }
    pub(super) fn is_http(&self) -> bool {
        #[cfg(feature = "http")]
        if let Connect::Http(_) = self {
            return true;
        }
        false
    }
}

/// Per-connection configuration shared by many servers (the seed's `context:`): an HTTP
/// proxy and a request timeout.
#[derive(Clone, Debug, Default)]
pub struct Context {
    pub(super) http_proxy: Option<String>,
    pub(super) request_timeout: Option<Duration>,
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Context::default()
    }
    /// An HTTP proxy (`http://host:port`) for `https://` servers.
    pub fn http_proxy(mut self, proxy: impl Into<String>) -> Self {
        self.http_proxy = Some(proxy.into());
        self
    }
    /// How long a request may take, for servers that set no `timeout` of their own.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }
}
