//! The agent's safety seams, through the path a user takes: stores private to this
//! user, no password in clear off this machine, no secret answer kept.

use std::os::unix::fs::PermissionsExt as _;

use mcp_agent::{
    Agent, ChatCompletions, Decision, Mode, Outcome, PendingWait, PostgresRunStore, SqliteRunStore,
};
use serde_json::json;

use super::{filesystem, python_server, scratch, ModelServer, PyServer};

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
    let model = ModelServer::scripted(
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

/// A "database" that takes the connection and never says a word cannot hold the run
/// store: connecting fails once the connect timeout (here the string's, 1 s; 10 s
/// unless said) passes, instead of waiting for ever.
#[tokio::test]
async fn a_silent_database_is_given_up_on() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            kept.push(socket);
        }
    });
    let url = format!("postgres://app@127.0.0.1:{port}/runs?connect_timeout=1");
    // Far beyond the one second: only a connection that never gives up reaches it.
    let tried = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        PostgresRunStore::connect(&url),
    )
    .await
    .expect("connecting gave up by itself");
    let e = tried.unwrap_err();
    assert!(e.is_store() && e.to_string().contains("no answer"), "{e}");
    held.abort();
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
    let model = ModelServer::scripted(&dir, json!([{"tool_calls": calls}, {"echo_tools": true}]));
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
    let model = ModelServer::scripted(
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

/// Everything of the store on disk (the database, its write-ahead log and shared
/// memory), as text.
fn store_bytes(store: &std::path::Path) -> String {
    let mut bytes = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let mut name = store.as_os_str().to_owned();
        name.push(suffix);
        bytes.extend(std::fs::read(std::path::PathBuf::from(name)).unwrap_or_default());
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn fingerprint(secret: &str) -> String {
    use sha2::Digest as _;
    mcp_runtime::digest::hex(&sha2::Sha256::digest(secret.as_bytes()))[..12].to_owned()
}

/// The input requests a suspended run's calls wait on: (decision, keys by the first
/// word of their message).
fn waiting(outcome: &Outcome) -> Vec<(String, Vec<(String, String)>)> {
    let calls = match outcome {
        Outcome::InputRequired { calls, .. } | Outcome::ApprovalRequired { calls, .. } => calls,
        other => panic!("{other:?}"),
    };
    calls
        .iter()
        .map(|p| {
            let PendingWait::Input { requests } = &p.waits else {
                panic!("{p:?}")
            };
            let keys = requests
                .iter()
                .map(|(k, r)| (r.message.clone(), k.clone()))
                .collect();
            (p.decision.clone(), keys)
        })
        .collect()
}

fn key_for(keys: &[(String, String)], message: &str) -> String {
    keys.iter()
        .find(|(m, _)| m == message)
        .unwrap_or_else(|| panic!("no `{message}` request in {keys:?}"))
        .1
        .clone()
}

/// Answers to a server's input requests are kept only while a person still has to
/// act, and never a secret: an `on_input` callback's answer (a vault token) waits in
/// this process's memory, and so does a field the request marks `writeOnly` (a
/// password) — the store, read with its log before and after a checkpoint, holds
/// neither, though it holds the rest of the person's answer (the positive control).
/// The run goes on in the same process with both; in another agent (a process that
/// never held them) the call asks again for exactly what it lacks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_input_answers_are_never_stored() {
    use mcp_runtime::InputResponse;
    const VAULT: &str = "VAULT-TOKEN-CANARY-5d1e";
    const PASSWORD: &str = "PASSWORD-CANARY-8c3a";
    const PASSWORD_2: &str = "PASSWORD-CANARY-2-77b0";
    const USER: &str = "user-visible-4f2b";
    const PERSON_TOKEN: &str = "PERSON-TOKEN-9e41";
    // Everything logged, at every level.
    let logs = &super::observed().logs;
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let dir = scratch("secret-answers");
    let py = PyServer::start();
    let sign_in_twice = json!({"tool_calls": [
        {"name": "sign_in", "arguments": {}},
        {"name": "sign_in", "arguments": {}}
    ]});
    let model = ModelServer::scripted(
        &dir,
        json!([sign_in_twice, {"echo_tools": true}, sign_in_twice, {"echo_tools": true}]),
    );
    let store = dir.join("runs.sqlite3");
    let agent = |callback: bool| {
        let seen = events.clone();
        let mut b = Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Auto)
            .server(python_server(&py.url()))
            .store(SqliteRunStore::open(&store).unwrap())
            .on_event(move |_, e| seen.lock().unwrap().push(format!("{e:?}")));
        if callback {
            b = b.on_input(|ask| {
                let answer = (ask.request.message == "Vault token for sign_in")
                    .then(|| InputResponse::accept(json!({"token": VAULT})));
                async move { answer }
            });
        }
        b.build().unwrap()
    };
    let login = |user: &str, password: &str| {
        InputResponse::accept(json!({"user": user, "password": password}))
    };
    let here = agent(true);

    // Both calls ask for a vault token and a login; the callback gives the token, so
    // each waits for a person's login.
    let first = here.run("sign-in-run").await.unwrap();
    let calls = waiting(&first);
    assert_eq!(calls.len(), 2, "{first:?}");
    for (_, keys) in &calls {
        assert_eq!(keys.len(), 1, "only the login waits for a person: {keys:?}");
    }
    let run = match &first {
        Outcome::InputRequired { run_id, .. } => run_id.clone(),
        _ => unreachable!(),
    };
    // A person answers one call; the other still waits, so the run is kept.
    let (d1, k1) = (&calls[0].0, key_for(&calls[0].1, "Sign in"));
    let outcome = here
        .decide(
            &run,
            [(
                d1.clone(),
                Decision::answer("ann", [(k1, login(USER, PASSWORD))]),
            )],
        )
        .await
        .unwrap();
    assert_eq!(waiting(&outcome).len(), 1, "{outcome:?}");
    let kept = store_bytes(&store);
    assert!(kept.contains(USER), "the reader sees the person's answer");
    assert!(kept.contains("sign-in-run"), "the reader sees the run");
    assert!(!kept.contains(PASSWORD), "a writeOnly field was stored");
    assert!(!kept.contains(VAULT), "a callback's answer was stored");

    // The same process goes on: the password and the token come from its memory.
    let (d2, k2) = (&calls[1].0, key_for(&calls[1].1, "Sign in"));
    let done = here
        .decide(
            &run,
            [(
                d2.clone(),
                Decision::answer("ann", [(k2, login(USER, PASSWORD))]),
            )],
        )
        .await
        .unwrap();
    let Outcome::Finished { text, .. } = done else {
        panic!("{done:?}")
    };
    let signed = format!(
        "signed in as {USER}; password {}; token {}",
        fingerprint(PASSWORD),
        fingerprint(VAULT)
    );
    assert_eq!(text.matches(&signed).count(), 2, "{text}");

    // Another run: one call answered here, the other decided by an agent that never
    // held the answers (another process) and has no callback.
    let first = here.run("sign-in-run-2").await.unwrap();
    let calls = waiting(&first);
    let Outcome::InputRequired { run_id: run, .. } = &first else {
        unreachable!()
    };
    let (d1, k1) = (&calls[0].0, key_for(&calls[0].1, "Sign in"));
    here.decide(
        run,
        [(
            d1.clone(),
            Decision::answer("ann", [(k1, login(USER, PASSWORD))]),
        )],
    )
    .await
    .unwrap();
    let there = agent(false);
    let (d2, k2) = (&calls[1].0, key_for(&calls[1].1, "Sign in"));
    let again = there
        .decide(
            run,
            [(
                d2.clone(),
                Decision::answer("bob", [(k2, login(USER, PASSWORD_2))]),
            )],
        )
        .await
        .unwrap();
    // What it lacks is asked again: for the first call its token and its login (the
    // password was withheld), for the second its token (the callback's answer).
    let mut calls = waiting(&again);
    calls.sort_by_key(|(_, keys)| keys.len());
    assert_eq!(calls.len(), 2, "{again:?}");
    let messages = |keys: &[(String, String)]| {
        let mut m: Vec<String> = keys.iter().map(|(m, _)| m.clone()).collect();
        m.sort();
        m
    };
    assert_eq!(messages(&calls[0].1), ["Vault token for sign_in"]);
    assert_eq!(
        messages(&calls[1].1),
        ["Sign in", "Vault token for sign_in"]
    );
    // A person gives the token now: a field no schema marks secret, kept until its
    // call is sent.
    let vault = || InputResponse::accept(json!({"token": PERSON_TOKEN}));
    let answers = vec![
        (
            calls[0].0.clone(),
            Decision::answer(
                "bob",
                [(key_for(&calls[0].1, "Vault token for sign_in"), vault())],
            ),
        ),
        (
            calls[1].0.clone(),
            Decision::answer(
                "bob",
                [
                    (key_for(&calls[1].1, "Vault token for sign_in"), vault()),
                    (key_for(&calls[1].1, "Sign in"), login(USER, PASSWORD_2)),
                ],
            ),
        ),
    ];
    let done = there.decide(run, answers).await.unwrap();
    let Outcome::Finished { text, .. } = done else {
        panic!("{done:?}")
    };
    let signed_2 = format!(
        "signed in as {USER}; password {}; token {}",
        fingerprint(PASSWORD_2),
        fingerprint(PERSON_TOKEN)
    );
    assert_eq!(text.matches(&signed_2).count(), 2, "{text}");

    // Nothing secret in the store, with its log open or checkpointed into the file.
    let open = store_bytes(&store);
    here.close().await.unwrap();
    there.close().await.unwrap();
    drop((here, there));
    let closed = store_bytes(&store);
    for kept in [&open, &closed] {
        assert!(kept.contains("sign-in-run-2"), "the reader sees the run");
        for secret in [VAULT, PASSWORD, PASSWORD_2] {
            assert!(!kept.contains(secret), "{secret} reached the run store");
        }
    }
    // Once the calls were sent and the log checkpointed, no answer is kept: not even
    // in the file's free space. (The user name is in the tool's result, which the
    // transcript keeps.)
    assert!(
        !closed.contains(PERSON_TOKEN),
        "an answer outlived its call"
    );
    // Nor in events, logs, or a decision's Debug; the positive controls: they are
    // read (events name the answering, logs were written, Debug shows the key).
    let events = events.lock().unwrap().join("\n");
    assert!(events.contains("InputAnswered"), "{events}");
    let logs = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(logs.len() > 500, "trace logging was captured");
    let decision = format!(
        "{:?}",
        Decision::answer("ann", [("k1", login(USER, PASSWORD))])
    );
    assert!(
        decision.contains("k1") && decision.contains("accept"),
        "{decision}"
    );
    for secret in [VAULT, PASSWORD, PASSWORD_2, PERSON_TOKEN] {
        assert!(!events.contains(secret), "{secret} reached an event");
        assert!(!logs.contains(secret), "{secret} reached the logs");
        assert!(
            !decision.contains(secret),
            "{secret} is in a decision's Debug"
        );
    }
}

/// A server that asks in two rounds may carry the first round's answers in its
/// `requestState`, readable when it only signs it. When those answers are ones the run
/// may not keep (a callback's), the state waits in memory with them: the store holds
/// neither, and the run goes on with both in the same agent. An agent that never held
/// them starts the server's questions over. The positive control: the state, read
/// straight from the runtime, does carry the first answer in clear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_state_that_may_carry_answers_is_not_stored() {
    use mcp_runtime::{InputResponse, RequestOptions};
    const VAULT: &str = "VAULT-IN-STATE-CANARY-31f7";
    const PASSWORD: &str = "PASSWORD-STATE-CANARY-c04d";
    let dir = scratch("secret-state");
    let py = PyServer::start_env(&[], &[("PYSERVER_SIGN_ONLY_STATE", "1")]);

    // The positive control: the second round's state carries the first answer.
    let direct = python_server(&py.url());
    let first = direct
        .call_pausing("sign_in_steps", json!({}), RequestOptions::default())
        .await
        .unwrap();
    let pending = first.needs_input().unwrap().clone();
    let key = pending.keys().next().unwrap().to_owned();
    let second = direct
        .call_pausing(
            "sign_in_steps",
            json!({}),
            RequestOptions::default().with_input_answers(
                pending,
                [(key, InputResponse::accept(json!({"token": VAULT})))],
            ),
        )
        .await
        .unwrap();
    let state = serde_json::to_string(second.needs_input().unwrap()).unwrap();
    assert!(
        state.contains(VAULT),
        "the state carries the answer: {state}"
    );
    direct.close().await.unwrap();

    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "sign_in_steps", "arguments": {}}]},
            {"echo_tools": true},
            {"tool_calls": [{"name": "sign_in_steps", "arguments": {}}]},
            {"echo_tools": true}
        ]),
    );
    let store = dir.join("runs.sqlite3");
    let agent = |callback: bool| {
        let mut b = Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Auto)
            .server(python_server(&py.url()))
            .store(SqliteRunStore::open(&store).unwrap());
        if callback {
            b = b.on_input(|ask| {
                let answer = (ask.request.message == "Vault token for sign_in")
                    .then(|| InputResponse::accept(json!({"token": VAULT})));
                async move { answer }
            });
        }
        b.build().unwrap()
    };
    let login = || InputResponse::accept(json!({"user": "ann", "password": PASSWORD}));
    let here = agent(true);
    let out = here.run("two rounds").await.unwrap();
    let calls = waiting(&out);
    assert_eq!(calls[0].1.len(), 1, "{out:?}");
    let k = key_for(&calls[0].1, "Sign in");
    let kept = store_bytes(&store);
    assert!(
        kept.contains("state_withheld"),
        "the stored call says its state is withheld"
    );
    assert!(
        !kept.contains(VAULT),
        "the server's state reached the store"
    );
    let done = here
        .resume(
            out.run_id(),
            &calls[0].0,
            Decision::answer("ann", [(k, login())]),
        )
        .await
        .unwrap();
    let Outcome::Finished { text, .. } = done else {
        panic!("{done:?}")
    };
    assert!(
        text.contains(&format!("token {}", fingerprint(VAULT))),
        "the withheld state went back: {text}"
    );

    // Another agent, without the state: the server's questions start over.
    let out = here.run("two rounds again").await.unwrap();
    let calls = waiting(&out);
    let k = key_for(&calls[0].1, "Sign in");
    let there = agent(false);
    let again = there
        .resume(
            out.run_id(),
            &calls[0].0,
            Decision::answer("bob", [(k, login())]),
        )
        .await
        .unwrap();
    let calls = waiting(&again);
    assert_eq!(calls[0].1[0].0, "Vault token for sign_in", "{again:?}");
    let kept = store_bytes(&store);
    for secret in [VAULT, PASSWORD] {
        assert!(!kept.contains(secret), "{secret} reached the run store");
    }
    here.close().await.unwrap();
    there.close().await.unwrap();
}

/// PostgreSQL: "on this machine" means a loopback address or `localhost` itself, never a
/// name under `.localhost` — the driver resolves that one with no check that it stays
/// here. Asking for no TLS to one is refused before connecting (so nothing is resolved
/// or sent, and the error is the connection string's, not a failed connection), by the
/// run store and the credential store alike.
#[tokio::test]
async fn postgres_takes_no_name_under_localhost_for_this_machine() {
    let url = "postgres://u:s3cret-pw@db.localhost:1/x?sslmode=disable";
    let e = PostgresRunStore::connect(url).await.unwrap_err();
    let said = e.to_string();
    assert!(
        e.is_store()
            && said.contains("sslmode=disable")
            && said.contains("not known to be on this machine"),
        "{e}"
    );
    assert!(!format!("{e} {e:?}").contains("s3cret-pw"));
    let e = mcp_agent::runtime::auth::PostgresStore::connect(url)
        .await
        .unwrap_err();
    assert!(
        e.is_config() && e.to_string().contains("not known to be on this machine"),
        "{e}"
    );
    assert!(!format!("{e} {e:?}").contains("s3cret-pw"));
}
