//! Text a server sent, made safe to show, and sizes for messages.

use std::borrow::Cow;

/// Escapes what a terminal would act on in text a server sent: control characters
/// (escape sequences start with ESC), and the Unicode controls that reorder or hide
/// text (bidirectional overrides, zero-width joiners and marks). Tabs and newlines stay
/// when `keep_newlines`; everything else printable passes unchanged.
pub fn escape(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && !(c == '\t' || (keep_newlines && c == '\n')))
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    };
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`escape`] for one line: newlines are escaped too.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Server text for one line of a message: at most `max` characters (then `…`), with
/// controls escaped.
pub fn clip(text: &str, max: usize) -> String {
    let cut = match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    };
    escape_controls(&cut).into_owned()
}

/// A byte count for people: `64 MiB`, `1.5 KiB`, `300 bytes`.
pub fn size(bytes: usize) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_a_terminal_acts_on() {
        assert_eq!(escape_controls("plain text"), "plain text");
        assert!(matches!(escape_controls("plain"), Cow::Borrowed(_)));
        assert_eq!(
            escape_controls("\u{1b}[2Jgone\u{7}"),
            "\\u{1b}[2Jgone\\u{7}"
        );
        assert_eq!(escape_controls("a\nb\tc"), "a\\u{a}b\tc");
        assert_eq!(escape("a\nb", true), "a\nb");
        assert_eq!(escape_controls("abc\u{202e}def"), "abc\\u{202e}def");
        assert_eq!(escape_controls("\u{9b}31m"), "\\u{9b}31m");
    }

    #[test]
    fn sizes() {
        assert_eq!(size(64 * 1024 * 1024), "64 MiB");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(10), "10 bytes");
        assert_eq!(size(3 << 30), "3 GiB");
    }
}
