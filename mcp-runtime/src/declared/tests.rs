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

/// The Debug of how a server is reached.
fn connect_debug(m: &Mcp) -> String {
    match &m.spec.connect {
        Connect::Stdio(c) => format!("{c:?}"),
        Connect::Http(c) => format!("{c:?}"),
        Connect::Custom(_) | Connect::Missing => String::new(),
    }
}

/// A stdio server's fingerprint covers its environment: names in clear, values only
/// keyed; a value computed at start counts by its name.
#[test]
fn the_fingerprint_covers_environment_values_keyed() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let secret = "postgres://app:hunter2@db-7.internal/prod";
    let server = |db: &str| {
        Mcp::builder("db")
            .command(["db-server", "--stdio"])
            .directory("/srv/db")
            .env("DATABASE_URL", db)
            .build()
            .unwrap()
    };
    let a = server(secret);
    assert_eq!(a.config_fingerprint(), server(secret).config_fingerprint());
    assert_eq!(a.config_fingerprint(), a.config_fingerprint_keyed(b""));
    let other = server("postgres://app:hunter2@db-8.internal/prod");
    assert_ne!(a.config_fingerprint(), other.config_fingerprint());
    assert_ne!(
        a.config_fingerprint_keyed(b"k1"),
        other.config_fingerprint_keyed(b"k1")
    );
    // Two keys, two fingerprints; one key, one fingerprint.
    assert_ne!(
        a.config_fingerprint_keyed(b"k1"),
        a.config_fingerprint_keyed(b"k2")
    );
    assert_eq!(
        a.config_fingerprint_keyed(b"k1"),
        server(secret).config_fingerprint_keyed(b"k1")
    );
    // The value is nowhere in clear.
    for shown in [
        a.config_fingerprint(),
        a.config_fingerprint_keyed(b"k1"),
        format!("{a:?}"),
        connect_debug(&a),
    ] {
        assert!(
            !shown.contains("hunter2") && !shown.contains("db-7"),
            "{shown}"
        );
    }
    assert!(a.config_fingerprint().starts_with("sha256:"));
    // The variable's name counts too, and so do the inherited ones.
    let renamed = Mcp::builder("db")
        .command(["db-server", "--stdio"])
        .directory("/srv/db")
        .env("DB_URL", secret)
        .build()
        .unwrap();
    assert_ne!(a.config_fingerprint(), renamed.config_fingerprint());
    let inheriting = |names: &[&str], all: bool| {
        let mut b = Mcp::builder("db")
            .command(["db-server", "--stdio"])
            .directory("/srv/db")
            .env("DATABASE_URL", secret)
            .inherit_env(names.iter().copied());
        if all {
            b = b.inherit_all_env();
        }
        b.build().unwrap().config_fingerprint()
    };
    assert_eq!(inheriting(&[], false), a.config_fingerprint());
    assert_ne!(inheriting(&["LANG"], false), a.config_fingerprint());
    assert_ne!(inheriting(&[], true), a.config_fingerprint());

    // A value computed at start: its name counts, not its value.
    let starts = Arc::new(AtomicUsize::new(0));
    let computed = |starts: Arc<AtomicUsize>| {
        Mcp::builder("db")
            .command(["db-server", "--stdio"])
            .env_with("TOKEN", move || {
                format!("t-{}", starts.fetch_add(1, Ordering::SeqCst))
            })
            .build()
            .unwrap()
    };
    let c = computed(starts.clone());
    let before = c.config_fingerprint();
    let other = computed(starts.clone());
    assert_eq!(before, other.config_fingerprint());
    assert_eq!(
        starts.load(Ordering::SeqCst),
        0,
        "a fingerprint runs nothing"
    );
    let fixed = Mcp::builder("db")
        .command(["db-server", "--stdio"])
        .env("TOKEN", "t-0")
        .build()
        .unwrap();
    assert_ne!(before, fixed.config_fingerprint(), "computed is not fixed");
    let unnamed = Mcp::builder("db")
        .command(["db-server", "--stdio"])
        .build()
        .unwrap();
    assert_ne!(before, unnamed.config_fingerprint());
}

/// An HTTP server's fingerprint covers its static headers (names in clear, values
/// keyed), its computed headers by name, and whether it has a bearer token — never
/// the token.
#[test]
fn the_fingerprint_covers_header_values_keyed_never_the_token() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let server = |tenant: &str, token: &str| {
        Mcp::builder("crm")
            .url("https://crm.example.com/mcp")
            .header("X-Tenant", tenant)
            .bearer_token(token)
            .build()
            .unwrap()
    };
    let a = server("acme-corp-tenant", "tok-1");
    assert_eq!(
        a.config_fingerprint(),
        server("acme-corp-tenant", "tok-1").config_fingerprint()
    );
    let other = server("globex-tenant", "tok-1");
    assert_ne!(a.config_fingerprint(), other.config_fingerprint());
    assert_ne!(
        a.config_fingerprint_keyed(b"k"),
        other.config_fingerprint_keyed(b"k")
    );
    assert_ne!(
        a.config_fingerprint_keyed(b"k1"),
        a.config_fingerprint_keyed(b"k2")
    );
    // The token rotates: not part of which server this is.
    assert_eq!(
        a.config_fingerprint(),
        server("acme-corp-tenant", "tok-2").config_fingerprint()
    );
    let tokenless = Mcp::builder("crm")
        .url("https://crm.example.com/mcp")
        .header("X-Tenant", "acme-corp-tenant")
        .build()
        .unwrap();
    assert_ne!(a.config_fingerprint(), tokenless.config_fingerprint());
    for shown in [
        a.config_fingerprint(),
        a.config_fingerprint_keyed(b"k"),
        format!("{a:?}"),
        connect_debug(&a),
    ] {
        assert!(
            !shown.contains("acme") && !shown.contains("tok-1"),
            "{shown}"
        );
    }
    // The query counts keyed (it may carry a tenant or a key), never in clear.
    let plain = Mcp::builder("crm")
        .url("https://crm.example.com/mcp")
        .build()
        .unwrap();
    let query = |q: &str| {
        Mcp::builder("crm")
            .url(format!("https://crm.example.com/mcp?tenant={q}"))
            .build()
            .unwrap()
            .config_fingerprint_keyed(b"k")
    };
    assert_eq!(query("initech"), query("initech"));
    assert_ne!(query("initech"), query("umbrella"));
    assert_ne!(query("initech"), plain.config_fingerprint_keyed(b"k"));
    assert!(!query("initech").contains("initech"));
    // A computed header: its name counts, not its value.
    let calls = Arc::new(AtomicUsize::new(0));
    let computed = |calls: Arc<AtomicUsize>| {
        Mcp::builder("crm")
            .url("https://crm.example.com/mcp")
            .header_with("X-Request-Tag", move || {
                Some(format!("r-{}", calls.fetch_add(1, Ordering::SeqCst)))
            })
            .build()
            .unwrap()
    };
    let c = computed(calls.clone());
    assert_eq!(
        c.config_fingerprint(),
        computed(calls.clone()).config_fingerprint()
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "a fingerprint runs nothing"
    );
    assert_ne!(c.config_fingerprint(), plain.config_fingerprint());
    let fixed = Mcp::builder("crm")
        .url("https://crm.example.com/mcp")
        .header("X-Request-Tag", "r-0")
        .build()
        .unwrap();
    assert_ne!(c.config_fingerprint(), fixed.config_fingerprint());
}

/// A tool's definition digest covers its title, output schema and the arguments its
/// declaration fixes (a value computed per call by its name only).
#[test]
fn the_definition_digest_covers_title_output_schema_and_fixed_arguments() {
    use std::sync::atomic::{AtomicI64, Ordering};
    let tool = |title: Option<&str>, output: Option<Value>| {
        let mut t: Tool = serde_json::from_value(serde_json::json!({
            "name": "query",
            "description": "Runs a query",
            "inputSchema": {
                "type": "object",
                "properties": {"sql": {"type": "string"}, "database": {"type": "string"}},
            },
        }))
        .unwrap();
        t.title = title.map(str::to_owned);
        t.output_schema = output;
        t
    };
    let schema = serde_json::json!({"type": "object", "properties": {"rows": {"type": "array"}}});
    let digest = |t: Tool| McpTool::from_definition(t).definition_digest();
    let base = digest(tool(Some("Query"), Some(schema.clone())));
    assert_eq!(base, digest(tool(Some("Query"), Some(schema.clone()))));
    assert_ne!(
        base,
        digest(tool(Some("Delete everything"), Some(schema.clone())))
    );
    assert_ne!(base, digest(tool(None, Some(schema.clone()))));
    assert_ne!(base, digest(tool(Some("Query"), None)));
    assert_ne!(
        base,
        digest(tool(
            Some("Query"),
            Some(serde_json::json!({"type": "object"}))
        ))
    );

    // Shaped by a declaration with a fixed argument.
    let shaped = |shape: ToolShape| {
        let m = Mcp::builder("db")
            .command(["db-server"])
            .tool(shape)
            .build()
            .unwrap();
        let tools = m.shape(vec![tool(Some("Query"), None)]).unwrap();
        assert_eq!(tools.len(), 1);
        tools[0].definition_digest()
    };
    let prod = shaped(ToolShape::new("query").fixed_argument("database", "prod"));
    assert_eq!(
        prod,
        shaped(ToolShape::new("query").fixed_argument("database", "prod"))
    );
    assert_ne!(
        prod,
        shaped(ToolShape::new("query").fixed_argument("database", "staging"))
    );
    assert_ne!(
        prod,
        shaped(ToolShape::new("query").fixed_argument("sql", "prod"))
    );
    // A value computed per call counts by its name only, and is not computed.
    let n = Arc::new(AtomicI64::new(0));
    let computed = |n: Arc<AtomicI64>| {
        shaped(
            ToolShape::new("query").fixed_argument_with("database", move || {
                Value::from(n.fetch_add(1, Ordering::SeqCst))
            }),
        )
    };
    let first = computed(n.clone());
    assert_eq!(first, computed(n.clone()));
    assert_eq!(n.load(Ordering::SeqCst), 0, "a digest runs nothing");
    assert_ne!(first, prod);
    assert_ne!(
        first,
        shaped(ToolShape::new("query").fixed_argument("database", "computed"))
    );
    // Without a fixed argument the shaped tool's schema keeps `database`: another
    // digest again.
    assert_ne!(prod, shaped(ToolShape::new("query")));
    // The digest stays the same after the handle is gone.
    let m = Mcp::builder("db")
        .command(["db-server"])
        .tool(ToolShape::new("query").fixed_argument("database", "prod"))
        .build()
        .unwrap();
    let t = m.shape(vec![tool(Some("Query"), None)]).unwrap().remove(0);
    drop(m);
    assert_eq!(t.definition_digest(), prod);
}
