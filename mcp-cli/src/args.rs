//! The command line: every command, its arguments, and the options they share.

use clap::{Arg, ArgAction, Command};

/// How each command takes its server: a name (a snapshot, or a server in a
/// configuration file), `--url`, or `-- COMMAND…`.
fn target(c: Command, name_required: bool) -> Command {
    c.arg(
        Arg::new("name")
            .required(name_required)
            .help("the server: a snapshot in .mcp/, or a server in .mcp.json / .vscode/mcp.json (with --url or -- COMMAND, just a name)"),
    )
}

/// The options every command that talks to a server shares; added after the
/// command's own positional arguments, so `-- COMMAND…` comes last.
fn shared(c: Command) -> Command {
    c.arg(
        Arg::new("url")
            .long("url")
            .value_name("URL")
            .conflicts_with_all(["command", "config"])
            .help("the server's Streamable HTTP (or HTTP+SSE) endpoint"),
    )
    .arg(
        Arg::new("header")
            .long("header")
            .short('H')
            .value_name("NAME:VALUE")
            .action(ArgAction::Append)
            .help("a header sent with every request to an HTTP server (repeatable)"),
    )
    .arg(
        Arg::new("command")
            .last(true)
            .num_args(1..)
            .value_name("COMMAND")
            .help("the command that starts a stdio server"),
    )
    .arg(
        Arg::new("config")
            .long("config")
            .value_name("FILE")
            .conflicts_with("command")
            .help("take the server from this configuration file (.mcp.json or .vscode/mcp.json format)"),
    )
    .arg(
        Arg::new("dir")
            .long("dir")
            .value_name("DIR")
            .help("the snapshot folder (default: the nearest .mcp/ from here up to the project root)"),
    )
    .arg(
        Arg::new("allow-outside-project")
            .long("allow-outside-project")
            .action(ArgAction::SetTrue)
            .help("look for snapshots and configuration files above the project root too, and use (start) what is found there"),
    )
    .arg(
        Arg::new("protocol")
            .long("protocol")
            .value_name("ERA")
            .value_parser(["auto", "modern", "legacy"])
            .default_value("auto")
            .help("which protocol era to speak: detect it, only 2026-07-28 (modern), or only the initialize handshake (legacy)"),
    )
    .arg(
        Arg::new("timeout")
            .long("timeout")
            .value_name("SECS")
            .value_parser(clap::value_parser!(f64))
            .help("give up after this many seconds (for `listen`: stop listening then)"),
    )
    .arg(
        Arg::new("log-level")
            .long("log-level")
            .value_name("LEVEL")
            .value_parser(["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"])
            .help("ask the server for its log messages from this level up, shown on stderr (`listen`: on stdout, from info up by default)"),
    )
    .arg(
        Arg::new("json")
            .long("json")
            .action(ArgAction::SetTrue)
            .help("print the protocol's JSON"),
    )
}

fn pairs(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_name("KEY=VALUE")
        .action(ArgAction::Append)
        .help(help)
}

/// The `mcp` command.
pub fn cli() -> Command {
    let cmd = |name: &'static str, about: &'static str, required: bool| {
        target(Command::new(name).about(about), required)
    };
    Command::new("mcp")
        .about("Look at any MCP server, call its tools, and keep the snapshots #[mcp(...)] checks tool names against")
        .after_help("Exit codes: 0 ok; 1 the tool returned an error result (or a snapshot is out of date); 2 usage; 3 connection or protocol failure; 4 authorization needed; 130 interrupted.")
        .subcommand_required(true)
        .subcommand(shared(cmd(
            "info",
            "What the server says about itself: protocol era and version, name, version, capabilities, instructions",
            false,
        )))
        .subcommand(shared(cmd("tools", "List the server's tools", false)))
        .subcommand(shared(
            cmd("call", "Call a tool and print its result as JSON (progress on stderr; Ctrl-C cancels it)", true)
                .arg(Arg::new("tool").required(true).help("the tool"))
                .arg(Arg::new("arguments").help("the arguments, as a JSON object"))
                .arg(pairs("arg", "an argument; VALUE is read as JSON when it parses, as a string otherwise (repeatable)"))
                .arg(
                    Arg::new("text")
                        .long("text")
                        .action(ArgAction::SetTrue)
                        .conflicts_with("json")
                        .help("print only the result's text content"),
                )
                .arg(
                    Arg::new("task")
                        .long("task")
                        .action(ArgAction::SetTrue)
                        .help("run the call as a task (servers with tasks); Ctrl-C cancels the task"),
                ),
        ))
        .subcommand(shared(cmd("prompts", "List the server's prompts", false)))
        .subcommand(shared(
            cmd("prompt", "Get a prompt, its arguments given as KEY=VALUE", true)
                .arg(Arg::new("prompt").required(true).help("the prompt"))
                .arg(
                    Arg::new("arguments")
                        .num_args(0..)
                        .value_name("KEY=VALUE")
                        .help("the prompt's arguments"),
                ),
        ))
        .subcommand(shared(cmd("resources", "List the server's resources", false)))
        .subcommand(shared(cmd("templates", "List the server's resource templates", false)))
        .subcommand(shared(
            cmd("read", "Read a resource", true)
                .arg(Arg::new("uri").required(true).help("the resource's URI")),
        ))
        .subcommand(shared(
            cmd(
                "complete",
                "Suggest values for an argument of a prompt (--prompt) or a resource template (--template)",
                true,
            )
            .arg(Arg::new("argument").required(true).help("the argument to complete"))
            .arg(Arg::new("value").default_value("").help("what is typed so far"))
            .arg(
                Arg::new("prompt-ref")
                    .long("prompt")
                    .value_name("PROMPT")
                    .conflicts_with("template-ref")
                    .help("complete an argument of this prompt"),
            )
            .arg(
                Arg::new("template-ref")
                    .long("template")
                    .value_name("URI_TEMPLATE")
                    .help("complete a variable of this resource template"),
            )
            .arg(pairs("context", "the value of an argument already chosen (repeatable)")),
        ))
        .subcommand(shared(
            cmd(
                "listen",
                "Print the server's notifications as they arrive (list changes, resource updates, log messages, task statuses) until interrupted",
                true,
            )
            .arg(
                Arg::new("resource")
                    .long("resource")
                    .value_name("URI")
                    .action(ArgAction::Append)
                    .help("also hear when this resource changes (repeatable)"),
            )
            .arg(
                Arg::new("task-id")
                    .long("task")
                    .value_name("ID")
                    .action(ArgAction::Append)
                    .help("also follow this task's status (repeatable)"),
            )
        ))
        .subcommand(shared(
            cmd(
                "tasks",
                "List the server's tasks; with an ID, show one (--cancel cancels it, --wait waits for its result)",
                true,
            )
            .arg(Arg::new("id").help("a task's id"))
            .arg(
                Arg::new("cancel")
                    .long("cancel")
                    .action(ArgAction::SetTrue)
                    .requires("id")
                    .conflicts_with("wait")
                    .help("cancel the task"),
            )
            .arg(
                Arg::new("wait")
                    .long("wait")
                    .action(ArgAction::SetTrue)
                    .requires("id")
                    .help("wait for the task's result (Ctrl-C stops waiting; the task goes on)"),
            )
            .arg(
                Arg::new("text")
                    .long("text")
                    .action(ArgAction::SetTrue)
                    .requires("wait")
                    .help("with --wait, print only the result's text content"),
            ),
        ))
        .subcommand(
            shared(cmd(
                "snapshot",
                "Refresh (or with --check, verify) the committed snapshots in .mcp/; with NAME, add or refresh one (its server from --url, -- COMMAND, or a configuration file)",
                false,
            ))
            .arg(
                Arg::new("check")
                    .long("check")
                    .action(ArgAction::SetTrue)
                    .help("exit 1 when a snapshot is out of date"),
            ),
        )
        .subcommand(shared(
            cmd(
                "login",
                "Authorize with an OAuth server in a browser; the credentials are kept for the other commands",
                true,
            )
            .arg(
                Arg::new("owner")
                    .long("owner")
                    .default_value("default")
                    .help("whose credentials these are"),
            )
            .arg(
                Arg::new("open")
                    .long("open")
                    .help("program that opens the URL (for example xdg-open)"),
            ),
        ))
        .subcommand(
            Command::new("completions")
                .about("Print a shell completion script: `mcp completions bash > ~/.local/share/bash-completion/completions/mcp`")
                .arg(
                    Arg::new("shell")
                        .required(true)
                        .value_parser(["bash", "zsh", "fish", "elvish", "powershell"]),
                ),
        )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_consistent() {
        super::cli().debug_assert();
    }
}
