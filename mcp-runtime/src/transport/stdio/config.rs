//! How to start a stdio server: program, arguments, folder, environment (clean by
//! default), limits.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::transport::DEFAULT_MAX_MESSAGE_SIZE;

type EnvProvider = Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>;

/// How to start a stdio server.
#[derive(Clone)]
pub struct StdioConfig {
    pub(super) program: String,
    pub(super) args: Vec<String>,
    pub(super) directory: Option<PathBuf>,
    pub(super) env: Vec<(String, String)>,
    pub(super) env_providers: Vec<EnvProvider>,
    /// The names of the variables the providers compute, where known (a declared
    /// server's `env_with`): part of its configuration fingerprint.
    pub(super) env_computed: Vec<String>,
    pub(super) name: String,
    pub(super) close_grace: Duration,
    pub(super) max_message_size: usize,
    pub(super) inherit_all: bool,
    pub(super) inherit: Vec<String>,
    pub(super) remove: Vec<String>,
}

/// The variables a spawned server gets from this process's environment by default (the
/// official TypeScript SDK's default set), besides those named with
/// [`StdioConfig::inherit_env`] and those set with [`StdioConfig::env`].
pub const SAFE_ENV_VARS: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

impl StdioConfig {
    /// Runs `program` (looked up on `PATH`).
    pub fn new(program: impl Into<String>) -> Self {
        let program = program.into();
        StdioConfig {
            name: program.clone(),
            program,
            args: Vec::new(),
            directory: None,
            env: Vec::new(),
            env_providers: Vec::new(),
            env_computed: Vec::new(),
            close_grace: Duration::from_secs(2),
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            inherit_all: false,
            inherit: Vec::new(),
            remove: Vec::new(),
        }
    }

    /// Builds the config from a whole argv: the program, then its arguments.
    pub fn from_argv<I, S>(argv: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut it = argv.into_iter().map(Into::into);
        let program = it
            .next()
            .filter(|p: &String| !p.is_empty())
            .ok_or_else(|| {
                Error::config("the stdio command is empty; give at least the program")
            })?;
        Ok(StdioConfig::new(program).args(it))
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// The working directory of the process.
    pub fn directory(mut self, dir: impl Into<PathBuf>) -> Self {
        self.directory = Some(dir.into());
        self
    }

    /// Passes this process's whole environment to the server — API keys, database
    /// URLs and tokens included. By default the server gets only the safe default set
    /// ([`SAFE_ENV_VARS`]: `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`), the
    /// variables named with [`inherit_env`](Self::inherit_env), and those set with
    /// [`env`](Self::env).
    pub fn inherit_all_env(mut self) -> Self {
        self.inherit_all = true;
        self
    }

    /// Also passes this variable of this process's environment (when it is set).
    pub fn inherit_env(mut self, name: impl Into<String>) -> Self {
        self.inherit.push(name.into());
        self
    }

    /// With [`inherit_all_env`](Self::inherit_all_env): never passes this variable of
    /// this process's environment (a variable set with [`env`](Self::env) is still
    /// passed).
    pub fn env_remove(mut self, name: impl Into<String>) -> Self {
        self.remove.push(name.into());
        self
    }

    /// The largest message (one line of stdout) the server may send, in bytes
    /// (default [`DEFAULT_MAX_MESSAGE_SIZE`], 64 MiB). A longer one fails the calls in
    /// flight and stops the process; nothing larger is ever held in memory.
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes.max(1024);
        self
    }

    /// Sets an environment variable for the server.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Adds variables computed each time the process starts (a token that rotates, say).
    pub fn env_with(
        mut self,
        provider: impl Fn() -> Vec<(String, String)> + Send + Sync + 'static,
    ) -> Self {
        self.env_providers.push(Arc::new(provider));
        self
    }

    /// [`env_with`](Self::env_with) for a provider that computes the variables
    /// `names` (a declared server's `env_with`), so that the fingerprint can name them.
    pub(crate) fn env_with_named(
        mut self,
        names: Vec<String>,
        provider: impl Fn() -> Vec<(String, String)> + Send + Sync + 'static,
    ) -> Self {
        self.env_computed.extend(names);
        self.env_providers.push(Arc::new(provider));
        self
    }

    /// What a configuration fingerprint covers of this config: program, arguments,
    /// working directory, the inherited variables' names, whether the whole
    /// environment is inherited, and each set variable's name with the HMAC-SHA-256 of
    /// its value under `key` (a computed one's name with a marker). Never a value.
    pub(crate) fn fingerprint(&self, key: &[u8]) -> serde_json::Value {
        let mut env: Vec<serde_json::Value> = self
            .env
            .iter()
            .map(|(name, value)| {
                serde_json::json!({
                    "name": name,
                    "hmac": crate::digest::hmac_sha256_hex(key, value.as_bytes()),
                })
            })
            .collect();
        env.extend(
            self.env_computed
                .iter()
                .map(|name| serde_json::json!({"name": name, "computed": true})),
        );
        serde_json::json!({
            "kind": "stdio",
            "program": self.program,
            "args": self.args,
            "directory": self.directory.as_ref().map(|d| d.display().to_string()),
            "env": env,
            "inherit_env": self.inherit,
            "inherit_all_env": self.inherit_all,
            "env_remove": self.remove,
        })
    }

    /// The name used in logs (defaults to the program).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How long `close` waits after closing stdin, and again after SIGTERM (default 2s).
    pub fn close_grace(mut self, grace: Duration) -> Self {
        self.close_grace = grace;
        self
    }

    /// The program.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The arguments.
    pub fn arguments(&self) -> &[String] {
        &self.args
    }

    /// The working directory of the process, when one is set.
    pub fn working_directory(&self) -> Option<&std::path::Path> {
        self.directory.as_deref()
    }
}

impl fmt::Debug for StdioConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Environment values may be secrets: show the names only.
        let env_names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("StdioConfig")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("directory", &self.directory)
            .field("env", &env_names)
            .field("env_providers", &self.env_providers.len())
            .field("env_computed", &self.env_computed)
            .field("inherit_all_env", &self.inherit_all)
            .field("inherit", &self.inherit)
            .field("env_remove", &self.remove)
            .field("max_message_size", &self.max_message_size)
            .finish()
    }
}
