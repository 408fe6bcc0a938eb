//! The gate never allows outside the policy: random modes, allow-lists, declarations
//! and names — near-misses included (case, spaces, a prefix, Unicode look-alikes and
//! invisible characters) — checked against the policy written out as a table.

use mcp_agent::gate::ToolFacts;
use mcp_agent::{Gate, Mode, Verdict};
use proptest::prelude::*;
use serde_json::json;

/// Names a policy may list, and the near-misses of them a server or model could use.
const NAMES: &[&str] = &[
    "read_file",
    "Read_file",
    "read_file ",
    " read_file",
    "read_fil",
    "read_file_",
    "fs_read_file",
    "rеad_file",         // Cyrillic е
    "read\u{200b}_file", // zero-width space
    "read_ﬁle",          // the ﬁ ligature
    "write_file",
    "delete_tree",
    "",
];

#[derive(Clone, Copy, Debug)]
enum Kind {
    ReadOnly,
    Approve,
    Auto,
    Ask(bool),
}

fn mode(kind: Kind) -> Mode {
    match kind {
        Kind::ReadOnly => Mode::ReadOnly,
        Kind::Approve => Mode::Approve,
        Kind::Auto => Mode::Auto,
        Kind::Ask(answer) => Mode::ask(move |_, _, _| async move { answer }),
    }
}

/// The policy, written out: what each mode does with a tool (docs/agent.md, "The gate").
fn expected(kind: Kind, allow: &[&str], tool: Option<(&str, bool, bool)>) -> Verdict {
    let Some((name, app_only, requires_approval)) = tool else {
        return Verdict::Deny(String::new());
    };
    if app_only {
        return Verdict::Deny(String::new());
    }
    // Listed means exactly, byte for byte.
    let listed = allow.iter().any(|a| a.as_bytes() == name.as_bytes());
    match kind {
        Kind::ReadOnly if !listed => Verdict::Deny(String::new()),
        Kind::ReadOnly | Kind::Approve | Kind::Auto if requires_approval => Verdict::Suspend,
        Kind::ReadOnly | Kind::Auto => Verdict::Allow,
        Kind::Approve if listed => Verdict::Allow,
        Kind::Approve => Verdict::Suspend,
        Kind::Ask(_) if listed && !requires_approval => Verdict::Allow,
        Kind::Ask(true) => Verdict::Allow,
        Kind::Ask(false) => Verdict::Deny(String::new()),
    }
}

fn same(a: &Verdict, b: &Verdict) -> bool {
    matches!(
        (a, b),
        (Verdict::Allow, Verdict::Allow)
            | (Verdict::Suspend, Verdict::Suspend)
            | (Verdict::Deny(_), Verdict::Deny(_))
    )
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::ReadOnly),
        Just(Kind::Approve),
        Just(Kind::Auto),
        any::<bool>().prop_map(Kind::Ask),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_gate_never_allows_outside_the_policy(
        kind in kind(),
        allow in proptest::sample::subsequence(NAMES.to_vec(), 0..4),
        called in proptest::sample::select(NAMES.to_vec()),
        known in any::<bool>(),
        app_only in any::<bool>(),
        requires_approval in any::<bool>(),
    ) {
        let gate = Gate::new(mode(kind), allow.iter().copied());
        let facts = ToolFacts {
            name: called.to_owned(),
            server: "fs".into(),
            app_only,
            requires_approval,
        };
        let tool = known.then_some(&facts);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let got = rt.block_on(gate.decide(called, tool, &json!({"path": "/"})));
        let want = expected(kind, &allow, known.then_some((called, app_only, requires_approval)));
        prop_assert!(
            same(&got, &want),
            "{kind:?} allow={allow:?} called={called:?} known={known} app_only={app_only} requires_approval={requires_approval}: got {got:?}, the policy says {want:?}"
        );
        // Whatever else, these never run without a person or the callback: an app-only
        // tool, an unknown one, one not listed in read-only mode.
        if got == Verdict::Allow {
            prop_assert!(known && !app_only);
            if matches!(kind, Kind::ReadOnly) {
                prop_assert!(allow.contains(&called));
            }
        }
    }
}
