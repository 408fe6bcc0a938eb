//! The checks each fuzz target makes on one input (fuzz/README.md). Every target calls
//! the library's own parsing entry point — `mcp_runtime_core`'s public parsers, or the
//! hidden `fuzzing` modules of `mcp-runtime` and `mcp-agent`, which call the functions
//! the library uses — and checks invariants, not only the absence of a panic:
//!
//! * **bounded memory**: the most memory live at once while the input is parsed is at
//!   most [`BUDGET_PER_BYTE`] times its size plus [`BUDGET_FIXED`] (a counting global
//!   allocator watches);
//! * **round trips** where a type writes itself back (JSON-RPC messages, snapshots,
//!   stored runs): written and read again, the same value;
//! * **equivalences** where two paths must agree (a message gathered as it arrives and
//!   parsed whole; an event stream fed in pieces and at once).
//!
//! `cargo test` in this folder replays every input kept under `corpus/` and
//! `regressions/` through the same functions, without libFuzzer.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use mcp_runtime_core::gather::Gather;
use mcp_runtime_core::jsonrpc::Message;

/// Memory a parse may hold at its peak, per byte of input…
pub const BUDGET_PER_BYTE: usize = 64;
/// …plus this much (budgets that do not grow with the input: the YAML alias budget,
/// buffers of fixed size).
pub const BUDGET_FIXED: usize = 48 << 20;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

fn grew(n: usize) {
    let live = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` on an input of `len` bytes and fails if it held more than its budget.
fn bounded<T>(len: usize, f: impl FnOnce() -> T) -> T {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    let held = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let budget = len.saturating_mul(BUDGET_PER_BYTE) + BUDGET_FIXED;
    assert!(
        held <= budget,
        "{held} bytes held at once for {len} bytes of input (budget {budget})"
    );
    out
}

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Two strings from one input: split at the first NUL (the second may be empty).
fn two(data: &[u8]) -> Option<(&str, &str)> {
    let s = text(data)?;
    Some(s.split_once('\0').unwrap_or((s, "")))
}

/// JSON-RPC messages, a stdio line or an HTTP body: every message that parses is
/// written back and reads as itself.
pub fn jsonrpc(data: &[u8]) {
    let parsed = bounded(data.len(), || Message::parse(data));
    for m in parsed.into_iter().flatten().flatten() {
        let written = m.to_vec();
        match Message::parse(&written).as_deref() {
            Ok([Ok(again)]) => assert_eq!(again, &m, "{}", String::from_utf8_lossy(&written)),
            other => panic!(
                "{} does not read back: {other:?}",
                String::from_utf8_lossy(&written)
            ),
        }
    }
}

/// What a parse says, errors' wording aside.
type Shape = Option<Vec<Option<Message>>>;

fn shape(p: Result<Vec<Result<Message, String>>, String>) -> Shape {
    p.ok().map(|v| v.into_iter().map(Result::ok).collect())
}

/// A message gathered as it arrives — long strings moved out of the buffer, in pieces
/// of any size — parses as the same message parsed whole, or fails as it does. The
/// first three bytes choose the string threshold, the piece size and line or body.
pub fn gather(data: &[u8]) {
    let [long, piece, mode, input @ ..] = data else {
        return;
    };
    let long = usize::from(*long % 32) + 1;
    let piece = usize::from(*piece) + 1;
    let lines = mode & 1 == 1;
    let whole = match memchr_newline(input).filter(|_| lines) {
        Some(i) => &input[..i],
        None => input,
    };
    let want = shape(Message::parse(whole.trim_ascii()));
    let got = bounded(data.len(), || {
        let mut g = Gather::with_threshold(lines, long);
        let mut buf = Vec::new();
        let mut fed = 0;
        for chunk in input.chunks(piece) {
            buf.extend_from_slice(chunk);
            fed += chunk.len();
            if let Some(end) = g.advance(&mut buf) {
                assert_eq!(buf[end], b'\n');
                return shape(g.finish(buf[..end].trim_ascii()));
            }
            assert_eq!(g.len(buf.len()), fed, "the length as sent is kept");
        }
        shape(g.finish(buf.trim_ascii()))
    });
    assert_eq!(got, want, "{:?}", String::from_utf8_lossy(input));
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

/// An event stream: fed in pieces (the first byte chooses their size) it gives the
/// events it gives at once, none larger than the limit.
pub fn sse(data: &[u8]) {
    use mcp_runtime_core::sse::Parser;
    let [piece, input @ ..] = data else {
        return;
    };
    const LIMIT: usize = 4096;
    let run = |size: usize| {
        let mut p = Parser::new(LIMIT);
        let mut out = Vec::new();
        let mut failed = false;
        for chunk in input.chunks(size.max(1)) {
            if p.push(chunk, &mut out).is_err() {
                failed = true;
                break;
            }
        }
        if !failed {
            p.finish(&mut out);
        }
        (out, failed)
    };
    let (at_once, failed) = bounded(data.len(), || run(input.len()));
    let (in_pieces, failed_in_pieces) = bounded(data.len(), || run(usize::from(*piece) + 1));
    for e in at_once.iter().chain(&in_pieces) {
        assert!(e.data.len() <= LIMIT, "an event of {} bytes", e.data.len());
    }
    if !failed && !failed_in_pieces {
        assert_eq!(at_once, in_pieces);
    }
}

/// A snapshot file: one that reads is written back and reads as itself.
pub fn snapshot(data: &[u8]) {
    use mcp_runtime_core::snapshot::Snapshot;
    let Some(t) = text(data) else { return };
    let Ok(s) = bounded(data.len(), || Snapshot::parse(t)) else {
        return;
    };
    let written = s.to_json();
    let again = Snapshot::parse(&written).expect("a written snapshot reads");
    assert_eq!(again, s);
}

/// `WWW-Authenticate` headers.
pub fn www_authenticate(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let challenges = bounded(data.len(), || mcp_runtime::fuzzing::www_authenticate(t));
    for (scheme, params) in challenges {
        assert!(!scheme.is_empty(), "a challenge with no scheme");
        for (k, _) in params {
            assert!(!k.is_empty(), "a parameter with no name");
        }
    }
}

/// An authorization server's metadata (issuer, then NUL, then the document); and
/// whether a protected resource names a server (resource NUL server).
pub fn as_metadata(data: &[u8]) {
    let Some((issuer, rest)) = two(data) else {
        return;
    };
    bounded(data.len(), || {
        let _ = mcp_runtime::fuzzing::as_metadata(issuer, rest.as_bytes());
        let m = mcp_runtime::fuzzing::resource_matches(issuer, rest, false);
        // The same resource and server always match (but an empty one).
        if !issuer.is_empty() {
            assert!(mcp_runtime::fuzzing::resource_matches(
                issuer, issuer, false
            ));
        }
        m
    });
}

/// The 2024-11-05 `endpoint` event (stream URL NUL reference): a reference without a
/// scheme resolves on the stream's own origin (an absolute one to elsewhere is
/// refused by the transport after this).
pub fn endpoint(data: &[u8]) {
    let Some((base, reference)) = two(data) else {
        return;
    };
    // The transport's URL is an absolute http(s) URL with a host (its config says so).
    let absolute_base = base.parse::<http_uri::Uri>().is_ok_and(|u| {
        matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some_and(|h| !h.is_empty())
    });
    if !absolute_base {
        return;
    }
    let Some(Ok((resolved, same_origin))) = bounded(data.len(), || {
        mcp_runtime::fuzzing::endpoint(base, reference)
    }) else {
        return;
    };
    // What the transport takes as absolute (a URI with a scheme) is checked against
    // the stream's origin after this; anything else must stay on it.
    let absolute = reference
        .trim()
        .parse::<http_uri::Uri>()
        .is_ok_and(|u| u.scheme().is_some());
    assert!(
        absolute || same_origin,
        "{reference:?} against {base:?} resolved to another origin: {resolved}"
    );
}

/// `SKILL.md` frontmatter (YAML, with an alias budget).
pub fn skill_frontmatter(data: &[u8]) {
    let Some(t) = text(data) else { return };
    bounded(data.len(), || mcp_runtime::fuzzing::skill_frontmatter(t));
}

/// RFC 6570 templates (template NUL name=value NUL …).
pub fn uri_template(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let mut parts = t.split('\0');
    let template = parts.next().unwrap_or_default();
    let vars: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
    bounded(data.len(), || {
        let _ = mcp_runtime::declared::expand_template(template, &vars);
    });
}

/// A JSON Schema and a value (schema NUL value): a hostile schema is refused or
/// checked within bounds; `is_valid` and `check` agree; a check reports at most
/// `MAX_VIOLATIONS`, each clipped.
pub fn schema(data: &[u8]) {
    use mcp_runtime::schema::{Schema, MAX_VIOLATIONS};
    let Some(t) = text(data) else { return };
    let (schema, value) = t.split_once('\0').unwrap_or((t, "null"));
    let (Ok(schema), Ok(value)) = (
        serde_json::from_str::<serde_json::Value>(schema),
        serde_json::from_str::<serde_json::Value>(value),
    ) else {
        return;
    };
    bounded(data.len(), || {
        let Ok(compiled) = Schema::new(&schema) else {
            return;
        };
        let valid = compiled.is_valid(&value);
        match compiled.check(&value) {
            Ok(()) => assert!(valid, "check passed what is_valid refused"),
            Err(v) => {
                assert!(!valid, "check refused what is_valid passed");
                assert!(!v.is_empty() && v.len() <= MAX_VIOLATIONS);
                for one in &v {
                    assert!(one.message.len() <= 310 && one.path.len() <= 310);
                }
            }
        }
    });
}

/// A Chat Completions answer.
pub fn openai_answer(data: &[u8]) {
    bounded(data.len(), || {
        let _ = mcp_agent::fuzzing::openai_answer(data);
    });
}

/// A streamed Chat Completions answer (tool-call deltas and all).
pub fn openai_stream(data: &[u8]) {
    bounded(data.len(), || {
        let _ = mcp_agent::fuzzing::openai_stream(data);
    });
}

/// A Responses answer.
pub fn responses_answer(data: &[u8]) {
    bounded(data.len(), || {
        let _ = mcp_agent::fuzzing::responses_answer(data);
    });
}

/// A streamed Responses answer (argument deltas, the final response).
pub fn responses_stream(data: &[u8]) {
    bounded(data.len(), || {
        let _ = mcp_agent::fuzzing::responses_stream(data);
    });
}

/// An Anthropic Messages answer.
pub fn anthropic_answer(data: &[u8]) {
    bounded(data.len(), || {
        let _ = mcp_agent::fuzzing::anthropic_answer(data);
    });
}

/// A streamed Anthropic Messages answer.
pub fn anthropic_stream(data: &[u8]) {
    bounded(data.len(), || {
        let _ = mcp_agent::fuzzing::anthropic_stream(data);
    });
}

/// A stored run's state (JSON): read, written back and read again, the same run.
pub fn stored_run(data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let checked = bounded(data.len(), || mcp_agent::fuzzing::stored_run(v));
    if let Err(e) = checked {
        panic!("{e}");
    }
}

/// The targets by name, for the replay test.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("jsonrpc", jsonrpc),
    ("gather", gather),
    ("sse", sse),
    ("snapshot", snapshot),
    ("www_authenticate", www_authenticate),
    ("as_metadata", as_metadata),
    ("endpoint", endpoint),
    ("skill_frontmatter", skill_frontmatter),
    ("uri_template", uri_template),
    ("openai_answer", openai_answer),
    ("openai_stream", openai_stream),
    ("responses_answer", responses_answer),
    ("responses_stream", responses_stream),
    ("anthropic_answer", anthropic_answer),
    ("anthropic_stream", anthropic_stream),
    ("stored_run", stored_run),
    ("schema", schema),
];
