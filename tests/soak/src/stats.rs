//! What the soak run measures: a random source, latency histograms, per-kind tallies,
//! error kinds, and samples of this process (memory, descriptors, children).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mcp_runtime::Error;

/// A small, fast random source (xorshift); no cryptographic use.
#[derive(Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A latency histogram of fixed size (5 % buckets from 1 µs): what a long run holds
/// does not grow with its length.
#[derive(Debug)]
pub(crate) struct Histogram {
    pub(crate) buckets: Vec<u64>,
}

impl Histogram {
    const BUCKETS: usize = 600;
    pub(crate) fn new() -> Histogram {
        Histogram {
            buckets: vec![0; Self::BUCKETS],
        }
    }
    pub(crate) fn record(&mut self, d: Duration) {
        let us = d.as_micros().max(1) as f64;
        let i = (us.ln() / 1.05f64.ln()) as usize;
        self.buckets[i.min(Self::BUCKETS - 1)] += 1;
    }
    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
    pub(crate) fn quantile(&self, q: f64) -> Duration {
        let total = self.count();
        if total == 0 {
            return Duration::ZERO;
        }
        let want = ((total as f64) * q).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Duration::from_micros(1.05f64.powi(i as i32 + 1) as u64);
            }
        }
        Duration::MAX
    }
}

/// What the clients of one kind did.
#[derive(Debug)]
pub(crate) struct Tally {
    pub(crate) ok: u64,
    /// Calls cancelled or timed out on purpose (the operation asked for it).
    pub(crate) deliberate: u64,
    pub(crate) errors: BTreeMap<&'static str, (u64, String)>,
    pub(crate) hung: u64,
    pub(crate) latency: Histogram,
    /// Successes in the last quarter of the run.
    pub(crate) late_ok: u64,
}

impl Tally {
    pub(crate) fn new() -> Tally {
        Tally {
            ok: 0,
            deliberate: 0,
            errors: BTreeMap::new(),
            hung: 0,
            latency: Histogram::new(),
            late_ok: 0,
        }
    }
}

/// The kind of a clean error, for the report.
pub(crate) fn kind_of(e: &Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_cancelled() {
        "cancelled"
    } else if e.is_closed() {
        "closed (server gone)"
    } else if e.is_unauthorized() {
        "unauthorized"
    } else if e.is_http() {
        "HTTP status"
    } else if e.is_transport() {
        "transport (connect refused, reset)"
    } else if e.is_protocol() {
        "JSON-RPC error"
    } else if e.is_invalid_response() {
        "invalid response"
    } else if e.is_unsupported() {
        "unsupported"
    } else {
        "other"
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) at: Duration,
    pub(crate) rss_kb: u64,
    pub(crate) fds: usize,
    pub(crate) tasks: usize,
    pub(crate) children: usize,
}

pub(crate) fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

pub(crate) fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// This process's children (pid, command line).
pub(crate) fn children() -> Vec<(i32, String)> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // pid (comm) state ppid ...: comm may hold spaces and parentheses.
        let after = stat.rsplit_once(')')?.1;
        let mut fields = after.split_whitespace();
        let state = fields.next()?;
        if fields.next()? != me {
            return None;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        Some((pid, format!("[{state}] {cmdline}")))
    })
    .collect()
}

pub(crate) fn sample(start: Instant) -> Sample {
    Sample {
        at: start.elapsed(),
        rss_kb: rss_kb(),
        fds: open_fds(),
        tasks: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        children: children().len(),
    }
}

/// The median of `v` (0 when empty).
pub(crate) fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}
