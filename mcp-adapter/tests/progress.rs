//! `memory_optimize` sends `notifications/progress` when the request carries
//! `_meta.progressToken`: in-process, over `tokio::io::duplex`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ProgressNotificationParam, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use memstrata::Memory;
use memstrata_mcp::{Auth, Caller, MemoryServer, Principal, Shared};

/// A store with a few sessions holding several versions each (so `medium` and up prune).
fn shared_with_sessions() -> Arc<Shared> {
    let mem = Memory::builder()
        .temporary()
        .session_retention(1)
        .open()
        .expect("temp store");
    for i in 0..5 {
        let sid = mem
            .sessions()
            .create(&format!("s{i}"), json!({}))
            .unwrap()
            .session_id;
        for v in 0..3 {
            mem.sessions().save(&sid, json!({"v": v}), 1).unwrap();
        }
    }
    Shared::new(mem, Auth::disabled(), false).expect("shared")
}

fn serve(shared: Arc<Shared>) -> tokio::io::DuplexStream {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let server = MemoryServer::new(shared, "in-process", Caller::Fixed(Principal::local()));
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    client_io
}

struct ProgressRecorder {
    tx: mpsc::UnboundedSender<ProgressNotificationParam>,
}

impl ClientHandler for ProgressRecorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        let _ = self.tx.send(params);
    }
}

#[tokio::test]
async fn rmcp_client_receives_progress_for_its_token() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let client = ProgressRecorder { tx }
        .serve(serve(shared_with_sessions()))
        .await
        .expect("client initializes");

    // rmcp clients put their own `_meta.progressToken` on every request.
    let params = CallToolRequestParams::new("memory_optimize")
        .with_arguments(json!({"level": "aggressive"}).as_object().cloned().unwrap());
    let handle = client
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("tools/call sent");
    let want = handle.progress_token.clone();
    let ServerResult::CallToolResult(r) = handle.await_response().await.expect("tools/call") else {
        panic!("not a tool result")
    };
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(r.structured_content.as_ref().unwrap()["success"], true);

    // The client runs notification handlers on their own tasks, so collect what arrived
    // (the wire order, notifications first, is checked by the raw test below).
    let first = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("a progress notification")
        .expect("client alive");
    let mut got = vec![first];
    // Every notification was sent before the result; wait for the one of each stage (the
    // last is `flush`) instead of for a quiet moment, which a loaded machine can stretch.
    let stages = ["sweep", "prune_sessions", "merge_index", "flush"];
    let seen = |got: &[ProgressNotificationParam], stage: &str| {
        got.iter()
            .any(|p| p.message.as_deref().is_some_and(|m| m.starts_with(stage)))
    };
    while !stages.iter().all(|s| seen(&got, s)) {
        let p = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("a progress notification is missing: {got:#?}"))
            .expect("client alive");
        got.push(p);
    }
    assert!(got.iter().all(|p| p.progress_token == want), "{got:#?}");
    assert!(
        got.windows(2).all(|w| w[0].progress < w[1].progress),
        "progress must increase: {got:#?}"
    );
    assert!(
        got.iter().all(|p| p.total.is_none_or(|t| p.progress <= t)),
        "{got:#?}"
    );
    let messages: Vec<&str> = got.iter().filter_map(|p| p.message.as_deref()).collect();
    for stage in ["sweep", "prune_sessions", "merge_index", "flush"] {
        assert!(
            messages.iter().any(|m| m.starts_with(stage)),
            "no {stage} report in {messages:#?}"
        );
    }
    client.cancel().await.ok();
}

/// On the wire: at least one `notifications/progress` carrying the request's token, all of
/// them before the response; none for a request without a token.
#[tokio::test]
async fn progress_notifications_precede_the_result_on_the_wire() {
    let io = serve(shared_with_sessions());
    let (r, mut w) = tokio::io::split(io);
    let mut lines = BufReader::new(r).lines();
    let mut send = async |v: Value| {
        w.write_all(format!("{v}\n").as_bytes()).await.unwrap();
        w.flush().await.unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}),
    )
    .await;
    let mut next = async || -> Value {
        let l = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("server answers")
            .unwrap()
            .expect("server alive");
        serde_json::from_str(&l).unwrap()
    };
    loop {
        if next().await["id"] == 1 {
            break;
        }
    }
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "memory_optimize", "arguments": {"level": "medium"},
        "_meta": {"progressToken": 42}}}),
    )
    .await;
    let mut progress = Vec::new();
    let result = loop {
        let m = next().await;
        if m["id"] == 2 {
            break m;
        }
        if m["method"] == "notifications/progress" {
            progress.push(m["params"].clone());
        }
    };
    assert_eq!(
        result["result"]["structuredContent"]["success"], true,
        "{result}"
    );
    assert!(!progress.is_empty(), "no progress before the result");
    assert!(
        progress.iter().all(|p| p["progressToken"] == 42),
        "{progress:#?}"
    );
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    assert!(
        progress.iter().any(|p| p["total"].is_number()),
        "prune_sessions knows its total: {progress:#?}"
    );

    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "memory_optimize", "arguments": {"level": "medium"}}}),
    )
    .await;
    loop {
        let m = next().await;
        assert_ne!(
            m["method"], "notifications/progress",
            "progress without a token: {m}"
        );
        if m["id"] == 3 {
            assert_eq!(m["result"]["structuredContent"]["success"], true, "{m}");
            break;
        }
    }
}
