//! Concurrent clients on real loopback sockets: 50 clients (half speak MCP over
//! WebSocket with the rmcp client, half the plain `POST /mcp/v1/execute`
//! envelope over HTTP/1.1 keep-alive connections) each write N short-term
//! items and N episodes with unique keys and marker words, all at once. Every
//! client then finds its own writes (read-your-writes), and once all are done
//! every single write is read back through both transports: nothing lost,
//! nothing duplicated, and the audit trail holds every call.

use std::collections::BTreeSet;
use std::future::ready;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::Barrier;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

use memstrata::Memory;
use memstrata_mcp::transport::{HttpConfig, router};
use memstrata_mcp::{Auth, Shared};

const CLIENTS: usize = 50;
const N: usize = 20;

/// A minimal HTTP/1.1 keep-alive client for the execute envelope.
struct Envelope {
    host: String,
    rd: BufReader<OwnedReadHalf>,
    wr: OwnedWriteHalf,
    next_id: u64,
}

impl Envelope {
    async fn connect(addr: SocketAddr) -> Envelope {
        let stream = TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (rd, wr) = stream.into_split();
        Envelope {
            host: addr.to_string(),
            rd: BufReader::new(rd),
            wr,
            next_id: 1,
        }
    }

    /// One request/response on the connection; returns the JSON-RPC response.
    async fn execute(&mut self, tool: &str, parameters: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "execute",
                          "params": {"tool": tool, "parameters": parameters}})
        .to_string();
        let request = format!(
            "POST /mcp/v1/execute HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.wr.write_all(request.as_bytes()).await.unwrap();
        let mut line = String::new();
        self.rd.read_line(&mut line).await.unwrap();
        assert!(
            line.starts_with("HTTP/1.1 200"),
            "{tool}: status line {line:?}"
        );
        let mut length = None;
        loop {
            line.clear();
            self.rd.read_line(&mut line).await.unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((name, value)) = l.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = Some(value.trim().parse::<usize>().unwrap());
            }
        }
        let mut buf = vec![0; length.expect("the envelope answers with a Content-Length")];
        self.rd.read_exact(&mut buf).await.unwrap();
        let resp: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(resp["id"], id, "{tool}: response id");
        resp
    }
}

type WsClient = RunningService<RoleClient, ()>;

/// rmcp client transport over a tungstenite WebSocket.
async fn ws_connect(addr: SocketAddr) -> WsClient {
    let req = format!("ws://{addr}/mcp/ws").into_client_request().unwrap();
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let (sink, stream) = ws.split();
    let sink = sink.with(|m: TxJsonRpcMessage<RoleClient>| {
        ready(Ok::<_, tokio_tungstenite::tungstenite::Error>(
            Message::Text(serde_json::to_string(&m).unwrap().into()),
        ))
    });
    let stream = stream.filter_map(|m| {
        ready(match m {
            Ok(Message::Text(t)) => {
                serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(t.as_str()).ok()
            }
            _ => None,
        })
    });
    ().serve((Box::pin(sink), Box::pin(stream)))
        .await
        .expect("initialize over WebSocket")
}

enum Client {
    Ws(WsClient),
    Http(Envelope),
}

impl Client {
    async fn connect(addr: SocketAddr, ws: bool) -> Client {
        if ws {
            Client::Ws(ws_connect(addr).await)
        } else {
            Client::Http(Envelope::connect(addr).await)
        }
    }

    /// Call a tool that must succeed; returns its structured result.
    async fn call(&mut self, tool: &str, args: Value) -> Value {
        match self {
            Client::Ws(c) => {
                let Value::Object(args) = args else {
                    unreachable!()
                };
                let r = c
                    .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
                    .await
                    .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"));
                assert_ne!(r.is_error, Some(true), "{tool} failed: {:?}", r.content);
                r.structured_content
                    .unwrap_or_else(|| panic!("{tool}: no structuredContent"))
            }
            Client::Http(c) => {
                let mut resp = c.execute(tool, args).await;
                assert!(resp.get("error").is_none(), "{tool} failed: {resp}");
                resp["result"].take()
            }
        }
    }

    async fn close(self) {
        if let Client::Ws(c) = self {
            c.cancel().await.unwrap();
        }
    }
}

fn key(c: usize, i: usize) -> String {
    format!("client{c}/item{i}")
}

fn marker(c: usize, i: usize) -> String {
    format!("mk{c}x{i}q")
}

/// One writer: N stores and N episodes, interleaved; then it finds each of its episodes.
async fn writer(addr: SocketAddr, c: usize, start: Arc<Barrier>) -> Vec<String> {
    let mut client = Client::connect(addr, c.is_multiple_of(2)).await;
    start.wait().await;
    let mut ids = Vec::with_capacity(N);
    for i in 0..N {
        let r = client
            .call(
                "memory_store",
                json!({"key": key(c, i), "value": {"c": c, "i": i}}),
            )
            .await;
        assert_eq!(
            (r["success"].clone(), r["key"].clone()),
            (json!(true), json!(key(c, i)))
        );
        let r = client
            .call(
                "episode_record",
                json!({"summary": format!("client {c} wrote {}", marker(c, i)), "content": {"c": c, "i": i},
                       "tags": [format!("client-{c}")], "participants": ["tester"]}),
            )
            .await;
        ids.push(r["id"].as_str().expect("episode id").to_owned());
    }
    // Read-your-writes while the other clients are still writing.
    for (i, id) in ids.iter().enumerate() {
        let r = client
            .call("episode_search", json!({"query": marker(c, i), "limit": 5}))
            .await;
        let hits: Vec<&str> = r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["episode"]["id"].as_str().unwrap())
            .collect();
        assert_eq!(hits, [id.as_str()], "client {c}: marker {}", marker(c, i));
    }
    client.close().await;
    ids
}

async fn run(addr: SocketAddr, shared: Arc<Shared>) {
    let start = Arc::new(Barrier::new(CLIENTS));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| tokio::spawn(writer(addr, c, Arc::clone(&start))))
        .collect();
    let mut all_ids: Vec<Vec<String>> = Vec::with_capacity(CLIENTS);
    for t in tasks {
        all_ids.push(t.await.expect("writer task"));
    }
    let unique: BTreeSet<&String> = all_ids.iter().flatten().collect();
    assert_eq!(unique.len(), CLIENTS * N, "episode ids are unique");

    // Every write is there, read through both transports by fresh connections.
    let mut readers = [
        Client::connect(addr, true).await,
        Client::connect(addr, false).await,
    ];
    for (c, ids) in all_ids.iter().enumerate() {
        let reader = &mut readers[c % 2];
        for (i, id) in ids.iter().enumerate() {
            let r = reader
                .call("memory_retrieve", json!({"key": key(c, i)}))
                .await;
            assert_eq!(r["found"], true, "lost {}", key(c, i));
            assert_eq!(r["value"], json!({"c": c, "i": i}));
            let r = reader
                .call("episode_search", json!({"query": marker(c, i), "limit": 5}))
                .await;
            let hits = r["hits"].as_array().unwrap();
            assert_eq!(hits.len(), 1, "marker {}: {r}", marker(c, i));
            assert_eq!(hits[0]["episode"]["id"], id.as_str());
            assert_eq!(hits[0]["episode"]["content"], json!({"c": c, "i": i}));
        }
        // Exactly this client's episodes carry its tag: none lost, none duplicated.
        let r = reader
            .call(
                "episode_search",
                json!({"query": "", "tags": [format!("client-{c}")], "limit": 100}),
            )
            .await;
        let got: BTreeSet<&str> = r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["episode"]["id"].as_str().unwrap())
            .collect();
        assert_eq!(r["hits"].as_array().unwrap().len(), N);
        assert_eq!(got, ids.iter().map(String::as_str).collect::<BTreeSet<_>>());
    }
    for r in readers {
        r.close().await;
    }

    // The audit trail holds every mutating call, each ok, from both transports.
    let trail = memstrata_mcp::security::audit_tail(&shared.mem.path(), 10 * CLIENTS * N).unwrap();
    for tool in ["memory_store", "episode_record"] {
        let calls: Vec<_> = trail.iter().filter(|a| a.tool == tool).collect();
        assert_eq!(calls.len(), CLIENTS * N, "{tool} audit entries");
        assert!(calls.iter().all(|a| a.ok && a.context == "default"));
        assert_eq!(
            calls.iter().filter(|a| a.transport == "ws").count(),
            CLIENTS * N / 2
        );
        assert_eq!(
            calls.iter().filter(|a| a.transport == "execute").count(),
            CLIENTS * N / 2
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_lose_nothing() {
    let shared = Shared::new(Memory::temporary().unwrap(), Auth::disabled(), true).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let app = router(Arc::clone(&shared), &HttpConfig::new(addr), stop.clone());
    let server_stop = stop.clone();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { server_stop.cancelled().await })
            .await
    });
    // A hang guard, not a timing assertion: a deadlock fails the test instead of stalling CI.
    tokio::time::timeout(Duration::from_secs(600), run(addr, Arc::clone(&shared)))
        .await
        .expect("concurrency test did not finish within 10 minutes");
    stop.cancel();
    server.await.unwrap().unwrap();
}
