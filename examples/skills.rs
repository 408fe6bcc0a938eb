//! Skills: lists a server's skills (nothing else is fetched), loads one — its
//! `SKILL.md` checked against the listed entry — and reads one of its files, checked
//! too. A skill that changed on the server is reported as needing re-approval.
//!
//! ```sh
//! cargo run -p examples --example skills -- COMMAND… SKILL FILE
//! # e.g. the project's skills test server (after `bash tests/peers/install.sh`):
//! cargo run -p examples --example skills -- .peers/venv/bin/python tests/peers/skillserver.py stdio pdf-processing references/FORMS.md
//! ```

use mcp_runtime::{skills::LoadOutcome, Client, StdioConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        return Err("usage: skills COMMAND… SKILL FILE".into());
    }
    let file = args.pop().unwrap_or_default();
    let name = args.pop().unwrap_or_default();
    let client = Client::builder()
        // Tells the server this host loads skills itself.
        .skills()
        .stdio(StdioConfig::from_argv(args)?)?;
    if !client.skills_supported().await? {
        return Err("the server does not serve skills".into());
    }
    let skills = client.skills().await?;
    for s in &skills {
        println!(
            "- {} ({}): {}",
            s.name(),
            s.uri(),
            s.description().escape_debug()
        );
    }
    let skill = skills
        .iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| format!("no skill named `{name}`"))?;
    if let Some(why) = skill.exceeded_limit() {
        println!("declined: {why}");
        return Ok(client.close().await?);
    }
    println!(
        "fingerprint (what an approval binds to): {}",
        skill.fingerprint()
    );
    if let Some(tools) = skill.allowed_tools() {
        println!("asks for tools (not granted): {tools}");
    }
    // A skill that changed (or is too large) is an outcome, not an error.
    let loaded = match client.load_skill(skill).await? {
        LoadOutcome::Done(l) => l,
        not => {
            println!("{}: {not}", skill.uri());
            return Ok(client.close().await?);
        }
    };
    println!("--- instructions\n{}", loaded.instructions().trim());
    let content = match loaded.read(&file).await? {
        LoadOutcome::Done(c) => c,
        not => {
            println!("{file}: {not}");
            return Ok(client.close().await?);
        }
    };
    println!(
        "--- {} ({} bytes, checked)\n{}",
        content.uri,
        content.bytes().len(),
        content.text().unwrap_or("(binary)").trim()
    );
    client.close().await?;
    Ok(())
}
