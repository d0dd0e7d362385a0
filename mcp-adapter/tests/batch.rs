//! The batch write tools over MCP (in process): `episode_record_many` and
//! `knowledge_store_many` round-trip, and a bad item fails the whole call with
//! its index and field named, storing nothing.

mod common;

use serde_json::json;

use common::{connect, shared_temp};
use memstrata_mcp::Principal;

#[tokio::test]
async fn episode_record_many_round_trip_and_atomic_rejection() {
    let h = connect(shared_temp(), Principal::local()).await;
    let items: Vec<_> = (0..20)
        .map(|i| json!({"summary": format!("batch turn {i} about canoes"), "tags": ["chat"]}))
        .collect();
    let r = h
        .call(
            "episode_record_many",
            json!({"items": items, "namespace": "proj"}),
        )
        .await;
    let ids = r["ids"].as_array().unwrap();
    assert_eq!(ids.len(), 20);
    let got = h
        .call("episode_get", json!({"id": ids[4], "namespace": "proj"}))
        .await;
    assert_eq!(got["episode"]["summary"], "batch turn 4 about canoes");
    let hits = h
        .call(
            "episode_search",
            json!({"query": "", "tags": ["chat"], "limit": 100, "namespace": "proj"}),
        )
        .await;
    assert_eq!(hits["hits"].as_array().unwrap().len(), 20);

    let mut bad: Vec<_> = (0..5)
        .map(|i| json!({"summary": format!("poisoned {i}")}))
        .collect();
    bad[3] = json!({"summary": "bad", "importance": 11});
    let msg = h
        .call_err("episode_record_many", json!({"items": bad}))
        .await;
    assert!(msg.starts_with("INVALID_INPUT"), "{msg}");
    assert!(msg.contains("items[3].importance"), "{msg}");
    bad[3] = json!({"summary": "bad", "tags": vec!["t"; 65]});
    let msg = h
        .call_err("episode_record_many", json!({"items": bad}))
        .await;
    assert!(
        msg.starts_with("LIMIT_EXCEEDED") && msg.contains("items[3].tags"),
        "{msg}"
    );
    let found = h.call("episode_search", json!({"query": "poisoned"})).await;
    assert!(found["hits"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn knowledge_store_many_round_trip_and_atomic_rejection() {
    let h = connect(shared_temp(), Principal::local()).await;
    let r = h
        .call(
            "knowledge_store_many",
            json!({"items": [
                {"key": "user:ann", "knowledge": {"role": "dev"}},
                {"key": "user:bob", "knowledge": {"city": "Lyon"}},
                {"key": "user:ann", "knowledge": {"role": "lead"}},
            ]}),
        )
        .await;
    let versions: Vec<(String, i64)> = r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["key"].as_str().unwrap().to_owned(),
                e["version"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        versions,
        vec![
            ("user:ann".to_owned(), 1),
            ("user:bob".to_owned(), 1),
            ("user:ann".to_owned(), 2)
        ]
    );
    let got = h
        .call("knowledge_retrieve", json!({"key": "user:ann"}))
        .await;
    assert_eq!(got["entry"]["knowledge"], json!({"role": "lead"}));
    let msg = h
        .call_err(
            "knowledge_store_many",
            json!({"items": [{"key": "fine", "knowledge": 1}, {"key": "", "knowledge": 2}]}),
        )
        .await;
    assert!(msg.contains("items[1].key"), "{msg}");
    let q = h.call("knowledge_retrieve", json!({"key": "fine"})).await;
    assert_eq!(q["found"], false);
}
