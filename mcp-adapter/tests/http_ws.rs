//! The HTTP listener in-process: the Host/Origin/auth guard and the execute
//! envelope through `tower::ServiceExt::oneshot`, and MCP over WebSocket with an
//! rmcp client on a real loopback socket.

use std::future::ready;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use futures::{SinkExt, StreamExt};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use memstrata::Memory;
use memstrata_mcp::transport::{HttpConfig, router};
use memstrata_mcp::{Access, Auth, Principal, Shared};

fn shared(auth: Auth) -> Arc<Shared> {
    Shared::new(Memory::temporary().unwrap(), auth, true).unwrap()
}

fn cfg() -> HttpConfig {
    HttpConfig::new("127.0.0.1:8765".parse().unwrap())
}

fn envelope(tool: &str, parameters: Value) -> Body {
    Body::from(
        json!({"jsonrpc": "2.0", "id": 7, "method": "execute", "params": {"tool": tool, "parameters": parameters}})
            .to_string(),
    )
}

async fn send(app: &axum::Router, req: Request<Body>) -> (StatusCode, Value) {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn post(host: &str) -> axum::http::request::Builder {
    Request::post("/mcp/v1/execute")
        .header(header::HOST, host)
        .header(header::CONTENT_TYPE, "application/json")
}

#[tokio::test]
async fn guard_checks_host_origin_and_keys() {
    let auth = Auth::disabled()
        .with_full_keys(["full-access-key"])
        .with_key(
            "scoped-key-123",
            Principal::restricted("scoped", &[], &["team-*"], Access::None),
        );
    let app = router(shared(auth), &cfg(), CancellationToken::new());
    let ok_req = |key: Option<&str>, tool: &str, params: Value| {
        let mut b = post("localhost:8765");
        if let Some(k) = key {
            b = b.header(header::AUTHORIZATION, format!("Bearer {k}"));
        }
        b.body(envelope(tool, params)).unwrap()
    };
    // DNS rebinding: foreign Host or Origin is refused before authentication.
    let r = post("evil.example.com")
        .header(header::AUTHORIZATION, "Bearer full-access-key")
        .body(envelope("system_status", json!({})))
        .unwrap();
    assert_eq!(send(&app, r).await.0, StatusCode::FORBIDDEN);
    let r = post("127.0.0.1:8765")
        .header(header::ORIGIN, "http://evil.example.com")
        .header(header::AUTHORIZATION, "Bearer full-access-key")
        .body(envelope("system_status", json!({})))
        .unwrap();
    assert_eq!(send(&app, r).await.0, StatusCode::FORBIDDEN);
    // Keys.
    assert_eq!(
        send(&app, ok_req(None, "system_status", json!({}))).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        send(&app, ok_req(Some("nope"), "system_status", json!({})))
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    let (s, v) = send(
        &app,
        ok_req(Some("full-access-key"), "system_status", json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["id"], 7);
    assert_eq!(v["result"]["status"], "healthy");
    // A scoped key inside and outside its contexts.
    let (s, v) = send(
        &app,
        ok_req(
            Some("scoped-key-123"),
            "memory_store",
            json!({"key": "k", "value": 1, "namespace": "team-a"}),
        ),
    )
    .await;
    assert_eq!(
        (s, v["result"]["success"].clone()),
        (StatusCode::OK, json!(true))
    );
    let (s, v) = send(
        &app,
        ok_req(
            Some("scoped-key-123"),
            "memory_store",
            json!({"key": "k", "value": 1}),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(v["error"]["data"]["code"], "FORBIDDEN");
    // The same guard sits in front of /mcp.
    let r = Request::post("/mcp")
        .header(header::HOST, "localhost:8765")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(send(&app, r).await.0, StatusCode::UNAUTHORIZED);
}

/// A refusal is answered without reading the request body, so the refusal of a request
/// with a body says `Connection: close` (the server will not reuse the connection, and a
/// client must not either); a refusal without a body, and an accepted request, keep it.
#[tokio::test]
async fn refusals_of_requests_with_a_body_close_the_connection() {
    let app = router(
        shared(Auth::disabled().with_full_keys(["full-access-key"])),
        &cfg(),
        CancellationToken::new(),
    );
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "execute",
        "params": {"tool": "system_status", "parameters": {}}})
    .to_string();
    let connection = |r: &axum::response::Response| {
        r.headers()
            .get(header::CONNECTION)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let with_body = |key: Option<&str>, host: &str| {
        let mut b = post(host).header(header::CONTENT_LENGTH, body.len());
        if let Some(k) = key {
            b = b.header(header::AUTHORIZATION, format!("Bearer {k}"));
        }
        b.body(Body::from(body.clone())).unwrap()
    };
    for (what, req) in [
        ("no key", with_body(None, "localhost:8765")),
        (
            "wrong key",
            with_body(Some("wrong-key-0123"), "localhost:8765"),
        ),
        (
            "foreign Host",
            with_body(Some("full-access-key"), "evil.example.com"),
        ),
    ] {
        let r = app.clone().oneshot(req).await.unwrap();
        assert!(r.status().is_client_error(), "{what}: {}", r.status());
        assert_eq!(connection(&r).as_deref(), Some("close"), "{what}");
    }
    let chunked = post("localhost:8765")
        .header(header::TRANSFER_ENCODING, "chunked")
        .body(Body::from(body.clone()))
        .unwrap();
    let r = app.clone().oneshot(chunked).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(connection(&r).as_deref(), Some("close"), "chunked");

    let no_body = Request::get("/mcp/v1/execute")
        .header(header::HOST, "localhost:8765")
        .body(Body::empty())
        .unwrap();
    let r = app.clone().oneshot(no_body).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        connection(&r),
        None,
        "a refusal without a body keeps the connection"
    );
    let r = app
        .clone()
        .oneshot(with_body(Some("full-access-key"), "localhost:8765"))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        connection(&r),
        None,
        "an accepted request keeps the connection"
    );
}

/// Every refused request is in the audit trail (missing or wrong key, out of scope,
/// undecodable arguments); successful reads only with `audit_reads`.
#[tokio::test]
async fn refused_requests_are_audited_and_reads_on_request() {
    for audit_reads in [false, true] {
        let auth = Auth::disabled()
            .with_full_keys(["full-access-key"])
            .with_key(
                "scoped-key-123",
                Principal::restricted("scoped", &["team-*"], &[], Access::None),
            );
        let shared =
            Shared::with_audit(Memory::temporary().unwrap(), auth, true, audit_reads).unwrap();
        let app = router(Arc::clone(&shared), &cfg(), CancellationToken::new());
        let req = |key: Option<&str>, tool: &str, params: Value| {
            let mut b = post("localhost:8765");
            if let Some(k) = key {
                b = b.header(header::AUTHORIZATION, format!("Bearer {k}"));
            }
            b.body(envelope(tool, params)).unwrap()
        };
        let calls = [
            (None, "system_status", json!({}), StatusCode::UNAUTHORIZED),
            (
                Some("wrong-key-000"),
                "system_status",
                json!({}),
                StatusCode::UNAUTHORIZED,
            ),
            // A read outside the key's contexts.
            (
                Some("scoped-key-123"),
                "memory_retrieve",
                json!({"key": "k", "namespace": "other"}),
                StatusCode::FORBIDDEN,
            ),
            // Arguments that do not decode.
            (
                Some("full-access-key"),
                "memory_retrieve",
                json!({"kee": "k"}),
                StatusCode::OK,
            ),
            // An allowed read.
            (
                Some("scoped-key-123"),
                "memory_retrieve",
                json!({"key": "k", "namespace": "team-a"}),
                StatusCode::OK,
            ),
        ];
        for (key, tool, params, status) in calls {
            assert_eq!(send(&app, req(key, tool, params)).await.0, status, "{tool}");
        }
        let trail = memstrata_mcp::security::audit_tail(&shared.mem.path(), 20).unwrap();
        let seen: Vec<(String, String, String, Option<String>)> = trail
            .iter()
            .map(|a| {
                (
                    a.who.clone(),
                    a.tool.clone(),
                    a.context.clone(),
                    a.error.clone(),
                )
            })
            .collect();
        let mut want = vec![
            (
                "anonymous".into(),
                "-".into(),
                "-".into(),
                Some("UNAUTHORIZED".into()),
            ),
            (
                "invalid-key".into(),
                "-".into(),
                "-".into(),
                Some("UNAUTHORIZED".into()),
            ),
            (
                "scoped".into(),
                "memory_retrieve".into(),
                "other".into(),
                Some("FORBIDDEN".into()),
            ),
            (
                seen[3].0.clone(),
                "memory_retrieve".into(),
                "-".into(),
                Some("INVALID_INPUT".into()),
            ),
        ];
        assert!(seen[3].0.starts_with("key-"), "{seen:?}");
        if audit_reads {
            want.push((
                "scoped".into(),
                "memory_retrieve".into(),
                "team-a".into(),
                None,
            ));
        }
        assert_eq!(seen, want, "audit_reads={audit_reads}");
    }
}

#[tokio::test]
async fn envelope_errors_are_json_rpc() {
    let app = router(shared(Auth::disabled()), &cfg(), CancellationToken::new());
    let req = |body: Body| post("localhost").body(body).unwrap();
    let (s, v) = send(
        &app,
        req(envelope(
            "knowledge_update",
            json!({"key": "nope", "patch": {}}),
        )),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["error"]["data"]["code"], "NOT_FOUND");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("knowledge_store")
    );
    let (_, v) = send(
        &app,
        req(envelope(
            "episode_record",
            json!({"summary": "x", "importance": 99}),
        )),
    )
    .await;
    assert_eq!(v["error"]["code"], -32602);
    let (_, v) = send(&app, req(envelope("nope", json!({})))).await;
    assert_eq!(v["error"]["code"], -32601);
    let (s, v) = send(&app, req(Body::from("[1,2"))).await;
    assert_eq!(
        (s, v["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!(-32700))
    );
    let (s, _) = send(
        &app,
        req(Body::from(
            json!({"jsonrpc": "1.0", "id": 1, "method": "execute"}).to_string(),
        )),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let small = HttpConfig {
        max_body_bytes: 1024,
        ..cfg()
    };
    let app = router(shared(Auth::disabled()), &small, CancellationToken::new());
    let (s, _) = send(
        &app,
        req(envelope(
            "memory_store",
            json!({"key": "k", "value": "x".repeat(4096)}),
        )),
    )
    .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
}

/// rmcp client transport over a tungstenite WebSocket.
fn ws_client(
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) -> (
    impl futures::Sink<TxJsonRpcMessage<RoleClient>, Error = tokio_tungstenite::tungstenite::Error>
    + Send
    + Unpin
    + 'static,
    impl futures::Stream<Item = RxJsonRpcMessage<RoleClient>> + Send + Unpin + 'static,
) {
    let (sink, stream) = ws.split();
    let sink = sink.with(|m: TxJsonRpcMessage<RoleClient>| {
        ready(Ok(Message::Text(serde_json::to_string(&m).unwrap().into())))
    });
    let stream = stream.filter_map(|m| {
        ready(match m {
            Ok(Message::Text(t)) => serde_json::from_str(t.as_str()).ok(),
            _ => None,
        })
    });
    (Box::pin(sink), Box::pin(stream))
}

/// The router on a real loopback socket, one full-access key (`ws-key-0123456789`):
/// its state, its address, the token that stops it, and the server task.
async fn serve_with_ws_key() -> (
    Arc<Shared>,
    SocketAddr,
    CancellationToken,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let shared = shared(Auth::disabled().with_full_keys(["ws-key-0123456789"]));
    let stop = CancellationToken::new();
    let app = router(Arc::clone(&shared), &cfg(), stop.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let server_stop = stop.clone();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { server_stop.cancelled().await })
            .await
    });
    (shared, addr, stop, server)
}

#[tokio::test]
async fn mcp_over_websocket() {
    let (shared, addr, stop, server) = serve_with_ws_key().await;

    // Without the key the upgrade is refused.
    let req = format!("ws://{addr}/mcp/ws").into_client_request().unwrap();
    let refused = tokio_tungstenite::connect_async(req)
        .await
        .expect_err("401");
    assert!(refused.to_string().contains("401"), "{refused}");

    let mut req = format!("ws://{addr}/mcp/ws").into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", "Bearer ws-key-0123456789".parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let client = ().serve(ws_client(ws)).await.expect("initialize over WebSocket");
    assert_eq!(client.list_all_tools().await.unwrap().len(), 34);
    let call = |name: &str, args: Value| {
        let Value::Object(args) = args else {
            unreachable!()
        };
        client.call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
    };
    let r = call("context_switch", json!({"target_context": "ws"}))
        .await
        .unwrap();
    assert_eq!(r.structured_content.unwrap()["previous_context"], "default");
    call("memory_store", json!({"key": "k", "value": "over ws"}))
        .await
        .unwrap();
    // The switch persisted for this WebSocket connection.
    let r = call("memory_retrieve", json!({"key": "k"})).await.unwrap();
    assert_eq!(r.structured_content.unwrap()["value"], "over ws");
    let r = call("memory_retrieve", json!({"key": "k", "namespace": "ws"}))
        .await
        .unwrap();
    assert_eq!(r.structured_content.unwrap()["found"], true);
    client.cancel().await.unwrap();
    stop.cancel();
    server.await.unwrap().unwrap();
    let trail = memstrata_mcp::security::audit_tail(&shared.mem.path(), 10).unwrap();
    assert!(
        trail
            .iter()
            .any(|a| a.transport == "ws" && a.tool == "memory_store" && a.context == "ws")
    );
}

/// Send one message and wait for the answer carrying an id.
async fn ask<S>(ws: &mut S, msg: Value) -> Value
where
    S: futures::Sink<Message>
        + futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
        + Unpin,
    <S as futures::Sink<Message>>::Error: std::fmt::Debug,
{
    ws.send(Message::Text(msg.to_string().into()))
        .await
        .unwrap();
    loop {
        if let Message::Text(t) = ws.next().await.expect("socket open").unwrap() {
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v.get("id").is_some() {
                return v;
            }
        }
    }
}

/// The execute envelope on the WebSocket endpoint, before and after an MCP handshake on
/// the same socket; MCP keeps working beside it.
#[tokio::test]
async fn execute_envelope_over_websocket() {
    let (shared, addr, stop, server) = serve_with_ws_key().await;
    let mut req = format!("ws://{addr}/mcp/ws").into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", "Bearer ws-key-0123456789".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    // No handshake yet: the envelope is answered with the tool's structured result.
    let r = ask(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 1, "method": "execute",
        "params": {"tool": "memory_store", "parameters": {"key": "k", "value": 42}}}),
    )
    .await;
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["success"], true, "{r}");
    assert_eq!(r["result"]["context"], "default", "{r}");
    // Errors are JSON-RPC errors, as on POST /mcp/v1/execute.
    let r = ask(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 2, "method": "execute",
        "params": {"tool": "no_such_tool", "parameters": {}}}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = ask(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 3, "method": "execute",
        "params": {"tool": "session_restore", "parameters": {"session_id": "nope"}}}),
    )
    .await;
    assert_eq!(r["error"]["data"]["code"], "NOT_FOUND", "{r}");
    // MCP on the same socket.
    let r = ask(&mut ws, json!({"jsonrpc": "2.0", "id": 4, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
    .await;
    assert_eq!(r["result"]["serverInfo"]["name"], "memstrata-mcp", "{r}");
    ws.send(Message::Text(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let r = ask(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "memory_retrieve", "arguments": {"key": "k"}}}),
    )
    .await;
    assert_eq!(r["result"]["structuredContent"]["value"], 42, "{r}");
    let r = ask(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 6, "method": "execute",
        "params": {"tool": "memory_retrieve", "parameters": {"key": "k"}}}),
    )
    .await;
    assert_eq!(r["result"]["value"], 42, "{r}");
    let r = ask(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 7, "method": "no/such/method"}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    ws.close(None).await.unwrap();
    stop.cancel();
    server.await.unwrap().unwrap();
    let trail = memstrata_mcp::security::audit_tail(&shared.mem.path(), 10).unwrap();
    assert!(
        trail
            .iter()
            .any(|a| a.transport == "ws" && a.tool == "memory_store" && a.ok),
        "{trail:?}"
    );
}
