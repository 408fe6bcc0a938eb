//! An incremental Server-Sent Events parser (the WHATWG event-stream format).
//!
//! Bytes go in as they arrive; complete events come out. It scans each byte once, so a
//! 10 MB event costs linear time, and comment lines (`: keep-alive`) are dropped. An
//! event (with the line being read) may not grow past the parser's limit: past it,
//! [`Parser::push`] fails and keeps nothing of it.

use std::time::Duration;

/// The shortest wait before reconnecting, whatever `retry:` a server sends.
pub const RETRY_FLOOR: Duration = Duration::from_millis(250);
/// The longest wait before reconnecting.
pub const RETRY_CEILING: Duration = Duration::from_secs(30);

/// How long to wait before reconnecting: the server's `retry:` (or one second), never
/// less than [`RETRY_FLOOR`], doubled for each attempt in a row that brought nothing,
/// up to [`RETRY_CEILING`].
pub fn reconnect_delay(retry_ms: Option<u64>, fruitless: u32) -> Duration {
    let base = Duration::from_millis(retry_ms.unwrap_or(1000)).max(RETRY_FLOOR);
    base.saturating_mul(1u32 << fruitless.min(8))
        .min(RETRY_CEILING.max(base))
}

/// An event grew past the parser's limit.
#[derive(Debug)]
pub struct Overflow;

/// One dispatched event.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Event {
    /// `event:` (empty means `message`).
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// `id:`, if the event had one.
    pub id: Option<String>,
}

/// The parser: bytes in with [`Parser::push`], complete events out.
#[derive(Debug)]
pub struct Parser {
    /// The most an event (its data, and the line being read) may hold.
    limit: usize,
    buf: Vec<u8>,
    /// Where to resume looking for a line end in `buf`.
    scanned: usize,
    event: String,
    data: String,
    has_data: bool,
    id: Option<String>,
    /// The last `retry:` value in milliseconds.
    pub retry: Option<u64>,
    /// The last event id seen (it persists across events, as the spec says).
    pub last_id: Option<String>,
    /// A `\\r` ended the previous chunk: a following `\\n` belongs to it.
    skip_lf: bool,
}

impl Parser {
    /// A parser that refuses events larger than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Parser {
            limit,
            buf: Vec::new(),
            scanned: 0,
            event: String::new(),
            data: String::new(),
            has_data: false,
            id: None,
            retry: None,
            last_id: None,
            skip_lf: false,
        }
    }

    /// A parser for the stream that follows this one (a reconnection): the same limit,
    /// and the last event id and `retry:` carried over.
    pub fn resume(&self) -> Self {
        let mut p = Parser::new(self.limit);
        p.last_id = self.last_id.clone();
        p.retry = self.retry;
        p
    }

    /// Reads `chunk` (any piece of the stream) and appends the events it completes to
    /// `out`. Past the limit it fails and keeps nothing of the event being read.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<Event>) -> Result<(), Overflow> {
        let mut chunk = chunk;
        if self.skip_lf {
            if let Some(b'\n') = chunk.first() {
                chunk = &chunk[1..];
            }
            self.skip_lf = false;
        }
        self.buf.extend_from_slice(chunk);
        let mut start = 0;
        let mut i = self.scanned;
        while i < self.buf.len() {
            let b = self.buf[i];
            if b == b'\n' || b == b'\r' {
                let line_end = i;
                let mut next = i + 1;
                if b == b'\r' {
                    if next < self.buf.len() {
                        if self.buf[next] == b'\n' {
                            next += 1;
                        }
                    } else {
                        self.skip_lf = true;
                    }
                }
                let line = std::mem::take(&mut self.buf);
                self.line(&line[start..line_end], out);
                self.buf = line;
                start = next;
                i = next;
            } else {
                i += 1;
            }
        }
        self.buf.drain(..start);
        self.scanned = self.buf.len();
        if self.buf.len() + self.data.len() + self.event.len() > self.limit {
            self.buf = Vec::new();
            self.data = String::new();
            self.scanned = 0;
            self.has_data = false;
            return Err(Overflow);
        }
        Ok(())
    }

    /// The stream ended: a last line without its line end is read, and an event
    /// without its closing blank line is dispatched (model providers end streams so).
    pub fn finish(&mut self, out: &mut Vec<Event>) {
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.line(&line, out);
        }
        self.scanned = 0;
        self.line(b"", out);
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Event>) {
        if line.is_empty() {
            if self.has_data {
                let ev = Event {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                    id: self.id.take(),
                };
                out.push(ev);
            } else {
                self.event.clear();
                self.id = None;
            }
            self.has_data = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&c| c == b':') {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"event" => self.event = value.into_owned(),
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"id" if !value.contains('\0') => {
                self.id = Some(value.clone().into_owned());
                self.last_id = Some(value.into_owned());
            }
            b"retry" => {
                if let Ok(ms) = value.trim().parse::<u64>() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(input: &[u8], piece: usize) -> (Vec<Event>, Parser) {
        let mut p = Parser::new(16 << 20);
        let mut out = Vec::new();
        for c in input.chunks(piece) {
            p.push(c, &mut out).unwrap();
        }
        (out, p)
    }

    #[test]
    fn an_event_past_the_limit_is_refused_and_not_kept() {
        let mut p = Parser::new(1000);
        let mut out = Vec::new();
        // Many data lines of one event: the event grows past the limit.
        let mut failed = false;
        for _ in 0..100 {
            if p.push(
                b"data: 0123456789012345678901234567890123456789\n",
                &mut out,
            )
            .is_err()
            {
                failed = true;
                break;
            }
        }
        assert!(failed && out.is_empty());
        assert!(p.data.capacity() == 0 && p.buf.capacity() == 0);
        // One endless line without a newline.
        let mut p = Parser::new(1000);
        let chunk = [b'x'; 300];
        let refused = (0..10).any(|_| p.push(&chunk, &mut out).is_err());
        assert!(refused);
        // Events under the limit pass, however many.
        let mut p = Parser::new(1000);
        for _ in 0..1000 {
            p.push(b"data: small\n\n", &mut out).unwrap();
        }
        assert_eq!(out.len(), 1000);
    }

    #[test]
    fn reconnect_delays_have_a_floor_and_back_off() {
        assert_eq!(reconnect_delay(Some(0), 0), RETRY_FLOOR);
        assert_eq!(reconnect_delay(Some(0), 2), RETRY_FLOOR * 4);
        assert_eq!(reconnect_delay(None, 0), Duration::from_secs(1));
        assert_eq!(reconnect_delay(Some(0), 30), RETRY_CEILING);
        assert_eq!(reconnect_delay(Some(5000), 1), Duration::from_secs(10));
        // A server may ask for a long wait; it gets it, but no longer for failing.
        assert_eq!(reconnect_delay(Some(90_000), 3), Duration::from_secs(90));
    }

    #[test]
    fn events_comments_ids_and_retry_in_any_chunking() {
        let input = b": keep-alive\r\n\r\nid: 7\r\nretry: 500\r\ndata:\r\n\r\nevent: message\ndata: {\"a\":1}\ndata: {\"b\":2}\n\n:\r\nevent: endpoint\rdata: /messages?s=1\r\r";
        for piece in [1, 2, 3, 5, 8, 1000] {
            let (events, p) = parse_in_pieces(input, piece);
            assert_eq!(events.len(), 3, "piece {piece}: {events:?}");
            assert_eq!(
                events[0],
                Event {
                    event: String::new(),
                    data: String::new(),
                    id: Some("7".into())
                }
            );
            assert_eq!(events[1].data, "{\"a\":1}\n{\"b\":2}");
            assert_eq!(events[1].event, "message");
            assert_eq!(
                events[2],
                Event {
                    event: "endpoint".into(),
                    data: "/messages?s=1".into(),
                    id: None
                }
            );
            assert_eq!(p.retry, Some(500));
            assert_eq!(p.last_id.as_deref(), Some("7"));
        }
    }

    #[test]
    fn a_model_providers_stream_split_anywhere_parses_the_same() {
        let text =
            "event: a\ndata: {\"x\":1}\n\n: comment\r\ndata: one\r\ndata: two\r\n\r\ndata: [DONE]";
        for size in 1..text.len() {
            let mut p = Parser::new(1024);
            let mut out = Vec::new();
            for chunk in text.as_bytes().chunks(size) {
                p.push(chunk, &mut out).expect("within the limit");
            }
            p.finish(&mut out);
            let seen: Vec<(&str, &str)> = out
                .iter()
                .map(|e| (e.event.as_str(), e.data.as_str()))
                .collect();
            assert_eq!(
                seen,
                [("a", "{\"x\":1}"), ("", "one\ntwo"), ("", "[DONE]")],
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn finish_dispatches_an_event_the_stream_did_not_close() {
        let mut p = Parser::new(1024);
        let mut out = Vec::new();
        p.push(b"event: a\ndata: 1\n\nevent: b\ndata: 2", &mut out)
            .expect("within the limit");
        assert_eq!(out.len(), 1);
        p.finish(&mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((out[1].event.as_str(), out[1].data.as_str()), ("b", "2"));
        p.finish(&mut out);
        assert_eq!(out.len(), 2, "nothing more to dispatch");
    }

    #[test]
    fn a_large_event_in_small_chunks() {
        let big = "x".repeat(1 << 20);
        let input = format!("data: {big}\n\n");
        let (events, _) = parse_in_pieces(input.as_bytes(), 4096);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data.len(), 1 << 20);
    }
}
