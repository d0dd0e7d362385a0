//! Embeddings over MCP: `embedding` fields on the tools, and `--embeddings-url`
//! against a stub OpenAI-compatible endpoint on loopback started by the test.

mod common;

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use common::{connect, shared_temp};
use memstrata_mcp::Principal;

/// Deterministic vectors: letter counts a..p, so texts sharing letters are close.
fn letters(text: &str) -> Vec<f64> {
    let mut v = vec![0.01f64; 16];
    for c in text.chars().filter(char::is_ascii_lowercase) {
        v[(c as usize - 'a' as usize) % 16] += 1.0;
    }
    v
}

#[derive(Default)]
struct Seen {
    inputs: Vec<Vec<String>>,
    models: Vec<String>,
    auth: Vec<Option<String>>,
}

async fn embeddings(
    State(seen): State<Arc<Mutex<Seen>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let input: Vec<String> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    let data: Vec<Value> = input
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": letters(t)}))
        .collect();
    let mut s = seen.lock().unwrap();
    s.models
        .push(body["model"].as_str().unwrap_or("").to_owned());
    s.auth.push(
        headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_owned()),
    );
    s.inputs.push(input);
    Json(json!({"object": "list", "data": data, "model": body["model"]}))
}

/// Start the stub on an ephemeral loopback port; returns its URL.
async fn stub() -> (String, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let app = axum::Router::new()
        .route("/v1/embeddings", axum::routing::post(embeddings))
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}/v1/embeddings"), seen)
}

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &str,
    args: Value,
) -> rmcp::model::CallToolResult {
    let Value::Object(args) = args else {
        unreachable!()
    };
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
        .await
        .expect("tools/call")
}

fn ok(r: rmcp::model::CallToolResult) -> Value {
    assert_ne!(r.is_error, Some(true), "{}", common::text(&r));
    r.structured_content.expect("structured result")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_embeds_through_the_endpoint_without_vectors_in_calls() {
    let (url, seen) = stub().await;
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--embeddings-url",
        &url,
        "--embeddings-model",
        "stub-mini",
        "stdio",
    ];
    let mut child = common::binary::command(&dir.path().join("s.mem"), &args)
        .env("MEMSTRATA_EMBEDDINGS_API_KEY", "sk-test-secret")
        .env("MEMSTRATA_LOG", "debug")
        .spawn()
        .unwrap();
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve(io).await.expect("initialize");

    let id = ok(call(
        &client,
        "episode_record",
        json!({"summary": "abc abc", "content": {"note": "cab"}}),
    )
    .await)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ok(call(&client, "episode_record", json!({"summary": "xyz mno"})).await);
    ok(call(
        &client,
        "knowledge_store",
        json!({"key": "fact", "knowledge": "abba"}),
    )
    .await);
    // "bca" shares no word with any episode: only the vector list can find it.
    let hits = ok(call(&client, "episode_search", json!({"query": "bca"})).await);
    let top = &hits["hits"][0];
    assert_eq!(top["episode"]["id"], json!(id));
    assert_eq!(top["vector_rank"], json!(1));
    assert_eq!(top["bm25_rank"], Value::Null);
    let k = ok(call(&client, "knowledge_query", json!({"text": "baba"})).await);
    assert_eq!(k["hits"][0]["key"], "fact");
    assert_eq!(k["hits"][0]["vector_rank"], json!(1));

    {
        let s = seen.lock().unwrap();
        assert_eq!(
            s.inputs,
            vec![
                vec!["abc abc\nnote cab".to_owned()],
                vec!["xyz mno".to_owned()],
                vec!["fact\nabba".to_owned()],
                vec!["bca".to_owned()],
                vec!["baba".to_owned()],
            ]
        );
        assert!(s.models.iter().all(|m| m == "stub-mini"));
        assert!(
            s.auth
                .iter()
                .all(|a| a.as_deref() == Some("Bearer sk-test-secret"))
        );
    }
    client.cancel().await.unwrap();
    assert!(child.wait().await.unwrap().success());
    let mut err = String::new();
    use tokio::io::AsyncReadExt;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .await
        .unwrap();
    assert!(
        err.contains("embedding with an OpenAI-compatible endpoint"),
        "{err}"
    );
    assert!(!err.contains("sk-test-secret"), "the API key was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_endpoint_is_a_clear_tool_error() {
    // A socket bound but never listening holds the port for the whole test: a connection
    // to it is refused, and no other process can take the port in between (a port bound
    // then released could be reused by anything).
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = held.local_addr().unwrap().port();
    let mem = memstrata::Memory::temporary().unwrap();
    let e = memstrata_mcp::backend::HttpEmbedder::with_key(
        &format!("http://127.0.0.1:{port}/v1/embeddings"),
        "m",
        Some("sk-never-shown".into()),
    )
    .unwrap();
    mem.set_embedder(Some(Arc::new(e)));
    let shared = memstrata_mcp::Shared::new(mem, memstrata_mcp::Auth::disabled(), true).unwrap();
    let h = connect(shared, Principal::local()).await;
    let msg = h.call_err("episode_record", json!({"summary": "x"})).await;
    assert!(msg.contains("embedder"), "{msg}");
    assert!(msg.contains("cannot connect"), "{msg}");
    assert!(!msg.contains("sk-never-shown"));
    // Nothing was stored.
    let hits = h.call("episode_search", json!({"query": ""})).await;
    assert_eq!(hits["hits"], json!([]));
    drop(held);
}

#[tokio::test]
async fn embedding_fields_on_the_tools() {
    let h = connect(shared_temp(), Principal::local()).await;
    let a = h
        .call(
            "episode_record",
            json!({"summary": "apple apple apple orchard", "embedding": [0.0, 1.0, 0.0]}),
        )
        .await["id"]
        .clone();
    let b = h
        .call(
            "episode_record",
            json!({"summary": "banana bread", "embedding": [1.0, 0.0, 0.0]}),
        )
        .await["id"]
        .clone();
    let c = h
        .call(
            "episode_record",
            json!({"summary": "apple pie with a long list of other words around it", "embedding": [0.6, 0.8, 0.0]}),
        )
        .await["id"]
        .clone();
    let r = h
        .call(
            "episode_search",
            json!({"query": "apple", "embedding": [1.0, 0.0, 0.0], "fusion": "rrf",
                   "bm25_weight": 1.0, "vector_weight": 1.0, "rrf_k": 60}),
        )
        .await;
    let ids: Vec<&Value> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["episode"]["id"])
        .collect();
    assert_eq!(ids, vec![&a, &c, &b]);
    assert_eq!(r["hits"][0]["bm25_rank"], json!(1));
    assert_eq!(r["hits"][0]["vector_rank"], json!(3));
    // Pure vector search, paged.
    let r = h
        .call(
            "episode_search",
            json!({"query": "", "embedding": [1.0, 0.0, 0.0], "limit": 2}),
        )
        .await;
    assert_eq!(r["hits"][0]["episode"]["id"], b);
    assert_eq!(r["hits"].as_array().unwrap().len(), 2);
    let next = r["next_cursor"].as_str().unwrap().to_owned();
    let r = h
        .call(
            "episode_search",
            json!({"query": "", "embedding": [1.0, 0.0, 0.0], "limit": 2, "cursor": next}),
        )
        .await;
    assert_eq!(r["hits"][0]["episode"]["id"], a);

    let msg = h
        .call_err(
            "episode_record",
            json!({"summary": "x", "embedding": [1.0, 0.0]}),
        )
        .await;
    assert!(
        msg.contains("embedding has 2 dimensions, context 'default' uses 3"),
        "{msg}"
    );
    let msg = h
        .call_err(
            "episode_search",
            json!({"query": "x", "embedding": [1.0, 0.0, 0.0], "fusion": "best"}),
        )
        .await;
    assert!(msg.contains("fusion"), "{msg}");

    h.call(
        "knowledge_store",
        json!({"key": "k1", "knowledge": "hammers", "embedding": [0.0, 0.0, 1.0]}),
    )
    .await;
    let r = h
        .call(
            "knowledge_query",
            json!({"text": "", "embedding": [0.1, 0.0, 1.0]}),
        )
        .await;
    assert_eq!(r["hits"][0]["key"], "k1");
    assert_eq!(r["hits"][0]["vector_rank"], json!(1));
}
