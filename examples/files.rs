//! The filesystem reference server over stdio, shaped for a model: a prefix, a renamed
//! tool with a fixed argument, approval for anything destructive, and typed methods.
//!
//! Run with `cargo run -p examples --example files` (needs Node.js and npx).

use mcp_runtime::mcp;

#[mcp(
    command("npx", "-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "."),
    prefix = "fs",
    except(move_file),
    tool(list_directory, as = ls, fixed_arguments(path = Self::root)),
    requires_approval(if = destructive),
    defer(directory_tree, search_files),
)]
pub struct Files {
    root: String,
}

impl Files {
    fn root(&self) -> String {
        self.root.clone()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = Files::new(".".into());
    for tool in files.mcp().tools().await? {
        let mut notes = Vec::new();
        if tool.requires_approval() {
            notes.push("needs approval");
        }
        if tool.deferred {
            notes.push("deferred");
        }
        println!("{:<32} {}", tool.name, notes.join(", "));
    }
    // The model sees `ls` without a `path`: it is always the root.
    println!(
        "{}",
        files.mcp().call("ls", serde_json::json!({})).await?.text()
    );
    // Typed: arguments and structured output from the snapshot `.mcp/files.json`.
    let readme = files
        .fs_read_text_file(files_tools::FsReadTextFile {
            path: "Cargo.toml".into(),
            head: Some(3.0),
            tail: None,
        })
        .await?;
    if let Some(out) = readme.output {
        println!("{}", out.content);
    }
    files.mcp().close().await?;
    Ok(())
}
