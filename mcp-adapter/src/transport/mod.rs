//! How clients reach a [`crate::MemoryServer`]: the HTTP listener (streamable HTTP,
//! WebSocket, the execute envelope), built-in TLS, and the drain that keeps a stdio
//! session answering after its input ends.

pub mod drain;
pub mod http;
pub mod tls;
pub mod ws;

pub use http::{DEFAULT_MAX_BODY_BYTES, HttpConfig, router, serve, serve_on};
pub use tls::{Tls, TlsFiles};
