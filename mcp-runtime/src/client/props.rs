//! Property tests of the session's logic, against servers drawn at random:
//!
//! * **era negotiation**: whatever versions a server speaks in which era, however it
//!   answers what it does not speak (an error, silence, a version list), however slow
//!   it is and whatever the transport, the session never settles on an era or version
//!   the server does not speak, reaches it whenever the rule says it can, never
//!   sends `initialize` after an unanswered probe on the same connection, gives the
//!   same answer on the next connect, and never hangs (the clock is paused: a wait
//!   nothing ends would be seen as one);
//! * **pagination and the list cache**: whatever the page sizes, cursors (empty,
//!   Unicode, long), time-to-live and the moments the server changes its list (and
//!   says so), a listing never holds an item twice, never misses one, never holds
//!   one the server did not list, and the cache never serves a list older than the
//!   server's last announced change.

use super::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{json, Value};

use crate::error::Result;
use crate::jsonrpc::{ErrorObject, Notification, Request, Response};
use crate::protocol::{Era, LEGACY_VERSIONS, MODERN_VERSIONS};
use crate::testing::{Scripted, Step};
use crate::transport::{BoxFuture, Incoming, RequestContext, Transport};
use mcp_runtime_core::lock;

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

// ---------------------------------------------------------------------------------
// Era negotiation
// ---------------------------------------------------------------------------------

/// What a server that does not speak 2026-07-28 does with `server/discover`.
#[derive(Clone, Copy, Debug)]
enum Unknown {
    /// `-32601`.
    MethodNotFound,
    /// An error of its own (`-32600`, "not initialized").
    NotInitialized,
    /// Nothing, ever (a stdio server that ignores requests before its handshake).
    Silence,
    /// A version error listing its handshake versions.
    VersionError,
}

/// What a handshake server answers an `initialize` offering a version it does not speak.
#[derive(Clone, Copy, Debug)]
enum Counter {
    /// Its own newest version, as the 2024–2025 handshake says.
    OwnNewest,
    /// A version error listing what it speaks.
    VersionError,
}

#[derive(Clone, Debug)]
struct EraServer {
    /// 2026-07-28-era versions it speaks (some this client does not know).
    modern: Vec<String>,
    /// Handshake versions it speaks (some this client does not know).
    legacy: Vec<String>,
    unknown: Unknown,
    counter: Counter,
    /// What a 2026-07-28-only server answers `initialize`: a version error listing its
    /// versions (true) or `-32601`.
    refuses_with_versions: bool,
    latency: Duration,
    /// Like HTTP (every request answered) or a message stream (stdio).
    answers_every: bool,
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn versions(
    known: &'static [&'static str],
    unknown: &'static [&'static str],
) -> impl Strategy<Value = Vec<String>> {
    let all: Vec<&'static str> = known.iter().chain(unknown).copied().collect();
    proptest::sample::subsequence(all.clone(), 0..=all.len())
        .prop_map(|v| v.into_iter().map(str::to_owned).collect())
}

fn era_server() -> impl Strategy<Value = EraServer> {
    (
        versions(MODERN_VERSIONS, &["2099-01-01", "2027-01-01"]),
        versions(LEGACY_VERSIONS, &["2023-01-01", "2025-12-31"]),
        prop_oneof![
            Just(Unknown::MethodNotFound),
            Just(Unknown::NotInitialized),
            Just(Unknown::Silence),
            Just(Unknown::VersionError),
        ],
        prop_oneof![Just(Counter::OwnNewest), Just(Counter::VersionError)],
        any::<bool>(),
        prop_oneof![
            4 => (0u64..3_000).prop_map(Duration::from_millis),
            1 => (10_000u64..40_000).prop_map(Duration::from_millis),
        ],
        any::<bool>(),
    )
        .prop_map(
            |(modern, legacy, unknown, counter, refuses_with_versions, latency, answers_every)| {
                EraServer {
                    modern,
                    legacy,
                    unknown,
                    counter,
                    refuses_with_versions,
                    latency,
                    answers_every,
                }
            },
        )
}

impl EraServer {
    fn version_error(&self, supported: Vec<String>) -> Step {
        Step::Fail(-32022, json!({ "supported": supported }))
    }

    fn everything(&self) -> Vec<String> {
        self.modern.iter().chain(&self.legacy).cloned().collect()
    }

    fn newest_legacy(&self) -> Option<&String> {
        self.legacy.iter().max()
    }

    /// The server's answer to one request (before its latency).
    fn answer(&self, r: &Request) -> Step {
        match r.method.as_str() {
            "server/discover" => {
                let asked = r.params["_meta"][crate::protocol::meta::VERSION]
                    .as_str()
                    .unwrap_or_default();
                if self.modern.is_empty() {
                    return match self.unknown {
                        Unknown::MethodNotFound => Step::Fail(-32601, Value::Null),
                        Unknown::NotInitialized => Step::Fail(-32600, Value::Null),
                        Unknown::Silence => Step::Hang,
                        Unknown::VersionError => self.version_error(self.legacy.clone()),
                    };
                }
                if self.modern.iter().any(|v| v == asked) {
                    Step::Reply(json!({"supportedVersions": self.modern, "capabilities": {}}))
                } else {
                    self.version_error(self.everything())
                }
            }
            "initialize" => {
                let offered = r.params["protocolVersion"].as_str().unwrap_or_default();
                if self.legacy.is_empty() {
                    return if self.refuses_with_versions {
                        self.version_error(self.modern.clone())
                    } else {
                        Step::Fail(-32601, Value::Null)
                    };
                }
                if self.legacy.iter().any(|v| v == offered) {
                    return Step::Reply(json!({"protocolVersion": offered, "capabilities": {}}));
                }
                match self.counter {
                    Counter::OwnNewest => Step::Reply(
                        json!({"protocolVersion": self.newest_legacy(), "capabilities": {}}),
                    ),
                    Counter::VersionError => self.version_error(self.everything()),
                }
            }
            _ => Step::Reply(json!({})),
        }
    }

    /// Whether the server answers `server/discover` at all (in time).
    fn answers_discover(&self) -> bool {
        self.latency < CONNECT_TIMEOUT
            && !(self.modern.is_empty() && matches!(self.unknown, Unknown::Silence))
    }

    /// What the rule (docs/architecture.md, "How the era is decided") reaches, if
    /// anything: the era, and the versions it may settle on.
    fn reachable(&self) -> Option<(Era, Vec<&'static str>)> {
        if self.latency >= CONNECT_TIMEOUT {
            return None;
        }
        let common = |ours: &[&'static str], theirs: &[String]| -> Vec<&'static str> {
            ours.iter()
                .copied()
                .filter(|v| theirs.iter().any(|t| t == v))
                .collect()
        };
        let modern = common(MODERN_VERSIONS, &self.modern);
        if !modern.is_empty() {
            return Some((Era::Modern, modern));
        }
        let legacy = common(LEGACY_VERSIONS, &self.legacy);
        if legacy.is_empty() {
            return None;
        }
        // A version error to the probe lists the handshake versions too (a dual-era
        // server lists all it speaks), so the handshake is tried.
        let first_offer = LEGACY_VERSIONS[0];
        let handshake_works = self.legacy.iter().any(|v| v == first_offer)
            || match self.counter {
                Counter::OwnNewest => self
                    .newest_legacy()
                    .is_some_and(|n| LEGACY_VERSIONS.contains(&n.as_str())),
                Counter::VersionError => true,
            };
        handshake_works.then_some((Era::Legacy, legacy))
    }

    /// Whether the server speaks `version` in `era`.
    fn speaks(&self, era: Era, version: &str) -> bool {
        match era {
            Era::Modern => self.modern.iter().any(|v| v == version),
            Era::Legacy => self.legacy.iter().any(|v| v == version),
        }
    }
}

fn era_client(server: &EraServer) -> (Client, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let s = server.clone();
    let t = Scripted {
        script: Box::new(move |r: &Request, _| {
            let step = s.answer(r);
            if s.latency.is_zero() {
                step
            } else {
                Step::Late(s.latency, Box::new(step))
            }
        }),
        seen: Arc::default(),
        log: log.clone(),
        mirrors: false,
        headers: Arc::default(),
        answers_every: server.answers_every,
    };
    let client = Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .build(t)
        .expect("a client");
    (client, log)
}

/// The outcome of one connect: the era and version, or that it failed.
type Outcome = std::result::Result<(Era, String), String>;

fn check_era(server: &EraServer) -> std::result::Result<(), TestCaseError> {
    let (client, log) = era_client(server);
    let outcomes: Vec<Outcome> = paused_runtime()
        .block_on(async {
            let mut outcomes = Vec::new();
            for _ in 0..2 {
                // An hour of (paused) time is far more than any connect may take: what is
                // still waiting then waits on nothing that will end.
                let outcome = tokio::time::timeout(Duration::from_secs(3600), client.connect())
                    .await
                    .map_err(|_| "the connect hung".to_owned())?;
                outcomes.push(
                    outcome
                        .map(|d| (d.era, d.protocol_version.clone()))
                        .map_err(|e| e.to_string()),
                );
                let _ = client.close().await;
            }
            std::result::Result::<_, String>::Ok(outcomes)
        })
        .map_err(TestCaseError::fail)?;
    let expected = server.reachable();
    for outcome in &outcomes {
        match (outcome, &expected) {
            (Ok((era, version)), _) => {
                prop_assert!(
                    server.speaks(*era, version),
                    "settled on {era:?} {version}, which the server does not speak"
                );
                let (want, versions) = expected.clone().ok_or_else(|| {
                    TestCaseError::fail(format!(
                        "connected ({era:?} {version}) to a server the rule cannot reach"
                    ))
                })?;
                prop_assert_eq!(*era, want);
                prop_assert!(
                    versions.contains(&version.as_str()),
                    "{} is not a version both speak",
                    version
                );
            }
            (Err(e), Some(want)) => {
                return Err(TestCaseError::fail(format!(
                    "failed ({e}) where {want:?} was reachable"
                )))
            }
            (Err(_), None) => {}
        }
    }
    prop_assert_eq!(&outcomes[0], &outcomes[1], "the second connect differs");
    // One handshake at a time: on a message stream, a probe the server never
    // answered is never followed by initialize on the same connection.
    if !server.answers_every && !server.answers_discover() {
        let log = lock(&log).clone();
        for connection in log.split(|m| m == "close") {
            if let Some(probe) = connection.iter().position(|m| m == "server/discover") {
                prop_assert!(
                    !connection[probe..].iter().any(|m| m == "initialize"),
                    "initialize after an unanswered probe on one connection: {:?}",
                    log
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn era_negotiation_settles_only_on_what_the_server_speaks(server in era_server()) {
        check_era(&server)?;
    }
}

// ---------------------------------------------------------------------------------
// Pagination and the list cache
// ---------------------------------------------------------------------------------

/// How the server makes its cursors.
#[derive(Clone, Copy, Debug)]
enum Cursors {
    /// The offset of the next page: a change between pages shifts what follows.
    Offset,
    /// The offset in some text of its own (empty for the second page, Unicode, long).
    Opaque,
}

/// Something the server does before answering a `tools/list` request.
#[derive(Clone, Debug)]
enum Edit {
    /// Adds a tool at this position (modulo the list's length).
    Add(usize),
    /// Removes the tool at this position (modulo the list's length).
    Remove(usize),
    /// Renames nothing, but says its list changed.
    Spurious,
}

#[derive(Clone, Debug)]
struct PagedServer {
    start: usize,
    page: usize,
    cursors: Cursors,
    ttl_ms: u64,
    /// Changes, each before the `tools/list` request of its index (counted over the
    /// whole test).
    changes: Vec<(usize, Edit)>,
    /// Listings the test asks for, each after this much (paused) time.
    listings: Vec<u64>,
}

fn paged_server() -> impl Strategy<Value = PagedServer> {
    (
        0usize..40,
        1usize..8,
        prop_oneof![Just(Cursors::Offset), Just(Cursors::Opaque)],
        prop_oneof![Just(0u64), 1u64..5_000, Just(3_600_000u64)],
        proptest::collection::vec(
            (
                0usize..60,
                prop_oneof![
                    (0usize..64).prop_map(Edit::Add),
                    (0usize..64).prop_map(Edit::Remove),
                    Just(Edit::Spurious),
                ],
            ),
            0..8,
        ),
        proptest::collection::vec(0u64..10_000, 1..6),
    )
        .prop_map(
            |(start, page, cursors, ttl_ms, changes, listings)| PagedServer {
                start,
                page,
                cursors,
                ttl_ms,
                changes,
                listings,
            },
        )
}

/// The cursor of the page that starts at `offset` (never 0: the first page has none).
fn cursor_text(offset: usize, server: &PagedServer) -> String {
    match server.cursors {
        Cursors::Offset => offset.to_string(),
        // The second page's cursor is the empty string; later ones grow long.
        Cursors::Opaque => "é€🙂".repeat((offset - server.page) * 37),
    }
}

fn offset_of(cursor: &str, server: &PagedServer) -> Option<usize> {
    match server.cursors {
        Cursors::Offset => cursor.parse().ok(),
        Cursors::Opaque => Some(cursor.chars().filter(|c| *c == 'é').count() / 37 + server.page),
    }
}

/// The server's state: its tools, and what it has done.
struct PagedState {
    tools: Vec<String>,
    next_name: usize,
    lists: usize,
    incoming: Option<Incoming>,
}

struct PagedTransport {
    server: PagedServer,
    state: Arc<Mutex<PagedState>>,
}

impl PagedTransport {
    fn apply(&self, change: &Edit, state: &mut PagedState) {
        match change {
            Edit::Add(at) => {
                let name = format!("added-{}", state.next_name);
                state.next_name += 1;
                let at = at % (state.tools.len() + 1);
                state.tools.insert(at, name);
            }
            Edit::Remove(at) if !state.tools.is_empty() => {
                let at = at % state.tools.len();
                state.tools.remove(at);
            }
            Edit::Remove(_) | Edit::Spurious => {}
        }
    }

    fn answer(&self, r: &Request) -> std::result::Result<Value, ErrorObject> {
        let mut state = lock(&self.state);
        if r.method != "tools/list" {
            return Ok(crate::testing::discover_ok());
        }
        let n = state.lists;
        state.lists += 1;
        for (_, change) in self.server.changes.iter().filter(|(at, _)| *at == n) {
            self.apply(change, &mut state);
            // Said before the answer, as a message stream delivers it.
            if let Some(incoming) = &state.incoming {
                incoming.notification(Notification {
                    method: "notifications/tools/list_changed".into(),
                    params: None,
                });
            }
        }
        let offset = match r.params.get("cursor").and_then(Value::as_str) {
            None => 0,
            Some(c) => offset_of(c, &self.server).ok_or_else(|| ErrorObject {
                code: -32602,
                message: "bad cursor".into(),
                data: None,
            })?,
        };
        let end = (offset + self.server.page).min(state.tools.len());
        let page: Vec<Value> = state
            .tools
            .get(offset.min(end)..end)
            .unwrap_or_default()
            .iter()
            .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
            .collect();
        let mut result = json!({"tools": page, "ttlMs": self.server.ttl_ms});
        if end < state.tools.len() {
            result["nextCursor"] = cursor_text(end, &self.server).into();
        }
        Ok(result)
    }
}

impl Transport for PagedTransport {
    fn connect<'a>(&'a self, incoming: &'a Incoming) -> BoxFuture<'a, Result<()>> {
        lock(&self.state).incoming = Some(incoming.clone());
        Box::pin(async { Ok(()) })
    }
    fn request(&self, request: Request, _cx: RequestContext) -> BoxFuture<'_, Result<Response>> {
        let outcome = self.answer(&request);
        Box::pin(async move {
            Ok(Response {
                id: request.id,
                outcome,
            })
        })
    }
    fn notify<'a>(&'a self, _n: Notification, _v: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn cancel<'a>(&'a self, _n: Notification, _v: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn close(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

fn check_pages(server: &PagedServer) -> std::result::Result<(), TestCaseError> {
    let state = Arc::new(Mutex::new(PagedState {
        tools: (0..server.start).map(|i| format!("tool-{i}")).collect(),
        next_name: 0,
        lists: 0,
        incoming: None,
    }));
    let client = Client::builder()
        .build(PagedTransport {
            server: server.clone(),
            state: state.clone(),
        })
        .expect("a client");
    paused_runtime().block_on(async {
        for wait in &server.listings {
            tokio::time::sleep(Duration::from_millis(*wait)).await;
            let before = lock(&state).lists;
            let listed = tokio::time::timeout(Duration::from_secs(3600), client.tools())
                .await
                .map_err(|_| TestCaseError::fail("the listing hung"))?
                .map_err(|e| TestCaseError::fail(format!("the listing failed: {e}")))?;
            let (now, after) = {
                let s = lock(&state);
                (s.tools.clone(), s.lists)
            };
            let names: Vec<String> = listed.into_iter().map(|t| t.name).collect();
            let mut distinct = names.clone();
            distinct.sort();
            distinct.dedup();
            prop_assert_eq!(distinct.len(), names.len(), "an item twice: {:?}", names);
            // The changes made while this listing read its pages: fewer than the
            // attempts a listing makes, so the last attempt saw none, and the list is
            // exactly the server's (in its order).
            let changes_during = server
                .changes
                .iter()
                .filter(|(at, _)| (before..after).contains(at))
                .count();
            if changes_during < 3 {
                prop_assert_eq!(&names, &now, "the listing is not the server's list");
            } else {
                // A storm of changes: still nothing twice (above), and nothing the
                // server never listed.
                prop_assert!(names
                    .iter()
                    .all(|n| n.starts_with("tool-") || n.starts_with("added-")));
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_listing_holds_each_item_once_and_misses_none(server in paged_server()) {
        check_pages(&server)?;
    }
}

/// A server whose cursors go round in a circle longer than one step: the listing
/// ends with an error at the first repeat, not after thousands of pages.
#[tokio::test]
async fn a_cursor_cycle_ends_the_listing_at_the_first_repeat() {
    let (c, seen) = crate::testing::scripted(Client::builder(), |r, _| match r.method.as_str() {
        "server/discover" => Step::Reply(crate::testing::discover_ok()),
        _ => {
            let next = match r.params.get("cursor").and_then(Value::as_str) {
                None | Some("c") => "a",
                Some("a") => "b",
                Some(_) => "c",
            };
            Step::Reply(json!({"tools": [], "nextCursor": next}))
        }
    });
    let e = c.tools().await.unwrap_err();
    assert!(
        e.is_invalid_response() && e.to_string().contains("repeats"),
        "{e}"
    );
    let lists = lock(&seen)
        .iter()
        .filter(|r| r.method == "tools/list")
        .count();
    assert_eq!(lists, 4, "a, b, c, then a again");
}
