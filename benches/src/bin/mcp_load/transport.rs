//! The transports (rows) and one client's connection to the server: stdio shared by
//! every client (answers matched by id), streamable HTTP (sessions or stateless),
//! WebSocket, `/mcp/v1/execute`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::process::ChildStdin;
use tokio::sync::{Mutex, oneshot};
use tokio_tungstenite::tungstenite::Message;

use crate::{Result, SESSION_VERSION, STATELESS_VERSION};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Transport {
    Stdio,
    HttpSession,
    HttpStateless,
    Ws,
    Execute,
}

impl Transport {
    pub(crate) fn parse(s: &str) -> Option<Transport> {
        Some(match s {
            "stdio" => Transport::Stdio,
            "http-session" => Transport::HttpSession,
            "http-stateless" => Transport::HttpStateless,
            "ws" => Transport::Ws,
            "execute" => Transport::Execute,
            _ => return None,
        })
    }

    pub(crate) fn label(self, c: usize) -> String {
        match self {
            Transport::Stdio => {
                format!("stdio, {c} clients on one connection ({c} requests in flight)")
            }
            Transport::HttpSession => format!(
                "streamable HTTP with sessions (`initialize`, then `Mcp-Session-Id`), {c} sessions"
            ),
            Transport::HttpStateless => {
                format!("streamable HTTP, stateless 2026-07-28 `tools/call`, {c} connections")
            }
            Transport::Ws => format!("WebSocket, {c} connections"),
            Transport::Execute => {
                format!("HTTP `POST /mcp/v1/execute`, {c} keep-alive connections")
            }
        }
    }

    pub(crate) fn short(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::HttpSession => "streamable HTTP (sessions)",
            Transport::HttpStateless => "streamable HTTP (stateless)",
            Transport::Ws => "WebSocket",
            Transport::Execute => "`/mcp/v1/execute`",
        }
    }
}

/// One stdio server connection shared by every client: requests matched to answers by id.
pub(crate) struct StdioConn {
    pub(crate) stdin: Mutex<ChildStdin>,
    pub(crate) pending: std::sync::Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    pub(crate) next_id: AtomicU64,
}

impl StdioConn {
    pub(crate) async fn request(
        &self,
        method: &str,
        params: Value,
    ) -> std::result::Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .map_err(|_| "stdio: poisoned lock")?
            .insert(id, tx);
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .map_err(|e| e.to_string())?;
        line.push(b'\n');
        {
            let mut w = self.stdin.lock().await;
            w.write_all(&line)
                .await
                .map_err(|e| format!("stdio write: {e}"))?;
            w.flush().await.map_err(|e| format!("stdio write: {e}"))?;
        }
        let msg = rx
            .await
            .map_err(|_| "stdio: the server closed its output before answering".to_string())?;
        rpc_result(msg)
    }

    pub(crate) async fn notify(&self, method: &str) -> Result<()> {
        let mut line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": method}))?;
        line.push(b'\n');
        let mut w = self.stdin.lock().await;
        w.write_all(&line).await?;
        w.flush().await?;
        Ok(())
    }
}

/// One client's way to the server.
pub(crate) enum Conn {
    Stdio(Arc<StdioConn>),
    Ws {
        ws: Box<tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>>,
        next_id: u64,
    },
    Http {
        send: http1::SendRequest<Full<Bytes>>,
        mode: Transport,
        session: Option<String>,
        next_id: u64,
    },
}

fn rpc_result(msg: Value) -> std::result::Result<Value, String> {
    if let Some(e) = msg.get("error") {
        return Err(format!("JSON-RPC error {e}"));
    }
    msg.get("result")
        .cloned()
        .ok_or_else(|| format!("answer without a result: {msg}"))
}

/// The structured result of a `tools/call` result (errors for `isError`).
fn tool_result(r: Value) -> std::result::Result<Value, String> {
    if r.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(format!(
            "tool error: {}",
            r.get("content").unwrap_or(&Value::Null)
        ));
    }
    Ok(r.get("structuredContent").cloned().unwrap_or(Value::Null))
}

/// The JSON-RPC answer with `id` in a body that is JSON or an SSE stream.
fn answer_in(body: &[u8], id: u64) -> std::result::Result<Value, String> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body).map_err(|_| "answer is not UTF-8".to_string())?;
    for line in text.lines() {
        if let Some(data) = line.strip_prefix("data:")
            && let Ok(v) = serde_json::from_str::<Value>(data.trim_start())
            && v.get("id").and_then(Value::as_u64) == Some(id)
        {
            return Ok(v);
        }
    }
    Err(format!(
        "no answer with id {id} in the response: {}",
        text.chars().take(200).collect::<String>()
    ))
}

impl Conn {
    pub(crate) async fn http(port: u16, mode: Transport) -> Result<Conn> {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
        tcp.set_nodelay(true)?;
        let (send, conn) = http1::handshake(TokioIo::new(tcp)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut c = Conn::Http {
            send,
            mode,
            session: None,
            next_id: 0,
        };
        if mode == Transport::HttpSession {
            c.initialize().await?;
        }
        Ok(c)
    }

    pub(crate) async fn ws(port: u16) -> Result<Conn> {
        let (ws, _) =
            tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}/mcp/ws")).await?;
        let mut c = Conn::Ws {
            ws: Box::new(ws),
            next_id: 0,
        };
        c.initialize().await?;
        Ok(c)
    }

    /// `initialize` + `notifications/initialized` (session transports).
    async fn initialize(&mut self) -> Result<()> {
        let params = json!({"protocolVersion": SESSION_VERSION, "capabilities": {},
                            "clientInfo": {"name": "memstrata-mcp-load", "version": "0"}});
        match self {
            Conn::Ws { ws, next_id } => {
                *next_id += 1;
                let id = *next_id;
                ws.send(Message::text(
                    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params})
                        .to_string(),
                ))
                .await?;
                ws_answer(ws, id)
                    .await
                    .map_err(|e| format!("initialize: {e}"))?;
                ws.send(Message::text(
                    json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
                ))
                .await?;
                Ok(())
            }
            Conn::Http {
                send,
                session,
                next_id,
                ..
            } => {
                *next_id += 1;
                let body = json!({"jsonrpc": "2.0", "id": *next_id, "method": "initialize", "params": params});
                let req = Request::post("/mcp")
                    .header("host", "127.0.0.1")
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(Full::new(Bytes::from(body.to_string())))?;
                send.ready()
                    .await
                    .map_err(|e| format!("initialize: connection: {e}"))?;
                let resp = send
                    .send_request(req)
                    .await
                    .map_err(|e| format!("initialize: {e:?}"))?;
                let sid = resp
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
                    .ok_or("initialize: no Mcp-Session-Id in the answer")?;
                let status = resp.status();
                let bytes = resp.into_body().collect().await?.to_bytes();
                if !status.is_success() {
                    return Err(format!("initialize: HTTP {status}").into());
                }
                rpc_result(answer_in(&bytes, *next_id)?)?;
                let req = Request::post("/mcp")
                    .header("host", "127.0.0.1")
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-session-id", &sid)
                    .header("mcp-protocol-version", SESSION_VERSION)
                    .body(Full::new(Bytes::from(
                        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
                            .to_string(),
                    )))?;
                send.ready()
                    .await
                    .map_err(|e| format!("initialized: connection: {e}"))?;
                let resp = send
                    .send_request(req)
                    .await
                    .map_err(|e| format!("notifications/initialized: {e:?}"))?;
                let status = resp.status();
                resp.into_body().collect().await?;
                if !status.is_success() {
                    return Err(format!("notifications/initialized: HTTP {status}").into());
                }
                *session = Some(sid);
                Ok(())
            }
            Conn::Stdio(_) => Ok(()),
        }
    }

    /// One `tools/call`: the structured result, or what went wrong.
    pub(crate) async fn call(
        &mut self,
        tool: &str,
        args: Value,
    ) -> std::result::Result<Value, String> {
        match self {
            Conn::Stdio(s) => tool_result(
                s.request("tools/call", json!({"name": tool, "arguments": args}))
                    .await?,
            ),
            Conn::Ws { ws, next_id } => {
                *next_id += 1;
                let id = *next_id;
                let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                                 "params": {"name": tool, "arguments": args}});
                ws.send(Message::text(msg.to_string()))
                    .await
                    .map_err(|e| format!("WebSocket send: {e}"))?;
                tool_result(ws_answer(ws, id).await?)
            }
            Conn::Http {
                send,
                mode,
                session,
                next_id,
            } => {
                *next_id += 1;
                let id = *next_id;
                let b = Request::post(if *mode == Transport::Execute {
                    "/mcp/v1/execute"
                } else {
                    "/mcp"
                })
                .header("host", "127.0.0.1")
                .header("content-type", "application/json");
                let (b, body) = match mode {
                    Transport::Execute => (
                        b,
                        json!({"jsonrpc": "2.0", "id": id, "method": "execute",
                               "params": {"tool": tool, "parameters": args}}),
                    ),
                    Transport::HttpStateless => (
                        b.header("accept", "application/json, text/event-stream")
                            .header("mcp-protocol-version", STATELESS_VERSION)
                            .header("mcp-method", "tools/call")
                            .header("mcp-name", tool),
                        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                               "params": {"name": tool, "arguments": args, "_meta": {
                                   "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
                                   "io.modelcontextprotocol/clientCapabilities": {}}}}),
                    ),
                    _ => (
                        b.header("accept", "application/json, text/event-stream")
                            .header("mcp-protocol-version", SESSION_VERSION)
                            .header("mcp-session-id", session.as_deref().unwrap_or("")),
                        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                               "params": {"name": tool, "arguments": args}}),
                    ),
                };
                let req = b
                    .body(Full::new(Bytes::from(body.to_string())))
                    .map_err(|e| e.to_string())?;
                send.ready()
                    .await
                    .map_err(|e| format!("HTTP connection: {e}"))?;
                let resp = send
                    .send_request(req)
                    .await
                    .map_err(|e| format!("HTTP: {e}"))?;
                let status = resp.status();
                let bytes = resp
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| format!("HTTP body: {e}"))?
                    .to_bytes();
                if !status.is_success() {
                    return Err(format!(
                        "HTTP {status}: {}",
                        String::from_utf8_lossy(&bytes)
                            .chars()
                            .take(200)
                            .collect::<String>()
                    ));
                }
                let r = rpc_result(answer_in(&bytes, id)?)?;
                if *mode == Transport::Execute {
                    Ok(r)
                } else {
                    tool_result(r)
                }
            }
        }
    }

    /// End an HTTP session (`DELETE /mcp`); other connections just drop.
    pub(crate) async fn close(self) {
        if let Conn::Http {
            mut send,
            session: Some(sid),
            ..
        } = self
            && let Ok(req) = Request::delete("/mcp")
                .header("host", "127.0.0.1")
                .header("mcp-session-id", sid)
                .body(Full::new(Bytes::new()))
            && let Ok(resp) = send.send_request(req).await
        {
            let _ = resp.into_body().collect().await;
        }
    }
}

async fn ws_answer(
    ws: &mut tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>,
    id: u64,
) -> std::result::Result<Value, String> {
    loop {
        let msg = ws
            .next()
            .await
            .ok_or("WebSocket closed before the answer")?
            .map_err(|e| format!("WebSocket: {e}"))?;
        let text = match msg {
            Message::Text(t) => t,
            Message::Close(_) => return Err("WebSocket closed before the answer".into()),
            _ => continue,
        };
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("WebSocket frame: {e}"))?;
        if v.get("id").and_then(Value::as_u64) == Some(id) {
            return rpc_result(v);
        }
    }
}
