use super::*;

#[test]
fn templates_expand() {
    assert_eq!(
        expand_template("file:///{path}", &[("path", "Gemfile")]).unwrap(),
        "file:///Gemfile"
    );
    assert_eq!(
        expand_template("demo://r/{id}{?q}", &[("id", "7"), ("q", "a b")]).unwrap(),
        "demo://r/7?q=a%20b"
    );
}

#[test]
fn suggestions() {
    assert_eq!(
        did_you_mean("list_isues", ["list_issues", "get_issue"]),
        Some("list_issues")
    );
    assert_eq!(did_you_mean("zzz", ["list_issues"]), None);
}

#[test]
fn bad_declarations_fail_to_build() {
    let e = Mcp::builder("x").build().unwrap_err();
    assert!(e.to_string().contains("no `url`"), "{e}");
    let e = Mcp::builder("x")
        .url("http://example.com/mcp")
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("https://"), "{e}");
    assert_eq!(
        e.to_string().matches("configuration error").count(),
        1,
        "one prefix: {e}"
    );
    let e = Mcp::builder("x")
        .command(["echo"])
        .extension("audit", Value::Null)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("vendor prefix"), "{e}");
}

#[test]
fn the_committed_snapshots_read_back_byte_for_byte() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.mcp");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue; // the index
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let s = crate::snapshot::Snapshot::parse(&text).unwrap();
        assert_eq!(s.to_json(), text, "{}", path.display());
    }
}

/// A setting of one kind of connection on another is a configuration error, named.
#[test]
fn settings_that_cannot_apply_are_errors() {
    let e = Mcp::builder("x")
        .command(["echo"])
        .header("X-Team", "core")
        .bearer_token("t")
        .build()
        .unwrap_err();
    let text = e.to_string();
    assert!(e.is_config(), "{e}");
    assert!(
        text.contains("`header` applies to a `url` server only"),
        "{e}"
    );
    assert!(
        text.contains("`bearer_token` applies to a `url` server only"),
        "{e}"
    );
    let e = Mcp::builder("x")
        .url("https://example.com/mcp")
        .directory("/tmp")
        .env("A", "b")
        .build()
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("`directory` applies to a `command` server only"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("`env` applies to a `command` server only"),
        "{e}"
    );
    // The right settings on the right servers build.
    Mcp::builder("x")
        .command(["echo"])
        .directory("/tmp")
        .env("A", "b")
        .build()
        .unwrap();
    Mcp::builder("x")
        .url("https://example.com/mcp")
        .header("X-Team", "core")
        .bearer_token("t")
        .build()
        .unwrap();
}
