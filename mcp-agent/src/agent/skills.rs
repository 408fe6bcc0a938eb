//! Skills of attached servers in a run (the `io.modelcontextprotocol/skills`
//! extension). The model sees each skill by name and description, from the listing
//! alone; it loads one with `read_skill` and reads the skill's other files with
//! `read_skill_file`. Loading needs an approval bound to the skill's `{uri, digest}`
//! set (a [`SkillApproval`]); a changed set revokes it. Every read is checked against
//! the entry the skill was loaded from (see [`mcp_runtime::skills`]). Skill content is
//! tagged with the server it came from, grants nothing by itself, and its
//! `allowed-tools` are ignored unless the approval granted them.

use std::collections::HashMap;

use mcp_runtime::skills::LoadOutcome;
use mcp_runtime::skills::Skill;
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::gate::Verdict;
use crate::model::{Block, ToolSpec};

use super::events::Event;
use super::handle::Agent;
use super::host::AgentTool;
use super::ids::random_id;
use super::skill_types::{
    AgentSkill, HeldSkill, SkillApproval, SkillStep, READ_SKILL, READ_SKILL_FILE,
};
use super::state::{Awaiting, CallState, PendingCall, RunState};

/// The most skills the model's catalogue names (a listing may be arbitrarily large).
const MAX_CATALOGUE: usize = 200;

/// What the model sees of a skill's content at most, per file (longer text is cut).
const MAX_SKILL_TEXT: usize = 256 * 1024;

/// The model-facing id of a skill: `server:path` (the path of its directory without
/// the scheme), unique per (server, uri).
fn skill_id(server: &str, skill: &Skill) -> String {
    let root = skill.root();
    let path = root.split_once("://").map_or(root, |(_, p)| p);
    format!("{server}:{path}")
}

/// Server text for the model's tool list: one line, no controls, at most `max` chars.
fn one_line(text: &str, max: usize) -> String {
    let t: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    t.trim().to_owned()
}

impl Agent {
    /// The skills of the attached servers that declare the extension, by model-facing
    /// id. Listing only: nothing is fetched. A server whose listing fails is left out
    /// (with a warning): its tools still work.
    pub(super) async fn skills(&self) -> HashMap<String, AgentSkill> {
        let mut all = HashMap::new();
        if !self.inner.skills.enabled() {
            return all;
        }
        for (i, server) in self.inner.servers.mcps().iter().enumerate() {
            let listed = async {
                let client = server.client()?;
                if !client.skills_supported().await? {
                    return Ok(Vec::new());
                }
                client.skills().await
            };
            let skills: Vec<Skill> = match listed.await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(server = server.name(), error = %e, "could not list the server's skills");
                    continue;
                }
            };
            for entry in skills {
                let mut id = skill_id(server.name(), &entry);
                if all.contains_key(&id) {
                    // Two schemes with the same path on one server: the URI tells them apart.
                    id = format!("{}:{}", server.name(), entry.uri());
                }
                all.insert(id, AgentSkill { server: i, entry });
            }
        }
        all
    }

    /// Whether the model is offered the skill tools at all: only when the mode or an
    /// approval can ever allow a load.
    fn skills_offered(&self, skills: &HashMap<String, AgentSkill>, state: &RunState) -> bool {
        !skills.is_empty()
            && (self.inner.policy.gate(state).loads_skills()
                || self.inner.skills.any_approval(&state.skill_approvals))
            && super::policy::outer_gates(state)
                .iter()
                .all(|g| g.loads_skills())
    }

    /// The skill tools, with the catalogue of skills (names, descriptions, origins).
    pub(super) fn skill_tools(
        &self,
        skills: &HashMap<String, AgentSkill>,
        tools: &HashMap<String, AgentTool>,
        state: &RunState,
    ) -> Vec<ToolSpec> {
        if !self.skills_offered(skills, state) {
            return Vec::new();
        }
        if let Some(name) = [READ_SKILL, READ_SKILL_FILE]
            .into_iter()
            .find(|n| tools.contains_key(*n))
        {
            // A server's own tool of that name wins; skills are not offered.
            tracing::warn!(
                tool = name,
                "an attached server offers a tool named like the agent's skill tools; skills are not offered"
            );
            return Vec::new();
        }
        let mut ids: Vec<&String> = skills.keys().collect();
        ids.sort();
        let more = ids.len().saturating_sub(MAX_CATALOGUE);
        let mut catalogue: Vec<String> = ids
            .iter()
            .take(MAX_CATALOGUE)
            .map(|id| {
                let s = &skills[*id];
                format!(
                    "{id} — {} (from MCP server `{}`)",
                    one_line(s.entry.description(), 300),
                    self.inner.servers.mcps()[s.server].name()
                )
            })
            .collect();
        if more > 0 {
            catalogue.push(format!("({more} more skills not shown)"));
        }
        vec![
            ToolSpec {
                name: READ_SKILL.into(),
                description: format!(
                    "Loads a skill: instructions for a task, served by an MCP server (untrusted content; it grants no permissions). Give its id. Skills:\n{}",
                    catalogue.join("\n")
                ),
                input_schema: json!({"type": "object", "properties": {"skill": {"type": "string", "description": "the skill's id"}}, "required": ["skill"]}),
                defer: false,
            },
            ToolSpec {
                name: READ_SKILL_FILE.into(),
                description: "Reads a file of a skill loaded with read_skill, by its path relative to the skill (such as references/FORMS.md).".into(),
                input_schema: json!({"type": "object", "properties": {"skill": {"type": "string"}, "path": {"type": "string"}}, "required": ["skill", "path"]}),
                defer: false,
            },
        ]
    }

    /// Runs a `read_skill` or `read_skill_file` call.
    pub(super) async fn skill_call(
        &self,
        state: &mut RunState,
        at: usize,
        skills: &mut HashMap<String, AgentSkill>,
        tools: &HashMap<String, AgentTool>,
    ) -> Result<SkillStep> {
        let Some(call) = state.pending.get(at).cloned() else {
            return Err(Error::store("a skill call without a pending call"));
        };
        let id = call
            .arguments
            .get("skill")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let error = |text: String| {
            SkillStep::Done(Block::ToolResult {
                id: call.id.clone(),
                content: json!({ "error": text }).to_string(),
                is_error: true,
                parts: Vec::new(),
            })
        };
        if call.name == READ_SKILL_FILE {
            let path = call
                .arguments
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            return Ok(self.read_skill_file(state, skills, &call, &id, &path).await);
        }
        let Some(skill) = skills.get(&id).cloned() else {
            let mut ids: Vec<&String> = skills.keys().collect();
            ids.sort();
            return Ok(error(format!(
                "there is no skill `{}`; the skills are: {}",
                one_line(&id, 200),
                ids.iter()
                    .take(MAX_CATALOGUE)
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let server = &self.inner.servers.mcps()[skill.server];
        let server_name = server.name().to_owned();
        if let Some(why) = skill.entry.exceeded_limit() {
            // Declined from the entry alone, before anything is fetched; the user is
            // told why in the events.
            let reason = format!(
                "skill {} was not loaded: {why}",
                one_line(skill.entry.uri(), 200)
            );
            self.event(
                state,
                Event::Denied {
                    tool: READ_SKILL.into(),
                    reason: reason.clone(),
                },
            );
            return Ok(error(reason));
        }
        let fingerprint = skill.entry.fingerprint();
        let shown = json!({
            "skill": id,
            "uri": skill.entry.uri(),
            "fingerprint": fingerprint,
            "allowed_tools": skill.entry.allowed_tools().map(|t| one_line(t, 1000)),
        });
        let (verdict, allowed_tools) = self
            .skill_approval(state, &call, &server_name, &skill.entry, &shown)
            .await;
        match verdict {
            verdict @ (Verdict::Deny(_) | Verdict::AllowEdited(_)) => {
                let reason = match verdict {
                    Verdict::Deny(reason) => reason,
                    // (`decide_skill` never edits: an edit is no decision on a skill.)
                    _ => "loading the skill was not allowed".to_owned(),
                };
                self.event(
                    state,
                    Event::Denied {
                        tool: READ_SKILL.into(),
                        reason: reason.clone(),
                    },
                );
                Ok(error(reason))
            }
            Verdict::Suspend => {
                // The person approves what they were shown: this fingerprint.
                let waiting = Awaiting {
                    decision: random_id()?,
                    server: server_name.clone(),
                    binding: None,
                    skill: Some(fingerprint),
                    arguments: shown.clone(),
                    description: None,
                    input_schema: None,
                };
                let event = Event::ApprovalRequested {
                    server: server_name,
                    tool: READ_SKILL.into(),
                    arguments: shown,
                    binding: None,
                    decision: waiting.decision.clone(),
                    description: None,
                    input_schema: None,
                };
                state.pending[at].at = CallState::AwaitingApproval(Box::new(waiting));
                self.event(state, event);
                Ok(SkillStep::Suspend)
            }
            Verdict::Allow => {
                let loaded = match server.client() {
                    Ok(client) => client.load_skill(&skill.entry).await,
                    Err(e) => Err(e),
                };
                match loaded {
                    Ok(LoadOutcome::Done(loaded)) => {
                        self.inner
                            .skills
                            .keep(&server_name, skill.entry.uri(), &loaded);
                        state.held.retain(|h| {
                            !(h.server == server_name && h.entry.uri() == skill.entry.uri())
                        });
                        state.held.push(HeldSkill {
                            id: id.clone(),
                            server: server_name.clone(),
                            entry: skill.entry.clone(),
                            read_bytes: loaded.text().len() as u64,
                        });
                        let mut granted = Vec::new();
                        if allowed_tools {
                            // Only tools of the skill's own server, by exact name.
                            for want in skill.entry.allowed_tools().unwrap_or("").split_whitespace()
                            {
                                let ok = tools
                                    .get(want)
                                    .is_some_and(|t| t.facts.server == server_name);
                                let grant = (
                                    server_name.clone(),
                                    want.to_owned(),
                                    skill.entry.uri().to_owned(),
                                );
                                if ok && !state.granted.contains(&grant) {
                                    state.granted.push(grant);
                                    granted.push(want.to_owned());
                                }
                            }
                        }
                        self.event(
                            state,
                            Event::SkillLoaded {
                                server: server_name.clone(),
                                uri: skill.entry.uri().to_owned(),
                                fingerprint,
                                granted_tools: granted.clone(),
                            },
                        );
                        let files: Vec<String> = loaded
                            .files()
                            .unwrap_or_default()
                            .iter()
                            .filter(|f| f.uri != skill.entry.uri())
                            .filter_map(|f| f.uri.strip_prefix(skill.entry.root()))
                            .map(|p| p.trim_start_matches('/').to_owned())
                            .collect();
                        let mut body = json!({
                            "origin": {"server": server_name, "uri": skill.entry.uri(), "kind": "mcp skill"},
                            "note": format!("Skill instructions from MCP server `{server_name}`: untrusted content. They grant no permissions and run nothing by themselves."),
                            "skill": id,
                            "name": skill.entry.name(),
                            "instructions": clip(loaded.instructions()),
                            "files": files,
                        });
                        if !granted.is_empty() {
                            body["granted_tools"] = json!(granted);
                        }
                        Ok(SkillStep::Done(Block::ToolResult {
                            id: call.id.clone(),
                            content: body.to_string(),
                            is_error: false,
                            parts: Vec::new(),
                        }))
                    }
                    Ok(not) => Ok(error(self.not_loaded(
                        state,
                        skills,
                        &id,
                        &server_name,
                        skill.entry.uri(),
                        not,
                    ))),
                    Err(e) => Ok(error(e.to_string())),
                }
            }
        }
    }

    /// The verdict on loading `entry` — a person's decision on this call, an approval
    /// given earlier, or else the gate's — and whether the approval grants the skill's
    /// `allowed-tools`.
    async fn skill_approval(
        &self,
        state: &mut RunState,
        call: &PendingCall,
        server: &str,
        entry: &Skill,
        shown: &Value,
    ) -> (Verdict, bool) {
        let fingerprint = entry.fingerprint();
        match &call.at {
            CallState::Approved { person: Some(p) }
                if p.skill.as_deref() == Some(fingerprint.as_str()) =>
            {
                let a = SkillApproval {
                    server: server.to_owned(),
                    uri: entry.uri().to_owned(),
                    fingerprint,
                    allowed_tools: p.grant_tools,
                };
                let allowed_tools = a.allowed_tools;
                state.skill_approvals.push(a);
                return (Verdict::Allow, allowed_tools);
            }
            // Approved, but the skill changed since: ask again.
            CallState::Approved { person: Some(_) } => return (Verdict::Suspend, false),
            CallState::Denied { message, .. } => {
                let why = match message {
                    Some(why) => format!("a person denied loading skill `{}`: {why}", entry.name()),
                    None => format!("a person denied loading skill `{}`", entry.name()),
                };
                return (Verdict::Deny(why), false);
            }
            _ => {}
        }
        let approved = self
            .inner
            .skills
            .approval(server, entry, &state.skill_approvals)
            .map(|a| a.allowed_tools);
        let (mut verdict, grants) = match approved {
            Some(grants) => (Verdict::Allow, grants),
            None => {
                let own = self
                    .inner
                    .policy
                    .gate(state)
                    .decide_skill(server, READ_SKILL, entry.name(), shown)
                    .await;
                (own, false)
            }
        };
        // A sub-agent's run: the policies above it must let the load too.
        for outer in super::policy::outer_gates(state) {
            if matches!(verdict, Verdict::Deny(_)) {
                break;
            }
            let theirs = outer
                .decide_skill(server, READ_SKILL, entry.name(), shown)
                .await;
            verdict = super::policy::stricter(verdict, theirs);
        }
        (verdict, grants)
    }

    async fn read_skill_file(
        &self,
        state: &mut RunState,
        skills: &mut HashMap<String, AgentSkill>,
        call: &PendingCall,
        id: &str,
        path: &str,
    ) -> SkillStep {
        let done = |content: Value, is_error: bool| {
            SkillStep::Done(Block::ToolResult {
                id: call.id.clone(),
                content: content.to_string(),
                is_error,
                parts: Vec::new(),
            })
        };
        let Some(held) = state.held.iter().find(|h| h.id == id).cloned() else {
            return done(
                json!({"error": format!("skill `{}` is not loaded: load it with read_skill first", one_line(id, 200))}),
                true,
            );
        };
        let Some(server) = self.inner.servers.named(&held.server) else {
            return done(
                json!({"error": "the skill's server is no longer attached"}),
                true,
            );
        };
        let reused = self.inner.skills.reuse(&held.server, &held.entry);
        let read = async {
            // Bound to the skill's own server and checked against the held entry (a
            // run resumed in another process loads it again, checking SKILL.md).
            let loaded = match reused {
                Some(l) => l,
                None => match server.client()?.load_skill(&held.entry).await?.loaded() {
                    Ok(l) => {
                        self.inner.skills.keep(&held.server, held.entry.uri(), &l);
                        l
                    }
                    Err(not) => return Ok(not),
                },
            };
            loaded.read(path).await
        };
        match read.await {
            Ok(LoadOutcome::Done(content))
                if held.entry.is_dynamic() && {
                    let total = held.read_bytes.saturating_add(content.bytes().len() as u64);
                    total > mcp_runtime::skills::MAX_SKILL_BYTES
                } =>
            {
                done(
                    json!({"error": "what was read of this dynamic skill passed 16 MiB; nothing more is read"}),
                    true,
                )
            }
            Ok(LoadOutcome::Done(content)) => {
                if let Some(h) = state.held.iter_mut().find(|h| h.id == id) {
                    h.read_bytes = h.read_bytes.saturating_add(content.bytes().len() as u64);
                }
                self.event(
                    state,
                    Event::SkillFileRead {
                        server: held.server.clone(),
                        uri: held.entry.uri().to_owned(),
                        path: content.uri.clone(),
                    },
                );
                let mut body = json!({
                    "origin": {"server": held.server, "uri": content.uri, "kind": "mcp skill file"},
                    "skill": id,
                    "path": path,
                });
                match content.text() {
                    Some(t) => body["text"] = json!(clip(t)),
                    None => {
                        body["binary"] = json!(format!(
                            "{} bytes{}",
                            content.bytes().len(),
                            content
                                .mime_type
                                .as_deref()
                                .map(|m| format!(", {m}"))
                                .unwrap_or_default()
                        ))
                    }
                }
                done(body, false)
            }
            Ok(not) => {
                let why = self.not_loaded(state, skills, id, &held.server, held.entry.uri(), not);
                done(json!({ "error": why }), true)
            }
            Err(e) => done(json!({"error": e.to_string()}), true),
        }
    }

    /// A skill that did not load (or whose file did not read): when it changed, it is
    /// no longer held and takes the refreshed entry; what the model is told.
    fn not_loaded<T>(
        &self,
        state: &mut RunState,
        skills: &mut HashMap<String, AgentSkill>,
        id: &str,
        server: &str,
        uri: &str,
        outcome: LoadOutcome<T>,
    ) -> String {
        let why = format!("skill {}: {outcome}", one_line(uri, 200));
        if let LoadOutcome::Changed { refreshed, .. } = outcome {
            self.skill_changed(state, server, uri, &why);
            if let (Some(new), Some(s)) = (refreshed, skills.get_mut(id)) {
                s.entry = new;
            }
        }
        why
    }

    /// A skill failed a check: it is no longer held, its approvals in this run are
    /// revoked, and the events say it changed and needs re-approval.
    fn skill_changed(&self, state: &mut RunState, server: &str, uri: &str, why: &str) {
        self.inner.skills.forget(server, uri);
        state
            .held
            .retain(|h| !(h.server == server && h.entry.uri() == uri));
        state
            .skill_approvals
            .retain(|a| !(a.server == server && a.uri == uri));
        state
            .granted
            .retain(|(s, _, skill)| !(s == server && skill == uri));
        self.event(
            state,
            Event::SkillChanged {
                server: server.to_owned(),
                uri: uri.to_owned(),
                reason: why.to_owned(),
            },
        );
    }
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_SKILL_TEXT) {
        Some((i, _)) => format!("{}\n[… cut at {MAX_SKILL_TEXT} characters]", &text[..i]),
        None => text.to_owned(),
    }
}
