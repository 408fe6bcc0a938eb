//! One compile-fail case per diagnostic of `#[mcp(...)]`, and pass cases for every
//! setting. The snapshots the cases check against are the workspace's `.mcp/`.
//! Bless changed output with `TRYBUILD=overwrite cargo test -p mcp-macros --test ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
