//! The one rule for where the client may send anything: `https://`, or plain `http://`
//! to this machine only.
//!
//! Used by the HTTP transport (the server URL), OAuth (every metadata document and
//! endpoint, before anything is sent to it) and `#[mcp]` (the declared URL, at compile
//! time: the macro crate uses this same module). It parses instead of matching
//! text, so `http://localhost:1@remote/` (userinfo) and `http://127.evil.com/` (a name,
//! not an address) are refused. A `localhost` name passes here; the HTTP transport then
//! holds it to resolving to loopback addresses only.
//!
//! Standard library only.

use std::net::{IpAddr, Ipv6Addr};

/// A URL that passed the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// `https` or `http` (lowercase).
    pub scheme: String,
    /// The host as written (IPv6 without brackets), lowercase.
    pub host: String,
    /// Whether the host is a loopback address or a `localhost` name.
    pub loopback: bool,
    /// `scheme://host[:port]`, without anything else.
    pub origin: String,
}

/// Checks `url` against the rule; the error says what is wrong and how to fix it.
pub fn check(url: &str) -> Result<Checked, String> {
    if url
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
    {
        return Err(format!(
            "`{}` contains spaces, control characters or backslashes",
            redact(url)
        ));
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("`{}` is not an absolute URL (https://…)", redact(url)))?;
    let scheme = scheme.to_ascii_lowercase();
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.contains('@') {
        return Err(format!(
            "`{}` carries credentials in the URL (user:password@); give them as a header or token instead",
            redact(url)
        ));
    }
    let (host, port) =
        split_host_port(authority).ok_or_else(|| format!("`{}` has no valid host", redact(url)))?;
    let host = host.to_ascii_lowercase();
    let loopback = is_loopback_host(&host);
    match scheme.as_str() {
        "https" => {}
        "http" if loopback => {}
        "http" => {
            return Err(format!(
                "plain http:// is only allowed for loopback addresses; use https://{authority}"
            ))
        }
        _ => {
            return Err(format!(
                "`{}` must be an https:// URL (or http:// to a loopback address)",
                redact(url)
            ))
        }
    }
    let shown_host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.clone()
    };
    let origin = match port {
        Some(p) => format!("{scheme}://{shown_host}:{p}"),
        None => format!("{scheme}://{shown_host}"),
    };
    Ok(Checked {
        scheme,
        host,
        loopback,
        origin,
    })
}

/// `host[:port]` or `[v6][:port]`: the host (brackets removed) and the port.
fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        v6.parse::<Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (v6, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => Some(p.parse().ok()?),
        Some(_) => return None,
    };
    let name_ok = |h: &str| {
        !h.is_empty()
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
            && !h.starts_with('.')
            && !h.contains("..")
    };
    if host.contains(':') || name_ok(host) {
        Some((host, port))
    } else {
        None
    }
}

/// A loopback address (127.0.0.0/8, ::1, IPv4-mapped 127.x) or a `localhost` name.
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if is_localhost_name(h) {
        return true;
    }
    match h.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => v4.is_loopback(),
        Ok(IpAddr::V6(v6)) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

/// `localhost` and names under `.localhost` (RFC 6761).
pub fn is_localhost_name(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    h == "localhost" || h.ends_with(".localhost") && h.len() > ".localhost".len()
}

/// The URL safe to show: no userinfo, and the query (which may carry a key) replaced.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (path, query) = match tail.split_once('?') {
        Some((p, _)) => (p, "?…"),
        None => (tail.split('#').next().unwrap_or(""), ""),
    };
    match scheme {
        Some(s) => format!("{s}://{authority}{path}{query}"),
        None => format!("{authority}{path}{query}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_anywhere_http_only_to_this_machine() {
        for ok in [
            "https://example.com/mcp",
            "https://example.com:8443",
            "HTTPS://Example.COM/x?y=1",
            "http://localhost:3000/mcp",
            "http://LOCALHOST/mcp",
            "http://app.localhost:8080/",
            "http://127.0.0.1:9/x",
            "http://127.1.2.3/",
            "http://[::1]:8000/mcp",
            "http://[::ffff:127.0.0.1]/",
        ] {
            assert!(check(ok).is_ok(), "{ok}: {:?}", check(ok));
        }
        for (bad, why) in [
            ("http://example.com/mcp", "only allowed for loopback"),
            (
                "http://localhost:1@evil.example/token",
                "credentials in the URL",
            ),
            ("https://user:pw@example.com/mcp", "credentials in the URL"),
            ("http://127.evil.com/", "only allowed for loopback"),
            ("http://localhost.evil.com/", "only allowed for loopback"),
            ("http://[::2]/", "only allowed for loopback"),
            ("http://0.0.0.0/", "only allowed for loopback"),
            ("ftp://localhost/", "must be an https://"),
            ("localhost:3000/mcp", "not an absolute URL"),
            ("http:///mcp", "no valid host"),
            ("http://local host/", "spaces"),
            ("http://localhost\\@evil.com/", "backslashes"),
            ("https://exa mple.com", "spaces"),
            ("https://example.com:99999/", "no valid host"),
            ("https://example..com/", "no valid host"),
        ] {
            let e = check(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let c = check("http://[::1]:8000/mcp").unwrap();
        assert!(c.loopback);
        assert_eq!(c.origin, "http://[::1]:8000");
        assert!(!check("https://example.com").unwrap().loopback);
    }

    #[test]
    fn redaction() {
        assert_eq!(
            redact("https://user:PWSECRET@host/mcp?key=SECRET"),
            "https://host/mcp?…"
        );
        assert_eq!(redact("http://127.0.0.1:8/mcp"), "http://127.0.0.1:8/mcp");
        assert_eq!(redact("https://host/a#frag"), "https://host/a");
    }
}
