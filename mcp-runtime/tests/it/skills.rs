//! The skills extension against a real skills server of our own
//! (tests/peers/skillserver.py, on PyPI `mcp` 2.3.0): honest, tampered-digest,
//! tampered-size, tampered-frontmatter, tampered supporting file, unlisted file,
//! over-limit and dynamic skills, in both eras. The recording transport shows what
//! reached the wire: nothing is fetched ahead of need, and nothing after a failed check.

use std::sync::{Arc, Mutex};

use mcp_runtime::{client::Era, client::ProtocolMode, skills::LoadOutcome, Client, StdioConfig};

use crate::support::{self, Log, Recording};

fn skillserver_argv() -> Vec<String> {
    vec![
        support::peers()
            .join("venv/bin/python")
            .display()
            .to_string(),
        support::repo_root()
            .join("tests/peers/skillserver.py")
            .display()
            .to_string(),
        "stdio".into(),
    ]
}

fn skillserver() -> StdioConfig {
    StdioConfig::from_argv(skillserver_argv())
        .unwrap()
        .name("skills")
}

fn client(era: Era, config: StdioConfig) -> (Client, Arc<Mutex<Log>>) {
    let (rec, log, _) = Recording::new(config);
    let mode = match era {
        Era::Modern => ProtocolMode::Auto,
        Era::Legacy => ProtocolMode::Legacy,
    };
    let c = Client::builder()
        .name("skills")
        .skills()
        .protocol(mode)
        .build(rec)
        .unwrap();
    (c, log)
}

/// `method uri` of every request sent after the session started.
fn sent(log: &Arc<Mutex<Log>>) -> Vec<String> {
    log.lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| !matches!(r.method.as_str(), "initialize" | "server/discover"))
        .map(|r| {
            let uri = r.params.get("uri").and_then(|u| u.as_str()).unwrap_or("");
            format!("{} {uri}", r.method).trim_end().to_owned()
        })
        .collect()
}

fn reads(log: &Arc<Mutex<Log>>) -> Vec<String> {
    sent(log)
        .into_iter()
        .filter_map(|s| s.strip_prefix("resources/read ").map(str::to_owned))
        .collect()
}

async fn skill(c: &Client, name: &str) -> mcp_runtime::skills::Skill {
    c.skills()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.uri() == format!("skill://{name}/SKILL.md"))
        .unwrap_or_else(|| panic!("{name} is not listed"))
}

async fn lazy_listing_and_honest_loading(era: Era) {
    let (c, log) = client(era, skillserver());
    assert!(c.skills_supported().await.unwrap());
    let skills = c.skills().await.unwrap();
    let names: Vec<&str> = skills.iter().map(|s| s.name()).collect();
    // Every page (3 a page), the invalid entry left out, the hidden skill not listed.
    assert_eq!(
        names,
        [
            "pdf-processing",
            "tampered-digest",
            "tampered-size",
            "tampered-frontmatter",
            "tampered-support",
            "unlisted",
            "too-many-files",
            "too-big",
            "dynamic-skill",
            "deep-skill"
        ]
    );
    assert_eq!(
        sent(&log),
        ["skills/list"; 4],
        "listing fetched nothing but the listing"
    );
    let pdf = &skills[0];
    assert_eq!(
        pdf.allowed_tools(),
        Some("Bash(python:*) Read extract_text")
    );

    let loaded = done(c.load_skill(pdf).await);
    assert!(loaded.instructions().contains("references/FORMS.md"));
    assert!(!loaded.instructions().starts_with("---"));
    assert_eq!(reads(&log), ["skill://pdf-processing/SKILL.md"]);
    let forms = done(loaded.read("references/FORMS.md").await);
    assert!(forms.text().unwrap().starts_with('#'));
    let logo = done(loaded.read("assets/logo.png").await);
    assert_eq!(logo.bytes().len(), 64);
    assert_eq!(logo.text(), None);
    // Verified files are cached while the entry names the same digest.
    done(loaded.read("references/FORMS.md").await);
    done(c.load_skill(pdf).await);
    assert_eq!(
        reads(&log),
        [
            "skill://pdf-processing/SKILL.md",
            "skill://pdf-processing/references/FORMS.md",
            "skill://pdf-processing/assets/logo.png"
        ]
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn lazy_listing_and_honest_loading_modern() {
    lazy_listing_and_honest_loading(Era::Modern).await;
}

#[tokio::test]
async fn lazy_listing_and_honest_loading_legacy() {
    lazy_listing_and_honest_loading(Era::Legacy).await;
}

/// Each tampering is caught by its own check; the supporting file is never read, and
/// the entry is refreshed with `skills/get`.
async fn tampered_skills_are_not_loaded(era: Era) {
    let (c, log) = client(era, skillserver());
    for (name, why) in [
        ("tampered-digest", "digest"),
        ("tampered-size", "bytes, the entry says"),
        ("tampered-frontmatter", "frontmatter"),
    ] {
        let s = skill(&c, name).await;
        let before = sent(&log).len();
        let o = c.load_skill(&s).await.unwrap();
        let text = o.to_string();
        assert!(
            text.contains(why) && text.contains("needs re-approval"),
            "{name}: {text}"
        );
        let LoadOutcome::Changed { refreshed, .. } = o else {
            panic!("{name}: {text}")
        };
        assert_eq!(refreshed.as_ref().map(|s| s.uri()), Some(s.uri()));
        let uri = format!("skill://{name}/SKILL.md");
        assert_eq!(
            sent(&log)[before..],
            [format!("resources/read {uri}"), format!("skills/get {uri}")],
            "{name}: nothing read after the failed check"
        );
    }
    assert!(!reads(&log).iter().any(|r| r.ends_with("FORMS.md")));
    c.close().await.unwrap();
}

#[tokio::test]
async fn tampered_skills_are_not_loaded_modern() {
    tampered_skills_are_not_loaded(Era::Modern).await;
}

#[tokio::test]
async fn tampered_skills_are_not_loaded_legacy() {
    tampered_skills_are_not_loaded(Era::Legacy).await;
}

#[tokio::test]
async fn a_tampered_or_unlisted_supporting_file_revokes_the_skill() {
    let (c, log) = client(Era::Modern, skillserver());
    let loaded = done(c.load_skill(&skill(&c, "tampered-support").await).await);
    let e = loaded.read("references/FORMS.md").await.unwrap();
    assert!(e.is_changed() && e.to_string().contains("digest"), "{e}");
    assert!(loaded.is_revoked());
    let n = sent(&log).len();
    let e = loaded.read("SKILL.md").await.unwrap();
    assert!(e.is_changed(), "{e}");
    assert_eq!(sent(&log).len(), n, "a revoked skill reads nothing");

    // A file the server serves but the entry does not list is refused locally; so is
    // any reference that leaves the skill. Each is tried on a fresh load (a refusal
    // revokes the loaded skill).
    let unlisted = skill(&c, "unlisted").await;
    let n = reads(&log).len();
    for path in ["scripts/secret.sh", "skill://unlisted/scripts/secret.sh"] {
        let loaded = done(c.load_skill(&unlisted).await);
        let e = loaded.read(path).await.unwrap();
        assert!(
            e.is_changed() && e.to_string().contains("is not listed"),
            "{path}: {e}"
        );
        assert!(loaded.is_revoked(), "{path}");
    }
    let loaded = done(c.load_skill(&unlisted).await);
    for path in [
        "../pdf-processing/SKILL.md",
        "skill://pdf-processing/SKILL.md",
        "/etc/passwd",
    ] {
        let e = loaded.read(path).await.unwrap_err();
        assert!(
            e.is_config() && e.to_string().contains("stay within"),
            "{path}: {e}"
        );
    }
    assert!(!loaded.is_revoked());
    done(loaded.read("references/FORMS.md").await);
    // The first load read SKILL.md (the later ones were served from the cache), then
    // the one listed file; nothing else reached the wire.
    assert_eq!(
        reads(&log)[n..],
        [
            "skill://unlisted/SKILL.md",
            "skill://unlisted/references/FORMS.md"
        ]
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn limits_dynamic_hidden_nested_and_directories() {
    let (c, log) = client(Era::Legacy, skillserver());
    for name in ["too-many-files", "too-big"] {
        let o = c.load_skill(&skill(&c, name).await).await.unwrap();
        assert!(o.is_declined(), "{name}: {o}");
    }
    assert!(reads(&log).is_empty(), "declined before any fetch");

    let dynamic = done(c.load_skill(&skill(&c, "dynamic-skill").await).await);
    assert!(dynamic.skill().is_dynamic() && dynamic.files().is_none());
    assert!(done(dynamic.read("notes.md").await).text().is_some());
    assert!(dynamic.read("../pdf-processing/SKILL.md").await.is_err());

    let hidden = c.skill("skill://hidden/SKILL.md").await.unwrap();
    done(c.load_skill(&hidden).await);
    let e = c.skill("skill://nope/SKILL.md").await.unwrap_err();
    assert!(e.is_not_found(), "{e}");

    let deep = done(
        c.load_skill(&skill(&c, "nested/prefix/deep-skill").await)
            .await,
    );
    assert_eq!(deep.skill().root(), "skill://nested/prefix/deep-skill");
    done(deep.read("references/GUIDE.md").await);

    let children = c.read_directory("skill://pdf-processing").await.unwrap();
    let dirs: Vec<&str> = children
        .iter()
        .filter(|r| r.mime_type.as_deref() == Some("inode/directory"))
        .map(|r| r.uri.as_str())
        .collect();
    assert_eq!(
        dirs,
        [
            "skill://pdf-processing/assets",
            "skill://pdf-processing/references"
        ]
    );
    c.close().await.unwrap();

    // Without `directoryRead` the method is never called.
    let (c, log) = client(
        Era::Modern,
        StdioConfig::from_argv(skillserver_argv())
            .unwrap()
            .env("SKILLSERVER_NO_DIRECTORY", "1"),
    );
    let e = c
        .read_directory("skill://pdf-processing")
        .await
        .unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    assert!(sent(&log).is_empty());
    c.close().await.unwrap();
}

#[tokio::test]
async fn servers_without_the_extension_are_not_asked() {
    let (c, log) = client(Era::Modern, support::pyserver());
    assert!(!c.skills_supported().await.unwrap());
    assert!(c.skills().await.unwrap_err().is_unsupported());
    assert!(!sent(&log).iter().any(|m| m.starts_with("skills/")));
    c.close().await.unwrap();
}

/// Over Streamable HTTP too (the 2026-07-28 era, JSON replies).
#[tokio::test]
async fn over_http() {
    let port = support::free_port();
    let mut argv = skillserver_argv();
    argv.pop();
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).args(["http", &port.to_string()]);
    let server = support::HttpServer::start(cmd, port);
    let c = Client::builder()
        .name("skills-http")
        .http(mcp_runtime::HttpConfig::new(server.url("/mcp")))
        .unwrap();
    let skills = c.skills().await.unwrap();
    let pdf = skills
        .iter()
        .find(|s| s.name() == "pdf-processing")
        .unwrap();
    let loaded = done(c.load_skill(pdf).await);
    done(loaded.read("references/FORMS.md").await);
    let evil = skills
        .iter()
        .find(|s| s.name() == "tampered-frontmatter")
        .unwrap();
    assert!(c.load_skill(evil).await.unwrap().is_changed());
    c.close().await.unwrap();
}

/// The skill or file of an outcome that must have loaded.
fn done<T>(r: mcp_runtime::Result<LoadOutcome<T>>) -> T {
    match r.unwrap() {
        LoadOutcome::Done(t) => t,
        not => panic!("not loaded: {not}"),
    }
}
