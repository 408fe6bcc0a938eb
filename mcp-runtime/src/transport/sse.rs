//! An incremental Server-Sent Events parser (the WHATWG event-stream format).
//!
//! Bytes go in as they arrive; complete events come out. It scans each byte once, so a
//! 10 MB event costs linear time, and comment lines (`: keep-alive`) are dropped.

/// One dispatched event.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Event {
    /// `event:` (empty means `message`).
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// `id:`, if the event had one.
    pub id: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Parser {
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
    pub(crate) fn push(&mut self, chunk: &[u8], out: &mut Vec<Event>) {
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
        let mut p = Parser::default();
        let mut out = Vec::new();
        for c in input.chunks(piece) {
            p.push(c, &mut out);
        }
        (out, p)
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
    fn a_large_event_in_small_chunks() {
        let big = "x".repeat(1 << 20);
        let input = format!("data: {big}\n\n");
        let (events, _) = parse_in_pieces(input.as_bytes(), 4096);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data.len(), 1 << 20);
    }
}
