//! How clients reach a [`crate::MemoryServer`]: the HTTP listener (streamable HTTP,
//! WebSocket, the execute envelope), built-in TLS, and the drain that keeps a stdio
//! session answering after its input ends.

pub(crate) mod drain;
pub(crate) mod http;
pub(crate) mod tls;
pub(crate) mod ws;

pub use http::{DEFAULT_MAX_BODY_BYTES, HttpConfig, router, serve, serve_on};
pub use tls::{Tls, TlsFiles};
