//! Long work shown on stderr: a progress bar on a terminal, one line per report
//! otherwise; and Ctrl-C, which cancels what runs.

use std::io::IsTerminal as _;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mcp_runtime::model::Progress;
use mcp_runtime::CancellationToken;

use crate::show::{number, shown};

/// Shows the progress a server reports.
pub struct Reporter {
    bar: Option<Mutex<Option<ProgressBar>>>,
}

impl Reporter {
    /// A bar when stderr is a terminal, plain lines otherwise.
    pub fn new() -> Reporter {
        Reporter {
            bar: std::io::stderr().is_terminal().then(|| Mutex::new(None)),
        }
    }

    /// Shows one report.
    pub fn report(&self, p: &Progress) {
        let count = match p.total {
            Some(t) => format!("{}/{}", number(p.progress), number(t)),
            None => number(p.progress),
        };
        let message = p.message.as_deref().map(|m| shown(m).into_owned());
        let Some(slot) = &self.bar else {
            match message {
                Some(m) => eprintln!("progress {count}: {m}"),
                None => eprintln!("progress {count}"),
            }
            return;
        };
        let mut slot = mcp_runtime_core::lock(slot);
        let bar = slot.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{bar:30}] {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar
        });
        let text = match message {
            Some(m) => format!("{count} {m}"),
            None => count,
        };
        match p.total.filter(|t| *t > 0.0) {
            Some(total) => {
                bar.set_length(1000);
                bar.set_position(((p.progress / total).clamp(0.0, 1.0) * 1000.0) as u64);
            }
            None => bar.tick(),
        }
        bar.set_message(text);
    }

    /// Clears the bar (the work ended).
    pub fn finish(&self) {
        if let Some(slot) = &self.bar {
            if let Some(bar) = mcp_runtime_core::lock(slot).take() {
                bar.finish_and_clear();
            }
        }
    }
}

/// A token cancelled when the user presses Ctrl-C (SIGINT): what runs stops, says so,
/// and the command exits 130. A command that does not `watch` the token, and a second
/// Ctrl-C always, ends the process at once (exit 130; its stdio servers are stopped by
/// the watchdog).
pub fn interrupt(watch: bool) -> CancellationToken {
    let token = CancellationToken::new();
    let fired = token.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        if watch {
            fired.cancel();
            if tokio::signal::ctrl_c().await.is_err() {
                return;
            }
        }
        eprintln!("mcp: interrupted");
        std::process::exit(130);
    });
    token
}
