//! Secrets scrubbed from text a provider sent back: in any spelling JSON allows (the
//! secret as is, or any of its characters escaped — `\/`, `\"`, `\\`, `\n`, `\u002f`,
//! a surrogate pair — in any mix), before anything is cut.

/// Secrets shorter than this are not looked for (they would match ordinary text).
const SHORTEST: usize = 4;

/// What a secret is replaced with.
const REDACTED: &str = "[redacted]";

/// `text` with every secret of `secrets`, in any JSON spelling, replaced by
/// `[redacted]`.
pub(crate) fn scrub(text: &str, secrets: &[&str]) -> String {
    let secrets: Vec<&str> = secrets
        .iter()
        .copied()
        .filter(|s| s.len() >= SHORTEST)
        .collect();
    if secrets.is_empty() {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        // Only where a secret may start: its first character, or an escape.
        let found = if bytes[i] == b'\\'
            || secrets
                .iter()
                .any(|s| s.as_bytes().first() == Some(&bytes[i]))
        {
            secrets.iter().find_map(|s| matches_at(text, i, s))
        } else {
            None
        };
        match found {
            Some(end) => {
                out.push_str(REDACTED);
                i = end;
            }
            None => {
                let Some(c) = text[i..].chars().next() else {
                    break;
                };
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// At most the first `max` bytes of `raw` (cut on a character boundary), as text, with
/// the secrets scrubbed first: a secret that starts before the cut is scrubbed whole,
/// never left as a prefix.
pub(crate) fn preview(raw: &[u8], secrets: &[&str], max: usize) -> String {
    // A character escaped takes at most 6 bytes per byte (`\u002f` for `/`): any
    // spelling of a secret that starts before `max` ends inside this window.
    let longest = secrets.iter().map(|s| s.len()).max().unwrap_or(0);
    let window = max.saturating_add(longest.saturating_mul(6)).min(raw.len());
    let mut text = scrub(&String::from_utf8_lossy(&raw[..window]), secrets);
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// Where a spelling of `secret` that starts at `at` in `text` ends (the longest).
/// Each character of the secret may come as is or escaped; a backslash in the text
/// may be one of the secret or the start of an escape, so every place a spelling may
/// have reached so far is followed (a set, never a search that branches).
fn matches_at(text: &str, at: usize, secret: &str) -> Option<usize> {
    let mut ends = vec![at];
    for want in secret.chars() {
        let mut next: Vec<usize> = Vec::with_capacity(2);
        for &i in &ends {
            let Some(rest) = text.get(i..) else {
                continue;
            };
            let mut reach = |end: usize| {
                if !next.contains(&end) {
                    next.push(end);
                }
            };
            if rest.starts_with(want) {
                reach(i + want.len_utf8());
            }
            if let Some((got, len)) = escaped(rest) {
                if got == want {
                    reach(i + len);
                }
            }
        }
        if next.is_empty() {
            return None;
        }
        ends = next;
    }
    ends.into_iter().max()
}

/// The character a JSON escape at the start of `s` stands for, and its length.
fn escaped(s: &str) -> Option<(char, usize)> {
    let b = s.as_bytes();
    if b.first() != Some(&b'\\') {
        return None;
    }
    let simple = match b.get(1)? {
        b'"' => Some('"'),
        b'\\' => Some('\\'),
        b'/' => Some('/'),
        b'b' => Some('\u{8}'),
        b'f' => Some('\u{c}'),
        b'n' => Some('\n'),
        b'r' => Some('\r'),
        b't' => Some('\t'),
        b'u' => None,
        _ => return None,
    };
    if let Some(c) = simple {
        return Some((c, 2));
    }
    let unit = hex4(s.get(2..6)?)?;
    if let Some(c) = char::from_u32(unit) {
        return Some((c, 6));
    }
    // A high surrogate, then the low one.
    if !(0xD800..0xDC00).contains(&unit) || s.get(6..8)? != "\\u" {
        return None;
    }
    let low = hex4(s.get(8..12)?)?;
    if !(0xDC00..0xE000).contains(&low) {
        return None;
    }
    let c = char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?;
    Some((c, 12))
}

fn hex4(s: &str) -> Option<u32> {
    if s.len() != 4 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_is_scrubbed() {
        let key = "sk-a/b\"c\\d<é😀";
        let spellings = [
            key.to_owned(),
            serde_json::to_string(key)
                .unwrap()
                .trim_matches('"')
                .to_owned(),
            r#"sk-a\/b\"c\\d\u003C\u00e9\ud83d\ude00"#.to_owned(),
            r"\u0073\u006B-a\/b\u0022c\u005cd<é😀".to_owned(),
        ];
        for s in &spellings {
            let text = format!("before {s} after");
            assert_eq!(scrub(&text, &[key]), "before [redacted] after", "{s}");
        }
        // Not a spelling of it: left alone.
        let other = r"sk-a\/b\u0022c\\d<é😁";
        assert_eq!(scrub(other, &[key]), other);
        assert_eq!(scrub("abcd", &["abcd"]), "[redacted]");
        assert_eq!(scrub("abc", &["abc"]), "abc", "too short to look for");
    }

    #[test]
    fn a_secret_across_the_cut_is_scrubbed_whole() {
        let key = "sk-STRADDLE-0001";
        for at in 285..300 {
            let raw = format!("{}{key} and more", "x".repeat(at));
            let before_cut = &key[..(300 - at).min(key.len())];
            let p = preview(raw.as_bytes(), &[key], 300);
            assert!(p.len() <= 300);
            assert!(!p.contains(before_cut), "{at}: {p}");
            // The control: cut first, the prefix is there.
            let cut = String::from_utf8_lossy(&raw.as_bytes()[..300]).into_owned();
            assert!(cut.ends_with(before_cut), "{at}");
        }
        // Escaped, six bytes a character, starting just before the cut.
        let escaped: String = key
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        let raw = format!("{}{escaped}", "x".repeat(299));
        assert!(!preview(raw.as_bytes(), &[key], 300).contains('\\'));
        // A cut inside a character falls back to its start.
        let p = preview("é".repeat(200).as_bytes(), &[], 301);
        assert_eq!(p.len(), 300);
    }
}
