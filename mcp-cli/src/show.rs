//! Printing what a server sent: safe for a terminal, as tables for people and JSON for
//! scripts.

use std::borrow::Cow;
use std::io::IsTerminal as _;

use serde_json::Value;

/// Prints a line on stdout; when stdout was closed (`mcp tools x | head -1`), ends the
/// process quietly with 141 (as a process killed by SIGPIPE), rather than panic.
pub fn say_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").is_err() {
        std::process::exit(141);
    }
}

/// `println!` for the command's output (see [`say_line`]).
macro_rules! say {
    ($($t:tt)*) => {
        $crate::show::say_line(format_args!($($t)*))
    };
}
pub(crate) use say;

/// Text from a server, safe to print on one line: control characters escaped.
pub fn shown(text: &str) -> Cow<'_, str> {
    mcp_runtime_core::text::escape(text, false)
}

/// Text from a server, safe to print, its lines kept.
pub fn shown_lines(text: &str) -> Cow<'_, str> {
    mcp_runtime_core::text::escape(text, true)
}

/// JSON from a server, safe to print: serde_json escapes control characters already;
/// the Unicode controls that reorder or hide text are escaped too (`\u202e`), which
/// keeps it valid JSON (they only occur inside strings).
pub fn json_shown(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}' | '\u{80}'..='\u{9f}')
        {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Prints `value` as pretty JSON, safe for a terminal.
pub fn print_json(value: &Value) {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    say!("{}", json_shown(&text));
}

/// The first line of a description, safe to print.
pub fn first_line(text: Option<&str>) -> String {
    shown(text.unwrap_or("").lines().next().unwrap_or("").trim()).into_owned()
}

/// Prints rows: aligned columns on a terminal, tab-separated otherwise (for `cut`
/// and `awk`). Every cell must already be safe to print.
pub fn table(rows: &[Vec<String>]) {
    if !std::io::stdout().is_terminal() {
        for row in rows {
            say!("{}", row.join("\t"));
        }
        return;
    }
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; columns];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            // The last column is not padded; the others are, up to a point.
            widths[i] = widths[i].max(cell.chars().count().min(48));
        }
    }
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                let pad = widths[i].saturating_sub(cell.chars().count()) + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        say!("{}", line.trim_end());
    }
}

/// A number as a person writes it: `2`, not `2.0`.
pub fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}
