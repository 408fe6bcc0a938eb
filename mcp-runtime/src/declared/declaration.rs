//! What a `#[mcp]` declaration says, readable at run time without connecting.

/// What a `#[mcp(...)]` declaration says, as written: `Linear::DECLARATION`. For
/// tooling (listing what an application declares, where it connects, what needs
/// approval) and for the agent. Values read from the instance at run time (methods,
/// inputs) are not here, only that they exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declaration {
    /// The server's name (the struct's, in snake_case).
    pub name: &'static str,
    /// `url = …`.
    pub url: Option<&'static str>,
    /// `command(…)`: the program, then its arguments (empty for other servers).
    pub command: &'static [&'static str],
    /// `transport = Self::…`: a transport of the application's own.
    pub custom_transport: bool,
    /// `prefix = …`.
    pub prefix: Option<&'static str>,
    /// `only(…)`.
    pub only: Option<&'static [&'static str]>,
    /// `except(…)`.
    pub except: &'static [&'static str],
    /// `tool(name, as = …)`: the server's name, then the model's.
    pub renames: &'static [(&'static str, &'static str)],
    /// `tool(name, fixed_arguments(…))`: the tool, then the argument.
    pub fixed_arguments: &'static [(&'static str, &'static str)],
    /// Tools named by `requires_approval(…)`.
    pub requires_approval: &'static [&'static str],
    /// A `requires_approval` without names: every tool (or every tool its predicate
    /// picks) needs approval.
    pub approval_for_all: bool,
    /// Some approval depends on a predicate, decided per call.
    pub approval_predicates: bool,
    /// `defer(…)`: these tools (`Some(&[])`: every tool) stay out of a model's
    /// context until a tool search loads them.
    pub defer: Option<&'static [&'static str]>,
    /// The snapshot the build read, when there was one.
    pub snapshot: Option<&'static str>,
}
