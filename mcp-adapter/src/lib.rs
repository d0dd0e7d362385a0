//! # memstrata-mcp
//!
//! Memstrata served over the Model Context Protocol (rmcp): stdio, streamable
//! HTTP at `/mcp`, WebSocket at `/mcp/ws`, and the plain `POST /mcp/v1/execute`
//! envelope. See `docs/mcp.md`.
//!
//! - [`server::MemoryServer`]: the service, one per connection;
//! - [`ops`]: tool arguments and what each tool does (a thin mapping onto the core);
//! - [`envelope`]: the plain execute envelope, on every transport;
//! - [`http`]: the HTTP listener with Host/Origin checks, API keys, size limits;
//! - [`auth`], [`audit`]: who may do what, and the trail of mutating calls;
//! - [`store`], [`pgnotify`]: a `postgres://` store URL, and resource changes across
//!   the instances sharing one PostgreSQL store.

pub mod audit;
pub mod auth;
pub mod drain;
pub mod embeddings;
pub mod envelope;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub mod limits;
pub mod oauth;
pub mod ops;
mod outbound;
pub mod pgnotify;
pub mod prompts;
pub mod resources;
pub mod server;
pub mod store;
pub mod tls;
pub mod uri;
pub mod ws;

pub use crate::auth::{Access, Auth, Principal};
pub use crate::error::ToolError;
pub use crate::server::{Caller, MemoryServer, Shared};
