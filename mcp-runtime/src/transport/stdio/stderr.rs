//! What a stdio server writes to stderr: logged line by line, and its last lines kept
//! for the error that says the server ended ([`Tail`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::sync::watch;

/// The longest stderr line logged whole; the rest of a longer line is counted, not kept.
const LINE_MAX: usize = 8 * 1024;

/// How many of the last lines [`Tail`] keeps.
const TAIL_LINES: usize = 10;

/// The most of a line [`Tail`] keeps, in characters.
const TAIL_CHARS: usize = 300;

/// How long an ended server's stderr is waited for (a child it left behind may hold
/// the pipe open).
const TAIL_WAIT: Duration = Duration::from_secs(3);

/// The last lines a server wrote to stderr (control characters escaped), and whether
/// its stderr has ended.
pub(super) struct Tail {
    lines: Mutex<VecDeque<String>>,
    ended: watch::Sender<bool>,
}

impl Tail {
    pub(super) fn new() -> Arc<Tail> {
        Arc::new(Tail {
            lines: Mutex::new(VecDeque::with_capacity(TAIL_LINES)),
            ended: watch::Sender::new(false),
        })
    }

    fn push(&self, line: &str) {
        let mut lines = mcp_runtime_core::lock(&self.lines);
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        let kept = match line.char_indices().nth(TAIL_CHARS) {
            Some((at, _)) => format!("{}…", &line[..at]),
            None => line.to_owned(),
        };
        lines.push_back(kept);
    }

    /// The last lines the server wrote to stderr, one per line, once its stderr has
    /// ended (or [`TAIL_WAIT`] has passed); `None` when it wrote none.
    pub(super) async fn last(&self) -> Option<String> {
        let mut ended = self.ended.subscribe();
        let _ = tokio::time::timeout(TAIL_WAIT, ended.wait_for(|e| *e)).await;
        let lines = mcp_runtime_core::lock(&self.lines);
        (!lines.is_empty()).then(|| {
            lines
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
    }
}

/// Logs what the server writes to stderr, line by line, for as long as the process
/// keeps it open: any bytes (decoded lossily), lines cut at [`LINE_MAX`]; the last
/// lines go to `tail`.
pub(super) async fn drain(stderr: ChildStderr, name: String, tail: Arc<Tail>) {
    let mut r = BufReader::with_capacity(16 * 1024, stderr);
    let mut line = Vec::with_capacity(256);
    let mut cut = 0usize;
    loop {
        let available = match r.fill_buf().await {
            Ok([]) => break,
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!(server = %name, error = %e, "reading the server's stderr failed");
                break;
            }
        };
        let (take, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        let keep = take.min(LINE_MAX.saturating_sub(line.len()));
        line.extend_from_slice(&available[..keep]);
        cut += take - keep;
        r.consume(take);
        if done {
            log(&name, &line, cut, &tail);
            line.clear();
            cut = 0;
        }
    }
    if !line.is_empty() || cut > 0 {
        log(&name, &line, cut, &tail);
    }
    tail.ended.send_replace(true);
}

fn log(name: &str, line: &[u8], cut: usize, tail: &Tail) {
    let text = String::from_utf8_lossy(line);
    let text = crate::text::escape_controls(text.trim_end_matches(['\n', '\r']));
    if cut > 0 {
        tracing::info!(target: "mcp_runtime::stderr", server = %name, "{text}… ({cut} more bytes not shown)");
    } else {
        tracing::info!(target: "mcp_runtime::stderr", server = %name, "{text}");
    }
    if !text.trim().is_empty() {
        tail.push(&text);
    }
}
