//! # memstrata-mcp
//!
//! Memstrata served over the Model Context Protocol (rmcp): stdio, streamable
//! HTTP at `/mcp`, WebSocket at `/mcp/ws`, and the plain `POST /mcp/v1/execute`
//! envelope. See `docs/mcp.md`.
//!
//! - [`cli`]: the `memstrata-mcp` command line (the binary's `main` is one call);
//! - `server`: [`MemoryServer`], the service (one per connection), its [`Shared`]
//!   state and the tool table;
//! - `ops`: tool arguments and what each tool does (a thin mapping onto the core);
//! - `protocol`: resources, prompts, `memstrata://` URIs and the execute envelope;
//! - [`transport`]: the HTTP listener (Host/Origin checks, size limits), WebSocket,
//!   TLS, and the stdio drain;
//! - [`security`]: API keys, OAuth, limits, the audit trail, outbound endpoints;
//! - [`backend`]: the store location, resource changes across the instances sharing
//!   one PostgreSQL store, and the embeddings endpoint.
//!
//! Only what the binary, the integration tests and the fuzz targets use is public.

pub mod backend;
pub mod cli;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod ops;
mod protocol;
pub mod security;
mod server;
pub mod transport;

pub use crate::error::ToolError;
pub use crate::ops::Change;
pub use crate::security::{Access, Auth, Principal};
pub use crate::server::{Caller, MemoryServer, Shared};
