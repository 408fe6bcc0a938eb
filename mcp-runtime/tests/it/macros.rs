//! One compile-fail case per diagnostic of `#[mcp(...)]`, and pass cases for every
//! setting, compiled against this crate as users do (`mcp_runtime::mcp`). The snapshots
//! the cases check against are the workspace's `.mcp/`, named with `MCP_OFFLINE_DIR`:
//! trybuild compiles the cases as a workspace of their own (in `target/tests/trybuild`),
//! and the snapshot lookup never leaves a project. Bless changed output with
//! `TRYBUILD=overwrite cargo test -p mcp-runtime --test it -- --exact macros::ui`.
//!
//! They live here, not in `mcp-runtime-macros`: a dev-dependency of the macro crate on the
//! runtime would be a dependency circle, which `cargo package` cannot verify.

#[test]
fn ui() {
    // cargo, which trybuild runs, inherits it (nextest runs each test in a process of
    // its own, and no other test reads it).
    std::env::set_var(
        "MCP_OFFLINE_DIR",
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.mcp"),
    );
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
