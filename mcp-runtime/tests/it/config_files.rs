//! `Mcp::from_config_file`: a server declared from the configuration file its users
//! already keep (Claude Code's `.mcp.json`, VS Code's `.vscode/mcp.json`), variables
//! expanded, and a file that cannot be used refused with what to fix.

use serde_json::json;

use crate::support;

#[tokio::test]
async fn a_server_from_claude_code_and_vscode_files() {
    let dir = std::env::temp_dir().join(format!("mcp-rt-config-{}", std::process::id()));
    std::fs::create_dir_all(dir.join(".vscode")).unwrap();
    let argv = support::everything_argv();
    let entry = json!({
        "command": argv[0],
        "args": argv[1..],
        "env": {"DEFAULTED": "${MCP_RT_SURELY_UNSET:-fallback}", "WHERE": "${workspaceFolder}"}
    });
    std::fs::write(
        dir.join(".mcp.json"),
        json!({"mcpServers": {"ev": entry, "broken": {"command": "x", "env": {"K": "${MCP_RT_SURELY_UNSET}"}}}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join(".vscode/mcp.json"),
        json!({"servers": {"ev": entry}}).to_string(),
    )
    .unwrap();
    for (file, base) in [
        (dir.join(".mcp.json"), &dir),
        (dir.join(".vscode/mcp.json"), &dir),
    ] {
        let ev = mcp_runtime::Mcp::from_config_file(&file, "ev")
            .unwrap()
            .build()
            .unwrap();
        let env = ev.call("get-env", json!({})).await.unwrap().text();
        assert!(env.contains("\"DEFAULTED\": \"fallback\""), "{env}");
        assert!(
            env.contains(&format!("\"WHERE\": \"{}\"", base.display())),
            "{env}"
        );
        ev.close().await.unwrap();
    }
    let err = mcp_runtime::Mcp::from_config_file(dir.join(".mcp.json"), "broken").unwrap_err();
    assert!(err.is_config(), "{err}");
    assert!(
        err.to_string().contains("`MCP_RT_SURELY_UNSET` is not set"),
        "{err}"
    );
    let err = mcp_runtime::Mcp::from_config_file(dir.join(".mcp.json"), "evv").unwrap_err();
    assert!(err.to_string().contains("did you mean `ev`?"), "{err}");
    let err = mcp_runtime::Mcp::from_config_file(dir.join("missing.json"), "ev").unwrap_err();
    assert!(
        err.is_config() && err.to_string().contains("cannot be read"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
