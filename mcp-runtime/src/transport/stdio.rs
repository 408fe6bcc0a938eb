//! A local server started as a child process, speaking newline-delimited JSON-RPC over
//! its stdin and stdout.
//!
//! * The process starts lazily, on the first request, and again on the first request
//!   after it died or was closed.
//! * The server gets a clean environment: of this process's variables only a safe
//!   default set ([`SAFE_ENV_VARS`]) and those named with
//!   [`StdioConfig::inherit_env`], plus `env`. [`StdioConfig::inherit_all_env`] passes
//!   the whole environment instead (secrets included: opt in knowingly).
//! * Lines the server writes to stderr go to `tracing` (target `mcp_runtime::stderr`),
//!   whatever bytes they hold (decoded lossily, control characters escaped, each line
//!   cut at 8 KiB); stderr is read for as long as the process lives. When the process
//!   ends by itself, the error calls get carries the last lines it wrote there
//!   ([`Error::server_stderr`](crate::Error::server_stderr): at most 10, each cut at
//!   300 characters; not in the error's `Display`).
//! * No message may exceed [`StdioConfig::max_message_size`] (64 MiB by default): a
//!   line past it fails the calls in flight with an error for which
//!   [`Error::is_too_large`](crate::Error::is_too_large) is true, and the process is
//!   stopped; the next request starts it again.
//! * The process runs in its own process group, so a launcher such as `npx` and the
//!   server it starts are stopped together.
//! * [`close`](crate::Transport::close) closes stdin, waits, then sends SIGTERM, then
//!   SIGKILL. Dropping the transport without closing kills the process group and the
//!   runtime reaps it: no orphans, no zombies.
//! * When this process dies, however it dies (SIGKILL included), a watchdog kills the
//!   process groups of its stdio servers (see [`crate::transport::watchdog`]).
//! * If the process dies, calls in flight fail with an error for which
//!   [`Error::is_closed`](crate::Error::is_closed) is true: at once when its stderr
//!   closes with it, within about 3.5 s when a child it left behind keeps its stderr
//!   open (the wait for its last stderr lines).

use std::ffi::OsString;
use std::fmt;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;

use super::{watchdog, BoxFuture, Incoming, RequestContext, Transport};
use crate::error::{Error, Result};
use crate::jsonrpc::{Id, Message, Notification, Request, Response};

mod config;
mod reader;
mod stderr;
pub use config::{StdioConfig, SAFE_ENV_VARS};
use reader::{Ended, Reader, Sink, StreamEnd};
use stderr::Tail;

/// How long a request whose line could not be written waits to learn why the server
/// ended (the supervisor's grace for the process, and for its stderr).
const ENDED_WAIT: Duration = Duration::from_secs(5);

/// The stdio transport. Create it with [`StdioTransport::new`], or let
/// [`ClientBuilder::stdio`](crate::ClientBuilder::stdio) do it.
pub struct StdioTransport {
    config: StdioConfig,
    conn: Mutex<Option<Arc<Conn>>>,
}

impl fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioTransport")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The server's stdin, written by whichever task sends: no writer task, no hop to
/// another thread per message. `None` once closed.
type Stdin = Arc<tokio::sync::Mutex<Option<ChildStdin>>>;

/// What the reader hands on: notifications to the session, server requests answered
/// off the reading path.
struct ToSession {
    name: String,
    incoming: Incoming,
    stdin: Stdin,
}

impl Sink for ToSession {
    fn notification(&self, notification: Notification) {
        self.incoming.notification(notification);
    }

    fn request(&self, request: Request) {
        let incoming = self.incoming.clone();
        let stdin = self.stdin.clone();
        // Server requests are rare and may wait on a person: answer them off the
        // reading path.
        tokio::spawn(async move {
            let resp = incoming.request(request).await;
            let mut bytes = Message::Response(resp).to_vec();
            bytes.push(b'\n');
            let _ = write_line(&stdin, bytes).await;
        });
    }

    fn name(&self) -> &str {
        &self.name
    }
}

type StdoutReader = Reader<ChildStdout, ToSession>;

struct Conn {
    pid: Option<u32>,
    stdin: Stdin,
    reader: Arc<StdoutReader>,
    dead: Arc<AtomicBool>,
    close_tx: Mutex<Option<oneshot::Sender<oneshot::Sender<()>>>>,
}

impl Conn {
    async fn send(&self, message: &Message) -> Result<()> {
        let mut bytes = message.to_vec();
        bytes.push(b'\n');
        write_line(&self.stdin, bytes).await
    }
}

/// One line being written. A line is never left half-written: if the sender goes away
/// (a cancelled request) after part of it reached the pipe, the rest is written by a
/// task that keeps the pipe until it is done.
struct LineWrite {
    guard: Option<tokio::sync::OwnedMutexGuard<Option<ChildStdin>>>,
    bytes: Vec<u8>,
    written: usize,
}

impl Drop for LineWrite {
    fn drop(&mut self) {
        if self.written == 0 || self.written >= self.bytes.len() {
            return;
        }
        let (Some(mut guard), Ok(handle)) =
            (self.guard.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let rest = self.bytes.split_off(self.written);
        handle.spawn(async move {
            if let Some(stdin) = guard.as_mut() {
                let _ = stdin.write_all(&rest).await;
            }
        });
    }
}

/// Writes one line to the server's stdin from the calling task; lines of concurrent
/// senders queue in order (the lock is fair).
async fn write_line(stdin: &Stdin, bytes: Vec<u8>) -> Result<()> {
    let guard = stdin.clone().lock_owned().await;
    let mut line = LineWrite {
        guard: Some(guard),
        bytes,
        written: 0,
    };
    while line.written < line.bytes.len() {
        let LineWrite {
            guard: Some(guard),
            bytes,
            written,
        } = &mut line
        else {
            break;
        };
        let Some(pipe) = guard.as_mut() else {
            return Err(Error::closed("the server's stdin is closed"));
        };
        // A pipe write is cancel-safe: bytes count as written only once it returns.
        match pipe.write(&bytes[*written..]).await {
            Ok(0) | Err(_) => {
                // The pipe is broken: whatever is left cannot be written.
                *written = bytes.len();
                return Err(Error::closed("the server's stdin is closed"));
            }
            Ok(n) => *written += n,
        }
    }
    Ok(())
}

impl StdioTransport {
    /// A transport that will start the process on the first request.
    pub fn new(config: StdioConfig) -> Self {
        StdioTransport {
            config,
            conn: Mutex::new(None),
        }
    }

    /// The process id of the running server, if one runs.
    pub fn pid(&self) -> Option<u32> {
        self.live_conn().and_then(|c| c.pid)
    }

    fn live_conn(&self) -> Option<Arc<Conn>> {
        let guard = mcp_runtime_core::lock(&self.conn);
        guard
            .as_ref()
            .filter(|c| !c.dead.load(Ordering::Acquire))
            .cloned()
    }

    fn conn(&self, incoming: &Incoming) -> Result<Arc<Conn>> {
        let mut guard = mcp_runtime_core::lock(&self.conn);
        if let Some(c) = guard.as_ref() {
            if !c.dead.load(Ordering::Acquire) {
                return Ok(c.clone());
            }
        }
        let conn = Arc::new(self.spawn(incoming.clone())?);
        *guard = Some(conn.clone());
        Ok(conn)
    }

    fn spawn(&self, incoming: Incoming) -> Result<Conn> {
        let cfg = &self.config;
        let mut cmd = Command::new(&cfg.program);
        cmd.args(&cfg.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if let Some(dir) = &cfg.directory {
            cmd.current_dir(dir);
        }
        if !cfg.inherit_all {
            cmd.env_clear();
            for name in SAFE_ENV_VARS
                .iter()
                .copied()
                .chain(cfg.inherit.iter().map(String::as_str))
            {
                if let Some(v) = std::env::var_os(name) {
                    // Exported shell functions are code, not settings.
                    if !v.to_string_lossy().starts_with("()") {
                        cmd.env(name, v);
                    }
                }
            }
        }
        for name in &cfg.remove {
            cmd.env_remove(name);
        }
        for (k, v) in &cfg.env {
            cmd.env(k, v);
        }
        for provider in &cfg.env_providers {
            for (k, v) in provider() {
                cmd.env(OsString::from(k), OsString::from(v));
            }
        }
        let mut child = cmd.spawn().map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "; check that the program is installed and on PATH (or give a full path)"
            } else {
                ""
            };
            Error::transport(format!("cannot start `{}`: {e}{hint}", cfg.program)).with_source(e)
        })?;
        let pid = child.id();
        if let Some(pid) = pid {
            watchdog::watch(pid);
        }
        tracing::debug!(server = %cfg.name, pid, "started stdio server");
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => return Err(Error::transport("the server process has no stdio pipes")),
            };
        let stdin: Stdin = Arc::new(tokio::sync::Mutex::new(Some(stdin)));
        let reader = Arc::new(Reader::new(
            stdout,
            ToSession {
                name: cfg.name.clone(),
                incoming: incoming.clone(),
                stdin: stdin.clone(),
            },
            cfg.max_message_size,
        ));
        let dead = Arc::new(AtomicBool::new(false));
        let (close_tx, close_rx) = oneshot::channel();
        let tail = Tail::new();
        tokio::spawn(stderr::drain(stderr, cfg.name.clone(), tail.clone()));
        tokio::spawn(
            Supervisor {
                name: cfg.name.clone(),
                child,
                pgid: pid,
                reader: reader.clone(),
                dead: dead.clone(),
                incoming,
                stdin: stdin.clone(),
                grace: cfg.close_grace,
                max_message_size: cfg.max_message_size,
                tail,
            }
            .run(close_rx),
        );
        Ok(Conn {
            pid,
            stdin,
            reader,
            dead,
            close_tx: Mutex::new(Some(close_tx)),
        })
    }
}

struct Supervisor {
    name: String,
    child: Child,
    pgid: Option<u32>,
    reader: Arc<StdoutReader>,
    dead: Arc<AtomicBool>,
    incoming: Incoming,
    stdin: Stdin,
    grace: Duration,
    max_message_size: usize,
    /// The last lines the server wrote to stderr.
    tail: Arc<Tail>,
}

/// Kills the whole process group when dropped, whatever ends the supervisor (close, the
/// client dropped, the runtime shutting down).
struct GroupGuard(Option<u32>);

impl GroupGuard {
    fn signal(&self, sig: libc::c_int) {
        if let Some(pgid) = self.0 {
            if let Ok(pgid) = libc::pid_t::try_from(pgid) {
                // SAFETY: kill(2) with a negative pid signals a process group; it has no
                // memory-safety preconditions. ESRCH (no such group) is fine.
                unsafe {
                    libc::kill(-pgid, sig);
                }
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
        if let Some(pgid) = self.0 {
            watchdog::unwatch(pgid);
        }
    }
}

impl Supervisor {
    async fn run(mut self, close_rx: oneshot::Receiver<oneshot::Sender<()>>) {
        let group = GroupGuard(self.pgid);
        let mut close_rx = close_rx;
        let mut exited: Option<std::process::ExitStatus> = None;
        let mut closing: Option<oneshot::Sender<()>> = None;
        let grace_exit = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(grace_exit);
        let mut too_large = false;
        let mut ended_itself = false;
        let reason: String = loop {
            tokio::select! {
                biased;
                cmd = &mut close_rx, if closing.is_none() => {
                    match cmd {
                        Ok(done) => {
                            closing = Some(done);
                            break "closed by the client".to_owned();
                        }
                        // The transport was dropped without close.
                        Err(_) => break "the client was dropped".to_owned(),
                    }
                }
                end = self.reader.supervise() => {
                    match end {
                        StreamEnd::TooLong => {
                            too_large = true;
                            break format!("a message longer than {}", crate::text::size(self.max_message_size));
                        }
                        StreamEnd::Eof => {
                            let status = match exited {
                                Some(s) => s,
                                None => match tokio::time::timeout(Duration::from_millis(500), self.child.wait()).await {
                                    Ok(Ok(s)) => s,
                                    _ => {
                                        ended_itself = true;
                                        break "the server closed its stdout".to_owned();
                                    }
                                },
                            };
                            exited = Some(status);
                            ended_itself = true;
                            break format!("the server process exited ({status})");
                        }
                        StreamEnd::Failed(e) => break format!("reading from the server failed: {e}"),
                    }
                }
                status = self.child.wait(), if exited.is_none() => {
                    match status {
                        Ok(s) => {
                            exited = Some(s);
                            // Give the reader a moment to drain what the process wrote last.
                            grace_exit.as_mut().reset(tokio::time::Instant::now() + Duration::from_millis(300));
                        }
                        Err(e) => break format!("waiting for the server failed: {e}"),
                    }
                }
                () = &mut grace_exit, if exited.is_some() => {
                    let status = exited.map(|s| s.to_string()).unwrap_or_default();
                    ended_itself = true;
                    break format!("the server process exited ({status})");
                }
            }
        };
        // What the server said last on stderr is most often why it ended.
        let stderr = if ended_itself {
            self.tail.last().await
        } else {
            None
        };
        // Order matters: the session forgets its protocol state before anyone can see
        // the connection as dead and start a new one.
        self.incoming.disconnected();
        self.dead.store(true, Ordering::Release);
        self.reader.end(if too_large {
            Ended::TooLarge(self.max_message_size)
        } else {
            Ended::Closed(reason.clone(), stderr)
        });
        tracing::debug!(server = %self.name, %reason, "stdio server connection ended");
        if exited.is_none() {
            self.stop(&group, closing.is_some()).await;
        }
        // Leftovers of the group (a launcher's children) go too.
        drop(group);
        // The process is gone: a write still holding the pipe fails at once.
        if let Ok(mut pipe) = tokio::time::timeout(Duration::from_secs(1), self.stdin.lock()).await
        {
            pipe.take();
        }
        if let Some(done) = closing {
            let _ = done.send(());
        }
    }

    /// Stops the process: close stdin and wait, then SIGTERM and wait, then SIGKILL.
    async fn stop(&mut self, group: &GroupGuard, gentle: bool) {
        if gentle {
            // Closing stdin: the server sees end of input (after any line being
            // written, which holds the pipe until it is done — within the grace time).
            if let Ok(mut pipe) = tokio::time::timeout(self.grace, self.stdin.lock()).await {
                pipe.take();
            }
            if tokio::time::timeout(self.grace, self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
            group.signal(libc::SIGTERM);
            if tokio::time::timeout(self.grace, self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        group.signal(libc::SIGKILL);
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

/// Removes a waiting caller's slot when its request ends without a reply (cancelled,
/// or the line could not be sent).
struct Waiting<'a> {
    reader: &'a StdoutReader,
    id: Option<Id>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.reader.forget(&id);
        }
    }
}

impl Transport for StdioTransport {
    fn request(&self, request: Request, cx: RequestContext) -> BoxFuture<'_, Result<Response>> {
        Box::pin(async move {
            let conn = self.conn(&cx.incoming)?;
            // A connection that just died: why, once the supervisor has said (else the
            // write below fails and waits for it).
            if conn.dead.load(Ordering::Acquire) {
                if let Some(why) = conn.reader.ended() {
                    return Err(why);
                }
            }
            let id = request.id.clone();
            conn.reader.register(id.clone())?;
            let mut waiting = Waiting {
                reader: &conn.reader,
                id: Some(id.clone()),
            };
            if let Err(e) = conn.send(&Message::Request(request)).await {
                // The process may have exited before the line was written: why it
                // ended (its exit status, its last stderr lines) says more than the
                // broken pipe, once the supervisor has seen it.
                let ended = std::future::poll_fn(|cx| conn.reader.poll_reply(&id, cx));
                return match tokio::time::timeout(ENDED_WAIT, ended).await {
                    Ok(Err(why)) => Err(why),
                    _ => Err(e),
                };
            }
            let out = std::future::poll_fn(|cx| match &waiting.id {
                Some(id) => conn.reader.poll_reply(id, cx),
                None => std::task::Poll::Ready(Err(Error::closed("the server process exited"))),
            })
            .await;
            // The slot is gone with the result.
            waiting.id = None;
            out
        })
    }

    fn notify<'a>(&'a self, n: Notification, _version: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            match self.live_conn() {
                Some(conn) => conn.send(&Message::Notification(n)).await,
                None => Err(Error::closed("the server is not running")),
            }
        })
    }

    fn cancel<'a>(&'a self, n: Notification, _version: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            // Only meaningful on the connection the request went to; after a restart
            // there is nothing to cancel.
            if let Some(conn) = self.live_conn() {
                let _ = conn.send(&Message::Notification(n)).await;
            }
            Ok(())
        })
    }

    fn connect<'a>(&'a self, incoming: &'a Incoming) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { self.conn(incoming).map(|_| ()) })
    }

    fn close(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let conn = {
                let mut g = mcp_runtime_core::lock(&self.conn);
                g.take()
            };
            let Some(conn) = conn else { return Ok(()) };
            let close_tx = mcp_runtime_core::lock(&conn.close_tx).take();
            if let Some(close_tx) = close_tx {
                let (done_tx, done_rx) = oneshot::channel();
                if close_tx.send(done_tx).is_ok() {
                    let _ = done_rx.await;
                }
            }
            Ok(())
        })
    }
}
