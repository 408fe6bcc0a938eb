//! The skills extension on a session: listing, getting and loading skills, reading
//! their files with every check (see [`crate::skills`]).

use super::cache::typed_items;
use super::details::ServerDetails;
use super::handle::Client;
use super::options::RequestOptions;
use crate::error::{Error, Result};
use crate::model::{self, Resource};
use crate::protocol::Method;
use crate::skills::{
    check, extract, LoadOutcome, LoadedSkill, Mismatch, Skill, SkillContent, SkillFiles,
    SKILLS_EXTENSION,
};
use mcp_runtime_core::{lock, BoxFuture};
use serde_json::{Map, Value};
use std::sync::Arc;

impl Client {
    /// True when the server declares the skills extension (connecting first).
    pub async fn skills_supported(&self) -> Result<bool> {
        let d = self.inner.ensure().await?;
        Ok(d.capabilities.extension(SKILLS_EXTENSION).is_some())
    }

    async fn require_skills(&self) -> Result<Arc<ServerDetails>> {
        let d = self.inner.ensure().await?;
        if d.capabilities.extension(SKILLS_EXTENSION).is_none() {
            return Err(Error::unsupported(format!(
                "{} does not declare the skills extension ({SKILLS_EXTENSION})",
                self.inner.settings.name
            )));
        }
        Ok(d)
    }

    /// Every skill the server lists (`skills/list`, all pages), checked: an invalid
    /// entry (no `resources`, a path that does not end in its name, a malformed
    /// digest, …) is left out with a warning. Nothing else is fetched. A listing may
    /// be partial: a skill named elsewhere (the server's instructions, another skill)
    /// is found with [`skill`](Self::skill).
    ///
    /// Fails with [`Error::is_unsupported`] when the server does not declare the
    /// skills extension.
    pub async fn skills(&self) -> Result<Vec<Skill>> {
        self.require_skills().await?;
        let items = self.inner.list("skills/list", "skills").await?;
        let mut skills: Vec<Skill> = Vec::with_capacity(items.len());
        let mut seen = std::collections::HashSet::new();
        for item in items.iter() {
            match Skill::from_value(item.clone()) {
                Ok(s) if !seen.insert(s.uri().to_owned()) => tracing::warn!(
                    server = %self.inner.settings.name,
                    uri = %crate::text::clip(s.uri(), 200),
                    "the server listed a skill twice; the first entry is kept"
                ),
                Ok(s) => skills.push(s),
                Err(why) => tracing::warn!(
                    server = %self.inner.settings.name,
                    "left out an invalid skill entry: {why}"
                ),
            }
        }
        Ok(skills)
    }

    /// The current entry of one skill, by the URI of its `SKILL.md` (`skills/get`):
    /// also for skills the listing leaves out. An unknown URI is
    /// [`Error::is_not_found`].
    pub async fn skill(&self, uri: &str) -> Result<Skill> {
        self.require_skills().await?;
        let mut params = Map::new();
        params.insert("uri".into(), uri.into());
        let mut v = self
            .inner
            .call("skills/get", params, &RequestOptions::default())
            .await?;
        let skill = v
            .get_mut("skill")
            .map(Value::take)
            .ok_or_else(|| Error::invalid_response("`skills/get` result has no `skill`"))?;
        let skill = Skill::from_value(skill).map_err(Error::invalid_response)?;
        if skill.uri() != uri {
            return Err(Error::invalid_response(format!(
                "`skills/get` for {} answered with another skill ({})",
                crate::text::clip(uri, 200),
                crate::text::clip(skill.uri(), 200)
            )));
        }
        Ok(skill)
    }

    /// The direct children of a directory resource (`resources/directory/read`, all
    /// pages); subdirectories have the MIME type `inode/directory`. Only servers that
    /// declare the skills extension with `directoryRead` offer it; for others this
    /// fails with [`Error::is_unsupported`] without sending anything.
    ///
    /// A directory read is a live view: it never adds files to a loaded skill, whose
    /// held entry alone says what may be read.
    pub async fn read_directory(&self, uri: &str) -> Result<Vec<Resource>> {
        let d = self.require_skills().await?;
        let declared = d
            .capabilities
            .extension(SKILLS_EXTENSION)
            .and_then(|s| s.get("directoryRead"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !declared {
            return Err(Error::unsupported(format!(
                "{} does not offer `resources/directory/read` (no `directoryRead` in its skills extension)",
                self.inner.settings.name
            )));
        }
        let mut params = Map::new();
        params.insert("uri".into(), uri.into());
        let (items, _) = self
            .inner
            .pages(Method::ResourcesDirectoryRead.as_str(), params, "resources")
            .await?;
        Ok(typed_items(&self.inner.settings.name, "resource", &items))
    }

    /// Loads a skill: checks its limits from the entry (512 files, 16 MiB; otherwise
    /// [`LoadOutcome::Declined`] with the reason, before anything is fetched), reads
    /// its `SKILL.md` and checks it against the entry (size, digest, frontmatter field
    /// by field). The entry is held from then on: the skill's other files are read
    /// through the loaded [`LoadedSkill`], each checked against it.
    ///
    /// On a failed check nothing is used, the entry is refreshed with `skills/get`,
    /// and the outcome is [`LoadOutcome::Changed`] (with the refreshed entry): the
    /// skill changed and needs re-approval. A protocol or transport failure is an
    /// error. Reading a `SKILL.md` with [`resource`](Self::resource) is not
    /// a load.
    pub async fn load_skill(&self, skill: &Skill) -> Result<LoadOutcome> {
        self.require_skills().await?;
        if let Some(why) = skill.exceeded_limit() {
            return Ok(LoadOutcome::Declined { why });
        }
        let content = match self.read_skill_file(skill, skill.uri()).await?.loaded() {
            Ok(c) => c,
            Err(not) => return Ok(not),
        };
        let text: Arc<str> = match content.text() {
            Some(t) => Arc::from(t),
            None => return Ok(self.changed(skill, "SKILL.md is not text".into()).await),
        };
        Ok(LoadOutcome::Done(LoadedSkill::new(
            Arc::new(self.clone()),
            skill.clone(),
            text,
            content.bytes().len() as u64,
        )))
    }

    /// Reads one file of `entry` from this server and checks it. A file the entry does
    /// not list is refused without a request; a cached file whose digest the entry
    /// still names is served without one.
    async fn read_skill_file(&self, entry: &Skill, uri: &str) -> Result<LoadOutcome<SkillContent>> {
        let listed = entry.file(uri).map(|f| f.digest.clone());
        if !entry.is_dynamic() && listed.is_none() {
            let why = format!(
                "{} is not listed in the skill's entry",
                crate::text::clip(uri, 200)
            );
            return Ok(self.changed(entry, why).await);
        }
        if let Some(digest) = &listed {
            let hit = lock(&self.inner.skill_files).get(uri, digest);
            if let Some(hit) = hit {
                if check(entry, &hit).is_ok() {
                    return Ok(LoadOutcome::Done(hit));
                }
            }
        }
        let mut params = Map::new();
        params.insert("uri".into(), uri.into());
        let read = self
            .inner
            .call(
                Method::ResourcesRead.as_str(),
                params,
                &RequestOptions::default(),
            )
            .await;
        let read = match read {
            Ok(v) => v,
            // A listed file the server no longer serves: the skill changed.
            Err(e) if e.is_not_found() && !entry.is_dynamic() => {
                let why = format!(
                    "the server no longer serves {}",
                    crate::text::clip(uri, 200)
                );
                return Ok(self.changed(entry, why).await);
            }
            Err(e) => return Err(e),
        };
        let read: crate::model::ReadResourceResult =
            model::from_value(Method::ResourcesRead.as_str(), read)?;
        let verified = extract(uri, &read).and_then(|c| check(entry, &c).map(|()| c));
        match verified {
            Ok(content) => {
                if let Some(digest) = &listed {
                    lock(&self.inner.skill_files).put(digest, &content);
                }
                Ok(LoadOutcome::Done(content))
            }
            Err(Mismatch(why)) => Ok(self.changed(entry, why).await),
        }
    }

    /// The outcome of a failed check, with the entry refreshed by `skills/get`.
    async fn changed<T>(&self, entry: &Skill, why: String) -> LoadOutcome<T> {
        tracing::warn!(
            server = %self.inner.settings.name,
            skill = %crate::text::clip(entry.uri(), 200),
            "skill changed, needs re-approval: {why}"
        );
        // The listing may hold the old entry: the next one asks the server again.
        self.inner.invalidate("skills/list");
        let refreshed = match self.skill(entry.uri()).await {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::debug!(server = %self.inner.settings.name, error = %e, "could not refresh the skill's entry");
                None
            }
        };
        LoadOutcome::Changed { why, refreshed }
    }
}

/// A loaded skill reads its other files through the session it was loaded on.
impl SkillFiles for Client {
    fn server(&self) -> &str {
        self.name()
    }

    fn read_checked<'a>(
        &'a self,
        entry: &'a Skill,
        uri: &'a str,
    ) -> BoxFuture<'a, Result<LoadOutcome<SkillContent>>> {
        Box::pin(self.read_skill_file(entry, uri))
    }
}
