//! The plain execute envelope of the original continuity specification,
//! `{"jsonrpc":"2.0","id":…,"method":"execute","params":{"tool":…,"parameters":{…}}}`,
//! on every transport.
//!
//! [`dispatch`] runs one envelope's `params` (shared by `POST /mcp/v1/execute` and the
//! stream transports). [`Envelope`] wraps a stream transport (stdio, WebSocket): a
//! request whose method is `execute` is answered by the wrapper with the tool's
//! structured result (or a JSON-RPC error) and never reaches rmcp, so it works with or
//! without an MCP handshake; every other message goes to rmcp unchanged.

use std::future::Future;
use std::pin::Pin;

use rmcp::RoleServer;
use rmcp::model::{
    ClientRequest, CustomResult, ErrorCode, ErrorData, JsonRpcMessage, RequestId, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::security::auth::Principal;
use crate::security::limits::{Limits, MAX_IN_FLIGHT_PER_CONNECTION};
use crate::server::{MemoryServer, Shared};

/// The JSON-RPC method of the envelope.
pub const METHOD: &str = "execute";

/// A refused or failed envelope call: the JSON-RPC `error` object and whether it is a
/// scope refusal (HTTP 403 on `POST /mcp/v1/execute`).
#[derive(Debug, Clone)]
pub struct EnvelopeError {
    /// `{"code", "message", "data"?}`.
    pub error: Value,
    /// The caller's key may not do this.
    pub forbidden: bool,
}

impl EnvelopeError {
    fn new(code: i32, message: String) -> Self {
        EnvelopeError {
            error: json!({"code": code, "message": message}),
            forbidden: false,
        }
    }

    /// As rmcp's error type.
    pub fn to_error_data(&self) -> ErrorData {
        let code = self.error["code"].as_i64().unwrap_or(-32603) as i32;
        let message = self.error["message"].as_str().unwrap_or("error").to_owned();
        ErrorData::new(ErrorCode(code), message, self.error.get("data").cloned())
    }
}

/// Run the `params` of an execute envelope (`{"tool", "parameters"?}`) for `who`.
pub async fn dispatch(
    server: &MemoryServer,
    params: Option<&Value>,
    who: &Principal,
) -> Result<Value, EnvelopeError> {
    let Some(tool) = params.and_then(|p| p.get("tool")).and_then(Value::as_str) else {
        return Err(EnvelopeError::new(
            -32602,
            "invalid params: \"params.tool\" must be a tool name".into(),
        ));
    };
    let parameters = match params.and_then(|p| p.get("parameters")) {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => {
            return Err(EnvelopeError::new(
                -32602,
                "invalid params: \"params.parameters\" must be an object".into(),
            ));
        }
    };
    match server.execute_json(tool, parameters, who).await {
        None => Err(EnvelopeError::new(
            -32601,
            format!("unknown tool {tool:?} (tools/list gives the tool names)"),
        )),
        Some(Ok(result)) => Ok(result),
        Some(Err(e)) => Err(EnvelopeError {
            forbidden: e.code() == "FORBIDDEN",
            error: e.to_jsonrpc(),
        }),
    }
}

type Sending = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A server transport that answers execute envelopes itself (see the module docs).
pub struct Envelope<T> {
    inner: T,
    server: MemoryServer,
    who: Principal,
    done_tx: mpsc::UnboundedSender<TxJsonRpcMessage<RoleServer>>,
    done_rx: mpsc::UnboundedReceiver<TxJsonRpcMessage<RoleServer>>,
    /// Envelope calls running.
    running: usize,
    /// An answer being written (kept across cancelled `receive` calls).
    sending: Option<Sending>,
    /// The inner transport's input ended.
    eof: bool,
    /// Rate-limit every request of this connection against the shared limits.
    limits: Option<std::sync::Arc<Shared>>,
}

impl<T> std::fmt::Debug for Envelope<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envelope")
            .field("running", &self.running)
            .field("eof", &self.eof)
            .finish_non_exhaustive()
    }
}

impl<T: Transport<RoleServer>> Envelope<T> {
    /// Answer execute envelopes arriving on `inner` with `server` (its connection: a
    /// `context_switch` there lasts for the connection) as `who`.
    pub fn new(inner: T, server: MemoryServer, who: Principal) -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Envelope {
            inner,
            server,
            who,
            done_tx,
            done_rx,
            running: 0,
            sending: None,
            eof: false,
            limits: None,
        }
    }

    /// Take a token from the caller's rate-limit bucket for every JSON-RPC request
    /// (refused ones are answered here with `LIMIT_EXCEEDED`), and stop reading while
    /// [`MAX_IN_FLIGHT_PER_CONNECTION`] execute envelopes are running.
    #[must_use]
    pub fn with_limits(mut self, shared: std::sync::Arc<Shared>) -> Self {
        self.limits = Some(shared);
        self
    }

    /// A rate-limit refusal for request `m`, if its bucket is empty.
    fn rate_refusal(
        &self,
        m: &RxJsonRpcMessage<RoleServer>,
    ) -> Option<TxJsonRpcMessage<RoleServer>> {
        let shared = self.limits.as_ref()?;
        let JsonRpcMessage::Request(r) = m else {
            return None;
        };
        let wait = shared.limits.check_rate(&self.who.id).err()?;
        let err = Limits::rate_error(&self.who.id, wait);
        let mut e = EnvelopeError {
            error: err.to_jsonrpc(),
            forbidden: false,
        };
        e.error["data"]["retry_after_ms"] = json!(wait.as_millis().max(1) as u64);
        Some(JsonRpcMessage::error(e.to_error_data(), Some(r.id.clone())))
    }

    fn start(&mut self, id: RequestId, params: Option<Value>) {
        let server = self.server.clone();
        let who = self.who.clone();
        let tx = self.done_tx.clone();
        self.running += 1;
        tokio::spawn(async move {
            let msg = match dispatch(&server, params.as_ref(), &who).await {
                Ok(v) => JsonRpcMessage::response(ServerResult::CustomResult(CustomResult(v)), id),
                Err(e) => JsonRpcMessage::error(e.to_error_data(), Some(id)),
            };
            // The receiver lives as long as the transport.
            let _ = tx.send(msg);
        });
    }

    fn write(&mut self, msg: TxJsonRpcMessage<RoleServer>) {
        self.running -= 1;
        let send = self.inner.send(msg);
        self.sending = Some(Box::pin(async move {
            if let Err(e) = send.await {
                tracing::debug!("cannot write an execute answer: {e}");
            }
        }));
    }
}

fn is_envelope(m: &RxJsonRpcMessage<RoleServer>) -> bool {
    matches!(m, JsonRpcMessage::Request(r)
        if matches!(&r.request, ClientRequest::CustomRequest(c) if c.method == METHOD))
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Envelope<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    // Cancel-safe: a pending write is kept in `self.sending`, the channel and the inner
    // `receive` are cancel-safe.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(s) = self.sending.as_mut() {
                s.await;
                self.sending = None;
            }
            if self.eof {
                // Answer the envelope calls received before the end, then end.
                if self.running == 0 {
                    return None;
                }
                match self.done_rx.recv().await {
                    Some(msg) => self.write(msg),
                    None => return None,
                }
                continue;
            }
            let room = self.limits.is_none() || self.running < MAX_IN_FLIGHT_PER_CONNECTION;
            tokio::select! {
                Some(msg) = self.done_rx.recv() => self.write(msg),
                m = self.inner.receive(), if room => match m {
                    None => self.eof = true,
                    Some(m) => {
                        if let Some(refusal) = self.rate_refusal(&m) {
                            // Written before anything else is read: a flood waits on TCP.
                            self.running += 1;
                            self.write(refusal);
                        } else if is_envelope(&m) {
                            let JsonRpcMessage::Request(r) = m else { unreachable!() };
                            let ClientRequest::CustomRequest(c) = r.request else { unreachable!() };
                            self.start(r.id, c.params);
                        } else {
                            return Some(m);
                        }
                    }
                },
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
