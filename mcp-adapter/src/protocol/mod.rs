//! The MCP protocol pieces beside tools: resources and their `memstrata://` URIs,
//! prompts, and the plain execute envelope that every transport also accepts.

pub(crate) mod envelope;
pub(crate) mod prompts;
pub(crate) mod resources;
pub(crate) mod uri;
