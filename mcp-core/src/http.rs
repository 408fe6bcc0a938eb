//! The one HTTP client stack of the toolkit (feature `http`): the MCP transports and
//! the agent's model wires both send through it, so both apply the same rules.
//!
//! * hyper 1 with rustls (ring, webpki roots), HTTP/1.1 and h2, pooled keep-alive
//!   connections; no OpenSSL.
//! * A [`CheckedResolver`]: `localhost` and names under `.localhost` stand for this
//!   machine (RFC 6761) — plain `http://` is allowed to them for that reason — so a
//!   resolver that maps one anywhere but to loopback addresses is not believed, and the
//!   connection is refused before anything is sent. (The rule for URLs as strings is
//!   [`url_rule`](crate::url_rule); this is the same rule, applied when the name
//!   resolves.)
//! * An optional `CONNECT` proxy for everything but loopback.
//! * Bounded reads: [`read_limited`] never holds more of a body than its limit, and
//!   refuses one whose `Content-Length` says it is larger before reading it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as Pool;
use hyper_util::rt::TokioExecutor;

use crate::rt::BoxFuture;

/// What a request's body is.
pub type Body = Full<Bytes>;

/// A request ready to send.
pub type Request = http::Request<Body>;

/// The connector every pool uses: TCP through the [`CheckedResolver`].
pub type Connector = HttpConnector<CheckedResolver>;

/// The system resolver, with one rule on top: `localhost` and names under
/// `.localhost` must resolve to loopback addresses only. A resolver that says otherwise
/// is not believed: the connection is refused.
#[derive(Clone, Debug)]
pub struct CheckedResolver<R = GaiResolver>(pub R);

impl<R> tower_service::Service<Name> for CheckedResolver<R>
where
    R: tower_service::Service<Name, Error = std::io::Error>,
    R::Response: Iterator<Item = std::net::SocketAddr>,
    R::Future: Send + 'static,
{
    type Response = std::vec::IntoIter<std::net::SocketAddr>;
    type Error = std::io::Error;
    type Future = BoxFuture<'static, std::io::Result<Self::Response>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let host = name.as_str().to_owned();
        let resolving = self.0.call(name);
        Box::pin(async move {
            let addrs: Vec<std::net::SocketAddr> = resolving.await?.collect();
            check_localhost(&host, &addrs)?;
            Ok(addrs.into_iter())
        })
    }
}

/// Refuses a localhost name that resolved to anything but loopback addresses.
pub fn check_localhost(host: &str, addrs: &[std::net::SocketAddr]) -> std::io::Result<()> {
    if crate::url_rule::is_localhost_name(host)
        && (addrs.is_empty() || addrs.iter().any(|a| !a.ip().is_loopback()))
    {
        let found: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "`{host}` resolves to [{}], not to loopback addresses only; a localhost name must stand for this machine (refused before connecting)",
                found.join(", ")
            ),
        ));
    }
    Ok(())
}

/// How to build [`Clients`].
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// How long opening a TCP connection may take (`None`: the system's).
    pub connect_timeout: Option<Duration>,
    /// How long an idle pooled connection is kept.
    pub idle_timeout: Duration,
    /// A `CONNECT` proxy (`http://host:port`) for every destination but loopback.
    pub proxy: Option<String>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            connect_timeout: None,
            idle_timeout: Duration::from_secs(90),
            proxy: None,
        }
    }
}

/// Pooled connections: direct, or through a proxy for everything but loopback.
#[derive(Clone, Debug)]
pub struct Clients(Kind);

#[derive(Clone, Debug)]
enum Kind {
    Direct(Pool<HttpsConnector<Connector>, Body>),
    Proxied {
        direct: Pool<HttpsConnector<Connector>, Body>,
        tunnel: Box<Pool<HttpsConnector<Tunnel<Connector>>, Body>>,
    },
}

impl Clients {
    /// Builds the pools; nothing connects yet. `Err` says what is wrong (the proxy URL,
    /// the TLS setup).
    pub fn new(options: &PoolOptions) -> Result<Clients, String> {
        let mut tcp = HttpConnector::new_with_resolver(CheckedResolver(GaiResolver::new()));
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(options.connect_timeout);
        let pool = || {
            Pool::builder(TokioExecutor::new())
                .pool_idle_timeout(options.idle_timeout)
                .clone()
        };
        let direct = pool().build(tls(tcp.clone())?);
        let Some(p) = &options.proxy else {
            return Ok(Clients(Kind::Direct(direct)));
        };
        let proxy: http::Uri = p
            .parse()
            .map_err(|e| format!("proxy `{p}` is not a valid URL: {e}"))?;
        if proxy.scheme_str() != Some("http") {
            return Err(format!(
                "proxy `{p}` must be an http:// URL (CONNECT proxies)"
            ));
        }
        let tunnel = Tunnel::new(proxy, tcp);
        Ok(Clients(Kind::Proxied {
            direct,
            tunnel: Box::new(pool().build(tls(tunnel)?)),
        }))
    }

    /// Sends `req`; straight to a loopback destination even when there is a proxy.
    pub fn send(&self, req: Request) -> hyper_util::client::legacy::ResponseFuture {
        let loopback = req
            .uri()
            .host()
            .is_some_and(crate::url_rule::is_loopback_host);
        match &self.0 {
            Kind::Direct(c) => c.request(req),
            Kind::Proxied { direct, .. } if loopback => direct.request(req),
            Kind::Proxied { tunnel, .. } => tunnel.request(req),
        }
    }
}

/// The TLS settings every client of this process shares: built once (the root store,
/// the cipher suites, the session cache for resumption), not once per client — an idle
/// client holds a reference, not a copy.
fn tls_config() -> Result<rustls::ClientConfig, String> {
    static CONFIG: std::sync::OnceLock<Result<rustls::ClientConfig, String>> =
        std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            use hyper_rustls::ConfigBuilderExt;
            Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup failed: {e}"))?
            .with_webpki_roots()
            .with_no_client_auth())
        })
        .clone()
}

fn tls<C>(conn: C) -> Result<HttpsConnector<C>, String> {
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls_config()?)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(conn))
}

/// The request failed on a pooled connection the server had already closed (it was
/// not answered); sending it again on a new connection is safe for a request that may
/// be repeated.
pub fn is_stale(e: &hyper_util::client::legacy::Error) -> bool {
    if e.is_connect() {
        return false;
    }
    hyper_error(e).is_some_and(|h| h.is_incomplete_message() || h.is_canceled())
}

/// The request was provably not sent: the pooled connection was found closed before it
/// went out (hyper cancels it). Any request may be sent again.
pub fn was_not_sent(e: &hyper_util::client::legacy::Error) -> bool {
    hyper_error(e).is_some_and(hyper::Error::is_canceled)
}

fn hyper_error(e: &hyper_util::client::legacy::Error) -> Option<&hyper::Error> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = source {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            return Some(h);
        }
        source = err.source();
    }
    None
}

/// Why [`read_limited`] failed.
#[derive(Debug)]
pub enum ReadError {
    /// The body is larger than the limit: `declared` when its `Content-Length` said so
    /// before anything was read.
    TooLarge {
        /// What the `Content-Length` header declared, if that is how it was known.
        declared: Option<u64>,
    },
    /// The connection failed while reading.
    Failed(String),
}

/// A body whose `Content-Length` declares more than `limit` is refused before it is
/// read.
fn refuse_declared(
    resp: &http::Response<hyper::body::Incoming>,
    limit: usize,
) -> Result<(), ReadError> {
    let declared = resp
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(n) if n > limit as u64 => Err(ReadError::TooLarge { declared }),
        _ => Ok(()),
    }
}

/// Reads a whole body, never holding more than `limit` bytes of it; one whose
/// `Content-Length` declares more is refused before it is read.
pub async fn read_limited(
    resp: http::Response<hyper::body::Incoming>,
    limit: usize,
) -> Result<Bytes, ReadError> {
    refuse_declared(&resp, limit)?;
    match http_body_util::Limited::new(resp.into_body(), limit)
        .collect()
        .await
    {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(ReadError::TooLarge { declared: None })
        }
        Err(e) => Err(ReadError::Failed(e.to_string())),
    }
}

/// A body read by [`read_gathered`]: what is left of it, and, for a long one, its long
/// strings moved out as it arrived.
#[derive(Debug)]
pub struct Gathered {
    /// The body, less the long strings moved out (placeholders stand in their place).
    pub body: Bytes,
    /// The long strings, if the body grew past [`GATHER_FROM`](crate::gather::GATHER_FROM).
    pub gather: Option<crate::gather::Gather>,
}

impl Gathered {
    /// Parses the body as one JSON-RPC message or a batch, putting the long strings
    /// back (see [`Message::parse`](crate::jsonrpc::Message::parse)).
    pub fn parse(self) -> Result<Vec<Result<crate::jsonrpc::Message, String>>, String> {
        match self.gather {
            Some(g) => g.finish(&self.body),
            None => crate::jsonrpc::Message::parse(&self.body),
        }
    }
}

/// As [`read_limited`], for a body that is a JSON-RPC message: once it grows past
/// [`GATHER_FROM`](crate::gather::GATHER_FROM) bytes its long strings are moved out
/// as they arrive ([`gather`](crate::gather)), so a 10 MB result is held once, not as
/// bytes and again as its parsed value. A body that comes in one piece is not copied.
pub async fn read_gathered(
    resp: http::Response<hyper::body::Incoming>,
    limit: usize,
) -> Result<Gathered, ReadError> {
    use crate::gather::{Gather, GATHER_FROM};
    refuse_declared(&resp, limit)?;
    let mut body = resp.into_body();
    let mut first: Option<Bytes> = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut gather: Option<Gather> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ReadError::Failed(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let so_far = match &gather {
            Some(g) => g.len(buf.len()),
            None => buf.len() + first.as_ref().map_or(0, Bytes::len),
        };
        if so_far + data.len() > limit {
            return Err(ReadError::TooLarge { declared: None });
        }
        if buf.is_empty() && first.is_none() {
            first = Some(data);
            continue;
        }
        if let Some(f) = first.take() {
            buf.reserve(f.len() + data.len());
            buf.extend_from_slice(&f);
        }
        buf.extend_from_slice(&data);
        if gather.is_none() && buf.len() > GATHER_FROM {
            gather = Some(Gather::new(false));
        }
        if let Some(g) = &mut gather {
            g.advance(&mut buf);
        }
    }
    Ok(match first {
        Some(only) => Gathered {
            body: only,
            gather: None,
        },
        None => Gathered {
            body: Bytes::from(buf),
            gather,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tower_service::Service;

    #[derive(Clone)]
    struct Lying(Vec<SocketAddr>);

    impl tower_service::Service<Name> for Lying {
        type Response = std::vec::IntoIter<SocketAddr>;
        type Error = std::io::Error;
        type Future = std::future::Ready<std::io::Result<Self::Response>>;
        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: Name) -> Self::Future {
            std::future::ready(Ok(self.0.clone().into_iter()))
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("a socket address")
    }

    #[test]
    fn localhost_names_must_resolve_to_loopback_only() {
        for name in [
            "localhost",
            "LOCALHOST",
            "app.localhost",
            "a.b.localhost.",
            "x.LocalHost",
        ] {
            assert!(crate::url_rule::is_localhost_name(name), "{name}");
        }
        for name in [
            "localhost.example.com",
            "evillocalhost",
            "localhost-x",
            "127.0.0.1",
        ] {
            assert!(!crate::url_rule::is_localhost_name(name), "{name}");
        }
        let (lo, lo6, remote) = (addr("127.0.0.1:80"), addr("[::1]:80"), addr("192.0.2.7:80"));
        assert!(check_localhost("app.localhost", &[lo, lo6]).is_ok());
        assert!(check_localhost("app.localhost", &[lo, remote]).is_err());
        assert!(check_localhost("app.localhost", &[]).is_err());
        // Other names may resolve anywhere (https is required for them anyway).
        assert!(check_localhost("example.com", &[remote]).is_ok());

        // Through the resolver the connector uses: nothing connects, the resolver is
        // called directly.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let name = |n: &str| n.parse::<Name>().expect("a name");
        let mut lying = CheckedResolver(Lying(vec![remote]));
        let e = rt
            .block_on(lying.call(name("evil.localhost")))
            .expect_err("refused");
        assert!(e.to_string().contains("192.0.2.7"), "{e}");
        let mut honest = CheckedResolver(Lying(vec![lo]));
        let addrs: Vec<SocketAddr> = rt
            .block_on(honest.call(name("app.localhost")))
            .expect("believed")
            .collect();
        assert_eq!(addrs, [lo]);
    }

    #[test]
    fn a_proxy_must_be_plain_http() {
        let with = |p: &str| {
            Clients::new(&PoolOptions {
                proxy: Some(p.into()),
                ..PoolOptions::default()
            })
        };
        assert!(with("http://127.0.0.1:3128").is_ok());
        assert!(with("https://127.0.0.1:3128")
            .expect_err("refused")
            .contains("http://"));
        assert!(with("not a url").is_err());
    }
}
