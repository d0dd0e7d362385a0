//! In-process tests: an rmcp client talks to `MemoryServer` over `tokio::io::duplex`.

mod common;

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams, ResourceContents,
    SubscribeRequestParams,
};
use serde_json::{Value, json};

use common::{check, connect, shared_temp};
use memstrata::{Limits, Memory};
use memstrata_mcp::{Access, Auth, Principal, Shared};

const TOOLS: [&str; 34] = [
    "context_evictions",
    "context_retrieve",
    "context_set_on_duplicate",
    "context_set_retention",
    "context_store",
    "context_switch",
    "episode_get",
    "episode_record",
    "episode_record_many",
    "episode_search",
    "episodes_summarize",
    "knowledge_query",
    "knowledge_retrieve",
    "knowledge_store",
    "knowledge_store_many",
    "knowledge_update",
    "llm_punch_in",
    "llm_punch_out",
    "memory_forget",
    "memory_optimize",
    "memory_retrieve",
    "memory_store",
    "procedure_execute",
    "procedure_learn",
    "procedure_list",
    "procedure_resume",
    "procedure_update",
    "session_create",
    "session_restore",
    "session_save",
    "system_status",
    "working_focus",
    "working_get",
    "workspace_add",
];

#[test]
fn schema_checker_catches_mismatches() {
    let schema = json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}, "b": {"$ref": "#/$defs/B"}},
                        "$defs": {"B": {"type": ["string", "null"]}}});
    assert!(check(&schema, &schema, &json!({"a": 1, "b": null}), "$").is_ok());
    assert!(check(&schema, &schema, &json!({"a": "x"}), "$").is_err());
    assert!(check(&schema, &schema, &json!({"b": "x"}), "$").is_err());
    assert!(check(&schema, &schema, &json!({"a": 1, "b": 3}), "$").is_err());
}

/// The tool list is the contract: names, annotations and which fields are required.
/// Regenerate `tests/golden/tools.json` with `UPDATE_GOLDEN=1` after a deliberate change.
#[tokio::test]
async fn tool_list_matches_golden() {
    let h = connect(shared_temp(), Principal::local()).await;
    let mut names: Vec<&str> = h.tools.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, TOOLS);
    let mut summary = serde_json::Map::new();
    for name in TOOLS {
        let t = &h.tools[name];
        assert!(
            t.description.as_ref().is_some_and(|d| d.len() > 20),
            "{name} needs a description"
        );
        let input = Value::Object(t.input_schema.as_ref().clone());
        assert_eq!(input["type"], "object", "{name}");
        for (field, prop) in input["properties"].as_object().into_iter().flatten() {
            assert!(
                prop.get("description").is_some()
                    || prop.get("$ref").is_some()
                    || prop.get("allOf").is_some(),
                "{name}.{field} has no description"
            );
        }
        let output = Value::Object(
            t.output_schema
                .as_ref()
                .expect("output schema")
                .as_ref()
                .clone(),
        );
        assert_eq!(output["type"], "object", "{name} output");
        let a = t.annotations.as_ref().expect("annotations");
        assert_eq!(a.open_world_hint, Some(false), "{name}");
        let mut required: Vec<String> = input["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        required.sort();
        let mut props: Vec<String> = input["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        props.sort();
        summary.insert(
            name.to_owned(),
            json!({
                "title": a.title,
                "read_only": a.read_only_hint.unwrap_or(false),
                "destructive": a.destructive_hint,
                "idempotent": a.idempotent_hint,
                "arguments": props,
                "required": required,
            }),
        );
    }
    let got = serde_json::to_string_pretty(&Value::Object(summary)).unwrap() + "\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/tools.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).expect("golden file (run once with UPDATE_GOLDEN=1)");
    assert_eq!(
        got, want,
        "tool list changed; review and regenerate with UPDATE_GOLDEN=1"
    );
}

#[tokio::test]
async fn continuity_workflow() {
    let h = connect(shared_temp(), Principal::local()).await;
    let created = h
        .call(
            "session_create",
            json!({"name": "refactor", "metadata": {"repo": "x"}}),
        )
        .await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    let v1 = h
        .call(
            "session_save",
            json!({"session_id": sid, "content": {"step": 1}}),
        )
        .await;
    assert_eq!(v1["version"], 1);
    assert_eq!(v1["success"], true);
    let v2 = h
        .call(
            "session_save",
            json!({"session_id": sid, "content": {"step": 2, "notes": ["a", "b"]}, "compression_level": 3}),
        )
        .await;
    assert_eq!(v2["version"], 2);
    let latest = h.call("session_restore", json!({"session_id": sid})).await;
    assert_eq!(latest["version"], 2);
    assert_eq!(latest["content"], json!({"step": 2, "notes": ["a", "b"]}));
    assert_eq!(latest["metadata"], json!({"repo": "x"}));
    let first = h
        .call("session_restore", json!({"session_id": sid, "version": 1}))
        .await;
    assert_eq!(first["content"], json!({"step": 1}));
    let missing = h
        .call_err("session_restore", json!({"session_id": sid, "version": 7}))
        .await;
    assert!(missing.starts_with("NOT_FOUND:"), "{missing}");
    assert!(
        missing.contains("version 7") && missing.contains("1..=2"),
        "{missing}"
    );

    let stored = h
        .call(
            "context_store",
            json!({"key": "plan", "value": {"next": "tests"}, "ttl": 60, "namespace": "proj"}),
        )
        .await;
    assert!(stored["expires_at"].is_string());
    let got = h
        .call(
            "context_retrieve",
            json!({"key": "plan", "namespace": "proj"}),
        )
        .await;
    assert_eq!(got["value"], json!({"next": "tests"}));
    // Absent (never stored in this context): an answer, not an error.
    let absent = h.call("context_retrieve", json!({"key": "plan"})).await;
    assert_eq!(
        absent,
        json!({"success": false, "value": null, "stored_at": null, "expires_at": null})
    );
    assert_eq!(got["success"], true);
    assert!(got["stored_at"].is_string());
    // A malformed request is still an error.
    let bad = h.call_err("context_retrieve", json!({"kee": "plan"})).await;
    assert!(bad.starts_with("INVALID_INPUT:"), "{bad}");

    let sw = h
        .call("context_switch", json!({"target_context": "proj"}))
        .await;
    assert_eq!(sw["previous_context"], "default");
    assert_eq!(sw["context_loaded"], true);
    // The switch sticks for this connection: no namespace needed now.
    let got = h.call("context_retrieve", json!({"key": "plan"})).await;
    assert_eq!(got["value"]["next"], "tests");

    let pin = h
        .call(
            "llm_punch_in",
            json!({"llm_name": "claude", "task_description": "write tests",
                   "context": "free text: the in-process suite"}),
        )
        .await;
    let tid = pin["task_id"].as_str().unwrap().to_owned();
    let bad = h
        .call_err(
            "llm_punch_in",
            json!({"llm_name": "claude", "task_description": "x", "namespace": "bad ctx"}),
        )
        .await;
    assert!(bad.starts_with("INVALID_INPUT:"), "{bad}");
    let pout = h
        .call("llm_punch_out", json!({"task_id": tid, "summary": "done"}))
        .await;
    assert_eq!(pout["success"], true);
    assert!(pout["duration_seconds"].as_f64().unwrap() >= 0.0);
    let again = h
        .call_err("llm_punch_out", json!({"task_id": tid, "summary": "twice"}))
        .await;
    assert!(again.starts_with("CONFLICT:"), "{again}");
    // The finished task became an episode of the active context.
    let hits = h
        .call(
            "episode_search",
            json!({"query": "write tests", "tags": ["task"]}),
        )
        .await;
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1);
    assert_eq!(
        hits["hits"][0]["episode"]["content"]["context"],
        "free text: the in-process suite"
    );

    let st = h
        .call("system_status", json!({"include_metrics": true}))
        .await;
    assert_eq!(st["status"], "healthy");
    assert_eq!(st["session_count"], 1);
    let active = st["active_sessions"].as_array().unwrap();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0]["session_id"], sid.as_str());
    assert_eq!(active[0]["name"], "refactor");
    assert_eq!(active[0]["created_at"], created["created_at"]);
    let bare = h
        .call("system_status", json!({"include_sessions": false}))
        .await;
    assert!(bare["active_sessions"].is_null() && bare["session_count"].is_null());
    assert!(st["metrics"]["items"]["sessions"].as_u64() == Some(1));
    let opt = h
        .call(
            "memory_optimize",
            json!({"level": "medium", "target_session": sid}),
        )
        .await;
    assert_eq!(opt["success"], true);
    let bad = h
        .call_err("memory_optimize", json!({"level": "extreme"}))
        .await;
    assert!(bad.starts_with("INVALID_INPUT:"), "{bad}");
}

#[tokio::test]
async fn layer_workflow() {
    let h = connect(shared_temp(), Principal::local()).await;
    h.call(
        "memory_store",
        json!({"key": "draft", "value": {"text": "hello"}}),
    )
    .await;
    let r = h.call("memory_retrieve", json!({"key": "draft"})).await;
    assert_eq!(r["found"], true);
    assert_eq!(r["value"]["text"], "hello");
    assert_eq!(
        h.call("memory_forget", json!({"key": "draft"})).await["forgotten"],
        true
    );
    assert_eq!(
        h.call("memory_retrieve", json!({"key": "draft"})).await["found"],
        false
    );

    assert_eq!(
        h.call("working_focus", json!({"item": "bug 42"})).await["added"],
        true
    );
    assert_eq!(
        h.call("working_focus", json!({"item": "bug 42"})).await["added"],
        false
    );
    let id = h
        .call("workspace_add", json!({"value": {"file": "a.rs"}}))
        .await["id"]
        .clone();
    let w = h.call("working_get", json!({})).await;
    assert_eq!(w["focus"], json!(["bug 42"]));
    assert_eq!(w["workspace"][0]["id"], id);

    let mut ids = Vec::new();
    for i in 0..25 {
        let e = h
            .call(
                "episode_record",
                json!({"summary": format!("Deployed build {i} to staging"), "content": {"build": i}, "participants": ["alice"],
                       "tags": ["deploy"], "importance": 1 + (i % 10)}),
            )
            .await;
        ids.push(e["id"].as_str().unwrap().to_owned());
    }
    let page1 = h
        .call(
            "episode_search",
            json!({"query": "staging deploy", "limit": 10}),
        )
        .await;
    assert_eq!(page1["hits"].as_array().unwrap().len(), 10);
    let cursor = page1["next_cursor"]
        .as_str()
        .expect("more pages")
        .to_owned();
    let page2 = h
        .call(
            "episode_search",
            json!({"query": "staging deploy", "limit": 10, "cursor": cursor}),
        )
        .await;
    let page3 = h
        .call(
            "episode_search",
            json!({"query": "staging deploy", "limit": 10, "cursor": page2["next_cursor"]}),
        )
        .await;
    assert_eq!(page3["hits"].as_array().unwrap().len(), 5);
    assert!(page3["next_cursor"].is_null());
    let mut seen: Vec<String> = [&page1, &page2, &page3]
        .iter()
        .flat_map(|p| {
            p["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["episode"]["id"].as_str().unwrap().to_owned())
        })
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 25, "pages cover every hit once");
    // Limits are capped, not refused.
    let big = h
        .call(
            "episode_search",
            json!({"query": "staging", "limit": 100000}),
        )
        .await;
    assert_eq!(big["hits"].as_array().unwrap().len(), 25);
    let filtered = h
        .call("episode_search", json!({"query": "", "min_importance": 10}))
        .await;
    assert!(
        filtered["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["episode"]["importance"] == 10)
    );
    let got = h.call("episode_get", json!({"id": ids[3]})).await;
    assert_eq!(got["episode"]["content"]["build"], 3);
    assert_eq!(
        h.call("episode_get", json!({"id": "nope"})).await["found"],
        false
    );
    let s = h
        .call("episodes_summarize", json!({"ids": [ids[0], ids[1]]}))
        .await;
    assert!(s["summary"].as_str().unwrap().contains("build 0"));
    let bad_cursor = h
        .call_err("episode_search", json!({"query": "x", "cursor": "bogus"}))
        .await;
    assert!(
        bad_cursor.starts_with("INVALID_INPUT:") && bad_cursor.contains("cursor"),
        "{bad_cursor}"
    );

    let k = h
        .call(
            "knowledge_store",
            json!({"key": "user:alice", "knowledge": {"role": "admin"}}),
        )
        .await;
    assert_eq!(k["version"], 1);
    let u = h
        .call(
            "knowledge_update",
            json!({"key": "user:alice", "patch": {"team": "infra"}}),
        )
        .await;
    assert_eq!(u["knowledge"], json!({"role": "admin", "team": "infra"}));
    assert_eq!(u["version"], 2);
    let r = h
        .call("knowledge_retrieve", json!({"key": "user:alice"}))
        .await;
    assert_eq!(r["entry"]["knowledge"]["team"], "infra");
    let q = h
        .call("knowledge_query", json!({"text": "admin infra"}))
        .await;
    assert_eq!(q["hits"][0]["key"], "user:alice");
    let nf = h
        .call_err("knowledge_update", json!({"key": "user:bob", "patch": {}}))
        .await;
    assert!(
        nf.starts_with("NOT_FOUND:") && nf.contains("knowledge_store"),
        "{nf}"
    );
}

#[tokio::test]
async fn procedures_pause_for_actions_and_resume() {
    let h = connect(shared_temp(), Principal::local()).await;
    let steps = json!([
        {"id": "look", "description": "fetch ticket", "action": "lookup", "parameters": {"id": 7},
         "next": [{"condition": "last.severity > 3", "next": "page"}, {"condition": "true", "next": "note"}]},
        {"id": "page", "description": "page on-call", "action": "page", "parameters": {"who": "{{ params.user }}"}},
        {"id": "note", "description": "remember it", "action": "episodic.record", "parameters": {"summary": "low-severity ticket"}}
    ]);
    let p = h
        .call("procedure_learn", json!({"name": "triage", "steps": steps}))
        .await;
    assert_eq!(p["version"], 1);
    let dup = h
        .call_err("procedure_learn", json!({"name": "triage", "steps": steps}))
        .await;
    assert!(
        dup.starts_with("CONFLICT:") && dup.contains("procedure_update"),
        "{dup}"
    );
    let bad = h
        .call_err(
            "procedure_learn",
            json!({"name": "broken", "steps": [{"id": "a", "action": "set", "next": "nowhere"}]}),
        )
        .await;
    assert!(
        bad.starts_with("INVALID_INPUT:") && bad.contains("steps[0]"),
        "{bad}"
    );
    assert_eq!(
        h.call("procedure_list", json!({})).await["procedures"],
        json!(["triage"])
    );

    let run = h
        .call(
            "procedure_execute",
            json!({"name": "triage", "params": {"user": "bob"}}),
        )
        .await;
    assert_eq!(run["status"], "awaiting_action");
    assert_eq!(run["pending"]["action"], "lookup");
    let rid = run["run_id"].as_str().unwrap().to_owned();
    let run = h
        .call(
            "procedure_resume",
            json!({"run_id": rid, "output": {"severity": 5}}),
        )
        .await;
    assert_eq!(run["status"], "awaiting_action");
    assert_eq!(run["pending"]["action"], "page");
    assert_eq!(run["pending"]["parameters"]["who"], "bob");
    let run = h
        .call(
            "procedure_resume",
            json!({"run_id": rid, "output": {"paged": true}}),
        )
        .await;
    assert_eq!(run["status"], "completed");
    let done = h
        .call_err("procedure_resume", json!({"run_id": rid, "output": {}}))
        .await;
    assert!(done.starts_with("CONFLICT:"), "{done}");
    let unknown = h
        .call_err("procedure_resume", json!({"run_id": "nope", "output": {}}))
        .await;
    assert!(unknown.starts_with("NOT_FOUND:"), "{unknown}");

    let upd = h
        .call(
            "procedure_update",
            json!({"name": "triage", "steps": [{"id": "only", "action": "set", "parameters": {"x": 1}}]}),
        )
        .await;
    assert_eq!(upd["version"], 2);
    let run = h.call("procedure_execute", json!({"name": "triage"})).await;
    assert_eq!(run["status"], "completed");
}

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

/// Receive events until `want` arrives (earlier list_changed events from setup may come first);
/// returns the events seen before it. The timeout only turns a hang into a failure.
async fn wait_for(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    want: &str,
) -> Vec<String> {
    let mut before = Vec::new();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap_or_else(|_| panic!("no {want} notification; saw {before:?}"))
            .expect("client alive");
        if e == want {
            return before;
        }
        before.push(e);
    }
}

#[tokio::test]
#[allow(deprecated)] // resources/subscribe is the 2025-era API our clients use
async fn resources_prompts_and_subscriptions() {
    let shared = shared_temp();
    let mut h = connect(shared.clone(), Principal::local()).await;
    let other = connect(shared.clone(), Principal::local()).await;
    h.call(
        "knowledge_store",
        json!({"key": "user:alice", "knowledge": {"role": "admin"}}),
    )
    .await;
    let sid = h.call("session_create", json!({"name": "s1"})).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    h.call(
        "session_save",
        json!({"session_id": sid, "content": {"step": 1}}),
    )
    .await;
    h.call("episode_record", json!({"summary": "Fixed the flaky test"}))
        .await;

    let listed = h.client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert!(uris.contains(&"memstrata://status"), "{uris:?}");
    assert!(
        uris.contains(&format!("memstrata://sessions/{sid}").as_str()),
        "{uris:?}"
    );
    assert!(
        uris.contains(&"memstrata://knowledge/user:alice"),
        "{uris:?}"
    );
    assert!(
        uris.iter().any(|u| u.starts_with("memstrata://episodes/")),
        "{uris:?}"
    );
    let templates = h.client.list_all_resource_templates().await.unwrap();
    assert!(
        templates
            .iter()
            .any(|t| t.uri_template == "memstrata://knowledge/{key}")
    );

    let peer = h.client.peer().clone();
    let read = |uri: String| {
        let c = peer.clone();
        async move { c.read_resource(ReadResourceRequestParams::new(uri)).await }
    };
    let r = read("memstrata://knowledge/user:alice".into())
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &r.contents[0] else {
        panic!("text resource")
    };
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(v["entry"]["knowledge"]["role"], "admin");
    let r = read(format!("memstrata://sessions/{sid}")).await.unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &r.contents[0] else {
        panic!("text resource")
    };
    assert!(text.contains("\"step\": 1"));
    assert!(read("memstrata://knowledge/nobody".into()).await.is_err());
    assert!(read("file:///etc/passwd".into()).await.is_err());

    // Subscribe, then a change through *another* connection notifies this one.
    h.client
        .subscribe(SubscribeRequestParams::new(
            "memstrata://knowledge/user:alice",
        ))
        .await
        .unwrap();
    other
        .call(
            "knowledge_update",
            json!({"key": "user:alice", "patch": {"team": "infra"}}),
        )
        .await;
    wait_for(&mut h.events, "memstrata://knowledge/user:alice").await;
    // Nothing else was subscribed: the only updates seen are for that URI.
    other
        .call(
            "knowledge_store",
            json!({"key": "user:bob", "knowledge": {}}),
        )
        .await;
    let seen = wait_for(&mut h.events, "list_changed").await;
    assert!(!seen.iter().any(|e| e.contains("user:bob")), "{seen:?}");

    let prompts = h.client.list_all_prompts().await.unwrap();
    let mut names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["handoff", "recall", "resume_session"]);
    let args = |v: Value| v.as_object().cloned();
    let p = h
        .client
        .get_prompt(
            GetPromptRequestParams::new("recall")
                .with_arguments(args(json!({"query": "flaky test"})).unwrap()),
        )
        .await
        .unwrap();
    let t = serde_json::to_string(&p.messages).unwrap();
    assert!(t.contains("Fixed the flaky test"), "{t}");
    let p = h
        .client
        .get_prompt(
            GetPromptRequestParams::new("resume_session")
                .with_arguments(args(json!({"session_id": sid})).unwrap()),
        )
        .await
        .unwrap();
    assert!(serde_json::to_string(&p.messages).unwrap().contains("step"));
    h.call(
        "llm_punch_in",
        json!({"llm_name": "claude", "task_description": "port the parser"}),
    )
    .await;
    let p = h
        .client
        .get_prompt(
            GetPromptRequestParams::new("handoff")
                .with_arguments(args(json!({"to": "gpt"})).unwrap()),
        )
        .await
        .unwrap();
    let t = serde_json::to_string(&p.messages).unwrap();
    assert!(
        t.contains("s1") && t.contains("port the parser") && t.contains("Handoff to gpt"),
        "{t}"
    );
    assert!(
        h.client
            .get_prompt(GetPromptRequestParams::new("recall"))
            .await
            .is_err(),
        "missing required argument"
    );
}
