//! A minimal HTTP/1.1 client for the security tests: one request per connection
//! (`Connection: close`) over any byte stream (plain TCP or a rustls stream), so the
//! tests go through real sockets without another HTTP client crate.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use memstrata_mcp::Shared;
use memstrata_mcp::transport::HttpConfig;

/// A response: status, headers (lower-cased names) and the body as JSON (Null if not JSON).
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Send one request over `io` and read the whole response.
pub async fn request<S: AsyncRead + AsyncWrite + Unpin>(
    mut io: S,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<&Value>,
) -> Resp {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(t) = bearer {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    head.push_str("\r\n");
    io.write_all(head.as_bytes()).await.unwrap();
    io.write_all(body.as_bytes()).await.unwrap();
    io.flush().await.unwrap();
    let mut buf = Vec::new();
    // A TLS peer may close without close_notify; what was read is enough.
    let _ = io.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Resp {
        status,
        headers,
        body: serde_json::from_str(body).unwrap_or(Value::Null),
    }
}

/// Plain TCP request to `addr`.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<&Value>,
) -> Resp {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    request(tcp, method, path, bearer, body).await
}

/// An execute envelope.
pub fn envelope(id: u64, tool: &str, parameters: Value) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "execute", "params": {"tool": tool, "parameters": parameters}})
}

/// Serve `shared` on a loopback port the kernel picks: the listener is bound here and
/// handed to the server, so the address is known (and accepting connections into its
/// backlog) before the server task first runs; no port is probed then released.
/// Returns the address and the stop token.
pub async fn serve(shared: Arc<Shared>, cfg: HttpConfig) -> (SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(memstrata_mcp::transport::serve_on(
        listener,
        shared,
        cfg,
        stop.clone(),
    ));
    (addr, stop)
}
