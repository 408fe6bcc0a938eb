//! Runs you can watch: [`Agent::start`] drives a run on a task of its own and hands
//! back a [`RunHandle`]; [`Agent::watch`] follows any run's event log, from any
//! process, as it grows — each stored event once, in order, numbered.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use mcp_runtime::BoxFuture;
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use crate::content::Input;
use crate::error::{Error, Result};
use crate::model::{with_text_sink, TextSink};
use crate::store::RunStatus;

use super::decision::Outcome;
use super::events::Event;
use super::handle::Agent;
use super::options::{Principal, RunOptions};

/// How many stored events a watcher reads at a time.
const PAGE: usize = 256;

/// How many streamed text pieces a started run holds for a watcher that is behind
/// (one further behind misses the oldest: they are live only).
const DELTAS: usize = 1024;
/// The most bytes one held piece has (a longer one is split, on a character
/// boundary): what a started run holds for its watchers stays under
/// `DELTAS * DELTA_BYTES` (16 MiB), however large the provider's pieces.
const DELTA_BYTES: usize = 16 * 1024;

/// `text` cut into pieces of at most `max` bytes (more when one character is longer),
/// on character boundaries.
fn pieces(text: &str, max: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut cut = rest.len().min(max.max(1));
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, after) = rest.split_at(cut);
        rest = after;
        Some(piece)
    })
}

/// One event of a run, as a watcher gets it: the run, the event's number in the
/// run's log (`None` for a [`Event::TextDelta`], which is not kept), the run's owner
/// (from its [`RunOptions`]) and the event.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunEvent {
    /// The run.
    pub run_id: String,
    /// The event's number in the run's log: 1, 2, 3, … with no gap (`None` for a
    /// streamed text piece). Give the last one seen to [`Agent::watch`] to go on
    /// after it.
    pub seq: Option<u64>,
    /// The tenant the run belongs to.
    pub tenant: Option<String>,
    /// Who started the run.
    pub started_by: Option<Principal>,
    /// What happened.
    pub event: Event,
}

/// A run started with [`Agent::start`]: its id, its events as they happen, its
/// outcome. Dropping it does not stop the run (cancel it with
/// [`Agent::cancel`](crate::Agent::cancel)).
pub struct RunHandle {
    run_id: String,
    agent: Agent,
    owner: Owner,
    deltas: broadcast::Sender<String>,
    /// Subscribed at the start: the first `events()` gets every piece of text.
    first: std::sync::Mutex<Option<broadcast::Receiver<String>>>,
    done: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<Result<Outcome>>,
}

impl fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunHandle")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl RunHandle {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run's events: every stored one from the first, once each and in order,
    /// with the model's streamed text ([`Event::TextDelta`]) as it comes (all of it
    /// for the first call; from the call on for later ones);
    /// the stream ends after the run's last event of this drive (it finished, was
    /// cancelled, failed, or suspended: a resume is followed with [`Agent::watch`]).
    pub fn events(&self) -> RunEvents {
        RunEvents::new(Follower {
            agent: self.agent.clone(),
            run_id: self.run_id.clone(),
            last: 0,
            page: VecDeque::new(),
            owner: Some(self.owner.clone()),
            deltas: Some(
                crate::store::lock(&self.first)
                    .take()
                    .unwrap_or_else(|| self.deltas.subscribe()),
            ),
            done: Some(self.done.clone()),
            saves: self.agent.inner.books.saves(&self.run_id),
            ended: false,
            empty_waits: 0,
        })
    }

    /// Waits for the run's outcome (what [`Agent::run`](crate::Agent::run) returns).
    pub async fn outcome(self) -> Result<Outcome> {
        match self.task.await {
            Ok(outcome) => outcome,
            Err(e) => Err(Error::store(format!(
                "run {}: the task driving it stopped: {e}",
                self.run_id
            ))),
        }
    }
}

/// A run's tenant and who started it.
type Owner = (Option<String>, Option<Principal>);

fn owner_of(options: &RunOptions) -> Owner {
    (options.tenant.clone(), options.started_by.clone())
}

impl Agent {
    /// Starts `input` as [`run_with_options`](Self::run_with_options) does, and
    /// returns at once with a [`RunHandle`]: the run is kept (its first event,
    /// `RunStarted`, numbered 1) before this returns — so [`watch`](Self::watch)
    /// finds it from any process — and driven on a tokio task of its own (called
    /// outside a tokio runtime: an error for which `is_config()` is true). An error after it was kept leaves it `failed` with a
    /// `RunFailed` event, as a run that had run does.
    pub async fn start(&self, input: impl Into<Input>, options: RunOptions) -> Result<RunHandle> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::config("Agent::start drives the run on a tokio task: call it in a tokio runtime")
        })?;
        let owner = owner_of(&options);
        let mut state = self.new_run(input.into(), options)?;
        self.save(&mut state, RunStatus::Running).await?;
        let run_id = state.id.clone();
        let deltas = broadcast::Sender::new(DELTAS);
        let first = std::sync::Mutex::new(Some(deltas.subscribe()));
        let (finished, done) = watch::channel(false);
        let to = deltas.clone();
        let sink: TextSink = Arc::new(move |text: &str| {
            for piece in pieces(text, DELTA_BYTES) {
                let _ = to.send(piece.to_owned());
            }
        });
        let agent = self.clone();
        let task = runtime.spawn(async move {
            let outcome = with_text_sink(sink, agent.drive(state, None)).await;
            let _ = finished.send(true);
            outcome
        });
        Ok(RunHandle {
            run_id,
            agent: self.clone(),
            owner,
            deltas,
            first,
            done,
            task,
        })
    }

    /// Follows run `run_id` from any process: the events of its log after the one
    /// numbered `after` (from the first when `None`), then each new one as it is
    /// kept — once each, in order, numbered with no gap; a watcher that reconnects
    /// with the last number it saw misses nothing and sees nothing twice. The stream
    /// ends after an event that ends the run — `RunFinished`, `RunCancelled`, or
    /// `RunFailed` that leaves it failed — and goes on through a suspension (a
    /// resume continues the same log). A follow-up or a retry after the end goes on
    /// in the same log too: watch again after the last number (such a watch waits
    /// for one). An error (the run is not kept, the store fails, an event cannot be
    /// read or is not numbered next) is the stream's last item. New events are
    /// learned of as the store tells: PostgreSQL at once (`LISTEN/NOTIFY`), SQLite
    /// by a 200 ms poll, events saved by this agent at once.
    pub fn watch(&self, run_id: &str, after: Option<u64>) -> RunEvents {
        RunEvents::new(Follower {
            agent: self.clone(),
            run_id: run_id.to_owned(),
            last: after.unwrap_or(0),
            page: VecDeque::new(),
            owner: None,
            deltas: None,
            done: None,
            saves: self.inner.books.saves(run_id),
            ended: false,
            empty_waits: 0,
        })
    }
}

/// The events of a run, as a [`futures_core::Stream`] (or one at a time with
/// [`next`](Self::next)). Dropping it stops following.
pub struct RunEvents {
    follower: Option<Follower>,
    next: Option<BoxFuture<'static, (Option<Result<RunEvent>>, Follower)>>,
}

impl fmt::Debug for RunEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunEvents").finish_non_exhaustive()
    }
}

impl RunEvents {
    fn new(follower: Follower) -> RunEvents {
        RunEvents {
            follower: Some(follower),
            next: None,
        }
    }

    /// The next event; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Result<RunEvent>> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next_event(cx)).await
    }

    fn poll_next_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<RunEvent>>> {
        if self.next.is_none() {
            let Some(follower) = self.follower.take() else {
                return Poll::Ready(None);
            };
            self.next = Some(Box::pin(follower.next()));
        }
        let Some(next) = self.next.as_mut() else {
            return Poll::Ready(None);
        };
        match next.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready((item, follower)) => {
                self.next = None;
                if item.is_some() {
                    self.follower = Some(follower);
                }
                Poll::Ready(item)
            }
        }
    }
}

impl futures_core::Stream for RunEvents {
    type Item = Result<RunEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_next_event(cx)
    }
}

/// What follows one run's log.
struct Follower {
    agent: Agent,
    run_id: String,
    /// The number of the last event given.
    last: u64,
    /// Events read and not given yet.
    page: VecDeque<(u64, Value)>,
    /// The run's owner, once known.
    owner: Option<Owner>,
    /// A started run's streamed text.
    deltas: Option<broadcast::Receiver<String>>,
    /// A started run's task ended.
    done: Option<watch::Receiver<bool>>,
    /// This agent's saves.
    saves: watch::Receiver<u64>,
    ended: bool,
    /// Waits that found nothing new (a watch looks again whether the run is kept).
    empty_waits: u32,
}

impl Follower {
    /// The next item, and the follower to go on with.
    async fn next(mut self) -> (Option<Result<RunEvent>>, Follower) {
        let item = self.step().await;
        if matches!(item, Some(Err(_)) | None) {
            self.ended = true;
        }
        (item, self)
    }

    async fn step(&mut self) -> Option<Result<RunEvent>> {
        if self.ended {
            return None;
        }
        loop {
            // Text streamed so far comes before the stored events read after it (a
            // turn's text is streamed before its `ModelAnswered` is kept).
            if let Some(text) = pending_delta(&mut self.deltas) {
                return Some(Ok(self.event(None, Event::TextDelta { text })));
            }
            if let Some((seq, value)) = self.page.pop_front() {
                return Some(self.give(seq, value).await);
            }
            // Marked seen before reading: a save after the read wakes the wait.
            self.saves.borrow_and_update();
            // Ended: told so, or the task is gone without telling (it panicked).
            let finished = self
                .done
                .as_mut()
                .is_some_and(|d| *d.borrow_and_update() || d.has_changed().is_err());
            let store = self.agent.inner.books.store();
            match store
                .events_after(&self.run_id, Some(self.last), PAGE)
                .await
            {
                Ok(page) if !page.is_empty() => {
                    self.page = page.into();
                    continue;
                }
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
            if finished {
                return None;
            }
            // A watch looks whether the run is still kept at its first wait and every
            // tenth after: a run deleted or pruned while watched ends the watch.
            if self.done.is_none() && self.empty_waits.is_multiple_of(10) {
                match store.load(&self.run_id).await {
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        return Some(Err(Error::store(format!(
                            "run {} is not kept: there is nothing to watch",
                            self.run_id
                        ))))
                    }
                    Err(e) => return Some(Err(e)),
                }
            }
            tokio::select! {
                biased;
                text = delta(&mut self.deltas) => {
                    return Some(Ok(self.event(None, Event::TextDelta { text })));
                }
                waited = store.wait_events(&self.run_id, self.last) => {
                    if let Err(e) = waited {
                        return Some(Err(e));
                    }
                }
                _ = self.saves.changed() => {}
                _ = ended(&mut self.done) => {}
            }
            self.empty_waits = self.empty_waits.wrapping_add(1);
        }
    }

    /// The stored event numbered `seq`, checked: the next number, an event this
    /// version reads.
    async fn give(&mut self, seq: u64, value: Value) -> Result<RunEvent> {
        let run_id = &self.run_id;
        if Some(seq) != self.last.checked_add(1) {
            return Err(Error::store(format!(
                "run {run_id}: the store gave event {seq} after event {}: its log has a gap, a repeat or a change of order",
                self.last
            )));
        }
        let event: Event = serde_json::from_value(value).map_err(|e| {
            Error::store(format!("event {seq} of run {run_id} cannot be read: {e}"))
        })?;
        if matches!(event, Event::TextDelta { .. }) {
            return Err(Error::store(format!(
                "event {seq} of run {run_id} is a text delta, which is never kept"
            )));
        }
        if self.owner.is_none() {
            self.owner = Some(self.load_owner().await?);
        }
        self.last = seq;
        if ends_run(&event) {
            self.ended = true;
        }
        Ok(self.event(Some(seq), event))
    }

    /// The run's owner, from its kept state (checked as a resume checks it).
    async fn load_owner(&self) -> Result<Owner> {
        let books = &self.agent.inner.books;
        match books.store().load(&self.run_id).await? {
            Some(record) => Ok(owner_of(&books.read(&record)?.options)),
            None => Ok((None, None)),
        }
    }

    fn event(&self, seq: Option<u64>, event: Event) -> RunEvent {
        let (tenant, started_by) = self.owner.clone().unwrap_or_default();
        RunEvent {
            run_id: self.run_id.clone(),
            seq,
            tenant,
            started_by,
            event,
        }
    }
}

/// An event after which the run has ended (until a follow-up or retry takes it up).
fn ends_run(event: &Event) -> bool {
    matches!(
        event,
        Event::RunFinished
            | Event::RunCancelled { .. }
            | Event::RunFailed {
                resumable: false,
                ..
            }
    )
}

/// The next piece of streamed text (never, without a stream or once it closed).
async fn delta(deltas: &mut Option<broadcast::Receiver<String>>) -> String {
    loop {
        let Some(rx) = deltas.as_mut() else {
            return std::future::pending().await;
        };
        match rx.recv().await {
            Ok(text) => return text,
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => *deltas = None,
        }
    }
}

/// A piece of streamed text already sent, if any.
fn pending_delta(deltas: &mut Option<broadcast::Receiver<String>>) -> Option<String> {
    let rx = deltas.as_mut()?;
    loop {
        match rx.try_recv() {
            Ok(text) => return Some(text),
            Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => return None,
        }
    }
}

/// Returns when the started run's task ended (never, for a watch, or once told).
async fn ended(done: &mut Option<watch::Receiver<bool>>) {
    match done.as_mut() {
        // A task gone without telling (it panicked) ended too.
        Some(d) if !*d.borrow() => {
            let _ = d.changed().await;
        }
        _ => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::pieces;

    #[test]
    fn long_text_is_cut_on_character_boundaries() {
        let text = format!("{}é{}", "a".repeat(5), "b".repeat(3));
        let got: Vec<&str> = pieces(&text, 3).collect();
        assert_eq!(got.concat(), text);
        assert!(got.iter().all(|p| p.len() <= 4), "{got:?}");
        assert_eq!(pieces("", 3).count(), 0);
        assert_eq!(pieces("short", 16).collect::<Vec<_>>(), ["short"]);
    }
}
