//! The MCP protocol pieces beside tools: resources and their `memstrata://` URIs,
//! prompts, and the plain execute envelope that every transport also accepts.

pub mod envelope;
pub mod prompts;
pub mod resources;
pub mod uri;
