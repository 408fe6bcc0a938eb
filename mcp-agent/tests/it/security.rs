//! The agent's safety seams, through the path a user takes: stores private to this
//! user, no password in clear off this machine.

use std::os::unix::fs::PermissionsExt as _;

use mcp_agent::{Agent, ChatCompletions, Mode, Outcome, PostgresRunStore, SqliteRunStore};
use serde_json::json;

use super::{filesystem, scratch, FakeModel};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The SQLite run store holds prompts, arguments and results: its folder is created
/// 0700, the file and its `-wal` and `-shm` 0600 — whatever the umask — and an existing
/// file others could read is tightened. Checked after a run really wrote to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_store_is_private_to_this_user() {
    let dir = scratch("private-store");
    let folder = dir.join("state/runs");
    let file = folder.join("runs.sqlite3");
    let model = FakeModel::start(
        &dir,
        json!([{"tool_calls": [{"name": "write_file", "arguments": {"path": dir.join("x"), "content": "x"}}]}]),
    );
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Approve)
        .server(filesystem(&dir))
        .store(SqliteRunStore::open(&file).unwrap())
        .build()
        .unwrap();
    assert!(matches!(
        agent.run("write").await.unwrap(),
        Outcome::ApprovalRequired { .. }
    ));
    let wal = folder.join("runs.sqlite3-wal");
    let shm = folder.join("runs.sqlite3-shm");
    assert!(wal.exists() && shm.exists(), "the store keeps a WAL");
    assert_eq!(mode(&folder), 0o700);
    for f in [&file, &wal, &shm] {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
    agent.close().await.unwrap();

    // A store file others may read (made so outside the agent) is tightened on open.
    let loose = dir.join("loose.sqlite3");
    std::fs::write(&loose, b"").unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        mode(&loose),
        0o644,
        "the control: the file starts readable by all"
    );
    SqliteRunStore::open(&loose).unwrap();
    assert_eq!(mode(&loose), 0o600);
}

/// PostgreSQL: the "TLS for anything but loopback" rule is decided on the address
/// connected to, so `hostaddr` cannot route a loopback-looking URL elsewhere in clear:
/// asking for no TLS there is refused before anything is sent (and the password is not
/// in the error).
#[tokio::test]
async fn postgres_never_takes_a_password_off_this_machine_in_clear() {
    let e = PostgresRunStore::connect(
        "postgres://app:s3cret-pw@localhost:5432/runs?hostaddr=192.0.2.7&sslmode=disable",
    )
    .await
    .unwrap_err();
    assert!(
        e.is_store() && e.to_string().contains("sslmode=disable"),
        "{e}"
    );
    assert!(!format!("{e} {e:?}").contains("s3cret-pw"));
    // The same for the credential store of the runtime.
    let e = mcp_agent::runtime::auth::PostgresStore::connect(
        "host=localhost hostaddr=192.0.2.7 sslmode=disable user=app password=s3cret-pw dbname=c",
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("sslmode=disable"), "{e}");
    assert!(!format!("{e} {e:?}").contains("s3cret-pw"));
}

/// A provider that answers at once and then stalls mid-body (one byte every 0.2 s, for
/// ever) is cut off at the timeout — streamed or not — and the run says so instead of
/// hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_model_answer_is_cut_off_at_the_timeout() {
    let dir = scratch("stalled-model");
    let model = FakeModel::start(&dir, json!([{"trickle": true}]));
    for stream in [false, true] {
        let wire = ChatCompletions::new(model.url(), "fake-model")
            .unwrap()
            .timeout(std::time::Duration::from_secs(2))
            .streaming(stream);
        let agent = Agent::builder().model(wire).build().unwrap();
        let e = agent.run("hello").await.unwrap_err();
        assert!(
            e.is_model() && e.to_string().contains("took longer than"),
            "streamed {stream}: {e}"
        );
    }
}

/// A turn of many calls: at most `max_calls_in_flight` are on the server at once (the
/// rendezvous server's `crowd` answers the peak it saw, and returns only once the peak
/// reaches 3 — so the first three answer exactly 3, the positive control that they did
/// run together), and the calls past `max_calls_per_turn` do not run: the model reads
/// why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_and_calls_per_turn_are_bounded() {
    let dir = scratch("bounded-calls");
    let calls: Vec<_> = (0..12)
        .map(|_| json!({"name": "crowd", "arguments": {"group": "g", "until": 3}}))
        .collect();
    let model = FakeModel::start(&dir, json!([{"tool_calls": calls}, {"echo_tools": true}]));
    let server = mcp_agent::runtime::Mcp::builder("rendezvous")
        .command([
            super::peers().join("venv/bin/python").display().to_string(),
            super::repo_root()
                .join("tests/peers/rendezvous.py")
                .display()
                .to_string(),
        ])
        .build()
        .unwrap();
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .allow(["crowd"])
        .server(server)
        .max_calls_in_flight(3)
        .max_calls_per_turn(10)
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("crowd in").await.unwrap() else {
        panic!("the run finishes")
    };
    let peaks: Vec<u32> = text
        .lines()
        .filter_map(|l| l.strip_prefix("crowd: peak "))
        .map(|n| n.trim().parse().unwrap())
        .collect();
    assert_eq!(peaks.len(), 10, "{text}");
    assert!(peaks.iter().all(|p| *p <= 3), "more than 3 at once: {text}");
    assert!(peaks.contains(&3), "{text}");
    assert_eq!(
        text.matches("a turn may ask for at most 10 tool calls")
            .count(),
        2,
        "{text}"
    );
    agent.close().await.unwrap();
}

/// One server cannot stop the agent: a server that cannot start is left out of the turn
/// (`ServerUnavailable`, the model sees only the other server's tools) unless it is
/// required; a second server offering the same tool names has those tools hidden
/// (`ToolHidden`, naming the server attached first) instead of failing every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_cannot_stop_the_agent() {
    let dir = scratch("one-server");
    std::fs::write(dir.join("a.txt"), "A").unwrap();
    let model = FakeModel::start(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("a.txt")}}]},
            {"echo_tools": true}
        ]),
    );
    let broken = || {
        mcp_agent::runtime::Mcp::builder("broken")
            .command([dir.join("no-such-server").display().to_string()])
            .build()
            .unwrap()
    };
    let bin = super::peers().join("npm/node_modules/.bin/mcp-server-filesystem");
    let twin = mcp_agent::runtime::Mcp::builder("twin")
        .command([bin.display().to_string(), dir.display().to_string()])
        .build()
        .unwrap();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = events.clone();
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .allow(["read_text_file"])
        .server(filesystem(&dir))
        .server(broken())
        .server(twin)
        .on_event(move |_, e| seen.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("read a").await.unwrap() else {
        panic!("the run goes on without the broken server")
    };
    assert!(text.contains("read_text_file: A"), "{text}");
    let events = events.lock().unwrap().clone();
    assert!(events.iter().any(|e| matches!(e,
        mcp_agent::Event::ServerUnavailable { server, .. } if server == "broken")));
    assert!(events.iter().any(|e| matches!(e,
        mcp_agent::Event::ToolHidden { server, tool, reason }
            if server == "twin" && tool == "read_text_file" && reason.contains("`fs`"))));
    // The model was offered each name once.
    let offered = super::offered(&model.requests()[0]);
    assert_eq!(
        offered.iter().filter(|n| *n == "read_text_file").count(),
        1,
        "{offered:?}"
    );
    agent.close().await.unwrap();

    // Required, the same server stops the run.
    let required = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .server(filesystem(&dir))
        .server(broken())
        .require_server("broken")
        .build()
        .unwrap();
    let e = required.run("read a").await.unwrap_err();
    assert!(e.is_mcp(), "{e}");
    required.close().await.unwrap();
}

/// A provider that quotes the key it refused does not put the key in the error (nor
/// in the run's events): on both wires, streamed or not. The positive control: the
/// error does quote what the provider said around it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_provider_echoes_is_not_in_the_error() {
    let dir = scratch("echoed-key");
    let model = FakeModel::start(&dir, json!([{"status": 401, "echo_key": true}]));
    for stream in [false, true] {
        let chat = ChatCompletions::new(model.url(), "m")
            .unwrap()
            .api_key("sk-ECHOED-KEY-CANARY-0042")
            .streaming(stream);
        let e = Agent::builder()
            .model(chat)
            .build()
            .unwrap()
            .run("x")
            .await
            .unwrap_err();
        let text = format!("{e} {e:?}");
        // The provider did quote it: what it quoted is there, scrubbed.
        assert!(
            text.contains("Incorrect API key provided: Bearer [redacted]"),
            "{text}"
        );
        assert!(!text.contains("ECHOED-KEY-CANARY"), "{text}");
        let messages = mcp_agent::Messages::new(format!("http://127.0.0.1:{}", model.port), "m")
            .unwrap()
            .api_key("sk-ECHOED-KEY-CANARY-0042")
            .streaming(stream);
        let e = Agent::builder()
            .model(messages)
            .build()
            .unwrap()
            .run("x")
            .await
            .unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(text.contains("invalid x-api-key: [redacted]"), "{text}");
        assert!(!text.contains("ECHOED-KEY-CANARY"), "{text}");
    }
}
