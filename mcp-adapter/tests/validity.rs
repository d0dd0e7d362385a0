//! Facts with validity over MCP: `valid_from` / `valid_until` on knowledge_store,
//! knowledge_update and knowledge_store_many items, `as_of` on knowledge_retrieve,
//! knowledge_query and episode_search, `include_expired` on knowledge_query.

mod common;

use chrono::{Duration, Utc};
use serde_json::json;

use common::{connect, shared_temp};
use memstrata_mcp::Principal;

fn rfc(t: chrono::DateTime<Utc>) -> String {
    t.to_rfc3339()
}

#[tokio::test]
async fn knowledge_validity_and_as_of() {
    let h = connect(shared_temp(), Principal::local()).await;
    let t0 = Utc::now() - Duration::hours(2);
    let t1 = t0 + Duration::hours(1);
    let stored = h
        .call(
            "knowledge_store",
            json!({"key": "ceo", "knowledge": {"name": "Ada"}, "valid_from": rfc(t0)}),
        )
        .await;
    assert_eq!(stored["version"], 1);
    assert!(stored.get("valid_until").is_none());
    let updated = h
        .call(
            "knowledge_update",
            json!({"key": "ceo", "patch": {"name": "Grace"}, "valid_from": rfc(t1)}),
        )
        .await;
    assert_eq!(updated["version"], 2);

    let then = h
        .call(
            "knowledge_retrieve",
            json!({"key": "ceo", "as_of": rfc(t0 + Duration::minutes(30))}),
        )
        .await;
    assert_eq!(then["found"], true);
    assert_eq!(then["entry"]["knowledge"], json!({"name": "Ada"}));
    assert!(then["entry"]["valid_until"].is_string());
    let before = h
        .call(
            "knowledge_retrieve",
            json!({"key": "ceo", "as_of": rfc(t0 - Duration::minutes(1))}),
        )
        .await;
    assert_eq!(before["found"], false);
    let now = h.call("knowledge_retrieve", json!({"key": "ceo"})).await;
    assert_eq!(now["entry"]["knowledge"], json!({"name": "Grace"}));

    let q = h
        .call(
            "knowledge_query",
            json!({"text": "Grace", "as_of": rfc(t0 + Duration::minutes(30))}),
        )
        .await;
    assert_eq!(q["hits"][0]["knowledge"], json!({"name": "Ada"}));

    // An entry that expired: left out of knowledge_query unless include_expired.
    h.call(
        "knowledge_store_many",
        json!({"items": [{"key": "promo", "knowledge": {"text": "spring discount"},
                          "valid_from": rfc(t0), "valid_until": rfc(t1)}]}),
    )
    .await;
    let q = h.call("knowledge_query", json!({"text": "discount"})).await;
    assert_eq!(q["hits"], json!([]));
    let q = h
        .call(
            "knowledge_query",
            json!({"text": "discount", "include_expired": true}),
        )
        .await;
    assert_eq!(q["hits"][0]["key"], "promo");

    let err = h
        .call_err(
            "knowledge_store",
            json!({"key": "bad", "knowledge": 1, "valid_from": rfc(t1), "valid_until": rfc(t0)}),
        )
        .await;
    assert!(err.contains("valid_until"), "{err}");
}

#[tokio::test]
async fn episode_search_as_of() {
    let h = connect(shared_temp(), Principal::local()).await;
    let before = Utc::now() - Duration::seconds(5);
    h.call(
        "episode_record",
        json!({"summary": "billing outage", "timestamp": rfc(before - Duration::days(3))}),
    )
    .await;
    let hits = h.call("episode_search", json!({"query": "billing"})).await;
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1);
    assert!(hits["hits"][0]["episode"]["recorded_at"].is_string());
    let then = h
        .call(
            "episode_search",
            json!({"query": "billing", "as_of": rfc(before)}),
        )
        .await;
    assert_eq!(then["hits"], json!([]));
}
