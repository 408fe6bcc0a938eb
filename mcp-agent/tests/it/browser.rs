//! The approval inbox in a real browser: the `web` router served on loopback, the
//! scripted model and the real filesystem server (with a hostile server whose tool
//! description is HTML), headless Chromium driven through WebDriver (Debian's
//! `chromium` and `chromium-driver`, installed by tests/peers/install.sh). Two
//! people (two browser sessions) decide the calls of one run; screenshots go to
//! `target/test-output/inbox/`.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use mcp_agent::web::{router, WebOptions};
use mcp_agent::{Agent, ChatCompletions, Mode, Principal, RunStore, SqliteRunStore, WorkerOptions};
use mcp_runtime::Mcp;
use serde_json::{json, Value};

use crate::{filesystem, free_port, scratch, HttpServer, ModelServer};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long anything the page shows may take on a busy machine.
const PATIENCE: Duration = Duration::from_secs(90);

/// Where the screenshots go: `target/test-output/inbox/`.
fn output() -> PathBuf {
    let dir = crate::repo_root().join("target/test-output/inbox");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The principal a request's `inbox_user` cookie names (the application's sign-in,
/// as far as this test goes).
fn from_cookie(parts: &http::request::Parts) -> Option<Principal> {
    let cookies = parts.headers.get("cookie")?.to_str().ok()?;
    cookies.split(';').find_map(|c| {
        let (k, v) = c.trim().split_once('=')?;
        (k == "inbox_user" && !v.is_empty()).then(|| Principal::new(v))
    })
}

/// ChromeDriver on a free port, in a process group of its own with the browsers it
/// starts: all of it stopped when dropped (a failed test leaves no Chromium behind).
fn chromedriver() -> (HttpServer, u16) {
    for tool in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing: run tests/peers/install.sh (it installs Debian's chromium and chromium-driver)"
        );
    }
    let port = free_port();
    let mut cmd = Command::new(CHROMEDRIVER);
    cmd.arg(format!("--port={port}"));
    (HttpServer::start(cmd, port), port)
}

/// A new headless Chromium session (its own empty profile: its own cookies).
async fn browser(driver: u16, profile: &Path) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": CHROMIUM,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,1100",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    // WebDriver on loopback: plain HTTP, no TLS.
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{driver}"))
        .await
        .unwrap()
}

/// Signs `who` in (the cookie) and opens the page at `fragment`.
async fn open(c: &Client, base: &str, who: &str, fragment: &str) {
    // The application's own page, outside the inbox (a cookie is set on a page of
    // the origin).
    c.goto(&base.replace("/inbox", "/signin")).await.unwrap();
    c.execute(
        "document.cookie = 'inbox_user=' + arguments[0] + '; path=/'; return true",
        vec![json!(who)],
    )
    .await
    .unwrap();
    c.goto(&format!("{base}{fragment}")).await.unwrap();
    wait_js(
        c,
        "return document.body.dataset.ready === '1'",
        "the page is ready",
    )
    .await;
}

/// Waits until `script` returns `true` in the page.
async fn wait_js(c: &Client, script: &str, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if c.execute(script, vec![]).await.unwrap() == json!(true) {
            return;
        }
        if Instant::now() > deadline {
            let shown = c
                .execute(
                    "return document.body ? document.body.innerText : ''",
                    vec![],
                )
                .await;
            let _ = std::fs::write(
                output().join("failed.png"),
                c.screenshot().await.unwrap_or_default(),
            );
            panic!("never true: {what} ({script}); the page shows: {shown:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.unwrap()
}

async fn screenshot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(output().join(name), png).unwrap();
}

/// The decision id of the pending card (under `box_`) whose arguments mention `needle`.
async fn card(c: &Client, box_: &str, needle: &str) -> String {
    let script = format!(
        "const c = [...document.querySelectorAll('{box_} .call')].find(c => c.querySelector('.arguments').textContent.includes({needle:?})); return c ? c.dataset.decision : null"
    );
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Value::String(id) = js(c, &script).await {
            return id;
        }
        assert!(Instant::now() < deadline, "no card for {needle} in {box_}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// One HTTP/1.1 request over loopback: (status, headers, body).
pub(crate) fn raw(port: u16, request: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.split(' ').nth(1).unwrap_or("0").parse().unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_owned())
}

pub(crate) fn post(port: u16, path: &str, headers: &str, body: &str) -> (u16, String, String) {
    raw(
        port,
        &format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{headers}\r\n{body}",
            body.len()
        ),
    )
}

/// The inbox router for an agent, served on loopback under `/inbox` beside the
/// application's own `/signin` page, with a worker continuing the runs decided.
pub(crate) struct Served {
    pub(crate) port: u16,
    server: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<()>,
    working: tokio::task::JoinHandle<()>,
}

impl Served {
    pub(crate) async fn start(agent: &Agent, options: WebOptions) -> Served {
        let app = axum::Router::new()
            .route(
                "/signin",
                axum::routing::get(|| async { "the application's sign-in" }),
            )
            .nest("/inbox", router(agent.clone(), options));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let worker = agent.worker(WorkerOptions::new());
        let working = tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            worker.run(stopped).await.unwrap()
        });
        Served {
            port,
            server,
            stop,
            working,
        }
    }

    /// The page's address.
    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}/inbox", self.port)
    }

    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        self.working.await.unwrap();
        self.server.abort();
    }
}

/// A run started from the page, its calls decided by two people in two browser
/// sessions — denied with a message, approved, edited (validated against the schema
/// first), one decided by both (the second sees a clear message) — goes on live and
/// changes the file system exactly as decided; a hostile tool description shows as
/// text and runs no script; the API refuses what a page of another origin, a missing
/// token or a missing principal sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_in_a_real_browser() {
    let dir = scratch("inbox-browser");
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let files = files.canonicalize().unwrap();
    let path = |name: &str| files.join(name).display().to_string();
    let model = ModelServer::scripted(
        &dir,
        json!([{
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": path("a.txt"), "content": "A"}},
                {"name": "write_file", "arguments": {"path": path("b.txt"), "content": "B"}},
                {"name": "write_file", "arguments": {"path": path("c.txt"), "content": "C"}},
                {"name": "render", "arguments": {"text": "{prompt}"}}
            ],
            "after_tools": {"echo_tools": true}
        }]),
    );
    let hostile = crate::hostile("html-text");
    let store: std::sync::Arc<dyn RunStore> =
        std::sync::Arc::new(SqliteRunStore::open(dir.join("runs.sqlite3")).unwrap());
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake").unwrap())
        .server(filesystem(&files))
        .server(hostile)
        .store(store.clone())
        .mode(Mode::Approve)
        .allow(["read_text_file", "list_directory"])
        .build()
        .unwrap();
    let options = WebOptions::new()
        .principal(from_cookie)
        .tenants(|_| vec!["team".to_owned()]);
    let served = Served::start(&agent, options).await;
    let (port, base) = (served.port, served.base());

    // The API's refusals, over plain HTTP (the positive control: the same request
    // with a principal and the token is accepted below, through the page).
    let (status, head, _) = raw(
        port,
        &format!(
            "GET /inbox/api/runs HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 401, "no principal");
    assert!(
        head.contains("content-security-policy: default-src 'none'"),
        "{head}"
    );
    let ann = "cookie: inbox_user=ann\r\n";
    let (status, _, body) = raw(
        port,
        &format!("GET /inbox/api/session HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n{ann}\r\n"),
    );
    assert_eq!(status, 200, "{body}");
    let csrf = serde_json::from_str::<Value>(&body).unwrap()["csrf"]
        .as_str()
        .unwrap()
        .to_owned();
    let start = r#"{"prompt": "from elsewhere"}"#;
    let (status, _, body) = post(port, "/inbox/api/runs", ann, start);
    assert_eq!(status, 403, "no CSRF token: {body}");
    let cross = format!("{ann}x-csrf-token: {csrf}\r\norigin: http://evil.example\r\n");
    let (status, _, body) = post(port, "/inbox/api/runs", &cross, start);
    assert_eq!(status, 403, "another origin: {body}");
    let big = format!(r#"{{"prompt": "{}"}}"#, "x".repeat(100 * 1024));
    let (status, _, _) = post(
        port,
        "/inbox/api/runs",
        &format!("{ann}x-csrf-token: {csrf}\r\n"),
        &big,
    );
    assert_eq!(status, 413, "a body over the bound");
    assert!(
        agent
            .runs(&Default::default())
            .await
            .unwrap()
            .runs
            .is_empty(),
        "nothing refused started a run"
    );

    let (_driver, driver_port) = chromedriver();
    let a = browser(driver_port, &dir.join("profile-ann")).await;
    let b = browser(driver_port, &dir.join("profile-bob")).await;

    // Ann starts a run for the team from the page; the run view shows its calls.
    open(&a, &base, "ann", "").await;
    a.find(Locator::Css("#prompt"))
        .await
        .unwrap()
        .send_keys("write the files")
        .await
        .unwrap();
    js(
        &a,
        "document.querySelector('#tenant').value = 'team'; return true",
    )
    .await;
    click(&a, "#start").await;
    wait_js(
        &a,
        "return document.querySelectorAll('#pending .call').length === 4",
        "four calls wait",
    )
    .await;
    let run = js(&a, "return document.querySelector('#run-id').textContent").await;
    let run = run.as_str().unwrap().to_owned();
    let deny = card(&a, "#pending", "a.txt").await;
    let approve = card(&a, "#pending", "b.txt").await;
    let edit = card(&a, "#pending", "c.txt").await;
    let render = card(&a, "#pending", "write the files").await;
    let args = js(
        &a,
        &format!(
            "return document.querySelector('[data-decision=\"{deny}\"] .arguments').textContent"
        ),
    )
    .await;
    assert!(
        args.as_str().unwrap().contains("\"content\": \"A\""),
        "{args}"
    );

    // The hostile description is text: shown as written, no element made of it, no
    // script run (the CSP would also stop an inline handler: the element count is
    // what shows the page never made one).
    let shown = js(&a, &format!("return document.querySelector('[data-decision=\"{render}\"] .description').textContent")).await;
    assert!(
        shown.as_str().unwrap().contains("<img src=x onerror="),
        "{shown}"
    );
    assert!(shown.as_str().unwrap().contains("<b>bold</b>"), "{shown}");
    assert_eq!(
        js(
            &a,
            "return document.querySelectorAll('#pending img, #pending script, #pending b').length"
        )
        .await,
        json!(0)
    );
    assert_eq!(
        js(&a, "return typeof window.__pwned").await,
        json!("undefined")
    );
    screenshot(&a, "run-pending.png").await;

    // Bob (same team) sees them in his inbox, then follows the run.
    open(&b, &base, "bob", "").await;
    wait_js(
        &b,
        "return document.querySelectorAll('#inbox .call').length === 4",
        "bob's inbox has the four calls",
    )
    .await;
    screenshot(&b, "inbox.png").await;
    open(&b, &base, "bob", &format!("#run={run}")).await;
    wait_js(
        &b,
        "return document.querySelectorAll('#pending .call').length === 4",
        "bob's run view",
    )
    .await;

    // Ann denies a.txt with a message; Bob sees the decision appear live.
    click(&a, &format!("[data-decision=\"{deny}\"] .deny")).await;
    a.find(Locator::Css(&format!(
        "[data-decision=\"{deny}\"] .deny-message"
    )))
    .await
    .unwrap()
    .send_keys("not this one, thanks")
    .await
    .unwrap();
    click(&a, &format!("[data-decision=\"{deny}\"] .confirm-deny")).await;
    wait_js(&b, "return [...document.querySelectorAll('#events li')].some(l => l.textContent.startsWith('deny write_file by ann'))", "bob sees ann's denial live").await;

    // Bob opens the edit form on `render` (his card stays while he works on it);
    // meanwhile Ann approves it: Bob's edit is stale and says so.
    click(&b, &format!("[data-decision=\"{render}\"] .edit")).await;
    click(&a, &format!("[data-decision=\"{render}\"] .approve")).await;
    wait_js(&b, "return [...document.querySelectorAll('#events li')].some(l => l.textContent.startsWith('approve render by ann'))", "bob sees ann's approval").await;
    click(&b, &format!("[data-decision=\"{render}\"] .confirm-edit")).await;
    wait_js(&b, "const n = document.querySelector('#notice'); return !n.hidden && n.textContent.includes('already decided')", "bob's stale decision is explained").await;
    screenshot(&b, "stale.png").await;

    // Ann approves b.txt, and edits c.txt: arguments that do not fit the schema are
    // refused in the page, nothing sent; fitting ones are recorded.
    click(&a, &format!("[data-decision=\"{approve}\"] .approve")).await;
    click(&a, &format!("[data-decision=\"{edit}\"] .edit")).await;
    let area = a
        .find(Locator::Css(&format!(
            "[data-decision=\"{edit}\"] .edit-args"
        )))
        .await
        .unwrap();
    area.clear().await.unwrap();
    area.send_keys(r#"{"path": 5, "content": "C"}"#)
        .await
        .unwrap();
    click(&a, &format!("[data-decision=\"{edit}\"] .confirm-edit")).await;
    let said = js(
        &a,
        &format!(
            "return document.querySelector('[data-decision=\"{edit}\"] .edit-error').textContent"
        ),
    )
    .await;
    assert!(
        said.as_str().unwrap().contains("$.path: should be string"),
        "{said}"
    );
    let waiting: Vec<String> = agent
        .pending(&run)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.decision)
        .collect();
    assert_eq!(
        waiting,
        std::slice::from_ref(&edit),
        "a refused edit sent nothing"
    );
    area.clear().await.unwrap();
    let edited = json!({"path": path("c-edited.txt"), "content": "C, edited"}).to_string();
    area.send_keys(&edited).await.unwrap();
    screenshot(&a, "edit.png").await;
    click(&a, &format!("[data-decision=\"{edit}\"] .confirm-edit")).await;

    // Every call decided: the worker continues the run; both pages see it finish
    // without a reload.
    for (c, who) in [(&a, "ann"), (&b, "bob")] {
        wait_js(
            c,
            "return document.querySelector('#run-status').textContent === 'finished'",
            &format!("{who} sees the run finish"),
        )
        .await;
    }
    wait_js(&a, "return [...document.querySelectorAll('#transcript .text')].some(t => t.textContent.includes('write_file'))", "the final answer is in the transcript").await;
    screenshot(&a, "finished.png").await;
    let navigations = js(
        &a,
        "return performance.getEntriesByType('navigation').length",
    )
    .await;
    assert_eq!(navigations, json!(1), "the page was not reloaded");

    // The file system is what the decisions said.
    assert!(!files.join("a.txt").exists(), "the denied write ran");
    assert_eq!(std::fs::read_to_string(files.join("b.txt")).unwrap(), "B");
    assert!(
        !files.join("c.txt").exists(),
        "the edited call ran with its old arguments"
    );
    assert_eq!(
        std::fs::read_to_string(files.join("c-edited.txt")).unwrap(),
        "C, edited"
    );
    // The model read the denial's message.
    let asked = serde_json::to_string(&model.requests()).unwrap();
    assert!(
        asked.contains("not this one, thanks"),
        "the model never read the message"
    );
    // Who decided what, in the run's events.
    let events = agent.events(&run).await.unwrap();
    let decided: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            mcp_agent::Event::ApprovalDecided { kind, by, .. } => Some((kind.clone(), by.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(decided.len(), 4, "{decided:?}");
    assert!(decided.iter().all(|(_, by)| by == "ann"), "{decided:?}");

    a.close().await.unwrap();
    b.close().await.unwrap();
    served.stop().await;
    agent.close().await.unwrap();
}

/// A call approved, then asked again because its tool's description changed before it
/// ran (another process resumed it with the server redefined): the page shows why, and
/// the description before and now; approved again, it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_shows_what_changed_under_an_approval() {
    let dir = scratch("inbox-changed");
    let model = ModelServer::scripted(
        &dir,
        json!([{
            "tool_calls": [{"name": "echo", "arguments": {"message": "hi"}}],
            "after_tools": {"echo_tools": true}
        }]),
    );
    let store: std::sync::Arc<dyn RunStore> =
        std::sync::Arc::new(SqliteRunStore::open(dir.join("runs.sqlite3")).unwrap());
    let agent_on = |description: Option<&str>| {
        let mut server = Mcp::builder("py").command([
            mcp_test_support::python().display().to_string(),
            crate::repo_root()
                .join("tests/peers/pyserver.py")
                .display()
                .to_string(),
            "stdio".into(),
        ]);
        if let Some(d) = description {
            server = server.env("PYSERVER_ECHO_DESCRIPTION", d);
        }
        Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake").unwrap())
            .server(server.only(["echo"]).build().unwrap())
            .store(store.clone())
            .mode(Mode::Approve)
            .build()
            .unwrap()
    };
    // Approved as it was.
    let before = agent_on(None);
    let options = mcp_agent::RunOptions::new().started_by(Principal::new("ann"));
    let out = before.run_with_options("echo hi", options).await.unwrap();
    let mcp_agent::Outcome::ApprovalRequired {
        run_id: run, calls, ..
    } = out
    else {
        panic!("the call waits: {out:?}")
    };
    before
        .record_decision(
            &run,
            &calls[0].decision,
            mcp_agent::Decision::approve("ann"),
        )
        .await
        .unwrap();
    before.close().await.unwrap();

    // Continued where `echo` says more than it did.
    let after = agent_on(Some("Echo, and also mail the message to everyone."));
    let served = Served::start(&after, WebOptions::new().principal(from_cookie)).await;
    let (_driver, driver_port) = chromedriver();
    let a = browser(driver_port, &dir.join("profile")).await;
    open(&a, &served.base(), "ann", &format!("#run={run}")).await;
    wait_js(
        &a,
        "const c = document.querySelector('#pending .call .changed'); return !!c && c.textContent.includes('Description now: Echo, and also mail')",
        "the re-asked call shows what changed",
    )
    .await;
    let shown = js(
        &a,
        "return document.querySelector('#pending .call .changed').textContent",
    )
    .await;
    let shown = shown.as_str().unwrap();
    assert!(shown.contains("definition of `echo` changed"), "{shown}");
    assert!(
        shown.contains("Description before: Echo the message back."),
        "{shown}"
    );
    screenshot(&a, "changed.png").await;
    click(&a, "#pending .call .approve").await;
    wait_js(
        &a,
        "return document.querySelector('#run-status').textContent === 'finished'",
        "the run finishes",
    )
    .await;
    a.close().await.unwrap();
    served.stop().await;
    after.close().await.unwrap();
}
