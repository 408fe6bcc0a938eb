//! RFC 6570 URI templates, expanded (for [`Mcp::resource_from_template`](crate::Mcp::resource_from_template)).

use crate::error::{Error, Result};

/// Expands an RFC 6570 URI template (every level; values are strings).
///
/// Literals and values are percent-encoded as the RFC says (reserved characters and
/// percent-encoded triplets kept only by `{+x}` and `{#x}`); an undefined variable
/// expands to nothing. A template that is not one — an unclosed or stray brace, a `%`
/// that does not start two hex digits, an unknown operator, a bad name or prefix — is
/// an error saying where. Written here rather than taken from iri-string, whose 0.7.14
/// panics on some values of reserved expansions (found by fuzzing).
pub fn expand_template(template: &str, variables: &[(&str, &str)]) -> Result<String> {
    let bad = |why: String| {
        Error::config(format!(
            "`{}` is not a URI template: {why}",
            crate::text::clip(template, 200)
        ))
    };
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    let mut at = 0;
    loop {
        let open = rest.find('{').unwrap_or(rest.len());
        let literal = &rest[..open];
        if let Some(i) = literal.find('}') {
            return Err(bad(format!("a `}}` at byte {} closes nothing", at + i)));
        }
        encode_literal(&mut out, literal).map_err(|i| {
            bad(format!(
                "a `%` at byte {} is not followed by two hex digits",
                at + i
            ))
        })?;
        if open == rest.len() {
            return Ok(out);
        }
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or_else(|| {
            bad(format!(
                "the expression at byte {} is not closed",
                at + open
            ))
        })?;
        expression(&after[..close], variables, &mut out).map_err(bad)?;
        at += open + 1 + close + 1;
        rest = &after[close + 1..];
    }
}

/// One `{…}` expression, expanded into `out`.
fn expression(
    expr: &str,
    variables: &[(&str, &str)],
    out: &mut String,
) -> std::result::Result<(), String> {
    // (operator, first, separator, named, if empty, reserved allowed): RFC 6570 App. A.
    let (op, list) = match expr.chars().next() {
        Some(c @ ('+' | '#' | '.' | '/' | ';' | '?' | '&')) => (Some(c), &expr[1..]),
        Some(c @ ('=' | ',' | '!' | '@' | '|')) => {
            return Err(format!("the operator `{c}` is reserved"))
        }
        _ => (None, expr),
    };
    let (first, sep, named, if_empty, reserved) = match op {
        None => ("", ",", false, "", false),
        Some('+') => ("", ",", false, "", true),
        Some('#') => ("#", ",", false, "", true),
        Some('.') => (".", ".", false, "", false),
        Some('/') => ("/", "/", false, "", false),
        Some(';') => (";", ";", true, "", false),
        Some('?') => ("?", "&", true, "=", false),
        _ => ("&", "&", true, "=", false),
    };
    let mut started = false;
    for spec in list.split(',') {
        let (name, prefix) = match spec.split_once(':') {
            Some((n, p)) => {
                let digits_ok =
                    !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit());
                let n_chars = p
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| digits_ok && n > 0 && n < 10_000);
                (
                    n,
                    Some(n_chars.ok_or_else(|| format!("`{spec}` has a bad prefix"))?),
                )
            }
            None => (spec.strip_suffix('*').unwrap_or(spec), None),
        };
        let name_ok = !name.is_empty()
            && !name.starts_with('.')
            && !name.ends_with('.')
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'%'))
            && lone_percent(name).next().is_none();
        if !name_ok {
            return Err(format!("`{name}` is not a variable name"));
        }
        let Some((_, value)) = variables.iter().rev().find(|(k, _)| *k == name) else {
            continue;
        };
        out.push_str(if started { sep } else { first });
        started = true;
        if named {
            out.push_str(name);
            if value.is_empty() {
                out.push_str(if_empty);
                continue;
            }
            out.push('=');
        }
        let value = match prefix {
            Some(n) => value
                .char_indices()
                .nth(n)
                .map_or(*value, |(i, _)| &value[..i]),
            None => value,
        };
        if reserved {
            // Reserved expansion keeps triplets; a lone `%` is data.
            let mut lone = lone_percent(value).peekable();
            for (i, c) in value.char_indices() {
                if lone.next_if_eq(&i).is_some() {
                    out.push_str("%25");
                } else {
                    push_char(out, c, true);
                }
            }
        } else {
            for c in value.chars() {
                push_char(out, c, false);
            }
        }
    }
    Ok(())
}

/// Appends a literal: characters a URI allows as they are (and triplets), the others
/// percent-encoded. `Err` gives where a `%` does not start a triplet.
fn encode_literal(out: &mut String, literal: &str) -> std::result::Result<(), usize> {
    if let Some(i) = lone_percent(literal).next() {
        return Err(i);
    }
    for c in literal.chars() {
        push_char(out, c, true);
    }
    Ok(())
}

/// Appends `c`: unreserved characters as they are; reserved ones (and `%`, which the
/// callers have checked starts a triplet) as they are when `reserved`; anything else
/// as the percent-encoded triplets of its UTF-8.
fn push_char(out: &mut String, c: char, reserved: bool) {
    use std::fmt::Write as _;
    let keep = c.is_ascii_alphanumeric()
        || matches!(c, '-' | '.' | '_' | '~')
        || reserved && "%:/?#[]@!$&'()*+,;=".contains(c);
    if keep {
        out.push(c);
        return;
    }
    let mut utf8 = [0u8; 4];
    for b in c.encode_utf8(&mut utf8).bytes() {
        let _ = write!(out, "%{b:02X}");
    }
}

/// Where `s` has a `%` that does not start two hex digits.
fn lone_percent(s: &str) -> impl Iterator<Item = usize> + '_ {
    let b = s.as_bytes();
    memchr::memchr_iter(b'%', b).filter(move |&i| {
        !b.get(i + 1..i + 3)
            .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    })
}
