//! Forgetting by utility over MCP: context_set_retention (set, enforced at
//! once, cleared), context_evictions (the audit), system_status and
//! memory_optimize reports, and episode_search's rank_by_utility.

mod common;

use serde_json::json;

use common::{connect, shared_temp};
use memstrata_mcp::Principal;

#[tokio::test]
async fn retention_policy_evicts_audits_and_reports() {
    let h = connect(shared_temp(), Principal::local()).await;
    let mut ids = Vec::new();
    for i in 1..=6u8 {
        let r = h
            .call(
                "episode_record",
                json!({"summary": format!("observation number {i}"), "importance": i, "namespace": "notes"}),
            )
            .await;
        ids.push(r["id"].as_str().unwrap().to_owned());
    }
    let set = h
        .call(
            "context_set_retention",
            json!({"max_episodes": 4, "max_age": 86400.0, "namespace": "notes"}),
        )
        .await;
    assert_eq!(set["max_episodes"], 4);
    assert_eq!(set["max_age"], 86400.0);
    assert!(set["max_bytes"].is_null());
    // Over 4: down to 4 - 0 (the low-water mark of 4), the two least important gone.
    assert_eq!(set["evicted"], 2);
    for gone in &ids[..2] {
        let got = h
            .call("episode_get", json!({"id": gone, "namespace": "notes"}))
            .await;
        assert!(got["episode"].is_null(), "{got}");
    }
    let audit = h
        .call("context_evictions", json!({"namespace": "notes"}))
        .await;
    let list = audit["evictions"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|e| e["reason"] == "max_episodes"));
    assert!(
        list.iter()
            .all(|e| ids[..2].contains(&e["id"].as_str().unwrap().to_owned()))
    );

    let status = h.call("system_status", json!({})).await;
    let r = &status["retention"][0];
    assert_eq!(r["context"], "notes");
    assert_eq!(r["max_episodes"], 4);
    assert_eq!(r["evicted"], 2);

    let opt = h.call("memory_optimize", json!({"level": "light"})).await;
    let d = &opt["optimization_details"]["retention"];
    assert_eq!(d["episodes_evicted"], 0, "{d}");
    assert_eq!(d["contexts"]["notes"]["evicted_total"], 2, "{d}");

    let err = h
        .call_err("context_set_retention", json!({"max_episodes": 0}))
        .await;
    assert!(
        err.contains("INVALID_INPUT") && err.contains("max_episodes"),
        "{err}"
    );
    let err = h
        .call_err("context_set_retention", json!({"max_age": -1.0}))
        .await;
    assert!(err.contains("max_age"), "{err}");

    // Cleared: no limit, nothing more evicted.
    let cleared = h
        .call("context_set_retention", json!({"namespace": "notes"}))
        .await;
    assert!(cleared["max_episodes"].is_null());
    for i in 0..3 {
        h.call(
            "episode_record",
            json!({"summary": format!("more {i}"), "importance": 1, "namespace": "notes"}),
        )
        .await;
    }
    let status = h.call("system_status", json!({})).await;
    assert_eq!(status["retention"][0]["evicted"], 2);
    assert!(status["retention"][0]["max_episodes"].is_null());
}

#[tokio::test]
async fn episode_search_ranks_by_utility_when_asked() {
    let h = connect(shared_temp(), Principal::local()).await;
    let old = h
        .call(
            "episode_record",
            json!({"summary": "release checklist", "importance": 1, "timestamp": "2001-01-01T00:00:00Z"}),
        )
        .await;
    let new = h
        .call(
            "episode_record",
            json!({"summary": "release checklist", "importance": 9}),
        )
        .await;
    let ranked = h
        .call(
            "episode_search",
            json!({"query": "release checklist", "rank_by_utility": true, "limit": 2}),
        )
        .await;
    assert_eq!(ranked["hits"][0]["episode"]["id"], new["id"]);
    assert_eq!(ranked["hits"][1]["episode"]["id"], old["id"]);
    let a = ranked["hits"][0]["score"].as_f64().unwrap();
    let b = ranked["hits"][1]["score"].as_f64().unwrap();
    assert!(a > b, "{a} > {b}");
}
