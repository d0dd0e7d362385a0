//! Resources, prompts and subscriptions.

use super::*;

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
