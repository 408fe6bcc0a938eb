//! Starting a session: the era probe (`server/discover`, then `initialize` only when
//! the probe's answer is not modern), the legacy handshake, and what the server says
//! about itself.

use super::details::{ProtocolMode, ServerDetails};
use super::handle::Inner;
use super::negotiate;
use super::negotiate::{Handshake, Probe};
use super::options::RequestOptions;
use crate::error::{Error, Result};
use crate::jsonrpc::{Id, Notification, Request};
use crate::model::{LogLevel, ServerCapabilities};
use crate::protocol::Era;
use crate::protocol::{meta, Method};
use crate::protocol::{LEGACY_VERSIONS, MODERN_VERSIONS};
use serde_json::{json, Map, Value};
use std::sync::Arc;

pub(super) fn discovered(mut v: Value, version: String) -> ServerDetails {
    let info = v
        .get_mut("_meta")
        .and_then(|m| m.get_mut(meta::SERVER_INFO))
        .map(Value::take)
        .and_then(|i| serde_json::from_value(i).ok())
        .unwrap_or_default();
    ServerDetails {
        era: Era::Modern,
        protocol_version: version,
        capabilities: ServerCapabilities(
            v.get_mut("capabilities")
                .map(Value::take)
                .unwrap_or(Value::Null),
        ),
        info,
        instructions: v
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

impl Inner {
    pub(super) async fn ensure(self: &Arc<Self>) -> Result<Arc<ServerDetails>> {
        if let Some(d) = self.session.details() {
            return Ok(d);
        }
        let _connecting = self.session.connecting().await;
        if let Some(d) = self.session.details() {
            return Ok(d);
        }
        let d = match self.negotiate().await {
            Ok(d) => Arc::new(d),
            Err(e) => {
                // Whatever the server read of a failed connect, the next one starts on a
                // fresh connection (a stdio server restarted), so no server ever reads
                // a second handshake after a first.
                if !self.transport.answers_every_request() {
                    let _ = self.transport.close().await;
                }
                return Err(e);
            }
        };
        tracing::debug!(server = %self.settings.name, era = ?d.era, version = %d.protocol_version, "session started");
        self.session.set(d.clone());
        Ok(d)
    }

    pub(super) fn modern_meta(
        &self,
        version: &str,
        log_level: Option<LogLevel>,
    ) -> Map<String, Value> {
        let mut meta = Map::new();
        meta.insert(meta::VERSION.into(), version.into());
        meta.insert(
            meta::CLIENT_CAPABILITIES.into(),
            self.settings.capabilities.clone(),
        );
        meta.insert(meta::CLIENT_INFO.into(), self.settings.client_info.clone());
        if let Some(l) = log_level {
            meta.insert(meta::LOG_LEVEL.into(), l.as_str().into());
        }
        meta
    }

    /// Decides the era from what the server answers (see [`negotiate`](super::negotiate)).
    pub(super) async fn negotiate(self: &Arc<Self>) -> Result<ServerDetails> {
        // Start the server (a stdio process) before any clock of the connect runs.
        self.transport.connect(&self.incoming).await?;
        match self.settings.protocol {
            ProtocolMode::Legacy => return self.handshake(false).await,
            ProtocolMode::Modern => return self.probe(false).await,
            ProtocolMode::Auto => {}
        }
        if self.transport.era_hint() == Some(Era::Legacy) || self.session.ignores_discover() {
            // Known to be an older server: skip the probe, unless that is no longer so.
            match negotiate::handshake(
                &self.settings.name,
                self.initialize_request(LEGACY_VERSIONS[0]).await,
                LEGACY_VERSIONS[0],
            ) {
                Handshake::Legacy(v, version) => return self.finish_handshake(v, version).await,
                Handshake::Modern(version, _) => return self.discover_at(version).await,
                other => {
                    tracing::debug!(server = %self.settings.name, outcome = ?other, "initialize failed where it worked before; probing again");
                    // The server read one handshake already: start afresh, so it never
                    // reads two.
                    if !self.transport.answers_every_request() {
                        let _ = self.transport.close().await;
                        self.transport.connect(&self.incoming).await?;
                    }
                }
            }
        }
        self.probe(true).await
    }

    /// `server/discover`, at the newest version first, and nothing else until it is
    /// answered: a server reads one handshake at a time. With `fallback`, an answer
    /// that does not make the server modern leads to the `initialize` handshake; over
    /// a message stream, silence for the whole connect timeout leads to a restart of
    /// the server and `initialize` alone ([`Self::after_silence`]).
    pub(super) async fn probe(self: &Arc<Self>, fallback: bool) -> Result<ServerDetails> {
        let version = MODERN_VERSIONS[0];
        match self.discover(version).await {
            Err(e) if fallback && e.is_timeout() && !self.transport.answers_every_request() => {
                self.after_silence(e).await
            }
            answer => {
                let outcome = negotiate::probe(&self.settings.name, answer, version);
                self.after_probe(outcome, fallback).await
            }
        }
    }

    /// `server/discover` went unanswered for the whole connect timeout over a message
    /// stream: an older server that ignores requests before its handshake, or one far
    /// slower to start than the timeout allows. The server may still read the probe
    /// late, so `initialize` is not sent on this connection: the transport is closed
    /// (a stdio server stopped) and `initialize` goes alone to a fresh one. Either way
    /// the server then reads exactly one handshake, and the era is the one it answers.
    async fn after_silence(self: &Arc<Self>, silence: Error) -> Result<ServerDetails> {
        tracing::debug!(server = %self.settings.name, error = %silence, "server/discover went unanswered; restarting the server and sending initialize alone");
        let _ = self.transport.close().await;
        self.transport.connect(&self.incoming).await?;
        match self.handshake(true).await {
            Ok(d) => {
                self.session.note_ignores_discover();
                Ok(d)
            }
            Err(e) if e.is_timeout() => Err(Error::timeout_of(
                "server/discover, then initialize to the restarted server",
                self.settings.connect_timeout,
                "ClientBuilder::connect_timeout",
            )
            .with_source(e)),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn after_probe(
        self: &Arc<Self>,
        outcome: Probe,
        fallback: bool,
    ) -> Result<ServerDetails> {
        match outcome {
            Probe::Modern(v, version) => Ok(discovered(v, version)),
            Probe::Retry(version, _) => self.discover_at(version).await,
            Probe::NotModern(e) if fallback => {
                tracing::debug!(server = %self.settings.name, error = %e, "server/discover did not find a 2026-07-28 server; trying the initialize handshake");
                self.handshake(true).await
            }
            // No answer, or no connection: say that, not that the server is old.
            Probe::NotModern(e) if e.is_timeout() || e.is_transport() => Err(e),
            Probe::NotModern(e) => Err(Error::unsupported(format!(
                "{} does not speak the 2026-07-28 protocol (ProtocolMode::Modern): {e}",
                self.settings.name
            ))
            .with_source(e)),
            Probe::Fail(e) => Err(e),
        }
    }

    /// `server/discover` at a version the server listed, asked again while it lists
    /// another one (a bounded number of times).
    pub(super) async fn discover_at(
        self: &Arc<Self>,
        mut version: String,
    ) -> Result<ServerDetails> {
        let mut last = None;
        for _ in 0..3 {
            match negotiate::probe(&self.settings.name, self.discover(&version).await, &version) {
                Probe::Modern(v, version) => return Ok(discovered(v, version)),
                Probe::Retry(next, e) => {
                    version = next;
                    last = Some(e);
                }
                Probe::NotModern(e) | Probe::Fail(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            Error::unsupported(format!(
                "{} keeps refusing server/discover",
                self.settings.name
            ))
        }))
    }

    /// One `server/discover` request at `version`, with the session's ordinary timeouts.
    pub(super) async fn discover(self: &Arc<Self>, version: &str) -> Result<Value> {
        let mut params = Map::new();
        params.insert(
            "_meta".into(),
            Value::Object(self.modern_meta(version, None)),
        );
        let request = Request {
            id: Id::Number(self.next_id()),
            method: Method::ServerDiscover.as_str().into(),
            params: Value::Object(params),
        };
        self.exchange(version, request, &self.connect_options(), None, false)
            .await
    }

    /// The options of the connect's requests: the connect timeout, named when it passes.
    fn connect_options(&self) -> RequestOptions {
        RequestOptions {
            timeout: Some(self.settings.connect_timeout),
            timeout_setting: Some("ClientBuilder::connect_timeout"),
            ..RequestOptions::default()
        }
    }

    /// The legacy handshake. With `modern_ok`, a server that refuses it listing a
    /// 2026-07-28 version is spoken to in that era.
    pub(super) async fn handshake(self: &Arc<Self>, modern_ok: bool) -> Result<ServerDetails> {
        self.handshake_at(LEGACY_VERSIONS[0].to_owned(), modern_ok)
            .await
    }

    pub(super) async fn handshake_at(
        self: &Arc<Self>,
        mut offered: String,
        modern_ok: bool,
    ) -> Result<ServerDetails> {
        for _ in 0..2 {
            let answer = self.initialize_request(&offered).await;
            match negotiate::handshake(&self.settings.name, answer, &offered) {
                Handshake::Legacy(v, version) => return self.finish_handshake(v, version).await,
                Handshake::Retry(version) => offered = version,
                Handshake::Modern(version, _) if modern_ok => {
                    return Box::pin(self.discover_at(version)).await
                }
                Handshake::Modern(version, e) => {
                    let _ = self.transport.close().await;
                    let why = if self.settings.protocol == ProtocolMode::Legacy {
                        "use ProtocolMode::Auto or ProtocolMode::Modern for it"
                    } else {
                        "but its server/discover failed"
                    };
                    return Err(Error::unsupported(format!(
                        "{} refused the initialize handshake: it speaks {version}; {why}",
                        self.settings.name
                    ))
                    .with_source(e));
                }
                Handshake::Fail(e) => {
                    if e.is_unsupported() {
                        let _ = self.transport.close().await;
                    }
                    return Err(e);
                }
            }
        }
        Err(Error::unsupported(format!(
            "{} keeps refusing the initialize handshake",
            self.settings.name
        )))
    }

    /// One `initialize` request offering `version`.
    pub(super) async fn initialize_request(self: &Arc<Self>, version: &str) -> Result<Value> {
        let request = Request {
            id: Id::Number(self.next_id()),
            method: Method::Initialize.as_str().into(),
            params: json!({
                "protocolVersion": version,
                "capabilities": self.settings.capabilities,
                "clientInfo": self.settings.client_info,
            }),
        };
        self.exchange(version, request, &self.connect_options(), None, false)
            .await
    }

    /// Completes the handshake after a successful `initialize`.
    pub(super) async fn finish_handshake(
        self: &Arc<Self>,
        v: Value,
        version: String,
    ) -> Result<ServerDetails> {
        let details = ServerDetails {
            era: Era::Legacy,
            protocol_version: version.clone(),
            capabilities: ServerCapabilities(v.get("capabilities").cloned().unwrap_or(Value::Null)),
            info: v
                .get("serverInfo")
                .cloned()
                .and_then(|i| serde_json::from_value(i).ok())
                .unwrap_or_default(),
            instructions: v
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        self.transport
            .notify(
                Notification {
                    method: Method::Initialized.as_str().into(),
                    params: None,
                },
                &version,
            )
            .await?;
        if let Some(level) = self.settings.log_level {
            if details.capabilities.logging() {
                let request = Request {
                    id: Id::Number(self.next_id()),
                    method: Method::LoggingSetLevel.as_str().into(),
                    params: json!({"level": level.as_str()}),
                };
                if let Err(e) = self
                    .exchange(&version, request, &RequestOptions::default(), None, true)
                    .await
                {
                    tracing::warn!(server = %self.settings.name, error = %e, "logging/setLevel failed");
                }
            }
        }
        Ok(details)
    }
}
