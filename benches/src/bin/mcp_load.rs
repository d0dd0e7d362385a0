//! `mcp-load`: the bounded loopback load of issue #14 (docs/benchmarks.md,
//! *Bounded loopback load*) from a Rust client, so that the table measures the
//! server, not a Python client process.
//!
//! Per row: one fresh `memstrata-mcp` (release build, a fresh store, `--no-audit`),
//! C clients that each keep one call in flight, a pre-fill of 300 keys, a warm-up,
//! then D seconds of the mix of `benches/python/mcp_latency.py` — writes / reads /
//! searches = 20 / 60 / 20 %: `knowledge_store` of a new key (a fact with three
//! observations), `knowledge_retrieve` of a pre-filled key (a miss is an error),
//! `knowledge_query` of one word, limit 10 — the same facts and words (the standard
//! corpus). Afterwards every acknowledged write (pre-fill, warm-up, measured) is
//! read back by key on the same instance: LOST = acknowledged but not found.
//!
//! Transports (rows): `stdio` (one server process per row; the C clients share its
//! one stdio connection, C requests in flight, answers matched by id),
//! `http-session` (streamable HTTP as the SDK clients use it: `initialize`,
//! `notifications/initialized`, then `tools/call` with `Mcp-Session-Id`; one session
//! and one keep-alive connection per client), `http-stateless` (stateless
//! 2026-07-28 `tools/call` on `/mcp`, one keep-alive connection per client), `ws`
//! (one WebSocket per client, `initialize`d), `execute` (`POST /mcp/v1/execute`,
//! one keep-alive connection per client), and the wide row `execute-wide` /
//! `http-stateless-wide` / `http-session-wide` with the wide client count.
//!
//! Usage:
//!   mcp-load BINARY [--seconds D] [--warmup W] [--clients C] [--wide C64]
//!            [--rows stdio,http-session,...] [--threads T] [--dir DIR]
//!            [--md OUT.md] [--json OUT.json]
//! The JSON is the format `benches/python/quick_report.py` reads. Nothing here
//! asserts on time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use memstrata_benches::corpus::{Corpus, Rng};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Mutex, oneshot};
use tokio_tungstenite::tungstenite::Message;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const PREFILL: usize = 300;
const WRITE_PCT: usize = 20;
const READ_PCT: usize = 60; // the rest are searches
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Issue #14: C = 8 on every transport ≥ 2000 calls/s, p95 < 25 ms, p99 < 100 ms;
/// the wide HTTP row ≥ 1500 calls/s, p99 < 100 ms, 0 errors, 0 lost.
const TARGET_P95_NS: f64 = 25e6;
const TARGET_P99_NS: f64 = 100e6;
const KV_TEXTS: usize = 5000; // as `compare binding-data`
const QUERIES: usize = 200;
const SESSION_VERSION: &str = "2025-06-18";
const STATELESS_VERSION: &str = "2026-07-28";

// ------------------------------------------------------------------ workload

/// The facts and search words of `mcp_latency.py` (`binding-data` of the standard corpus).
struct Data {
    texts: Vec<String>,
    words: Vec<String>,
}

impl Data {
    fn standard() -> Data {
        let corpus = Corpus::standard();
        let texts = (0..KV_TEXTS)
            .map(|i| corpus.kv_value(i)["text"].as_str().unwrap_or("").to_owned())
            .collect();
        let words = corpus
            .keyword_queries(QUERIES)
            .iter()
            .filter_map(|q| q.split_whitespace().next().map(str::to_owned))
            .collect();
        Data { texts, words }
    }

    fn store(&self, i: usize) -> (&'static str, Value) {
        const KINDS: [&str; 6] = [
            "person", "project", "service", "decision", "incident", "tool",
        ];
        let obs: Vec<&str> = (0..3)
            .map(|j| self.texts[(i * 3 + j) % self.texts.len()].as_str())
            .collect();
        (
            "knowledge_store",
            json!({"key": key(i), "knowledge": {"entityType": KINDS[i % KINDS.len()], "observations": obs}}),
        )
    }
}

fn key(i: usize) -> String {
    format!("load-{i:06}")
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    Write,
    Read,
    Search,
}

/// The next call of the mix; `writes` numbers the new keys.
fn next_op(rng: &mut Rng, d: &Data, writes: &AtomicUsize) -> (Kind, &'static str, Value) {
    let x = rng.range(0, 100);
    if x < WRITE_PCT {
        let (tool, args) = d.store(PREFILL + writes.fetch_add(1, Ordering::Relaxed));
        (Kind::Write, tool, args)
    } else if x < WRITE_PCT + READ_PCT {
        (
            Kind::Read,
            "knowledge_retrieve",
            json!({"key": key(rng.range(0, PREFILL))}),
        )
    } else {
        let w = &d.words[rng.range(0, d.words.len())];
        (
            Kind::Search,
            "knowledge_query",
            json!({"text": w, "limit": 10}),
        )
    }
}

// ------------------------------------------------------------------ transports

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Transport {
    Stdio,
    HttpSession,
    HttpStateless,
    Ws,
    Execute,
}

impl Transport {
    fn parse(s: &str) -> Option<Transport> {
        Some(match s {
            "stdio" => Transport::Stdio,
            "http-session" => Transport::HttpSession,
            "http-stateless" => Transport::HttpStateless,
            "ws" => Transport::Ws,
            "execute" => Transport::Execute,
            _ => return None,
        })
    }

    fn label(self, c: usize) -> String {
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

    fn short(self) -> &'static str {
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
struct StdioConn {
    stdin: Mutex<ChildStdin>,
    pending: std::sync::Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
}

impl StdioConn {
    async fn request(&self, method: &str, params: Value) -> std::result::Result<Value, String> {
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

    async fn notify(&self, method: &str) -> Result<()> {
        let mut line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": method}))?;
        line.push(b'\n');
        let mut w = self.stdin.lock().await;
        w.write_all(&line).await?;
        w.flush().await?;
        Ok(())
    }
}

/// One client's way to the server.
enum Conn {
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
    async fn http(port: u16, mode: Transport) -> Result<Conn> {
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

    async fn ws(port: u16) -> Result<Conn> {
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
    async fn call(&mut self, tool: &str, args: Value) -> std::result::Result<Value, String> {
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
    async fn close(self) {
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

// ------------------------------------------------------------------ server

struct Server {
    child: Child,
    port: u16,
    stdio: Option<Arc<StdioConn>>,
}

async fn start_server(binary: &Path, store: &Path, transport: Transport) -> Result<Server> {
    let mut cmd = Command::new(binary);
    cmd.arg("--store")
        .arg(store)
        .arg("--no-audit")
        .stderr(Stdio::null())
        .kill_on_drop(true);
    if transport == Transport::Stdio {
        cmd.arg("stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let conn = Arc::new(StdioConn {
            stdin: Mutex::new(stdin),
            pending: std::sync::Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        });
        let reader = Arc::clone(&conn);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let Some(id) = v.get("id").and_then(Value::as_u64) else {
                    continue; // a notification
                };
                let tx = reader.pending.lock().ok().and_then(|mut p| p.remove(&id));
                if let Some(tx) = tx {
                    let _ = tx.send(v);
                }
            }
            // End of output: every caller still waiting gets an error (its sender drops).
            if let Ok(mut p) = reader.pending.lock() {
                p.clear();
            }
        });
        conn.request(
            "initialize",
            json!({"protocolVersion": SESSION_VERSION, "capabilities": {},
                   "clientInfo": {"name": "memstrata-mcp-load", "version": "0"}}),
        )
        .await?;
        conn.notify("notifications/initialized").await?;
        return Ok(Server {
            child,
            port: 0,
            stdio: Some(conn),
        });
    }
    // Port 0: the kernel picks the port and the server logs it (a port probed and released
    // here could be taken by another process before the server binds it).
    cmd.arg("http")
        .arg("--listen")
        .arg("127.0.0.1:0")
        // The default filter: the listening line is at `info`.
        .env("MEMSTRATA_LOG", "info,rmcp=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let mut lines = BufReader::new(child.stderr.take().ok_or("no stderr")?).lines();
    let port = loop {
        // The server prints its listening line or exits (end of stderr): no deadline.
        let Some(line) = lines.next_line().await? else {
            let st = child.wait().await?;
            return Err(format!("memstrata-mcp http exited early ({st})").into());
        };
        if let Some(port) = line
            .split("listening on http://127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|p| p.parse::<u16>().ok())
        {
            break port;
        }
    };
    // Keep reading stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Server {
        child,
        port,
        stdio: None,
    })
}

/// CPU seconds (user + system) of process `pid` so far.
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime), in clock ticks of 1/100 s.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

// ------------------------------------------------------------------ one row

#[derive(Default)]
struct Tally {
    lat: Vec<u64>,
    by_kind: HashMap<&'static str, Vec<u64>>,
    errors: Vec<String>,
    setup_errors: Vec<String>,
    acked: Vec<String>,
}

struct RowResult {
    transport: Transport,
    clients: usize,
    calls: usize,
    by_kind: [(usize, f64, f64); 3], // calls, p50, p95 per write / read / search
    rate: Option<f64>,
    p: [f64; 3],
    errors: usize,
    error_examples: Vec<String>,
    acked: usize,
    lost: Option<usize>,
    wall_s: f64,
    client_cpu: f64,
    server_cpu: f64,
    load_before: String,
    load_after: String,
    failure: Option<String>,
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Write => "write",
        Kind::Read => "read",
        Kind::Search => "search",
    }
}

/// Clients loop on the mix, one call in flight each, until `secs` have passed.
async fn drive(
    conns: Vec<Conn>,
    secs: f64,
    data: Arc<Data>,
    writes: Arc<AtomicUsize>,
    seed: u64,
    measured: bool,
) -> (Vec<Conn>, Tally, f64) {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(w, mut conn)| {
            let data = Arc::clone(&data);
            let writes = Arc::clone(&writes);
            tokio::spawn(async move {
                let mut rng = Rng::new(seed * 1000 + w as u64);
                let mut t = Tally::default();
                while Instant::now() < deadline {
                    let (kind, tool, args) = next_op(&mut rng, &data, &writes);
                    let wkey = (kind == Kind::Write)
                        .then(|| args["key"].as_str().unwrap_or("").to_owned());
                    let rkey = args.get("key").and_then(Value::as_str).map(str::to_owned);
                    let start = Instant::now();
                    let r = tokio::time::timeout(CALL_TIMEOUT, conn.call(tool, args)).await;
                    let ns = start.elapsed().as_nanos() as u64;
                    let err = match r {
                        Err(_) => Some(format!("{tool}: no answer within {CALL_TIMEOUT:?}")),
                        Ok(Err(e)) => Some(format!("{tool}: {e}")),
                        Ok(Ok(v))
                            if kind == Kind::Read
                                && v.get("found") == Some(&Value::Bool(false)) =>
                        {
                            Some(format!(
                                "{tool}: pre-filled key {} not found",
                                rkey.unwrap_or_default()
                            ))
                        }
                        Ok(Ok(_)) => None,
                    };
                    if let (Some(k), None) = (wkey, &err) {
                        t.acked.push(k);
                    }
                    match (measured, err) {
                        (false, Some(e)) => t.setup_errors.push(e),
                        (false, None) => {}
                        (true, Some(e)) => t.errors.push(e),
                        (true, None) => {
                            t.lat.push(ns);
                            t.by_kind.entry(kind_name(kind)).or_default().push(ns);
                        }
                    }
                }
                (conn, t)
            })
        })
        .collect();
    let mut all = Tally::default();
    let mut conns = Vec::new();
    for task in tasks {
        match task.await {
            Ok((conn, t)) => {
                conns.push(conn);
                all.lat.extend(t.lat);
                for (k, v) in t.by_kind {
                    all.by_kind.entry(k).or_default().extend(v);
                }
                all.errors.extend(t.errors);
                all.setup_errors.extend(t.setup_errors);
                all.acked.extend(t.acked);
            }
            Err(e) => all.errors.push(format!("client task failed: {e}")),
        }
    }
    (conns, all, t0.elapsed().as_secs_f64())
}

fn pct(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)] as f64
}

async fn connect(server: &Server, t: Transport, c: usize) -> Result<Vec<Conn>> {
    let mut conns = Vec::with_capacity(c);
    for _ in 0..c {
        conns.push(match t {
            Transport::Stdio => Conn::Stdio(Arc::clone(server.stdio.as_ref().ok_or("no stdio")?)),
            Transport::Ws => Conn::ws(server.port).await?,
            _ => Conn::http(server.port, t).await?,
        });
    }
    Ok(conns)
}

#[allow(clippy::too_many_arguments)]
async fn run_row(
    binary: &Path,
    dir: &Path,
    t: Transport,
    c: usize,
    secs: f64,
    warmup: f64,
    data: Arc<Data>,
    seed: u64,
) -> RowResult {
    let load_before = loadavg();
    let mut row = RowResult {
        transport: t,
        clients: c,
        calls: 0,
        by_kind: [(0, f64::NAN, f64::NAN); 3],
        rate: None,
        p: [f64::NAN; 3],
        errors: 0,
        error_examples: Vec::new(),
        acked: 0,
        lost: None,
        wall_s: 0.0,
        client_cpu: 0.0,
        server_cpu: 0.0,
        load_before,
        load_after: String::new(),
        failure: None,
    };
    let store = dir.join(format!("store-{seed}"));
    let _ = std::fs::remove_dir_all(&store);
    if let Err(e) = run_row_inner(binary, &store, &mut row, secs, warmup, data, seed).await {
        row.failure = Some(e.to_string());
    }
    let _ = std::fs::remove_dir_all(&store);
    row.load_after = loadavg();
    row
}

async fn run_row_inner(
    binary: &Path,
    store: &Path,
    row: &mut RowResult,
    secs: f64,
    warmup: f64,
    data: Arc<Data>,
    seed: u64,
) -> Result<()> {
    let (t, c) = (row.transport, row.clients);
    let mut server = start_server(binary, store, t).await?;
    let server_pid = server.child.id().map(|p| p.to_string()).unwrap_or_default();
    let mut conns = connect(&server, t, c).await?;
    // Pre-fill: the keys reads ask for, spread over the clients.
    let next = Arc::new(AtomicUsize::new(0));
    let mut acked: Vec<String> = Vec::new();
    let mut setup_errors = 0usize;
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut conn| {
            let (next, data) = (Arc::clone(&next), Arc::clone(&data));
            tokio::spawn(async move {
                let (mut ok, mut bad) = (Vec::new(), 0usize);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= PREFILL {
                        break;
                    }
                    let (tool, args) = data.store(i);
                    match conn.call(tool, args).await {
                        Ok(_) => ok.push(key(i)),
                        Err(_) => bad += 1,
                    }
                }
                (conn, ok, bad)
            })
        })
        .collect();
    conns = Vec::new();
    for task in tasks {
        let (conn, ok, bad) = task.await?;
        conns.push(conn);
        acked.extend(ok);
        setup_errors += bad;
    }
    let writes = Arc::new(AtomicUsize::new(0));
    let (conns, warm, _) = drive(
        conns,
        warmup,
        Arc::clone(&data),
        Arc::clone(&writes),
        seed,
        false,
    )
    .await;
    acked.extend(warm.acked);
    setup_errors += warm.setup_errors.len();
    let me = std::process::id().to_string();
    let (cpu_c0, cpu_s0) = (cpu_seconds(&me), cpu_seconds(&server_pid));
    let (mut conns, mut m, wall) = drive(
        conns,
        secs,
        Arc::clone(&data),
        Arc::clone(&writes),
        seed + 1,
        true,
    )
    .await;
    let (cpu_c1, cpu_s1) = (cpu_seconds(&me), cpu_seconds(&server_pid));
    row.client_cpu = cpu_c1.zip(cpu_c0).map_or(f64::NAN, |(a, b)| a - b);
    row.server_cpu = cpu_s1.zip(cpu_s0).map_or(f64::NAN, |(a, b)| a - b);
    acked.extend(std::mem::take(&mut m.acked));
    m.lat.sort_unstable();
    row.calls = m.lat.len();
    row.wall_s = wall;
    if !m.lat.is_empty() {
        row.rate = Some(m.lat.len() as f64 / wall);
        row.p = [pct(&m.lat, 0.5), pct(&m.lat, 0.95), pct(&m.lat, 0.99)];
    }
    for (i, k) in ["write", "read", "search"].iter().enumerate() {
        if let Some(v) = m.by_kind.get_mut(k) {
            v.sort_unstable();
            row.by_kind[i] = (v.len(), pct(v, 0.5), pct(v, 0.95));
        }
    }
    row.errors = m.errors.len();
    let mut seen: Vec<String> = Vec::new();
    for e in &m.errors {
        let short: String = e.chars().take(160).collect();
        if !seen.contains(&short) && seen.len() < 3 {
            seen.push(short);
        }
    }
    if setup_errors > 0 {
        seen.push(format!("{setup_errors} errors in the pre-fill and warm-up"));
    }
    row.error_examples = seen;
    // Lost writes: every acknowledged key read back, by key, on the same instance.
    row.acked = acked.len();
    let keys = Arc::new(acked);
    let pos = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = conns
        .drain(..)
        .map(|mut conn| {
            let (keys, pos) = (Arc::clone(&keys), Arc::clone(&pos));
            tokio::spawn(async move {
                let mut lost = 0usize;
                loop {
                    let i = pos.fetch_add(1, Ordering::Relaxed);
                    let Some(k) = keys.get(i) else { break };
                    match conn.call("knowledge_retrieve", json!({"key": k})).await {
                        Ok(v) if v.get("found") != Some(&Value::Bool(false)) => {}
                        _ => lost += 1,
                    }
                }
                (conn, lost)
            })
        })
        .collect();
    let mut lost = 0;
    for task in tasks {
        let (conn, l) = task.await?;
        lost += l;
        conn.close().await;
    }
    row.lost = Some(lost);
    // Stop the server: end of input for stdio, a kill for HTTP (the store is thrown away).
    if let Some(s) = server.stdio.take() {
        drop(s);
    }
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
    Ok(())
}

// ------------------------------------------------------------------ report

fn fmt_ns(ns: f64) -> String {
    if ns.is_nan() {
        "–".into()
    } else if ns < 1e6 {
        format!("{:.0} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

fn target(r: &RowResult, wide: bool) -> String {
    let Some(rate) = r.rate else {
        return "not measured".into();
    };
    if wide {
        let ok = rate >= 1500.0 && r.p[2] < TARGET_P99_NS && r.errors == 0 && r.lost == Some(0);
        format!(
            "≥ 1500/s, p99 < 100 ms, 0 errors, 0 lost: {}",
            if ok { "met" } else { "**missed**" }
        )
    } else {
        let ok = rate >= 2000.0 && r.p[1] < TARGET_P95_NS && r.p[2] < TARGET_P99_NS;
        format!(
            "≥ 2000/s, p95 < 25 ms, p99 < 100 ms: {}",
            if ok { "met" } else { "**missed**" }
        )
    }
}

struct Args {
    binary: PathBuf,
    secs: f64,
    warmup: f64,
    clients: usize,
    wide: usize,
    rows: Vec<(Transport, bool)>,
    threads: usize,
    dir: PathBuf,
    md: Option<PathBuf>,
    json: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let binary: PathBuf = it
        .next()
        .ok_or("usage: mcp-load BINARY [--seconds D] [--warmup W] [--clients C] [--wide C] [--rows LIST] [--threads T] [--dir DIR] [--md FILE] [--json FILE]")?
        .into();
    let mut a = Args {
        binary,
        secs: 10.0,
        warmup: 1.0,
        clients: 8,
        wide: 64,
        rows: Vec::new(),
        threads: 1,
        dir: std::env::temp_dir(),
        md: None,
        json: None,
    };
    let mut rows =
        "stdio,http-session,http-stateless,ws,execute,execute-wide,http-stateless-wide".to_owned();
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => a.secs = val()?.parse()?,
            "--warmup" => a.warmup = val()?.parse()?,
            "--clients" => a.clients = val()?.parse()?,
            "--wide" => a.wide = val()?.parse()?,
            "--rows" => rows = val()?,
            "--threads" => a.threads = val()?.parse()?,
            "--dir" => a.dir = val()?.into(),
            "--md" => a.md = Some(val()?.into()),
            "--json" => a.json = Some(val()?.into()),
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    for r in rows.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let (name, wide) = match r.strip_suffix("-wide") {
            Some(n) => (n, true),
            None => (r, false),
        };
        let t = Transport::parse(name).ok_or_else(|| format!("--rows: unknown row {r:?}"))?;
        a.rows.push((t, wide));
    }
    if a.clients == 0 || a.wide == 0 || a.threads == 0 || a.secs <= 0.0 {
        return Err("--clients, --wide, --threads and --seconds must be > 0".into());
    }
    Ok(a)
}

fn main() -> Result<()> {
    let a = parse_args()?;
    std::fs::create_dir_all(&a.dir)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(a.threads)
        .enable_all()
        .build()?;
    let data = Arc::new(Data::standard());
    let dir = tempfile::Builder::new()
        .prefix("mcp-load-")
        .tempdir_in(&a.dir)?;
    let started = Instant::now();
    let mut results = Vec::new();
    for (i, &(t, wide)) in a.rows.iter().enumerate() {
        let c = if wide { a.wide } else { a.clients };
        eprintln!("== mcp-load: {}", t.label(c));
        let r = rt.block_on(run_row(
            &a.binary,
            dir.path(),
            t,
            c,
            a.secs,
            a.warmup,
            Arc::clone(&data),
            7 + i as u64 * 10,
        ));
        eprintln!(
            "   {} calls, {}/s, p50 {} p95 {} p99 {}, {} errors, lost {:?}{}",
            r.calls,
            r.rate.map_or("–".into(), |x| format!("{x:.0}")),
            fmt_ns(r.p[0]),
            fmt_ns(r.p[1]),
            fmt_ns(r.p[2]),
            r.errors,
            r.lost,
            r.failure
                .as_ref()
                .map_or(String::new(), |f| format!(", FAILED: {f}"))
        );
        results.push((r, wide));
    }
    let total = started.elapsed().as_secs_f64();
    if let Some(path) = &a.json {
        let rows: Vec<Value> = results
            .iter()
            .map(|(r, wide)| {
                let ok = r.rate.is_some() && r.failure.is_none();
                json!({
                    "short": r.transport.short(), "label": r.transport.label(r.clients),
                    "clients": r.clients, "baseline": Value::Null, "calls": r.calls,
                    "rate": r.rate, "p50_ns": ok.then_some(r.p[0]), "p95_ns": ok.then_some(r.p[1]),
                    "p99_ns": ok.then_some(r.p[2]), "errors": r.errors, "lost": r.lost,
                    "acked": r.acked, "failure": r.failure, "target": target(r, *wide),
                    "client_cpu_s": r.client_cpu, "server_cpu_s": r.server_cpu, "wall_s": r.wall_s,
                    "load_before": r.load_before, "load_after": r.load_after,
                })
            })
            .collect();
        std::fs::write(path, serde_json::to_vec_pretty(&rows)?)?;
    }
    let md = markdown(&a, &results, total);
    if let Some(path) = &a.md {
        std::fs::write(path, &md)?;
    }
    println!("{md}");
    Ok(())
}

fn markdown(a: &Args, results: &[(RowResult, bool)], total: f64) -> String {
    let mut s = String::new();
    s.push_str("### Bounded loopback load (Rust load client)\n\n");
    s.push_str(&format!(
        "`benches/src/bin/mcp_load.rs` (`mcp-load`, a tokio client on {} runtime thread{}) against the release \
         `memstrata-mcp`: one server instance per row (a fresh store, `--no-audit`), C clients each with one call \
         in flight over loopback. Per row: a pre-fill of {PREFILL} entities (not measured), {} s of warm-up, then \
         D = {} s of the mix writes / reads / searches = {WRITE_PCT}% / {READ_PCT}% / {}%: WRITES `knowledge_store` a \
         new key each (a fact with three observations of 8–50 words), READS `knowledge_retrieve` a random pre-filled \
         key (a miss counts as an error), SEARCHES `knowledge_query` one word, limit 10 — the facts and words of the \
         Python rows. stdio: one server process for the row, its C clients multiplexed on the one stdio connection \
         (answers matched by id); streamable HTTP with sessions: each client `initialize`s its own session and sends \
         `tools/call` with `Mcp-Session-Id` on its own keep-alive connection (what the SDK clients do); stateless: \
         2026-07-28 `tools/call` requests (`Mcp-Method` / `Mcp-Name` headers, `_meta`), no session; WebSocket: one \
         `initialize`d connection per client; `/mcp/v1/execute`: the plain envelope, one keep-alive connection per \
         client. calls/s = completed calls ÷ the wall time of the measured window; p50/p95/p99 over every completed \
         call (errors apart). LOST = writes acknowledged (pre-fill, warm-up and measured) that `knowledge_retrieve` \
         of their key on the same instance does not find afterwards. CPU = seconds of CPU used during the measured \
         window by the client and by the server (`/proc/PID/stat`): with both on the same 2 cores, it shows which \
         side is the bound.\n\n",
        a.threads,
        if a.threads == 1 { "" } else { "s" },
        a.warmup,
        a.secs,
        100 - WRITE_PCT - READ_PCT
    ));
    s.push_str("| transport, clients | C | calls completed (w / r / s) | calls/s | p50 | p95 | p99 | errors | acknowledged writes / LOST | CPU client / server | load avg before → after | target |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (r, wide) in results {
        s.push_str(&format!(
            "| {} | {} | {} ({} / {} / {}) | {} | {} | {} | {} | {} | {} / {} | {:.1} s / {:.1} s | {} → {} | {} |\n",
            r.transport.label(r.clients),
            r.clients,
            r.calls,
            r.by_kind[0].0,
            r.by_kind[1].0,
            r.by_kind[2].0,
            r.rate.map_or("–".into(), |x| format!("{x:.0}")),
            fmt_ns(r.p[0]),
            fmt_ns(r.p[1]),
            fmt_ns(r.p[2]),
            r.errors,
            r.acked,
            r.lost.map_or("–".into(), |l| if l == 0 { "0".into() } else { format!("**{l}**") }),
            r.client_cpu,
            r.server_cpu,
            r.load_before,
            r.load_after,
            target(r, *wide)
        ));
    }
    s.push('\n');
    let per_op: Vec<String> = results
        .iter()
        .filter(|(r, _)| r.rate.is_some())
        .map(|(r, _)| {
            format!(
                "{} ×{}: {} / {}, {} / {}, {} / {}",
                r.transport.short(),
                r.clients,
                fmt_ns(r.by_kind[0].1),
                fmt_ns(r.by_kind[0].2),
                fmt_ns(r.by_kind[1].1),
                fmt_ns(r.by_kind[1].2),
                fmt_ns(r.by_kind[2].1),
                fmt_ns(r.by_kind[2].2)
            )
        })
        .collect();
    s.push_str(&format!(
        "p50 / p95 by op, writes / reads / searches: {}. Wall time of this section: {total:.0} s.\n\n",
        per_op.join("; ")
    ));
    for (r, _) in results {
        if let Some(f) = &r.failure {
            s.push_str(&format!(
                "- {}: **did not run**: {f}\n",
                r.transport.label(r.clients)
            ));
        }
        if !r.error_examples.is_empty() {
            s.push_str(&format!(
                "- {}: errors, e.g. {}\n",
                r.transport.label(r.clients),
                r.error_examples.join("; ")
            ));
        }
    }
    s.push('\n');
    s
}
