//! The soak run's report: what it prints and writes, and whether the run passed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::clients::{Kind, TOKEN_TTL_SECONDS};
use crate::stats::{children, median, Sample, Tally};
use crate::Args;

pub(crate) struct Report<'a> {
    pub(crate) args: &'a Args,
    /// How long the clients ran.
    pub(crate) run: Duration,
    /// How long until they had all finished and closed.
    pub(crate) elapsed: Duration,
    pub(crate) baseline: Sample,
    pub(crate) end: Sample,
    pub(crate) samples: &'a [Sample],
    pub(crate) tallies: &'a BTreeMap<Kind, Tally>,
    pub(crate) events: &'a BTreeMap<&'static str, u64>,
    pub(crate) tokens: Option<u64>,
    /// List changes the clients heard of (`after_change`).
    pub(crate) changes: u64,
    pub(crate) panics: usize,
}

impl Report<'_> {
    /// Resident memory (KB): the median of the run's second quarter, and of its last.
    pub(crate) fn rss_after_warmup(&self) -> (u64, u64) {
        let total = self.run.as_secs_f64();
        let within = |a: f64, b: f64| {
            self.samples
                .iter()
                .filter(|s| {
                    let t = s.at.as_secs_f64() / total;
                    t >= a && t < b && s.at <= self.run
                })
                .map(|s| s.rss_kb)
                .collect::<Vec<_>>()
        };
        (median(within(0.25, 0.5)), median(within(0.75, 1.01)))
    }

    pub(crate) fn render(&self) -> (String, bool) {
        let mut out = String::new();
        let mut failures: Vec<String> = Vec::new();
        let calls: u64 = self
            .tallies
            .values()
            .map(|t| t.ok + t.deliberate + t.hung + t.errors.values().map(|e| e.0).sum::<u64>())
            .sum();
        let _ = writeln!(
            out,
            "\n## Soak: {} clients, {:.0} s ({:.0} s until all had closed), {} operations ({:.0}/s)\n",
            self.args.clients,
            self.run.as_secs_f64(),
            self.elapsed.as_secs_f64(),
            calls,
            calls as f64 / self.run.as_secs_f64()
        );
        let _ = writeln!(out, "| clients | ok | cut short on purpose | errors | hung | p50 | p99 | ok in the last quarter |");
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- |");
        for (kind, t) in self.tallies {
            let errors: u64 = t.errors.values().map(|e| e.0).sum();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:.1} ms | {:.1} ms | {} |",
                kind.name(),
                t.ok,
                t.deliberate,
                errors,
                t.hung,
                t.latency.quantile(0.5).as_secs_f64() * 1e3,
                t.latency.quantile(0.99).as_secs_f64() * 1e3,
                t.late_ok
            );
            if t.hung > 0 {
                failures.push(format!("{}: {} operations hung", kind.name(), t.hung));
            }
            if t.late_ok == 0 {
                failures.push(format!(
                    "{}: no success in the last quarter of the run",
                    kind.name()
                ));
            }
        }
        let _ = writeln!(
            out,
            "\nErrors by kind (each a clean `mcp_runtime::Error`; first message):\n"
        );
        let _ = writeln!(out, "| clients | kind | count | first message |");
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for (kind, t) in self.tallies {
            for (what, (n, first)) in &t.errors {
                let _ = writeln!(
                    out,
                    "| {} | {what} | {n} | {} |",
                    kind.name(),
                    first.replace('|', "/")
                );
            }
        }
        let _ = writeln!(out, "\nChaos:\n");
        for (what, n) in self.events {
            let _ = writeln!(out, "* {what}: {n}");
        }
        let _ = writeln!(
            out,
            "* list changes heard by the clients (`after_change`): {}",
            self.changes
        );
        if let Some(tokens) = self.tokens {
            let _ = writeln!(
                out,
                "* access tokens issued (each lives {TOKEN_TTL_SECONDS} s): {tokens}"
            );
        }
        let (warm, last) = self.rss_after_warmup();
        let peak = self.samples.iter().map(|s| s.rss_kb).max().unwrap_or(0);
        let _ = writeln!(out, "\nThis process over time:\n");
        let _ = writeln!(
            out,
            "| | resident memory | open descriptors | live tasks | child processes |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
        let row = |out: &mut String, name: &str, s: &Sample| {
            let _ = writeln!(
                out,
                "| {name} | {:.1} MB | {} | {} | {} |",
                s.rss_kb as f64 / 1024.0,
                s.fds,
                s.tasks,
                s.children
            );
        };
        row(&mut out, "before the clients", &self.baseline);
        // The last sample at or before each point of the run.
        let at = |f: f64| {
            self.samples
                .iter()
                .rev()
                .find(|s| s.at.as_secs_f64() <= self.run.as_secs_f64() * f)
        };
        for (label, f) in [
            ("a quarter in", 0.25),
            ("half way", 0.5),
            ("three quarters in", 0.75),
            ("at the end of the calls", 1.0),
        ] {
            if let Some(s) = at(f) {
                row(
                    &mut out,
                    &format!("{label} ({:.0} s)", s.at.as_secs_f64()),
                    s,
                );
            }
        }
        row(&mut out, "after the clients closed", &self.end);
        let _ = writeln!(
            out,
            "\nResident memory: peak {:.1} MB; median {:.1} MB in the run's second quarter, {:.1} MB in its last.",
            peak as f64 / 1024.0,
            warm as f64 / 1024.0,
            last as f64 / 1024.0
        );
        if self.end.fds > self.baseline.fds {
            let open: Vec<String> = std::fs::read_dir("/proc/self/fd")
                .map(|d| {
                    d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                        .map(|p| p.display().to_string())
                        .collect()
                })
                .unwrap_or_default();
            failures.push(format!(
                "descriptors leaked: {} before the clients, {} after they closed: {open:?}",
                self.baseline.fds, self.end.fds
            ));
        }
        if self.end.tasks > self.baseline.tasks + 1 {
            failures.push(format!(
                "tasks leaked: {} before the clients, {} after they closed (the sampler is one)",
                self.baseline.tasks, self.end.tasks
            ));
        }
        if self.end.children > self.baseline.children {
            failures.push(format!(
                "child processes outlived their clients: {} before, {} after: {:?}",
                self.baseline.children,
                self.end.children,
                children()
            ));
        }
        if self.panics > 0 {
            failures.push(format!("{} panics", self.panics));
        }
        if self.args.seconds >= 300 && last > warm + warm / 4 {
            failures.push(format!(
                "resident memory grew after warm-up: {warm} KB → {last} KB"
            ));
        }
        if calls == 0 {
            failures.push("no operation ran".into());
        }
        if failures.is_empty() {
            let _ = writeln!(out, "\nPASS");
        } else {
            let _ = writeln!(out, "\nFAIL:");
            for f in &failures {
                let _ = writeln!(out, "* {f}");
            }
        }
        (out, failures.is_empty())
    }

    pub(crate) fn write(&self, dir: &Path, text: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("report.md"), text)?;
        let mut csv = String::from("seconds,rss_kb,fds,tasks,children\n");
        for s in self.samples {
            let _ = writeln!(
                csv,
                "{:.1},{},{},{},{}",
                s.at.as_secs_f64(),
                s.rss_kb,
                s.fds,
                s.tasks,
                s.children
            );
        }
        std::fs::write(dir.join("timeline.csv"), csv)
    }
}
