//! Examples of the MCP client toolkit; see the `[[example]]` entries. What the agent
//! examples share lives here.

use std::sync::Arc;

use mcp_agent::{RunStore, SqliteRunStore};

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
