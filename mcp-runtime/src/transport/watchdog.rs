//! Stops stdio servers when this process dies, however it dies.
//!
//! The stdio transport stops a server's process group on close and on drop, and a
//! server also sees its stdin close when this process exits. But a process killed with
//! SIGKILL runs no code, and some servers (or the children of a launcher such as
//! `npx`) ignore the end of their input. So the first stdio server also starts a
//! watchdog: a small `/bin/sh` loop in a process group of its own (Ctrl-C in a terminal
//! does not reach it), reading which process groups to guard from a pipe that only
//! this process holds. When this process dies, the pipe closes and the watchdog kills
//! every group still listed, then exits. Groups are listed while their server runs and
//! struck off when the transport has stopped them.
//!
//! Limits: a server that leaves its process group (`setsid`) escapes it; without
//! `/bin/sh` no watchdog runs (a debug log says so) and only close and drop stop
//! servers. One watchdog serves the whole process.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, MutexGuard};

/// Reads `+PGID` and `-PGID` lines; at end of input, kills the groups listed.
const SCRIPT: &str = r#"trap '' INT HUP TERM QUIT
groups=' '
while IFS= read -r line; do
  case "$line" in
    +*) groups="$groups${line#+} " ;;
    -*) gone=${line#-}; kept=' '
        for g in $groups; do [ "$g" = "$gone" ] || kept="$kept$g "; done
        groups=$kept ;;
  esac
done
for g in $groups; do kill -KILL "-$g" 2>/dev/null; done
"#;

struct Dog {
    child: Child,
    stdin: ChildStdin,
}

struct State {
    dog: Option<Dog>,
    groups: BTreeSet<u32>,
    unavailable: bool,
    /// A thread is starting the watchdog (it lists every group once it runs).
    starting: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    dog: None,
    groups: BTreeSet::new(),
    unavailable: false,
    starting: false,
});

fn state() -> MutexGuard<'static, State> {
    mcp_runtime_core::lock(&STATE)
}

/// Guards the process group `pgid` (a stdio server that just started).
pub(crate) fn watch(pgid: u32) {
    let mut s = state();
    if s.groups.insert(pgid) {
        s.tell(&format!("+{pgid}\n"));
    }
}

/// Stops guarding `pgid` (its server was stopped).
pub(crate) fn unwatch(pgid: u32) {
    let mut s = state();
    if s.groups.remove(&pgid) {
        s.tell(&format!("-{pgid}\n"));
    }
}

/// The process id of the watchdog, when one runs (it is a child of this process).
/// While the watchdog is being started, this waits for it (a few milliseconds).
pub fn pid() -> Option<u32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        {
            let s = state();
            if !s.starting || std::time::Instant::now() > deadline {
                return s.dog.as_ref().map(|d| d.child.id());
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

impl State {
    fn tell(&mut self, line: &str) {
        if let Some(dog) = &mut self.dog {
            if dog.stdin.write_all(line.as_bytes()).is_ok() {
                return;
            }
            // Someone killed the watchdog: start another with the whole list.
            if let Some(mut old) = self.dog.take() {
                let _ = old.child.kill();
                let _ = old.child.wait();
            }
            tracing::debug!("the stdio watchdog was gone; starting it again");
        }
        if self.unavailable || self.starting {
            return;
        }
        // `/bin/sh` starts on a thread of its own, off the path of the connect that
        // asked for it (a cold start does not wait for a shell); the groups listed by
        // then are written to it at once.
        self.starting = true;
        let spawned = std::thread::Builder::new()
            .name("mcp-stdio-watchdog".into())
            .spawn(|| {
                let started = start();
                let mut s = state();
                s.starting = false;
                match started {
                    Ok(mut dog) => {
                        let all: String = s.groups.iter().map(|g| format!("+{g}\n")).collect();
                        if dog.stdin.write_all(all.as_bytes()).is_ok() {
                            s.dog = Some(dog);
                        }
                    }
                    Err(e) => {
                        s.unavailable = true;
                        tracing::debug!(error = %e, "cannot start the stdio watchdog (/bin/sh); servers are stopped on close and drop only");
                    }
                }
            });
        if spawned.is_err() {
            self.starting = false;
            tracing::debug!("cannot start a thread for the stdio watchdog; servers are stopped on close and drop only");
        }
    }
}

fn start() -> std::io::Result<Dog> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(SCRIPT)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("the watchdog has no stdin"))?;
    Ok(Dog { child, stdin })
}
