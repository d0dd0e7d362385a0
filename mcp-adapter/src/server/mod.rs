//! The MCP service: one [`MemoryServer`] per connection, each with its own
//! active context (a `Memory::namespace("default")` handle on the shared engine).
//!
//! Tools are thin: each one deserializes its arguments ([`crate::ops`]), checks the
//! caller's access, runs the core call on a blocking thread, audits mutating
//! calls, and publishes resource changes to every connection.
//!
//! - `shared`: [`Shared`], the engine-wide state (store, auth, audit, limits, change hub);
//! - `conn`: per-connection state ([`Caller`], subscriptions, log level);
//! - `service`: [`MemoryServer`] and how it runs one tool call;
//! - `tools`: the tool table (one row per tool);
//! - `handler`: the rmcp `ServerHandler` (tools, resources, prompts, completion).

#![allow(deprecated)] // logging is deprecated by SEP-2577 but still what 2025-era clients use

mod conn;
mod handler;
mod service;
mod shared;
mod tools;

pub use conn::Caller;
pub use service::MemoryServer;
pub use shared::Shared;
pub(crate) use tools::TOOL_NAMES;
