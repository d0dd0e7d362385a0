//! Duplicates caught on write over MCP: `on_duplicate` on episode_record and
//! knowledge_store, `duplicate_of` in their results, context_set_on_duplicate.

mod common;

use serde_json::json;

use common::{connect, shared_temp};
use memstrata_mcp::Principal;

const TEXT: &str = "Deployed version 2.4 of the billing service to staging";

#[tokio::test]
async fn episode_record_applies_each_policy() {
    let h = connect(shared_temp(), Principal::local()).await;
    let first = h
        .call(
            "episode_record",
            json!({"summary": TEXT, "tags": ["deploy"]}),
        )
        .await;
    assert_eq!(first["created"], true);
    assert_eq!(first["on_duplicate"], "keep");
    assert!(first["duplicate_of"].is_null());
    let id = first["id"].as_str().unwrap().to_owned();

    // keep in a context that never asked for another policy: no detection.
    let kept = h.call("episode_record", json!({"summary": TEXT})).await;
    assert_eq!(kept["created"], true);
    assert!(kept["duplicate_of"].is_null());

    let skipped = h
        .call(
            "episode_record",
            json!({"summary": TEXT, "on_duplicate": "skip"}),
        )
        .await;
    assert_eq!(skipped["created"], false);
    assert_eq!(skipped["id"], id.as_str());

    let merged = h
        .call(
            "episode_record",
            json!({"summary": TEXT, "tags": ["staging"], "on_duplicate": "merge"}),
        )
        .await;
    assert_eq!(merged["id"], id.as_str());
    let ep = h.call("episode_get", json!({"id": id})).await;
    assert_eq!(ep["episode"]["tags"], json!(["deploy", "staging"]));
    assert_eq!(ep["episode"]["seen_count"], 2);

    let linked = h
        .call(
            "episode_record",
            json!({"summary": TEXT, "on_duplicate": "link"}),
        )
        .await;
    let got = h.call("episode_get", json!({"id": linked["id"]})).await;
    assert_eq!(got["episode"]["duplicate_of"], id.as_str());
    // Once the context has a dedup index, keep names the duplicate too.
    let again = h.call("episode_record", json!({"summary": TEXT})).await;
    assert_eq!(again["duplicate_of"], id.as_str());
    assert_eq!(again["similarity"], 1.0);

    // Batch items take on_duplicate and report per item.
    let many = h
        .call(
            "episode_record_many",
            json!({"items": [
                {"summary": "A fresh fact about the deployment pipeline", "on_duplicate": "skip"},
                {"summary": "a fresh fact about the deployment pipeline!", "on_duplicate": "skip"},
                {"summary": TEXT, "on_duplicate": "skip"},
            ]}),
        )
        .await;
    let r = many["results"].as_array().unwrap();
    assert_eq!(r[0]["created"], true);
    assert_eq!(r[1]["created"], false);
    assert_eq!(r[1]["id"], r[0]["id"]);
    assert_eq!(r[1]["duplicate_of"], r[0]["id"]);
    assert_eq!(many["ids"][2], id.as_str());

    let err = h
        .call_err(
            "episode_record",
            json!({"summary": TEXT, "on_duplicate": "drop"}),
        )
        .await;
    assert!(
        err.contains("INVALID_INPUT") && err.contains("`drop`") && err.contains("`merge`"),
        "{err}"
    );
}

#[tokio::test]
async fn context_policy_and_knowledge_store() {
    let h = connect(shared_temp(), Principal::local()).await;
    let set = h
        .call(
            "context_set_on_duplicate",
            json!({"on_duplicate": "skip", "namespace": "work"}),
        )
        .await;
    assert_eq!(set["on_duplicate"], "skip");
    let a = h
        .call(
            "episode_record",
            json!({"summary": TEXT, "namespace": "work"}),
        )
        .await;
    let b = h
        .call(
            "episode_record",
            json!({"summary": TEXT, "namespace": "work"}),
        )
        .await;
    assert_eq!(a["id"], b["id"]);
    assert_eq!(b["on_duplicate"], "skip");
    // The active context keeps `keep`.
    let c = h.call("episode_record", json!({"summary": TEXT})).await;
    assert_eq!(c["created"], true);

    let v = json!({"fact": "The customer prefers invoices by email every month"});
    let k1 = h
        .call(
            "knowledge_store",
            json!({"key": "billing.invoices", "knowledge": v}),
        )
        .await;
    assert!(k1.get("duplicate_of").is_none());
    let k2 = h
        .call(
            "knowledge_store",
            json!({"key": "crm.invoices", "knowledge": v, "on_duplicate": "skip"}),
        )
        .await;
    assert_eq!(k2["key"], "billing.invoices");
    assert_eq!(k2["duplicate_of"], "billing.invoices");
    let found = h
        .call("knowledge_retrieve", json!({"key": "crm.invoices"}))
        .await;
    assert_eq!(found["found"], false);
}
