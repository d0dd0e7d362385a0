//! MCP over WebSocket: one JSON-RPC message per text (or binary) frame.
//!
//! rmcp has no WebSocket transport, but any `Sink` of outgoing and `Stream`
//! of incoming JSON-RPC messages is one; this wraps axum's (tungstenite's)
//! socket in that shape. A frame that is not a JSON-RPC message is logged
//! and skipped (as rmcp's stdio transport does); a close frame or a socket
//! error ends the connection.

use std::future::ready;

use axum::extract::ws::{Message, WebSocket};
use futures::{Sink, SinkExt, Stream, StreamExt};
use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};

/// Split a WebSocket into the (sink, stream) pair rmcp serves over.
pub fn transport(
    socket: WebSocket,
) -> (
    impl Sink<TxJsonRpcMessage<RoleServer>, Error = axum::Error> + Send + Unpin + 'static,
    impl Stream<Item = RxJsonRpcMessage<RoleServer>> + Send + Unpin + 'static,
) {
    let (sink, stream) = socket.split();
    let sink = sink.with(|msg: TxJsonRpcMessage<RoleServer>| {
        ready(
            serde_json::to_string(&msg)
                .map(|text| Message::Text(text.into()))
                .map_err(axum::Error::new),
        )
    });
    let stream = stream
        .take_while(|frame| ready(matches!(frame, Ok(m) if !matches!(m, Message::Close(_)))))
        .filter_map(|frame| {
            ready(match frame {
                Ok(Message::Text(text)) => parse(text.as_bytes()),
                Ok(Message::Binary(bytes)) => parse(&bytes),
                _ => None,
            })
        });
    (Box::pin(sink), Box::pin(stream))
}

fn parse(bytes: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    match serde_json::from_slice(bytes) {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::debug!("ignoring a WebSocket frame that is not a JSON-RPC message: {e}");
            None
        }
    }
}
