//! The leader/follower reader against a real pipe: every reply reaches its caller
//! exactly once, notifications keep their order, cancellations lose nothing, nothing
//! hangs — with random interleavings (proptest) and on both runtime flavours.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::future::Future;

use proptest::prelude::*;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;

use super::*;

#[derive(Default)]
struct Record {
    notifications: Mutex<Vec<i64>>,
    requests: Mutex<Vec<String>>,
}

#[derive(Clone, Default)]
struct TestSink(Arc<Record>);

impl Sink for TestSink {
    fn notification(&self, n: Notification) {
        let seq = n
            .params
            .as_ref()
            .and_then(|p| p["seq"].as_i64())
            .unwrap_or(-1);
        self.0.notifications.lock().unwrap().push(seq);
    }
    fn request(&self, r: Request) {
        self.0.requests.lock().unwrap().push(r.method);
    }
    fn name(&self) -> &str {
        "test"
    }
}

type TestReader = Reader<pipe::Receiver, TestSink>;

fn reply(id: i64) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"n\":{id}}}}}\n")
}

fn note(seq: i64) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"seq\":{seq}}}}}\n")
}

/// A reader on a fresh pipe, its supervisor running; the test writes the server's side.
fn start(limit: usize) -> (Arc<TestReader>, pipe::Sender, TestSink) {
    let (tx, rx) = pipe::pipe().expect("a pipe");
    let sink = TestSink::default();
    let reader = Arc::new(Reader::new(rx, sink.clone(), limit));
    let supervisor = reader.clone();
    tokio::spawn(async move {
        let end = supervisor.supervise().await;
        supervisor.end(Ended::Closed(format!("{end:?}"), None));
    });
    (reader, tx, sink)
}

/// Registers `id` and waits for its reply, as the stdio transport does.
async fn call(reader: &TestReader, id: i64) -> Result<Response, Error> {
    let id = Id::Number(id);
    reader.register(id.clone())?;
    struct Forget<'a>(&'a TestReader, Id);
    impl Drop for Forget<'_> {
        fn drop(&mut self) {
            self.0.forget(&self.1);
        }
    }
    let _forget = Forget(reader, id.clone());
    std::future::poll_fn(|cx| reader.poll_reply(&id, cx)).await
}

fn result_n(r: &Response) -> i64 {
    r.outcome
        .as_ref()
        .map(|v| v["n"].as_i64().unwrap_or(-1))
        .unwrap_or(-2)
}

async fn write_chunked(tx: &mut pipe::Sender, bytes: &[u8], cuts: &[usize]) {
    let mut at = 0;
    for cut in cuts {
        let end = (at + cut).min(bytes.len());
        tx.write_all(&bytes[at..end]).await.unwrap();
        tokio::task::yield_now().await;
        at = end;
    }
    tx.write_all(&bytes[at..]).await.unwrap();
}

#[tokio::test]
async fn a_caller_reads_its_own_reply_and_hands_on_the_others() {
    let (reader, mut tx, sink) = start(1 << 20);
    let a = tokio::spawn({
        let r = reader.clone();
        async move { call(&r, 1).await }
    });
    let b = tokio::spawn({
        let r = reader.clone();
        async move { call(&r, 2).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let script = format!("{}{}{}{}", note(0), reply(2), note(1), reply(1));
    tx.write_all(script.as_bytes()).await.unwrap();
    assert_eq!(result_n(&a.await.unwrap().unwrap()), 1);
    assert_eq!(result_n(&b.await.unwrap().unwrap()), 2);
    assert_eq!(*sink.0.notifications.lock().unwrap(), vec![0, 1]);
}

#[tokio::test]
async fn notifications_are_read_while_no_caller_waits() {
    let (_reader, mut tx, sink) = start(1 << 20);
    let line = format!(
        "{}{}{{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"ping\"}}\n",
        note(7),
        note(8)
    );
    tx.write_all(line.as_bytes()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while sink.0.requests.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the supervisor reads an idle connection");
    assert_eq!(*sink.0.notifications.lock().unwrap(), vec![7, 8]);
    assert_eq!(*sink.0.requests.lock().unwrap(), vec!["ping".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_is_not_polled_holds_no_one_up() {
    let (reader, mut tx, _sink) = start(1 << 20);
    // Caller 1 is polled once (and may become the leader), then held without polling.
    let mut held = Box::pin(call(&reader, 1));
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    assert!(held.as_mut().poll(&mut cx).is_pending());
    // Make it the leader: the pipe becomes readable while it is the only caller.
    tx.write_all(note(0).as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let other = tokio::spawn({
        let r = reader.clone();
        async move { call(&r, 2).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    tx.write_all(reply(2).as_bytes()).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), other)
        .await
        .expect("the other caller is answered")
        .unwrap()
        .unwrap();
    assert_eq!(result_n(&got), 2);
    tx.write_all(reply(1).as_bytes()).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .expect("the held caller gets its reply once polled again")
        .unwrap();
    assert_eq!(result_n(&got), 1);
}

#[tokio::test]
async fn duplicate_late_and_malformed_lines_are_dropped() {
    let (reader, mut tx, sink) = start(1 << 20);
    let a = tokio::spawn({
        let r = reader.clone();
        async move { call(&r, 1).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let script = format!(
        "not json\n{}{}{}{}\n\n{}",
        reply(99),
        reply(1),
        reply(1).replace("\"n\":1", "\"n\":-5"),
        "{\"jsonrpc\":",
        note(3)
    );
    tx.write_all(script.as_bytes()).await.unwrap();
    assert_eq!(result_n(&a.await.unwrap().unwrap()), 1);
    // A later call with the same id is not answered by the stale duplicate.
    let b = tokio::spawn({
        let r = reader.clone();
        async move { call(&r, 1).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    tx.write_all(reply(1).replace("\"n\":1", "\"n\":11").as_bytes())
        .await
        .unwrap();
    assert_eq!(result_n(&b.await.unwrap().unwrap()), 11);
    assert_eq!(*sink.0.notifications.lock().unwrap(), vec![3]);
}

#[tokio::test]
async fn a_line_past_the_limit_ends_the_stream_and_every_call_fails() {
    let (reader, mut tx, _sink) = start(4096);
    let a = tokio::spawn({
        let r = reader.clone();
        async move { call(&r, 1).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let long = format!("{{\"x\":\"{}\"}}\n", "a".repeat(10_000));
    tx.write_all(long.as_bytes()).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), a)
        .await
        .expect("no hang")
        .unwrap()
        .unwrap_err();
    assert!(err.is_closed(), "{err}");
    assert!(err.to_string().contains("TooLong"), "{err}");
    assert!(reader.register(Id::Number(2)).is_err());
}

/// A long line is gathered as it arrives: its long string moves out of the read
/// buffer, so the line is never held as bytes and as its parsed value at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_is_gathered_not_held_twice() {
    const LONG: usize = 4 << 20;
    for (strings, gathered) in [(1, true), (LONG / 8, false)] {
        let (reader, mut tx, sink) = start(32 << 20);
        let callers: Vec<_> = [1, 2]
            .into_iter()
            .map(|id| {
                let r = reader.clone();
                tokio::spawn(async move { call(&r, id).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        // One string of 4 MiB, or (the positive control) as many bytes in short strings.
        let piece = "\\u00e9".repeat(LONG / 6 / strings);
        let texts = vec![format!("\"{piece}\""); strings].join(",");
        let mut bytes = note(1).into_bytes();
        bytes.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"texts\":[{texts}]}}}}\n")
                .as_bytes(),
        );
        bytes.extend_from_slice((reply(2) + &note(2)).as_bytes());
        let writer = tokio::spawn(async move {
            tx.write_all(&bytes).await.unwrap();
            tx
        });
        let mut replies = Vec::new();
        for c in callers {
            let r = tokio::time::timeout(Duration::from_secs(60), c)
                .await
                .expect("no hang")
                .unwrap()
                .unwrap();
            replies.push(r);
        }
        let _tx = writer.await.unwrap();
        let texts = &replies[0].outcome.as_ref().unwrap()["texts"];
        assert_eq!(texts.as_array().unwrap().len(), strings);
        assert_eq!(
            texts[0].as_str().unwrap(),
            "é".repeat(LONG / 6 / strings),
            "decoded as the parser would"
        );
        assert_eq!(result_n(&replies[1]), 2);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(*sink.0.notifications.lock().unwrap(), vec![1, 2]);
        let peak = reader.side.lock().unwrap().peak;
        if gathered {
            assert!(peak < 1 << 20, "the read buffer grew to {peak} bytes");
        } else {
            assert!(peak > LONG, "short strings stay in the buffer: {peak}");
        }
    }
}

#[tokio::test]
async fn a_gathered_line_past_the_limit_ends_the_stream() {
    let (reader, mut tx, _sink) = start(1 << 20);
    let a = tokio::spawn({
        let r = reader.clone();
        async move { call(&r, 1).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let long = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"{}\"}}\n",
        "a".repeat(2 << 20)
    );
    let writer = tokio::spawn(async move {
        // The reader stops reading at the limit; the rest may never be taken.
        let _ = tx.write_all(long.as_bytes()).await;
    });
    let err = tokio::time::timeout(Duration::from_secs(30), a)
        .await
        .expect("no hang")
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("TooLong"), "{err}");
    let peak = reader.side.lock().unwrap().peak;
    assert!(peak < 1 << 20, "the read buffer grew to {peak} bytes");
    writer.abort();
}

#[tokio::test]
async fn end_of_file_fails_the_waiting_calls() {
    let (reader, tx, _sink) = start(1 << 20);
    let a = tokio::spawn({
        let r = reader.clone();
        async move { call(&r, 1).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(tx);
    let err = tokio::time::timeout(Duration::from_secs(10), a)
        .await
        .expect("no hang")
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("Eof"), "{err}");
}

/// One run of the property: `callers` callers (some cancelled at a point of the
/// script), the server's lines in `order` with notifications between, cut into chunks.
#[derive(Clone, Debug)]
struct Case {
    callers: usize,
    cancel: Vec<bool>,
    order: Vec<usize>,
    notes_before: Vec<u8>,
    cuts: Vec<usize>,
    multi_thread: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..16).prop_flat_map(|n| {
        (
            Just(n),
            proptest::collection::vec(proptest::bool::weighted(0.25), n),
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            proptest::collection::vec(0u8..3, n + 1),
            proptest::collection::vec(1usize..200, 0..30),
            any::<bool>(),
        )
            .prop_map(
                |(callers, cancel, order, notes_before, cuts, multi_thread)| Case {
                    callers,
                    cancel,
                    order,
                    notes_before,
                    cuts,
                    multi_thread,
                },
            )
    })
}

fn run_case(c: &Case) -> Result<(), String> {
    let rt = if c.multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let (reader, mut tx, sink) = start(1 << 20);
        let mut tasks = Vec::new();
        let mut cancels = Vec::new();
        let (registered_tx, mut registered_rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..c.callers {
            let r = reader.clone();
            let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel::<()>();
            cancels.push(Some(cancel_tx));
            let registered = registered_tx.clone();
            tasks.push(tokio::spawn(async move {
                let id = i as i64;
                let wait = async {
                    let out = call(&r, id);
                    tokio::pin!(out);
                    // Poll once so the caller is registered (and may lead).
                    let first =
                        std::future::poll_fn(|cx| std::task::Poll::Ready(out.as_mut().poll(cx)))
                            .await;
                    let _ = registered.send(());
                    match first {
                        std::task::Poll::Ready(r) => r,
                        std::task::Poll::Pending => out.await,
                    }
                };
                tokio::select! {
                    r = wait => Some(r),
                    _ = cancel_rx => None,
                }
            }));
        }
        for _ in 0..c.callers {
            registered_rx.recv().await;
        }
        let mut script = String::new();
        let mut expected_notes = Vec::new();
        let mut seq = 0i64;
        let mut cancel_points = Vec::new();
        for (k, &who) in c.order.iter().enumerate() {
            for _ in 0..c.notes_before[k] {
                script.push_str(&note(seq));
                expected_notes.push(seq);
                seq += 1;
            }
            if c.cancel[who] {
                cancel_points.push((script.len(), who));
            }
            script.push_str(&reply(who as i64));
        }
        for _ in 0..c.notes_before[c.callers] {
            script.push_str(&note(seq));
            expected_notes.push(seq);
            seq += 1;
        }
        // Cancel each cancelled caller just before its reply is written.
        let mut at = 0;
        for (point, who) in cancel_points {
            write_chunked(&mut tx, &script.as_bytes()[at..point], &c.cuts).await;
            at = point;
            if let Some(cancel) = cancels[who].take() {
                let _ = cancel.send(());
            }
        }
        write_chunked(&mut tx, &script.as_bytes()[at..], &c.cuts).await;
        for (i, task) in tasks.into_iter().enumerate() {
            let out = tokio::time::timeout(Duration::from_secs(20), task)
                .await
                .map_err(|_| format!("caller {i} hung"))?
                .map_err(|e| e.to_string())?;
            match out {
                Some(Ok(r)) if result_n(&r) == i as i64 => {}
                Some(Ok(r)) => return Err(format!("caller {i} got {r:?}")),
                Some(Err(e)) => return Err(format!("caller {i} failed: {e}")),
                None if c.cancel[i] => {}
                None => return Err(format!("caller {i} was cancelled but not asked to")),
            }
        }
        // Every notification, in order (the last may still be on its way to the
        // supervisor when no caller waits any more).
        tokio::time::timeout(Duration::from_secs(20), async {
            while sink.0.notifications.lock().unwrap().len() < expected_notes.len() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await
        .map_err(|_| "notifications were lost".to_owned())?;
        let got = sink.0.notifications.lock().unwrap().clone();
        if got != expected_notes {
            return Err(format!(
                "notifications {got:?}, expected {expected_notes:?}"
            ));
        }
        if !reader.list.lock().slots.is_empty() {
            return Err("a slot was left behind".to_owned());
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_reply_reaches_its_caller_exactly_once(c in case()) {
        if let Err(e) = run_case(&c) {
            prop_assert!(false, "{e}");
        }
    }
}
