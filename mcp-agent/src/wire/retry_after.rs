//! The wait a provider asks for before a retry: `retry-after-ms` (milliseconds, as
//! OpenAI and Azure send it), else `Retry-After` — delay-seconds or an HTTP date
//! (RFC 9110). What it says is untrusted: a value too large to hold is the longest
//! wait there is ([`Duration::MAX`]), so that the retry policy's cap refuses it; a
//! value that does not parse is no wait asked for.

use std::time::Duration;

use http::HeaderMap;

/// Seconds since the epoch, now.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The wait `headers` ask for, read at `now` (seconds since the epoch).
pub(crate) fn read(headers: &HeaderMap, now: u64) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(number) {
        return Some(scaled(ms, 1000));
    }
    let v = text("retry-after")?;
    if let Some(secs) = number(v) {
        return Some(scaled(secs, 1));
    }
    let at = http_date(v)?;
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// A non-negative number: digits (any length: too many is `f64::INFINITY`), or a
/// decimal fraction.
fn number(v: &str) -> Option<f64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let n: f64 = v.parse().ok()?;
    (n >= 0.0).then_some(n)
}

/// `n` units of `1/per` second; beyond what a [`Duration`] holds, [`Duration::MAX`].
fn scaled(n: f64, per: u32) -> Duration {
    Duration::try_from_secs_f64(n / f64::from(per)).unwrap_or(Duration::MAX)
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), as seconds since the epoch.
fn http_date(v: &str) -> Option<u64> {
    let parts: Vec<&str> = v.split_ascii_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as u64 + 1;
    let day: u64 = day.parse().ok()?;
    let year: u64 = year.parse().ok()?;
    let hms: Vec<u64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || !(1970..=9999).contains(&year) || *h > 23 || *m > 59 || *s > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s)
}

/// Days from 1970-01-01 to this date (proleptic Gregorian; `year` ≥ 1970).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).saturating_sub(719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn seconds_dates_milliseconds_and_hostile_values() {
        let now = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT
        let read = |p: &[(&'static str, &str)]| read(&headers(p), now);
        assert_eq!(read(&[("retry-after", "1")]), Some(Duration::from_secs(1)));
        assert_eq!(
            read(&[("retry-after", " 120 ")]),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            read(&[("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT")]),
            Some(Duration::from_secs(30))
        );
        // A date already past: no wait.
        assert_eq!(
            read(&[("retry-after", "Sat, 05 Nov 1994 08:49:37 GMT")]),
            Some(Duration::ZERO)
        );
        assert_eq!(
            read(&[("retry-after-ms", "1500"), ("retry-after", "9")]),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            read(&[("retry-after", "999999999")]),
            Some(Duration::from_secs(999_999_999))
        );
        assert_eq!(
            read(&[("retry-after", &"9".repeat(400))]),
            Some(Duration::MAX)
        );
        for garbage in [
            "-1",
            "soon",
            "",
            "1e9",
            "Sun, 99 Nov 1994 08:49:37 GMT",
            "NaN",
        ] {
            assert_eq!(read(&[("retry-after", garbage)]), None, "{garbage}");
        }
        assert_eq!(read(&[]), None);
    }

    #[test]
    fn the_epoch_and_a_leap_day() {
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            http_date("Thu, 29 Feb 2024 12:00:00 GMT"),
            Some(1_709_208_000)
        );
    }
}
