//! Large messages gathered as they arrive, each long string moved out of the read
//! buffer while it fills, so that a message costs its own size once — not its bytes
//! plus its parsed value (a tool's 10 MB text, a base64 blob).
//!
//! Once a stdio line or an HTTP body grows past [`GATHER_FROM`] bytes, a [`Gather`]
//! follows its JSON as bytes are read: where strings start and end, and whether each is
//! an object key or a value. The content of every value string of at least
//! [`LONG_STRING`] bytes is moved, still escaped, into a buffer of its own, and a short
//! placeholder string takes its place in the read buffer. When the message is whole,
//! what is left in the buffer (its structure, keys and short strings) is parsed as any
//! message is, and each placeholder is replaced by its string — unescaped in place and
//! moved, never copied again.
//!
//! The framing is unchanged: a stdio line still ends at its first newline byte,
//! wherever it is. What parses is unchanged too: a string moved out is checked as
//! `serde_json` checks one (control characters, escapes, surrogate pairs, UTF-8), and
//! a message that is not JSON fails as it would have. Placeholders carry a random nonce
//! made for each message, so a peer cannot write one of its own. The nesting followed
//! is bounded: past [`MAX_DEPTH`] levels (which the parser refuses anyway) nothing more
//! is moved out.

use crate::jsonrpc::{Id, Message};
use serde_json::Value;
use std::hash::{BuildHasher, RandomState};

/// A message is gathered once this many of its bytes have arrived without its end.
pub const GATHER_FROM: usize = 256 * 1024;
/// Value strings at least this long are moved out of the read buffer.
pub const LONG_STRING: usize = 16 * 1024;
/// Nesting deeper than this is not followed (`serde_json` refuses past 128).
pub const MAX_DEPTH: usize = 256;

/// One message being gathered; see the [module](self) docs.
#[derive(Debug)]
pub struct Gather {
    /// `buf[..scan]` has been followed.
    scan: usize,
    state: State,
    /// The containers open: `true` for an object.
    stack: Vec<bool>,
    /// The next string in the current object is a key.
    expect_key: bool,
    /// The nesting went past [`MAX_DEPTH`] or closed what was not open: nothing more is
    /// moved out (the message will not parse).
    lost: bool,
    /// A stdio line: the message ends at its first newline byte.
    lines: bool,
    /// The message is a batch (parsed whole, every string decoded).
    batch: bool,
    /// What the current field of the message (the envelope's key at depth 1) is.
    field: Field,
    /// Inside `error`: its current field is one the error object keeps (all are, until
    /// a key says otherwise: an error object may also be read as a sequence).
    error_field: bool,
    /// Strings shorter than this stay in the buffer.
    long: usize,
    /// The contents moved out, escaped, in order, each with whether the parser decodes
    /// it.
    strings: Vec<(Vec<u8>, bool)>,
    /// Bytes moved out of the buffer, and placeholder bytes put in.
    taken: usize,
    added: usize,
    nonce: String,
}

/// A field of the envelope: kept (its strings are decoded by the parser, so each must
/// be valid), `error` (its own fields decide), or ignored (its strings are only
/// checked, as the parser skips them).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    Kept,
    Error,
    Ignored,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Outside,
    String {
        /// Where the content starts in the buffer.
        content: usize,
        /// A value (not an object's key) that may be moved out.
        value: bool,
        /// The parser decodes it (else it only skips it).
        kept: bool,
        /// The byte before `scan` was an escaping backslash.
        escaped: bool,
        /// Moved out into `strings[.0]`; the buffer holds its placeholder and then,
        /// from `.1`, content not yet moved.
        out: Option<(usize, usize)>,
    },
}

impl Gather {
    /// Follows a stdio line (it ends at its first newline byte) or, with
    /// `lines == false`, an HTTP body (it ends where the body does).
    pub fn new(lines: bool) -> Gather {
        Gather::with_threshold(lines, LONG_STRING)
    }

    /// As [`Gather::new`], moving out value strings of at least `long` bytes (tests use
    /// small ones).
    pub fn with_threshold(lines: bool, long: usize) -> Gather {
        let (a, b) = (RandomState::new(), RandomState::new());
        Gather {
            scan: 0,
            state: State::Outside,
            stack: Vec::new(),
            expect_key: false,
            lost: false,
            lines,
            batch: false,
            field: Field::Kept,
            error_field: true,
            long: long.max(1),
            strings: Vec::new(),
            taken: 0,
            added: 0,
            nonce: format!(
                "mcp-gathered-{:016x}{:016x}-",
                a.hash_one(0x6d6370u32),
                b.hash_one(0x6761u32)
            ),
        }
    }

    /// How long the message is so far (as the peer sent it), given the buffer's length.
    pub fn len(&self, buf_len: usize) -> usize {
        (buf_len + self.taken).saturating_sub(self.added)
    }

    /// Whether nothing has been gathered (the message so far is empty).
    pub fn is_empty(&self, buf_len: usize) -> bool {
        self.len(buf_len) == 0
    }

    /// Follows the bytes appended to `buf` since the last call, moving long strings
    /// out. For a stdio line, returns where the line ends (the index of its newline in
    /// `buf`) once it has arrived; what follows it is not touched.
    pub fn advance(&mut self, buf: &mut Vec<u8>) -> Option<usize> {
        loop {
            if self.scan >= buf.len() {
                self.scan = self.move_out(buf, buf.len());
                return None;
            }
            match self.state {
                State::Outside => {
                    let b = buf[self.scan];
                    match b {
                        b'\n' if self.lines => return Some(self.scan),
                        b'"' => {
                            let key = self.expect_key && self.stack.last() == Some(&true);
                            self.state = State::String {
                                content: self.scan + 1,
                                value: !key && !self.lost,
                                kept: self.kept(),
                                escaped: false,
                                out: None,
                            };
                            self.expect_key = false;
                        }
                        b'{' | b'[' => {
                            if self.stack.is_empty() {
                                self.batch = b == b'[';
                            }
                            if self.stack.len() >= MAX_DEPTH {
                                self.lost = true;
                            } else {
                                self.stack.push(b == b'{');
                            }
                            self.expect_key = b == b'{';
                        }
                        b'}' | b']' => {
                            if self.stack.pop().is_none() {
                                self.lost = true;
                            }
                            self.expect_key = false;
                        }
                        b':' => self.expect_key = false,
                        b',' => self.expect_key = self.stack.last() == Some(&true),
                        _ => {}
                    }
                    self.scan += 1;
                }
                State::String { escaped: true, .. } => {
                    if self.lines && buf[self.scan] == b'\n' {
                        return Some(self.scan);
                    }
                    self.set_escaped(false);
                    self.scan += 1;
                }
                State::String {
                    content,
                    value,
                    escaped: false,
                    ..
                } => match memchr::memchr3(b'"', b'\\', b'\n', &buf[self.scan..]) {
                    None => self.scan = buf.len(),
                    Some(i) => {
                        let at = self.scan + i;
                        match buf[at] {
                            b'\n' if self.lines => return Some(at),
                            b'\n' => self.scan = at + 1,
                            b'\\' => {
                                self.scan = at + 1;
                                self.set_escaped(true);
                            }
                            _ => {
                                if !value {
                                    self.key(&buf[content..at]);
                                }
                                // The closing quote: what is left of the content moves out
                                // (or all of it, if it is long), then the quote is passed.
                                let end = self.move_out(buf, at);
                                self.state = State::Outside;
                                self.scan = end + 1;
                            }
                        }
                    }
                },
            }
        }
    }

    fn set_escaped(&mut self, to: bool) {
        if let State::String { escaped, .. } = &mut self.state {
            *escaped = to;
        }
    }

    /// Whether the parser will decode a string that starts here.
    fn kept(&self) -> bool {
        if self.batch || self.stack.len() < 2 {
            return self.batch || self.stack.is_empty() || self.field != Field::Ignored;
        }
        match self.field {
            Field::Kept => true,
            // (An error object read as a sequence keeps all it has, or fails.)
            Field::Error => self.error_field,
            Field::Ignored => false,
        }
    }

    /// An object's key (`raw`, as sent) has ended: at the envelope's level and in its
    /// `error`, it decides which strings the parser decodes.
    fn key(&mut self, raw: &[u8]) {
        let depth = self.stack.len();
        if self.batch || !(depth == 1 || (depth == 2 && self.field == Field::Error)) {
            return;
        }
        // The longest name below, each character escaped, is 36 bytes.
        let name = if raw.len() > 36 {
            None
        } else if raw.contains(&b'\\') {
            check(raw).ok().and_then(|()| unescape(raw.to_vec()).ok())
        } else {
            std::str::from_utf8(raw).ok().map(str::to_owned)
        };
        let name = name.as_deref();
        if depth == 1 {
            self.error_field = true;
            self.field = match name {
                Some("id" | "method" | "params" | "result") => Field::Kept,
                Some("error") => Field::Error,
                _ => Field::Ignored,
            };
        } else {
            self.error_field = matches!(name, Some("code" | "message" | "data"));
        }
    }

    /// Moves the content of the current string scanned so far (it ends at `end`) out of
    /// the buffer if the string is long; returns where `end` now is (the bytes after it
    /// shift back with it).
    fn move_out(&mut self, buf: &mut Vec<u8>, end: usize) -> usize {
        let State::String {
            content,
            value: true,
            kept,
            escaped,
            out,
        } = self.state
        else {
            return end;
        };
        match out {
            Some((i, from)) => {
                self.strings[i].0.extend_from_slice(&buf[from..end]);
                buf.drain(from..end);
                self.taken += end - from;
                from
            }
            None if end - content >= self.long => {
                let i = self.strings.len();
                self.strings.push((buf[content..end].to_vec(), kept));
                let holder = format!("{}{i}", self.nonce);
                buf.splice(content..end, holder.bytes());
                let from = content + holder.len();
                self.taken += end - content;
                self.added += holder.len();
                self.state = State::String {
                    content,
                    value: true,
                    kept,
                    escaped,
                    out: Some((i, from)),
                };
                from
            }
            None => end,
        }
    }

    /// Parses the message, `residual` being what is left of it in the buffer (without
    /// a stdio line's newline), and puts each string moved out back in its place.
    ///
    /// What is refused is what `serde_json` refuses in the whole message: every string
    /// moved out is checked for control characters and escapes; a string the parser
    /// decodes (in a field the envelope keeps, or anywhere in a batch, which is parsed
    /// whole) is decoded here and must be UTF-8 with paired surrogates; a string in a
    /// field nobody reads is dropped unread, as the parser skips it.
    pub fn finish(self, residual: &[u8]) -> Result<Vec<Result<Message, String>>, String> {
        if let State::String { out: Some(_), .. } = self.state {
            return Err("EOF while parsing a string".to_owned());
        }
        let mut strings = Vec::with_capacity(self.strings.len());
        for (raw, kept) in self.strings {
            check(&raw)?;
            strings.push(Some(if kept {
                Long::Text(unescape(raw)?)
            } else {
                Long::Raw(raw)
            }));
        }
        let mut messages = Message::parse(residual)?;
        for m in messages.iter_mut().flatten() {
            restore_message(m, &self.nonce, &mut strings)?;
        }
        Ok(messages)
    }
}

/// A string moved out: as it came (escaped), or decoded.
enum Long {
    Raw(Vec<u8>),
    Text(String),
}

type Strings = Vec<Option<Long>>;

fn restore_message(m: &mut Message, nonce: &str, strings: &mut Strings) -> Result<(), String> {
    match m {
        Message::Request(r) => {
            restore_id(&mut r.id, nonce, strings)?;
            restore_string(&mut r.method, nonce, strings)?;
            restore(&mut r.params, nonce, strings)
        }
        Message::Notification(n) => {
            restore_string(&mut n.method, nonce, strings)?;
            match &mut n.params {
                Some(p) => restore(p, nonce, strings),
                None => Ok(()),
            }
        }
        Message::Response(r) => {
            restore_id(&mut r.id, nonce, strings)?;
            match &mut r.outcome {
                Ok(v) => restore(v, nonce, strings),
                Err(e) => {
                    restore_string(&mut e.message, nonce, strings)?;
                    match &mut e.data {
                        Some(d) => restore(d, nonce, strings),
                        None => Ok(()),
                    }
                }
            }
        }
    }
}

fn restore_id(id: &mut Id, nonce: &str, strings: &mut Strings) -> Result<(), String> {
    match id {
        Id::String(s) => restore_string(s, nonce, strings),
        Id::Number(_) => Ok(()),
    }
}

fn restore(v: &mut Value, nonce: &str, strings: &mut Strings) -> Result<(), String> {
    match v {
        Value::String(s) => restore_string(s, nonce, strings),
        Value::Array(items) => items
            .iter_mut()
            .try_for_each(|v| restore(v, nonce, strings)),
        Value::Object(map) => map
            .values_mut()
            .try_for_each(|v| restore(v, nonce, strings)),
        _ => Ok(()),
    }
}

fn restore_string(s: &mut String, nonce: &str, strings: &mut Strings) -> Result<(), String> {
    let Some(index) = s.strip_prefix(nonce) else {
        return Ok(());
    };
    let found = index
        .parse::<usize>()
        .ok()
        .and_then(|i| strings.get_mut(i))
        .and_then(Option::take);
    *s = match found {
        Some(Long::Text(text)) => text,
        Some(Long::Raw(raw)) => unescape(raw)?,
        None => return Err("a gathered string is out of place".to_owned()),
    };
    Ok(())
}

/// What `serde_json` checks of every string, even one it ignores: no control
/// characters, escapes that are escapes.
fn check(raw: &[u8]) -> Result<(), String> {
    if has_control(raw) {
        return Err("control character (\\u0000-\\u001F) found while parsing a string".to_owned());
    }
    let mut at = 0;
    while let Some(i) = memchr::memchr(b'\\', &raw[at..]) {
        let e = at + i + 1;
        match raw.get(e) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => at = e + 1,
            Some(b'u') => {
                hex4(raw, e + 1)?;
                at = e + 5;
            }
            Some(_) => return Err("invalid escape".to_owned()),
            None => return Err("EOF while parsing a string".to_owned()),
        }
    }
    Ok(())
}

/// Whether `raw` holds a byte below 0x20, 64 bytes at a time (so that it vectorizes:
/// a long string is checked at memory speed).
fn has_control(raw: &[u8]) -> bool {
    let mut blocks = raw.chunks_exact(64);
    blocks
        .by_ref()
        .any(|b| b.iter().fold(0u8, |seen, &c| seen | u8::from(c < 0x20)) != 0)
        || blocks.remainder().iter().any(|&c| c < 0x20)
}

/// Decodes a checked string's content in place: escapes, surrogate pairs, UTF-8.
fn unescape(mut raw: Vec<u8>) -> Result<String, String> {
    if let Some(first) = memchr::memchr(b'\\', &raw) {
        let (mut r, mut w) = (first, first);
        while r < raw.len() {
            if raw[r] != b'\\' {
                let next = memchr::memchr(b'\\', &raw[r..]).map_or(raw.len(), |i| r + i);
                raw.copy_within(r..next, w);
                w += next - r;
                r = next;
                continue;
            }
            let escape = *raw.get(r + 1).ok_or("EOF while parsing a string")?;
            r += 2;
            let byte = match escape {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 0x08,
                b'f' => 0x0c,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'u' => {
                    let high = hex4(&raw, r)?;
                    r += 4;
                    let code = match high {
                        0xD800..=0xDBFF => {
                            if raw.get(r..r + 2) != Some(b"\\u") {
                                return Err("unexpected end of hex escape".to_owned());
                            }
                            let low = hex4(&raw, r + 2)?;
                            if !(0xDC00..=0xDFFF).contains(&low) {
                                return Err("lone leading surrogate in hex escape".to_owned());
                            }
                            r += 6;
                            0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                        }
                        0xDC00..=0xDFFF => {
                            return Err("lone leading surrogate in hex escape".to_owned())
                        }
                        c => c,
                    };
                    let c = char::from_u32(code).ok_or("invalid unicode code point")?;
                    let mut utf8 = [0u8; 4];
                    let bytes = c.encode_utf8(&mut utf8).as_bytes();
                    raw[w..w + bytes.len()].copy_from_slice(bytes);
                    w += bytes.len();
                    continue;
                }
                _ => return Err("invalid escape".to_owned()),
            };
            raw[w] = byte;
            w += 1;
        }
        raw.truncate(w);
    }
    let mut s = String::from_utf8(raw).map_err(|_| "invalid unicode code point".to_owned())?;
    s.shrink_to_fit();
    Ok(s)
}

fn hex4(raw: &[u8], at: usize) -> Result<u32, String> {
    let digits = raw
        .get(at..at + 4)
        .ok_or("EOF while parsing a hex escape")?;
    digits.iter().try_fold(0u32, |n, &d| {
        let v = (d as char).to_digit(16).ok_or("invalid escape")?;
        Ok(n * 16 + v)
    })
}

#[cfg(test)]
mod tests;
