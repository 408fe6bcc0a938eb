//! Examples of the MCP client toolkit; see the `[[example]]` entries.
