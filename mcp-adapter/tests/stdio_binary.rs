//! The built `memstrata-mcp` binary over stdio: protocol-only stdout, persistence
//! across restarts, clean shutdown on EOF and on SIGTERM.

mod common;

use std::collections::BTreeMap;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Child;

use common::binary::{BIN, command};

fn spawn(store: &std::path::Path) -> Child {
    command(store, &["stdio"])
        .env("MEMSTRATA_LOG", "info")
        .spawn()
        .expect("spawn memstrata-mcp")
}

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &str,
    args: Value,
) -> Value {
    let Value::Object(args) = args else {
        unreachable!()
    };
    let r = client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
        .await
        .expect("tools/call");
    assert_ne!(r.is_error, Some(true), "{name}: {}", common::text(&r));
    r.structured_content.expect("structured result")
}

/// Write `msgs` to the server's stdin as JSON lines, close it (EOF right after the last
/// request), and collect every answer on stdout by id until the server closes stdout.
/// Non-JSON on stdout, or two answers for one id, fail the test.
async fn one_shot(child: &mut Child, msgs: &[Value]) -> BTreeMap<u64, Value> {
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut input = String::new();
    for m in msgs {
        input.push_str(&format!("{m}\n"));
    }
    stdin.write_all(input.as_bytes()).await.unwrap();
    stdin.flush().await.unwrap();
    drop(stdin);

    let mut responses = BTreeMap::new();
    let mut lines = BufReader::new(stdout).lines();
    while let Some(line) = lines.next_line().await.unwrap() {
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("non-JSON on stdout ({e}): {line}"));
        if let Some(id) = v.get("id").and_then(Value::as_u64) {
            assert!(responses.insert(id, v).is_none(), "two answers for id {id}");
        }
    }
    responses
}

async fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = e.read_to_string(&mut s).await;
    }
    s
}

#[tokio::test]
async fn persists_across_restarts_and_exits_cleanly_on_eof() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("agent.mem");

    let mut child = spawn(&store);
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve(io).await.expect("initialize");
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 34);
    let sid = call(
        &client,
        "session_create",
        json!({"name": "across restarts"}),
    )
    .await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    call(
        &client,
        "session_save",
        json!({"session_id": sid, "content": {"step": 1}}),
    )
    .await;
    call(
        &client,
        "knowledge_store",
        json!({"key": "fact", "knowledge": "sky is blue"}),
    )
    .await;
    // Closing stdin ends the session; the server flushes and exits 0.
    client.cancel().await.unwrap();
    let status = child.wait().await.unwrap();
    let err = stderr_of(&mut child).await;
    assert!(status.success(), "exit {status:?}; stderr: {err}");
    assert!(err.contains("store flushed"), "{err}");

    let mut child = spawn(&store);
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve(io).await.expect("initialize");
    let r = call(&client, "session_restore", json!({"session_id": sid})).await;
    assert_eq!(r["content"], json!({"step": 1}));
    let k = call(&client, "knowledge_retrieve", json!({"key": "fact"})).await;
    assert_eq!(k["entry"]["knowledge"], "sky is blue");
    client.cancel().await.unwrap();
    assert!(child.wait().await.unwrap().success());
    // The audit trail of the first run is in the store.
    let trail = std::fs::read_to_string(store.join("audit.jsonl")).unwrap();
    assert!(
        trail.contains("\"tool\":\"session_save\"") && trail.contains("\"who\":\"local\""),
        "{trail}"
    );
}

#[tokio::test]
async fn stdout_is_protocol_only_and_sigterm_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&dir.path().join("s.mem"));
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let msgs = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_store", "arguments": {"key": "k", "value": [1, 2]}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "episode_get", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "no/such/method"}),
    ];
    for m in &msgs {
        stdin.write_all(format!("{m}\n").as_bytes()).await.unwrap();
    }
    stdin.flush().await.unwrap();
    let mut responses = std::collections::BTreeMap::new();
    while responses.len() < 5 {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("server closed stdout early");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("non-JSON on stdout ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        if let Some(id) = v.get("id").and_then(Value::as_u64) {
            responses.insert(id, v);
        }
    }
    assert_eq!(
        responses[&3]["result"]["structuredContent"]["success"],
        true
    );
    assert_eq!(responses[&4]["result"]["isError"], true);
    assert_eq!(responses[&5]["error"]["code"], -32601);
    // The tool and prompt lists never change; resources do (and are notified).
    let caps = &responses[&1]["result"]["capabilities"];
    assert_eq!(caps["tools"]["listChanged"], false, "{caps}");
    assert_eq!(caps["prompts"]["listChanged"], false, "{caps}");
    assert_eq!(caps["resources"]["listChanged"], true, "{caps}");
    // SIGTERM: clean shutdown with a flush, exit status 0.
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().await.unwrap();
    let err = stderr_of(&mut child).await;
    assert!(status.success(), "exit {status:?}; stderr: {err}");
    assert!(
        err.contains("signal received") && err.contains("store flushed"),
        "{err}"
    );
    // Undecodable arguments (episode_get without `id`) are in the audit trail.
    let trail = std::fs::read_to_string(dir.path().join("s.mem").join("audit.jsonl")).unwrap();
    assert!(
        trail
            .lines()
            .any(|l| l.contains("\"tool\":\"episode_get\"")
                && l.contains("\"error\":\"INVALID_INPUT\"")),
        "{trail}"
    );
}

/// Short keys are refused from --api-key and MEMSTRATA_API_KEYS, naming the source.
#[test]
fn short_api_keys_are_refused_from_the_flag_and_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], env: Option<&str>| {
        let mut c = std::process::Command::new(BIN);
        c.arg("--store").arg(dir.path().join("s.mem")).arg("http");
        c.args(args).env_remove("MEMSTRATA_API_KEYS");
        if let Some(v) = env {
            c.env("MEMSTRATA_API_KEYS", v);
        }
        let out = c.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, err) = run(&["--listen", "127.0.0.1:0", "--api-key", "short"], None);
    assert!(!ok);
    assert!(
        err.contains("--api-key: API key #1 is shorter than 8 characters"),
        "{err}"
    );
    assert!(
        !err.contains("short\""),
        "the key itself is never printed: {err}"
    );
    let (ok, err) = run(&["--listen", "127.0.0.1:0"], Some("long-enough-key,abc"));
    assert!(!ok);
    assert!(
        err.contains("MEMSTRATA_API_KEYS: API key #2 is shorter than 8 characters"),
        "{err}"
    );
}

/// A client that writes its requests and closes stdin at once (one-shot scripts, some hosts)
/// still gets every answer, failures included: a failed tool call sends a
/// `notifications/message` before its result, which rmcp stops delivering at EOF.
#[tokio::test]
async fn every_request_before_eof_is_answered_then_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&dir.path().join("s.mem"));
    let msgs = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "one-shot", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        // isError result (NOT_FOUND), logged to the client first.
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "knowledge_update", "arguments": {"key": "absent", "patch": {"a": 1}}}}),
        // JSON-RPC error.
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "memory_store", "arguments": {"key": "k", "value": 1}}}),
    ];
    let responses = one_shot(&mut child, &msgs).await;
    let status = child.wait().await.unwrap();
    let err = stderr_of(&mut child).await;
    assert_eq!(
        responses.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4],
        "stderr: {err}"
    );
    assert_eq!(
        responses[&2]["result"]["isError"], true,
        "{}",
        responses[&2]
    );
    assert!(
        responses[&2]["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("NOT_FOUND")),
        "{}",
        responses[&2]
    );
    assert_eq!(responses[&3]["error"]["code"], -32602, "{}", responses[&3]);
    assert_eq!(
        responses[&4]["result"]["structuredContent"]["success"], true,
        "{}",
        responses[&4]
    );
    assert!(status.success(), "exit {status:?}; stderr: {err}");
    assert!(!err.contains("timed out draining"), "{err}");
    assert!(err.contains("store flushed"), "{err}");
}

/// Without --workspace-root, `detect_files` scans the directory the server was started in
/// (gitignore-aware) and says so in `scanned_roots`.
#[tokio::test]
async fn detect_files_defaults_to_the_working_directory() {
    let store_dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join(".gitignore"), "ignored.txt\n").unwrap();
    let mut child = command(&store_dir.path().join("s.mem"), &["stdio"])
        .current_dir(work.path())
        .spawn()
        .expect("spawn memstrata-mcp");
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve(io).await.expect("initialize");
    let pin = call(
        &client,
        "llm_punch_in",
        json!({"llm_name": "claude", "task_description": "edit files"}),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    std::fs::write(work.path().join("edited.rs"), "fn main() {}").unwrap();
    std::fs::write(work.path().join("ignored.txt"), "x").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let out = call(
        &client,
        "llm_punch_out",
        json!({"task_id": pin["task_id"], "summary": "done", "detect_files": true}),
    )
    .await;
    let root = std::fs::canonicalize(work.path()).unwrap();
    assert_eq!(
        out["scanned_roots"],
        json!([root.display().to_string()]),
        "{out}"
    );
    assert_eq!(out["files"], json!(["edited.rs"]), "{out}");
    assert_eq!(out["files_modified"], 1, "{out}");
    // Without detection nothing is scanned.
    let pin = call(
        &client,
        "llm_punch_in",
        json!({"llm_name": "claude", "task_description": "think"}),
    )
    .await;
    let out = call(
        &client,
        "llm_punch_out",
        json!({"task_id": pin["task_id"], "summary": "done"}),
    )
    .await;
    assert_eq!(out["scanned_roots"], json!([]), "{out}");
    assert_eq!(out["files_modified"], 0, "{out}");
    client.cancel().await.unwrap();
    assert!(child.wait().await.unwrap().success());
}

/// The execute envelope over stdio: alone (no handshake, then EOF) and interleaved with MCP.
#[tokio::test]
async fn execute_envelope_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.mem");
    let run = |msgs: Vec<Value>| {
        let store = store.clone();
        async move {
            let mut child = spawn(&store);
            let responses = one_shot(&mut child, &msgs).await;
            let status = child.wait().await.unwrap();
            let err = stderr_of(&mut child).await;
            assert!(status.success(), "exit {status:?}; stderr: {err}");
            responses
        }
    };
    // A script: envelopes only, then EOF.
    let r = run(vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "execute",
               "params": {"tool": "memory_store", "parameters": {"key": "k", "value": "v"}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "execute",
               "params": {"tool": "context_retrieve", "parameters": {"key": "absent"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "execute",
               "params": {"tool": "memory_store", "parameters": {"kee": "k"}}}),
    ])
    .await;
    assert_eq!(r.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(r[&1]["result"]["success"], true, "{}", r[&1]);
    assert_eq!(r[&2]["result"]["success"], false, "{}", r[&2]);
    assert_eq!(r[&3]["error"]["data"]["code"], "INVALID_INPUT", "{}", r[&3]);
    // Interleaved with MCP on the same stream.
    let r = run(vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "execute",
               "params": {"tool": "memory_retrieve", "parameters": {"key": "k"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "memory_retrieve", "arguments": {"key": "k"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "execute", "params": {"tool": "nope"}}),
    ])
    .await;
    assert_eq!(r.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(r[&2]["result"]["value"], "v", "{}", r[&2]);
    assert_eq!(
        r[&3]["result"]["structuredContent"]["value"], "v",
        "{}",
        r[&3]
    );
    assert_eq!(r[&4]["error"]["code"], -32601, "{}", r[&4]);
}
