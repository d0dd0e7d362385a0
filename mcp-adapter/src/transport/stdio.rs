//! MCP over stdin/stdout: newline-delimited JSON-RPC, with execute envelopes answered
//! beside MCP, and every request received before EOF answered before rmcp winds down.

use rmcp::RoleServer;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{Stdin, Stdout};

use crate::protocol::envelope::Envelope;
use crate::security::auth::Principal;
use crate::server::MemoryServer;
use crate::transport::drain::DrainOnEof;

/// The stdio transport of the local user's connection served by `server`.
pub(crate) type Stdio = DrainOnEof<Envelope<AsyncRwTransport<RoleServer, Stdin, Stdout>>>;

/// The transport `server` is served on over stdin/stdout: lines up to `max_line` bytes;
/// execute envelopes are answered by `server` as the local principal; at EOF every
/// request already received is answered before the session ends.
pub(crate) fn transport(server: &MemoryServer, max_line: usize) -> Stdio {
    let rw = AsyncRwTransport::<RoleServer, _, _>::new(tokio::io::stdin(), tokio::io::stdout())
        .with_max_line_length(max_line);
    DrainOnEof::new(Envelope::new(rw, server.clone(), Principal::local()))
}
