//! Examples of the MCP client toolkit; see the `[[example]]` entries. What the agent
//! examples share lives here.

use std::sync::Arc;

use mcp_agent::{ChatCompletions, Messages, Model, Responses, RunStore, SqliteRunStore};

/// Whether `url` names a PostgreSQL database (`postgres://…`, `postgresql://…`).
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The run store `url` names: a PostgreSQL database (built with `--features
/// postgres`), else a SQLite file (`sqlite://` optional).
pub async fn run_store(url: &str) -> Result<Arc<dyn RunStore>, String> {
    if is_postgres(url) {
        #[cfg(feature = "postgres")]
        {
            let s = mcp_agent::PostgresRunStore::connect(url)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(Arc::new(s));
        }
        #[cfg(not(feature = "postgres"))]
        return Err(
            "this example was built without PostgreSQL: run it with `--features postgres`".into(),
        );
    }
    let s = SqliteRunStore::open(url.strip_prefix("sqlite://").unwrap_or(url))
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(s))
}

/// The model `AGENT_PROVIDER` (`openai`, the default — Chat Completions —,
/// `openai-responses` — the Responses API — or `anthropic`) and `AGENT_MODEL` name, at
/// `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` with `OPENAI_API_KEY` /
/// `ANTHROPIC_API_KEY` when set; `on_text` gets its text as it streams, when given.
pub fn model_from_env(on_text: Option<fn(&str)>) -> Result<Box<dyn Model>, String> {
    let id = std::env::var("AGENT_MODEL")
        .map_err(|_| "set AGENT_MODEL to the model's id (there is no default model)".to_owned())?;
    let openai_base = || {
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".to_owned())
    };
    match std::env::var("AGENT_PROVIDER")
        .as_deref()
        .unwrap_or("openai")
    {
        "openai" => {
            let mut m = ChatCompletions::new(openai_base(), id).map_err(|e| e.to_string())?;
            if let Ok(key) = std::env::var("OPENAI_API_KEY") {
                m = m.api_key(key);
            }
            if let Some(f) = on_text {
                m = m.on_text(f);
            }
            Ok(Box::new(m))
        }
        "openai-responses" => {
            let mut m = Responses::new(openai_base(), id).map_err(|e| e.to_string())?;
            if let Ok(key) = std::env::var("OPENAI_API_KEY") {
                m = m.api_key(key);
            }
            if let Some(f) = on_text {
                m = m.on_text(f);
            }
            Ok(Box::new(m))
        }
        "anthropic" => {
            let base = std::env::var("ANTHROPIC_BASE_URL")
                .unwrap_or_else(|_| "https://api.anthropic.com".to_owned());
            let mut m = Messages::new(base, id).map_err(|e| e.to_string())?;
            if let Ok(key) = std::env::var("ANTHROPIC_API_KEY") {
                m = m.api_key(key);
            }
            if let Some(f) = on_text {
                m = m.on_text(f);
            }
            Ok(Box::new(m))
        }
        other => Err(format!(
            "AGENT_PROVIDER={other}: use openai, openai-responses or anthropic"
        )),
    }
}
