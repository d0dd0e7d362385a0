//! Workflows through the tools: continuity, every layer, procedures that pause for host actions and
//! resume.

use super::*;

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
