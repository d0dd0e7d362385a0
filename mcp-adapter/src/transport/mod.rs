//! How clients reach a [`crate::MemoryServer`]: stdio (with the drain that keeps a
//! session answering after its input ends), the HTTP listener (streamable HTTP,
//! WebSocket, the execute envelope), and built-in TLS.

pub(crate) mod drain;
pub(crate) mod http;
pub(crate) mod stdio;
pub(crate) mod tls;
pub(crate) mod ws;

pub use http::{DEFAULT_MAX_BODY_BYTES, HttpConfig, router, serve, serve_on};
pub use tls::{Tls, TlsFiles};
