//! Every MCP tool call an agent's model asks for goes through the gate, and the gate
//! fails closed.
//!
//! | mode | a tool in the allow-list | any other tool |
//! | --- | --- | --- |
//! | [`Mode::ReadOnly`] (default) | allowed | denied |
//! | [`Mode::Ask`] | allowed | the ask callback decides (server, tool, arguments) |
//! | [`Mode::Approve`] | allowed (pre-approved) | the run suspends for a person's decision |
//! | [`Mode::Auto`] | allowed | allowed |
//!
//! On top of the mode: a tool its declaration marks `requires_approval` needs approval
//! in every mode (`Auto` included; in `Ask` the callback is the approval); a tool only
//! an MCP App may call (visibility without `"model"`) is never offered and always
//! denied; a name the model invents is denied. The allow-list matches exact names only,
//! and defaults to empty: a misconfigured agent denies everything. Tools the mode can
//! never allow are not advertised to the model at all.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use mcp_runtime::BoxFuture;
use serde_json::Value;

type AskFn = Arc<dyn Fn(&str, &str, &Value) -> BoxFuture<'static, Asked> + Send + Sync>;

/// What a [`Mode::Ask`] callback decides of a call: the whole of a person's decision.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Asked {
    /// Run it.
    Allow,
    /// Do not run it; the model reads the message, when there is one.
    Deny(Option<String>),
    /// Run it with these arguments instead (checked against the tool's schema first;
    /// the model's arguments are not sent).
    Edit(Value),
}

/// How an agent treats MCP tool calls.
#[derive(Clone, Default)]
pub enum Mode {
    /// Only the tools in the allow-list (the default).
    #[default]
    ReadOnly,
    /// Allow-listed tools, and whatever the callback allows (given the server, the tool
    /// and the arguments).
    Ask(AskFn),
    /// Allow-listed tools are pre-approved; any other suspends the run until a person
    /// decides ([`Agent::resume`](crate::Agent::resume)).
    Approve,
    /// Every tool.
    Auto,
}

impl Mode {
    /// [`Mode::Ask`] with this callback.
    pub fn ask<F, Fut>(decide: F) -> Mode
    where
        F: Fn(&str, &str, &Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = bool> + Send + 'static,
    {
        let decide = Arc::new(decide);
        Mode::Ask(Arc::new(move |s, t, a| {
            let yes = decide(s, t, a);
            Box::pin(async move {
                if yes.await {
                    Asked::Allow
                } else {
                    Asked::Deny(None)
                }
            })
        }))
    }

    /// [`Mode::Ask`] with a callback that decides as a person would: allow, deny with
    /// a message for the model, or edit the arguments ([`Asked`]).
    pub fn ask_decision<F, Fut>(decide: F) -> Mode
    where
        F: Fn(&str, &str, &Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Asked> + Send + 'static,
    {
        Mode::Ask(Arc::new(move |s, t, a| Box::pin(decide(s, t, a))))
    }

    /// The mode's name: `read_only`, `ask`, `approve` or `auto`.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::ReadOnly => "read_only",
            Mode::Ask(_) => "ask",
            Mode::Approve => "approve",
            Mode::Auto => "auto",
        }
    }

    /// How much the mode lets run without a person: `read_only` < `approve` (a person
    /// says yes) < `ask` (code says yes) < `auto`.
    fn rank(name: &str) -> u8 {
        match name {
            "read_only" => 0,
            "approve" => 1,
            "ask" => 2,
            _ => 3,
        }
    }
}

/// A permission mode's name that is not one (see [`Mode`]'s `FromStr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseModeError(String);

impl fmt::Display for ParseModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseModeError {}

/// The mode by its name: `read_only`, `approve`, `auto` (`ask` needs a callback:
/// [`Mode::ask`]).
impl std::str::FromStr for Mode {
    type Err = ParseModeError;

    fn from_str(name: &str) -> Result<Mode, ParseModeError> {
        match name {
            "read_only" => Ok(Mode::ReadOnly),
            "approve" => Ok(Mode::Approve),
            "auto" => Ok(Mode::Auto),
            "ask" => Err(ParseModeError(
                "the `ask` mode needs a callback: use Mode::ask(|server, tool, args| …)".into(),
            )),
            other => Err(ParseModeError(format!(
                "unknown permission mode `{other}`: use read_only, ask, approve or auto"
            ))),
        }
    }
}

impl fmt::Debug for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::ReadOnly => "ReadOnly",
            Mode::Ask(_) => "Ask",
            Mode::Approve => "Approve",
            Mode::Auto => "Auto",
        })
    }
}

/// What the gate knows of a tool.
#[derive(Clone, Debug)]
pub struct ToolFacts {
    /// Its model-facing name.
    pub name: String,
    /// The server it belongs to.
    pub server: String,
    /// Only an MCP App may call it.
    pub app_only: bool,
    /// Its declaration asks for a person's approval of this call.
    pub requires_approval: bool,
}

/// The gate's answer for one call.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Do not run it; the model gets this as an error result.
    Deny(String),
    /// A person must decide: the run suspends.
    Suspend,
    /// Run it with these arguments instead: a [`Mode::ask_decision`] callback edited
    /// them.
    AllowEdited(Value),
}

/// The permission mode and the allow-list.
#[derive(Clone, Debug, Default)]
pub struct Gate {
    mode: Mode,
    allow: BTreeSet<String>,
}

impl Gate {
    /// A gate with this mode and allow-list (exact names).
    pub fn new<I, S>(mode: Mode, allow: I) -> Gate
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Gate {
            mode,
            allow: allow.into_iter().map(Into::into).collect(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The allow-list.
    pub fn allowed(&self) -> impl Iterator<Item = &str> {
        self.allow.iter().map(String::as_str)
    }

    /// How this gate would allow more than a gate of mode `mode` (by name) with
    /// allow-list `allow`: one line per difference, empty when it allows nothing more
    /// (it is as tight or tighter).
    pub fn looser_than(&self, mode: &str, allow: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        if Mode::rank(self.mode.name()) > Mode::rank(mode) {
            out.push(format!(
                "mode `{}` allows more than `{mode}`",
                self.mode.name()
            ));
        }
        let extra: Vec<&str> = self
            .allow
            .iter()
            .filter(|n| !allow.contains(n))
            .map(String::as_str)
            .collect();
        if !extra.is_empty() {
            out.push(format!("the allow-list adds {extra:?}"));
        }
        out
    }

    /// Whether the model is offered this tool: only tools the mode can ever allow.
    pub fn advertised(&self, tool: &ToolFacts) -> bool {
        if tool.app_only {
            return false;
        }
        match self.mode {
            Mode::ReadOnly => self.allow.contains(&tool.name),
            Mode::Ask(_) | Mode::Approve | Mode::Auto => true,
        }
    }

    /// Decides one call. `tool` is `None` for a name no attached server offers.
    pub async fn decide(&self, name: &str, tool: Option<&ToolFacts>, arguments: &Value) -> Verdict {
        let Some(tool) = tool else {
            return Verdict::Deny(format!("there is no tool `{name}`"));
        };
        if tool.app_only {
            return Verdict::Deny(format!(
                "`{name}` may only be called from its app, not by a model"
            ));
        }
        let listed = self.allow.contains(&tool.name);
        match &self.mode {
            Mode::ReadOnly if !listed => Verdict::Deny(format!(
                "`{name}` is not allowed (read-only mode allows only the tools in the allow-list)"
            )),
            Mode::ReadOnly | Mode::Approve | Mode::Auto if tool.requires_approval => {
                Verdict::Suspend
            }
            Mode::ReadOnly | Mode::Auto => Verdict::Allow,
            Mode::Approve if listed => Verdict::Allow,
            Mode::Approve => Verdict::Suspend,
            Mode::Ask(_) if listed && !tool.requires_approval => Verdict::Allow,
            Mode::Ask(decide) => match decide(&tool.server, &tool.name, arguments).await {
                Asked::Allow => Verdict::Allow,
                Asked::Deny(None) => Verdict::Deny(format!("`{name}` was not allowed")),
                Asked::Deny(Some(why)) => Verdict::Deny(format!("`{name}` was not allowed: {why}")),
                Asked::Edit(arguments) => Verdict::AllowEdited(arguments),
            },
        }
    }

    /// Whether loading a skill can ever be allowed without an approval given in
    /// advance ([`SkillApproval`](crate::SkillApproval)): in every mode but
    /// [`Mode::ReadOnly`].
    pub fn loads_skills(&self) -> bool {
        !matches!(self.mode, Mode::ReadOnly)
    }

    /// Decides loading the skill `skill` of `server`, which no approval covers.
    /// `tool` is the name the model loads skills with and `shown` what a person or the
    /// ask callback sees of the skill (its id, URI, fingerprint, `allowed-tools`):
    /// [`Mode::Auto`] loads it, [`Mode::Approve`] suspends for a person,
    /// [`Mode::Ask`]'s callback decides (given `server`, `tool`, `shown`), and
    /// [`Mode::ReadOnly`] denies it. The allow-list grants no skill.
    pub async fn decide_skill(
        &self,
        server: &str,
        tool: &str,
        skill: &str,
        shown: &Value,
    ) -> Verdict {
        match &self.mode {
            Mode::Auto => Verdict::Allow,
            Mode::Approve => Verdict::Suspend,
            Mode::Ask(decide) => match decide(server, tool, shown).await {
                Asked::Allow => Verdict::Allow,
                Asked::Deny(why) => Verdict::Deny(match why {
                    Some(why) => format!("loading skill `{skill}` was not allowed: {why}"),
                    None => format!("loading skill `{skill}` was not allowed"),
                }),
                // There is nothing to edit in loading a skill.
                Asked::Edit(_) => Verdict::Deny(format!(
                    "loading skill `{skill}` was not allowed (an edit is no decision on a skill)"
                )),
            },
            Mode::ReadOnly => Verdict::Deny(format!(
                "skill `{skill}` is not approved (read-only mode loads only skills approved with AgentBuilder::approve_skill, for their current files)"
            )),
        }
    }

    /// Decides a call of the allow-listed tool `name` whose pinned definition or
    /// server changed (`reason` says how): the allow-list no longer allows it alone.
    /// [`Mode::Approve`] asks a person; every other mode denies it.
    pub fn decide_unpinned(&self, name: &str, reason: &str) -> Verdict {
        match self.mode {
            Mode::Approve => Verdict::Suspend,
            _ => Verdict::Deny(format!("`{name}` is not run: {reason}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(name: &str, app_only: bool, requires_approval: bool) -> ToolFacts {
        ToolFacts {
            name: name.into(),
            server: "fs".into(),
            app_only,
            requires_approval,
        }
    }

    /// Every cell: mode × in/out of the allow-list × requires_approval × app-only ×
    /// offered/invented name. Nothing is allowed that the table does not allow.
    #[tokio::test]
    async fn the_gate_fails_closed_in_every_cell() {
        let modes = || {
            vec![
                ("read_only", Mode::ReadOnly),
                ("ask-yes", Mode::ask(|_, _, _| async { true })),
                ("ask-no", Mode::ask(|_, _, _| async { false })),
                ("approve", Mode::Approve),
                ("auto", Mode::Auto),
            ]
        };
        for (mode_name, mode) in modes() {
            let gate = Gate::new(mode, ["listed"]);
            for listed in [true, false] {
                for approval in [true, false] {
                    for app_only in [true, false] {
                        let name = if listed { "listed" } else { "other" };
                        let tool = facts(name, app_only, approval);
                        let got = gate.decide(name, Some(&tool), &json!({})).await;
                        let want = match (mode_name, listed, approval, app_only) {
                            (_, _, _, true) => "deny",
                            ("read_only", false, _, _) => "deny",
                            ("read_only", true, true, _) => "suspend",
                            ("read_only", true, false, _) => "allow",
                            ("ask-yes", true, false, _) => "allow",
                            ("ask-yes", _, _, _) => "allow",
                            ("ask-no", true, false, _) => "allow",
                            ("ask-no", _, _, _) => "deny",
                            ("approve", _, true, _) => "suspend",
                            ("approve", true, false, _) => "allow",
                            ("approve", false, false, _) => "suspend",
                            ("auto", _, true, _) => "suspend",
                            ("auto", _, false, _) => "allow",
                            _ => unreachable!(),
                        };
                        let got_name = match got {
                            Verdict::Allow => "allow",
                            Verdict::Deny(_) => "deny",
                            Verdict::Suspend => "suspend",
                            Verdict::AllowEdited(_) => "allow edited",
                        };
                        assert_eq!(
                            got_name, want,
                            "{mode_name}, listed {listed}, requires approval {approval}, app-only {app_only}"
                        );
                        // Advertised only when the mode can ever allow it.
                        let advertised = gate.advertised(&tool);
                        let can = !app_only && (mode_name != "read_only" || listed);
                        assert_eq!(advertised, can, "{mode_name} {name} app-only {app_only}");
                    }
                }
            }
            // A name no server offers: denied, whatever the mode.
            assert!(matches!(
                gate.decide("invented", None, &json!({})).await,
                Verdict::Deny(_)
            ));
        }
    }

    #[tokio::test]
    async fn the_default_gate_denies_everything() {
        let gate = Gate::default();
        let tool = facts("read_file", false, false);
        assert!(!gate.advertised(&tool));
        assert!(matches!(
            gate.decide("read_file", Some(&tool), &json!({})).await,
            Verdict::Deny(_)
        ));
    }

    #[tokio::test]
    async fn the_ask_callback_sees_server_tool_and_arguments() {
        let gate = Gate::new(
            Mode::ask(|server, tool, args| {
                let ok = server == "fs" && tool == "write_file" && args["path"] == "/tmp/x";
                async move { ok }
            }),
            Vec::<String>::new(),
        );
        let tool = facts("write_file", false, false);
        assert_eq!(
            gate.decide("write_file", Some(&tool), &json!({"path": "/tmp/x"}))
                .await,
            Verdict::Allow
        );
        assert!(matches!(
            gate.decide("write_file", Some(&tool), &json!({"path": "/etc/x"}))
                .await,
            Verdict::Deny(_)
        ));
    }

    #[test]
    fn a_tighter_gate_is_not_looser() {
        let allow = ["read".to_owned(), "list".to_owned()];
        let gate = |m: Mode, a: &[&str]| Gate::new(m, a.iter().copied());
        assert!(gate(Mode::Approve, &["read"])
            .looser_than("approve", &allow)
            .is_empty());
        assert!(gate(Mode::ReadOnly, &[])
            .looser_than("auto", &allow)
            .is_empty());
        let e = gate(Mode::Auto, &["read", "write"]).looser_than("approve", &allow);
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].contains("auto") && e[1].contains("write"), "{e:?}");
        assert!(!gate(Mode::ask(|_, _, _| async { true }), &[])
            .looser_than("approve", &allow)
            .is_empty());
        assert!(gate(Mode::Approve, &[])
            .looser_than("ask", &allow)
            .is_empty());
    }

    #[tokio::test]
    async fn the_gate_decides_skills_by_its_mode() {
        let shown = json!({"skill": "fs:skills/pdf"});
        let cases = vec![
            ("read_only", Mode::ReadOnly, "deny"),
            (
                "ask-yes",
                Mode::ask(|s, t, a| {
                    let ok = s == "fs" && t == "read_skill" && a["skill"] == "fs:skills/pdf";
                    async move { ok }
                }),
                "allow",
            ),
            ("ask-no", Mode::ask(|_, _, _| async { false }), "deny"),
            ("approve", Mode::Approve, "suspend"),
            ("auto", Mode::Auto, "allow"),
        ];
        for (name, mode, want) in cases {
            // The allow-list grants no skill.
            let gate = Gate::new(mode, ["read_skill", "pdf"]);
            let got = match gate.decide_skill("fs", "read_skill", "pdf", &shown).await {
                Verdict::Allow => "allow",
                Verdict::Deny(_) => "deny",
                Verdict::Suspend => "suspend",
                Verdict::AllowEdited(_) => "allow edited",
            };
            assert_eq!(got, want, "{name}");
            assert_eq!(gate.loads_skills(), name != "read_only", "{name}");
        }
    }

    #[test]
    fn a_changed_pin_asks_a_person_only_in_approve_mode() {
        assert_eq!(
            Gate::new(Mode::Approve, ["t"]).decide_unpinned("t", "changed"),
            Verdict::Suspend
        );
        for mode in [
            Mode::ReadOnly,
            Mode::Auto,
            Mode::ask(|_, _, _| async { true }),
        ] {
            let v = Gate::new(mode, ["t"]).decide_unpinned("t", "its definition changed");
            assert!(
                matches!(&v, Verdict::Deny(why) if why.contains("its definition changed")),
                "{v:?}"
            );
        }
    }

    #[test]
    fn modes_by_name() {
        assert!(matches!("read_only".parse::<Mode>(), Ok(Mode::ReadOnly)));
        assert!(matches!("approve".parse::<Mode>(), Ok(Mode::Approve)));
        assert!("ask".parse::<Mode>().is_err());
        assert!("yolo"
            .parse::<Mode>()
            .unwrap_err()
            .to_string()
            .contains("read_only"));
    }
}
