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
    // Found by the `uri_template` fuzz target: iri-string panicked on a `%` followed
    // by a multi-byte character; such a template is refused.
    for bad in ["fg%aaaa%a\u{6e3}aap%p", "a%", "%g0", "x%4"] {
        let e = expand_template(bad, &[]).unwrap_err();
        assert!(e.to_string().contains("not a URI template"), "{e}");
    }
    assert!(expand_template("a%20b/{x}", &[("x", "1")]).is_ok());
    // …and on a value of a reserved expansion with a multi-byte character (`Õ`, or
    // one after a triplet): written in ASCII first, as the expansion would.
    let v = "yxf +,z#%fz#\u{6e3}%22";
    assert_eq!(
        expand_template("x{#v}", &[("v", v)]).unwrap(),
        "x#yxf%20+,z#%25fz#%DB%A3%22"
    );
    assert_eq!(
        expand_template("{+v}", &[("v", "%aa\u{51d}me")]).unwrap(),
        "%aa%D4%9Dme"
    );
    assert_eq!(
        expand_template("{+path}{g}", &[("path", "Õy"), ("g", "x")]).unwrap(),
        "%C3%95yx"
    );
    assert_eq!(
        expand_template("x{v}", &[("v", v)]).unwrap(),
        "xyxf%20%2B%2Cz%23%25fz%23%DB%A3%2522"
    );
    assert_eq!(
        expand_template("{+v}{v}", &[("v", "é%")]).unwrap(),
        "%C3%A9%25%C3%A9%25"
    );
    // RFC 6570's examples (section 3.2), string values.
    let vars = [
        ("var", "value"),
        ("hello", "Hello World!"),
        ("path", "/foo/bar"),
        ("empty", ""),
        ("x", "1024"),
        ("y", "768"),
    ];
    for (t, want) in [
        ("{var}", "value"),
        ("{hello}", "Hello%20World%21"),
        ("{+hello}", "Hello%20World!"),
        ("{+path}/here", "/foo/bar/here"),
        ("here?ref={+path}", "here?ref=/foo/bar"),
        ("X{#var}", "X#value"),
        ("{x,hello,y}", "1024,Hello%20World%21,768"),
        ("{+x,hello,y}", "1024,Hello%20World!,768"),
        ("{#path,x}/here", "#/foo/bar,1024/here"),
        ("X{.var}", "X.value"),
        ("X{.x,y}", "X.1024.768"),
        ("{/var}", "/value"),
        ("{/var,x}/here", "/value/1024/here"),
        ("{;x,y}", ";x=1024;y=768"),
        ("{;x,y,empty}", ";x=1024;y=768;empty"),
        ("{?x,y}", "?x=1024&y=768"),
        ("{?x,y,empty}", "?x=1024&y=768&empty="),
        ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
        ("{var:3}", "val"),
        ("{var:30}", "value"),
        ("{+path:6}/here", "/foo/b/here"),
        ("{undef}x{?undef}", "x"),
    ] {
        assert_eq!(expand_template(t, &vars).unwrap(), want, "{t}");
    }
    for bad in [
        "{",
        "}",
        "{var",
        "{=var}",
        "{var:0}",
        "{var:10000}",
        "{va r}",
        "{.}",
    ] {
        assert!(expand_template(bad, &vars).is_err(), "{bad}");
    }
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
