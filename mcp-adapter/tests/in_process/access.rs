//! Bad input kinds, API-key scopes, and each connection's own context.

use super::*;

#[tokio::test]
async fn bad_input_kinds() {
    let mem = Memory::builder()
        .temporary()
        .limits(Limits {
            max_value_bytes: 4096,
            ..Limits::default()
        })
        .open()
        .unwrap();
    let h = connect(
        Shared::new(mem, Auth::disabled(), false).unwrap(),
        Principal::local(),
    )
    .await;
    // Missing and mistyped arguments: a tool error naming the field (SEP-1303: the model can fix its call).
    let m = h.call_err("memory_store", json!({"value": 1})).await;
    assert!(
        m.starts_with("INVALID_INPUT:") && m.contains("`key`"),
        "{m}"
    );
    let m = h
        .call_err(
            "episode_record",
            json!({"summary": "x", "importance": "high"}),
        )
        .await;
    assert!(m.starts_with("INVALID_INPUT:"), "{m}");
    let m = h
        .call_err("memory_store", json!({"key": "k", "value": 1, "tll": 5}))
        .await;
    assert!(m.contains("tll"), "unknown fields are refused: {m}");
    // Engine validation.
    let m = h
        .call_err("episode_record", json!({"summary": "x", "importance": 11}))
        .await;
    assert!(
        m.starts_with("INVALID_INPUT:") && m.contains("importance"),
        "{m}"
    );
    let m = h
        .call_err("memory_store", json!({"key": "k", "value": 1, "ttl": -1}))
        .await;
    assert!(m.starts_with("INVALID_INPUT:") && m.contains("ttl"), "{m}");
    let m = h
        .call_err(
            "memory_store",
            json!({"key": "k", "value": "x".repeat(5000)}),
        )
        .await;
    assert!(
        m.starts_with("LIMIT_EXCEEDED:") && m.contains("4096"),
        "{m}"
    );
    let m = h
        .call_err(
            "memory_store",
            json!({"key": "k", "value": 1, "namespace": "bad name"}),
        )
        .await;
    assert!(
        m.starts_with("INVALID_INPUT:") && m.contains("namespace"),
        "{m}"
    );
    let m = h
        .call_err(
            "session_save",
            json!({"session_id": "x", "content": {}, "compression_level": 9}),
        )
        .await;
    assert!(
        m.starts_with("INVALID_INPUT:") && m.contains("compression_level"),
        "{m}"
    );
    // Nothing was stored by the failed calls.
    assert_eq!(
        h.call("memory_retrieve", json!({"key": "k"})).await["found"],
        false
    );
    // Unknown tool: a JSON-RPC error, not a tool result.
    let e = h
        .client
        .call_tool(CallToolRequestParams::new("no_such_tool"))
        .await
        .expect_err("unknown tool is a protocol error");
    assert!(e.to_string().contains("no_such_tool"), "{e}");
}

#[tokio::test]
async fn api_key_scopes_are_enforced() {
    let shared = shared_temp();
    let who = Principal::restricted("bot", &["shared"], &["proj-*"], Access::Read);
    let h = connect(shared.clone(), who).await;
    h.call(
        "memory_store",
        json!({"key": "k", "value": 1, "namespace": "proj-a"}),
    )
    .await;
    let m = h
        .call_err(
            "memory_store",
            json!({"key": "k", "value": 1, "namespace": "shared"}),
        )
        .await;
    assert!(
        m.starts_with("FORBIDDEN:") && m.contains("\"shared\"") && m.contains("proj-*"),
        "{m}"
    );
    let m = h
        .call_err("memory_store", json!({"key": "k", "value": 1}))
        .await;
    assert!(
        m.starts_with("FORBIDDEN:") && m.contains("\"default\""),
        "{m}"
    );
    h.call(
        "memory_retrieve",
        json!({"key": "k", "namespace": "shared"}),
    )
    .await;
    let m = h.call_err("session_create", json!({"name": "s"})).await;
    assert!(
        m.starts_with("FORBIDDEN:") && m.contains("engine-wide"),
        "{m}"
    );
    h.call("system_status", json!({})).await;
    let m = h
        .call_err("context_switch", json!({"target_context": "secret"}))
        .await;
    assert!(m.starts_with("FORBIDDEN:"), "{m}");
    // Refused mutating calls are audited with who and why.
    let trail = memstrata_mcp::security::audit_tail(&shared.mem.path(), 10).unwrap();
    assert!(
        trail
            .iter()
            .any(|a| a.who == "bot" && a.tool == "memory_store" && a.context == "proj-a" && a.ok)
    );
    assert!(trail.iter().any(|a| a.who == "bot"
        && a.context == "shared"
        && a.error.as_deref() == Some("FORBIDDEN")));
}

#[tokio::test]
async fn each_connection_has_its_own_context() {
    let shared = shared_temp();
    let a = connect(shared.clone(), Principal::local()).await;
    let b = connect(shared.clone(), Principal::local()).await;
    a.call("context_switch", json!({"target_context": "alpha"}))
        .await;
    a.call("memory_store", json!({"key": "k", "value": "from a"}))
        .await;
    assert_eq!(
        b.call("memory_retrieve", json!({"key": "k"})).await["found"],
        false
    );
    assert_eq!(
        b.call("memory_retrieve", json!({"key": "k", "namespace": "alpha"}))
            .await["value"],
        "from a"
    );
    // preserve_current = false clears the working memory of the context being left.
    a.call("working_focus", json!({"item": "x"})).await;
    a.call(
        "context_switch",
        json!({"target_context": "beta", "preserve_current": false}),
    )
    .await;
    assert_eq!(
        a.call("working_get", json!({"namespace": "alpha"})).await["focus"],
        json!([])
    );
}
