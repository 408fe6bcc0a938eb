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
    let e = Mcp::builder("x")
        .command(["echo"])
        .extension("audit", Value::Null)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("vendor prefix"), "{e}");
}
