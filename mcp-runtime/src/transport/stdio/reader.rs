//! Who reads a server's stdout: the caller that waits for its reply (leader/follower),
//! not a reader task that hands every reply to its caller.
//!
//! A hand-off costs a wake of another task per message, and on a multi-thread runtime
//! often a wake of another thread: it was the largest cost of a stdio call. Here a
//! caller waiting for its reply reads the pipe itself, without blocking:
//!
//! * **The pipe has one waker**, the *router*: whoever reads registers it, never its
//!   own. When the pipe becomes readable the router wakes one reader: the *leader* (a
//!   waiting caller, chosen when the pipe becomes readable), else the connection's
//!   supervisor task, which reads only while no caller waits (an idle connection's
//!   notifications and server requests). A caller that leaves after being woken for
//!   the pipe and before reading it passes the wake on.
//! * **One reader at a time** (a lock taken with `try_lock`, never waited on; all
//!   reading is non-blocking): a caller that finds another reading leaves a *retry*
//!   mark, and the reader reads again before it lets go. Lines are dispatched in the
//!   order they arrive, under that lock, so notifications keep their order.
//! * **Every reply reaches its caller exactly once**: a reply goes into its caller's
//!   slot (the first one for an id; a second is dropped) and the caller takes it from
//!   there; a caller that goes away (cancelled) removes its slot, and a late reply to
//!   it is dropped.
//! * **Nothing waits on a caller that is not polled**: the supervisor reads every
//!   [`WATCH`] while calls wait, so a caller that holds a started request without
//!   polling it delays the others by at most that long.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::io::AsyncRead;

use crate::error::Error;
use crate::jsonrpc::{Id, Message, Notification, Request, Response};
use mcp_runtime_core::gather::{Gather, GATHER_FROM};

/// How often the supervisor reads while calls wait (see the module's last point).
const WATCH: Duration = Duration::from_millis(50);

/// The room a read gets at least (a pipe holds 64 KiB), and the size the buffer
/// returns to after a large message.
const READ_ROOM: usize = 64 * 1024;

/// Where the lines that are not a waiting caller's reply go.
pub(super) trait Sink: Send + Sync + 'static {
    /// A notification from the server (in the order it was sent).
    fn notification(&self, notification: Notification);
    /// A request from the server, to be answered off the reading path.
    fn request(&self, request: Request);
    /// The server's name, for logs.
    fn name(&self) -> &str;
}

/// How the server's stdout ended, as a reader saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum StreamEnd {
    /// End of file.
    Eof,
    /// A line grew past the size limit.
    TooLong,
    /// Reading failed.
    Failed(String),
}

/// Why calls on this connection fail from now on (set by the supervisor).
#[derive(Clone, Debug)]
pub(super) enum Ended {
    /// The connection is over for this reason; the server's last stderr lines when it
    /// ended by itself.
    Closed(String, Option<String>),
    /// A line grew past this many bytes.
    TooLarge(usize),
}

impl Ended {
    pub(super) fn error(&self) -> Error {
        match self {
            Ended::Closed(reason, stderr) => {
                Error::closed(reason.clone()).with_server_stderr(stderr.clone())
            }
            Ended::TooLarge(limit) => {
                Error::too_large("stdout line", *limit, "StdioConfig::max_message_size")
            }
        }
    }
}

/// A waiting caller: its waker, and its reply once read.
struct Slot {
    waker: Option<Waker>,
    reply: Option<Response>,
}

/// Who waits for what; the router's view.
#[derive(Default)]
struct Waiters {
    /// Keyed by our own request ids: a fast hash (a server's ids are only looked up,
    /// never inserted).
    slots: foldhash::HashMap<Id, Slot>,
    /// The caller the router wakes when the pipe becomes readable.
    leader: Option<Id>,
    /// The leader was woken for the pipe and has not read it yet.
    leader_notified: bool,
    /// The supervisor's waker: woken when no caller waits, and when the stream ends.
    idle: Option<Waker>,
    /// Set by the reader that saw the end; the supervisor acts on it.
    stream_end: Option<StreamEnd>,
    /// Set by the supervisor: every call fails with it.
    ended: Option<Ended>,
    /// Calls registered so far, and the count the supervisor last saw (its watch
    /// stops after a quiet period and a registration restarts it).
    registered: u64,
    watched: u64,
    watching: bool,
}

impl Waiters {
    /// Who reads next: the leader, else a waiting caller (who becomes the leader), else
    /// the supervisor.
    fn target(&mut self) -> Option<Waker> {
        if self.leader.is_none() || self.leader_notified {
            // No leader, or it has not read since it was last woken (busy, or not
            // polled): another waiting caller reads, if there is one.
            let busy = self.leader.take();
            self.leader = self
                .slots
                .iter()
                .find(|(id, s)| {
                    s.waker.is_some() && s.reply.is_none() && Some(*id) != busy.as_ref()
                })
                .map(|(id, _)| id.clone())
                .or(busy);
        }
        let leader = self.leader.as_ref().and_then(|id| self.slots.get(id));
        if let Some(waker) = leader.and_then(|s| s.waker.clone()) {
            self.leader_notified = true;
            return Some(waker);
        }
        self.leader = None;
        self.idle.clone()
    }

    /// `id` no longer waits. True when it was the leader and had been woken for the
    /// pipe without reading it: the wake must go to someone else.
    fn leave(&mut self, id: &Id) -> bool {
        if self.leader.as_ref() == Some(id) {
            self.leader = None;
            std::mem::take(&mut self.leader_notified)
        } else {
            false
        }
    }
}

struct WaitList(Mutex<Waiters>);

impl WaitList {
    fn lock(&self) -> MutexGuard<'_, Waiters> {
        mcp_runtime_core::lock(&self.0)
    }

    /// The pipe is readable (or a wake is passed on): wake whoever reads next.
    fn route(&self) {
        let waker = self.lock().target();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The pipe's one waker.
struct Router(Arc<WaitList>);

impl Wake for Router {
    fn wake(self: Arc<Self>) {
        self.0.route();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.route();
    }
}

/// The read side: the pipe and the bytes read of lines not yet complete.
struct Side<R> {
    io: R,
    /// Bytes read and not yet dispatched (the start of a line). Grown as a line needs;
    /// only what was read is ever touched, so a large line costs its own size.
    buf: Vec<u8>,
    /// `buf[..scanned]` holds no newline.
    scanned: usize,
    /// The line in `buf` is long: its long strings are being moved out as it arrives.
    gather: Option<Gather>,
    /// The stream ended: nothing more is read.
    done: bool,
    /// The most `buf` ever held (tests check what a long line costs).
    #[cfg(test)]
    peak: usize,
}

/// The reading side of one connection, shared by its callers and its supervisor.
pub(super) struct Reader<R, S> {
    list: Arc<WaitList>,
    router: Waker,
    side: Mutex<Side<R>>,
    retry: AtomicBool,
    sink: S,
    limit: usize,
}

impl<R: AsyncRead + Unpin, S: Sink> Reader<R, S> {
    /// Reads `io`, lines of at most `limit` bytes; what is not a reply goes to `sink`.
    pub(super) fn new(io: R, sink: S, limit: usize) -> Self {
        let list = Arc::new(WaitList(Mutex::new(Waiters {
            watching: true,
            ..Waiters::default()
        })));
        Reader {
            router: Waker::from(Arc::new(Router(list.clone()))),
            list,
            side: Mutex::new(Side {
                io,
                buf: Vec::new(),
                scanned: 0,
                gather: None,
                done: false,
                #[cfg(test)]
                peak: 0,
            }),
            retry: AtomicBool::new(false),
            sink,
            limit,
        }
    }

    /// Why the connection is over, once it is.
    pub(super) fn ended(&self) -> Option<Error> {
        self.list.lock().ended.as_ref().map(Ended::error)
    }

    /// Expects a reply to `id`. Fails once the connection is over.
    pub(super) fn register(&self, id: Id) -> Result<(), Error> {
        let wake = {
            let mut w = self.list.lock();
            if let Some(ended) = &w.ended {
                return Err(ended.error());
            }
            w.slots.insert(
                id,
                Slot {
                    waker: None,
                    reply: None,
                },
            );
            w.registered += 1;
            if w.watching {
                None
            } else {
                w.watching = true;
                w.idle.clone()
            }
        };
        if let Some(waker) = wake {
            waker.wake();
        }
        Ok(())
    }

    /// Waits for the reply to `id` (registered), reading the pipe while no one else
    /// does. Dropping the wait without a result: call [`forget`](Self::forget).
    pub(super) fn poll_reply(
        &self,
        id: &Id,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Response, Error>> {
        if let Some(done) = self.take(id, Some(cx.waker())) {
            return Poll::Ready(done);
        }
        self.pump(Some(id));
        match self.take(id, None) {
            Some(done) => Poll::Ready(done),
            None => Poll::Pending,
        }
    }

    /// The caller of `id` stopped waiting (cancelled, or its request could not be sent).
    pub(super) fn forget(&self, id: &Id) {
        let reroute = {
            let mut w = self.list.lock();
            w.slots.remove(id).is_some() && w.leave(id)
        };
        if reroute {
            self.list.route();
        }
    }

    /// The reply to `id` or the connection's end, if either is there (the slot is then
    /// gone). Otherwise records `waker` and, for the leader, that it reads now.
    fn take(&self, id: &Id, waker: Option<&Waker>) -> Option<Result<Response, Error>> {
        let (out, reroute) = {
            let mut w = self.list.lock();
            let ended = w.ended.clone();
            let out = match w.slots.get_mut(id) {
                None => Some(Err(ended
                    .unwrap_or_else(|| Ended::Closed("the server process exited".into(), None))
                    .error())),
                Some(slot) => match (slot.reply.take(), ended) {
                    (Some(reply), _) => Some(Ok(reply)),
                    (None, Some(ended)) => Some(Err(ended.error())),
                    (None, None) => {
                        if let Some(waker) = waker {
                            match &slot.waker {
                                Some(w) if w.will_wake(waker) => {}
                                _ => slot.waker = Some(waker.clone()),
                            }
                        }
                        None
                    }
                },
            };
            let reroute = if out.is_some() {
                w.slots.remove(id);
                w.leave(id)
            } else {
                if waker.is_some() && w.leader.as_ref() == Some(id) {
                    // The leader reads now (pump follows).
                    w.leader_notified = false;
                }
                false
            };
            (out, reroute)
        };
        if reroute {
            self.list.route();
        }
        out
    }

    /// For the supervisor: reads while no caller does, and says when the stream ended.
    fn poll_idle(&self, cx: &mut Context<'_>) -> Poll<StreamEnd> {
        {
            let mut w = self.list.lock();
            if let Some(end) = &w.stream_end {
                return Poll::Ready(end.clone());
            }
            match &w.idle {
                Some(idle) if idle.will_wake(cx.waker()) => {}
                _ => w.idle = Some(cx.waker().clone()),
            }
        }
        self.pump(None);
        match &self.list.lock().stream_end {
            Some(end) => Poll::Ready(end.clone()),
            None => Poll::Pending,
        }
    }

    /// The supervisor's share of reading: while no caller waits it reads, and while
    /// calls wait it looks every [`WATCH`] (a caller that is not polled holds no one
    /// up). Returns how the stream ended.
    pub(super) async fn supervise(&self) -> StreamEnd {
        let watch = tokio::time::sleep(WATCH);
        tokio::pin!(watch);
        std::future::poll_fn(|cx| loop {
            if let Poll::Ready(end) = self.poll_idle(cx) {
                return Poll::Ready(end);
            }
            if !self.watching() || std::future::Future::poll(watch.as_mut(), cx).is_pending() {
                return Poll::Pending;
            }
            if !self.watch() {
                return Poll::Pending;
            }
            watch.as_mut().reset(tokio::time::Instant::now() + WATCH);
        })
        .await
    }

    /// True while the supervisor should keep its watch (calls wait, or came since the
    /// last look).
    fn watching(&self) -> bool {
        self.list.lock().watching
    }

    /// The supervisor's watch: reads on behalf of a leader that is not polled, and says
    /// whether to look again after [`WATCH`].
    fn watch(&self) -> bool {
        self.pump(None);
        let mut w = self.list.lock();
        let keep = !w.slots.is_empty() || w.registered != w.watched;
        w.watched = w.registered;
        w.watching = keep;
        keep
    }

    /// The connection is over: every waiting call and every later one fails with `why`.
    pub(super) fn end(&self, why: Ended) {
        let wakers: Vec<Waker> = {
            let mut w = self.list.lock();
            if w.ended.is_none() {
                w.ended = Some(why);
            }
            w.slots.values().filter_map(|s| s.waker.clone()).collect()
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Reads what the pipe has, unless someone else is reading (then they read again
    /// before they let go). `me`: the reading caller, whose own reply needs no wake.
    fn pump(&self, me: Option<&Id>) {
        loop {
            let mut side = match self.side.try_lock() {
                Ok(side) => side,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    self.retry.store(true, Ordering::SeqCst);
                    match self.side.try_lock() {
                        Ok(side) => side,
                        Err(TryLockError::Poisoned(p)) => p.into_inner(),
                        Err(TryLockError::WouldBlock) => return,
                    }
                }
            };
            let mut wake = Vec::new();
            self.read(&mut side, me, &mut wake);
            drop(side);
            for waker in wake {
                waker.wake();
            }
            if !self.retry.swap(false, Ordering::SeqCst) {
                return;
            }
        }
    }

    /// Reads until the pipe has nothing more (the router then is its waker), the
    /// stream ends, or a line is too long; dispatches every complete line.
    fn read(&self, side: &mut Side<R>, me: Option<&Id>, wake: &mut Vec<Waker>) {
        let mut cx = Context::from_waker(&self.router);
        while !side.done {
            if side.buf.capacity() - side.buf.len() < READ_ROOM / 2 {
                side.buf.reserve(READ_ROOM.max(side.buf.len() / 2));
            }
            match tokio_util::io::poll_read_buf(Pin::new(&mut side.io), &mut cx, &mut side.buf) {
                Poll::Pending => return,
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) => {
                    self.stream_ended(side, StreamEnd::Failed(e.to_string()), wake);
                }
                Poll::Ready(Ok(0)) => {
                    // End of file: the last bytes count as a line.
                    if !side.buf.is_empty() {
                        let last = std::mem::take(&mut side.buf);
                        side.scanned = 0;
                        let gather = side.gather.take();
                        self.dispatch(&last, gather, me, wake);
                    }
                    self.stream_ended(side, StreamEnd::Eof, wake);
                }
                Poll::Ready(Ok(_)) => {
                    #[cfg(test)]
                    {
                        side.peak = side.peak.max(side.buf.len());
                    }
                    self.lines(side, me, wake);
                }
            }
        }
    }

    /// Dispatches the complete lines in the buffer and keeps the rest. A line that
    /// grows long is gathered as it arrives (its long strings moved out of the buffer:
    /// `mcp_runtime_core::gather`), so it is never held twice.
    fn lines(&self, side: &mut Side<R>, me: Option<&Id>, wake: &mut Vec<Waker>) {
        loop {
            if let Some(gather) = &mut side.gather {
                let Some(end) = gather.advance(&mut side.buf) else {
                    if gather.len(side.buf.len()) > self.limit {
                        self.stream_ended(side, StreamEnd::TooLong, wake);
                    }
                    return;
                };
                let gather = side.gather.take();
                if gather.as_ref().is_some_and(|g| g.len(end) > self.limit) {
                    self.stream_ended(side, StreamEnd::TooLong, wake);
                    return;
                }
                self.dispatch(&side.buf[..end], gather, me, wake);
                side.buf.drain(..=end);
                side.scanned = 0;
            }
            let mut start = 0;
            while let Some(i) = memchr::memchr(b'\n', &side.buf[side.scanned..]) {
                let end = side.scanned + i;
                if end - start > self.limit {
                    self.stream_ended(side, StreamEnd::TooLong, wake);
                    return;
                }
                self.dispatch(&side.buf[start..end], None, me, wake);
                start = end + 1;
                side.scanned = start;
            }
            side.scanned = side.buf.len();
            if start > 0 {
                side.buf.drain(..start);
                side.scanned -= start;
            }
            if side.buf.len() > self.limit {
                self.stream_ended(side, StreamEnd::TooLong, wake);
                return;
            }
            if side.buf.len() > GATHER_FROM {
                side.gather = Some(Gather::new(true));
                continue;
            }
            // After a large message, give the memory back.
            if side.buf.capacity() > 16 * READ_ROOM && side.buf.len() < READ_ROOM {
                side.buf.shrink_to(READ_ROOM);
            }
            return;
        }
    }

    fn stream_ended(&self, side: &mut Side<R>, end: StreamEnd, wake: &mut Vec<Waker>) {
        side.done = true;
        side.scanned = 0;
        side.buf = Vec::new();
        side.gather = None;
        let mut w = self.list.lock();
        if w.stream_end.is_none() {
            w.stream_end = Some(end);
        }
        wake.extend(w.idle.clone());
    }

    fn dispatch(
        &self,
        line: &[u8],
        gather: Option<Gather>,
        me: Option<&Id>,
        wake: &mut Vec<Waker>,
    ) {
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            return;
        }
        let parsed = match gather {
            Some(g) => g.finish(trimmed),
            None => Message::parse(trimmed),
        };
        let messages = match parsed {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(server = %self.sink.name(), error = %e, bytes = trimmed.len(), preview = %preview(trimmed), "skipped a malformed message from the server");
                return;
            }
        };
        for m in messages {
            match m {
                Ok(Message::Response(r)) => self.deliver(r, me, wake),
                Ok(Message::Notification(n)) => self.sink.notification(n),
                Ok(Message::Request(req)) => self.sink.request(req),
                Err(e) => {
                    tracing::warn!(server = %self.sink.name(), error = %e, "skipped a malformed message in a batch from the server")
                }
            }
        }
    }

    fn deliver(&self, reply: Response, me: Option<&Id>, wake: &mut Vec<Waker>) {
        let mut w = self.list.lock();
        let Some(slot) = w.slots.get_mut(&reply.id) else {
            tracing::debug!(server = %self.sink.name(), id = %reply.id, "ignored a response to no pending request (late or cancelled)");
            return;
        };
        if slot.reply.is_some() {
            tracing::debug!(server = %self.sink.name(), id = %reply.id, "ignored a second response to the same request");
            return;
        }
        if me != Some(&reply.id) {
            wake.extend(slot.waker.clone());
        }
        slot.reply = Some(reply);
    }
}

fn preview(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]);
    s.into_owned()
}

#[cfg(test)]
mod tests;
