//! SIGTERM and SIGINT at every point of the built binary's start-up and work: the
//! handlers are installed before the store opens, so a signal while the store opens,
//! before or during MCP initialisation, after acknowledged writes, or during an
//! import always ends in a flush and exit status 0, and nothing acknowledged is lost.
//!
//! The tests synchronise on what the server prints on stderr (and on its answers),
//! never on sleeps: each waits for a given log line, then signals.

mod common;
mod security_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};
use tokio::sync::mpsc;

use security_support::{envelope, http};

use common::binary::{BIN, command};

const KEY: &str = "signals-test-api-key";
/// How long a server may take to exit after its signal (or EOF) on a loaded machine.
const EXIT_BOUND: Duration = Duration::from_secs(180);

/// A running binary whose stderr is read line by line as it comes.
struct Proc {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
}

impl Proc {
    fn spawn(store: &Path, args: &[&str]) -> Proc {
        let mut child = command(store, args)
            .env("MEMSTRATA_LOG", "info")
            .spawn()
            .expect("spawn memstrata-mcp");
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(l)) = err.next_line().await {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for the first stderr line containing `needle` (any line for ""), and
    /// returns it. Panics, with everything read so far, if stderr closes first.
    async fn wait_for(&mut self, needle: &str) -> String {
        while let Some(l) = self.lines.recv().await {
            self.seen.push(l.clone());
            if l.contains(needle) {
                return l;
            }
        }
        panic!(
            "stderr closed before a line with {needle:?}; status {:?}; stderr:\n{}",
            self.child.try_wait(),
            self.seen.join("\n")
        );
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.id().expect("still running").to_string();
        let ok = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} {pid}");
    }

    /// Waits for the exit; returns the status and the whole stderr.
    async fn exit(mut self) -> (ExitStatus, String) {
        drop(self.child.stdin.take());
        // A bound, not a synchronisation: a server that never exits fails the test with
        // its stderr instead of hanging the suite.
        let status = match tokio::time::timeout(EXIT_BOUND, self.child.wait()).await {
            Ok(s) => s.unwrap(),
            Err(_) => {
                let _ = self.child.start_kill();
                while let Ok(Some(l)) =
                    tokio::time::timeout(Duration::from_secs(5), self.lines.recv()).await
                {
                    self.seen.push(l);
                }
                panic!(
                    "no exit within {EXIT_BOUND:?}; stderr:\n{}",
                    self.seen.join("\n")
                );
            }
        };
        while let Some(l) = self.lines.recv().await {
            self.seen.push(l);
        }
        (status, self.seen.join("\n"))
    }

    /// Signals, then asserts a clean exit (status 0) after flushing the store.
    async fn signal_and_expect_clean_exit(self, sig: &str, when: &str) -> String {
        self.signal(sig);
        let (status, err) = self.exit().await;
        assert!(
            status.success(),
            "{sig} {when}: exit {status:?} (a signal kills the process only if it is not handled); stderr:\n{err}"
        );
        assert!(
            err.contains("store flushed"),
            "{sig} {when}: no flush; stderr:\n{err}"
        );
        err
    }
}

fn stdio(store: &Path) -> Proc {
    Proc::spawn(store, &["stdio"])
}

fn line(v: &Value) -> String {
    format!("{v}\n")
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
           "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "signals", "version": "1"}}})
}

/// Reads stdout lines until the answers to every id in `ids` have arrived (in any order:
/// rmcp answers concurrent requests as they finish); returns them by id.
async fn answers(out: &mut Lines<BufReader<ChildStdout>>, ids: &[u64]) -> BTreeMap<u64, Value> {
    let mut got = BTreeMap::new();
    while ids.iter().any(|id| !got.contains_key(id)) {
        let l =
            out.next_line().await.unwrap().unwrap_or_else(|| {
                panic!("stdout closed before the answers to {ids:?}; got {got:?}")
            });
        let v: Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"));
        if let Some(id) = v["id"].as_u64() {
            got.insert(id, v);
        }
    }
    got
}

/// Opens the store again and reads `keys` through execute envelopes (then EOF).
async fn read_back(store: &Path, keys: &[String]) -> BTreeMap<String, Value> {
    let mut p = stdio(store);
    let mut input = String::new();
    for (i, k) in keys.iter().enumerate() {
        input.push_str(&line(&envelope(
            i as u64 + 1,
            "memory_retrieve",
            json!({"key": k}),
        )));
    }
    let mut stdin = p.child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let mut out = BufReader::new(p.child.stdout.take().unwrap()).lines();
    let mut found = BTreeMap::new();
    while let Some(l) = out.next_line().await.unwrap() {
        let v: Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"));
        let i = v["id"].as_u64().expect("an id") as usize - 1;
        found.insert(keys[i].clone(), v["result"]["value"].clone());
    }
    let (status, err) = p.exit().await;
    assert!(status.success(), "reopen: exit {status:?}; stderr:\n{err}");
    found
}

/// Right at the first line the server prints (the handlers are in place; the store
/// is about to open or opening), and with nothing sent at all.
#[tokio::test]
async fn stdio_signal_while_the_store_opens() {
    for sig in ["-TERM", "-INT"] {
        let dir = tempfile::tempdir().unwrap();
        let mut p = stdio(&dir.path().join("s.mem"));
        p.wait_for("").await;
        p.signal_and_expect_clean_exit(sig, "at the first stderr line")
            .await;
    }
}

/// After start-up, before any `initialize` arrives.
#[tokio::test]
async fn stdio_signal_before_initialize() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = stdio(&dir.path().join("s.mem"));
    p.wait_for("serving MCP on stdio").await;
    p.signal_and_expect_clean_exit("-TERM", "before initialize")
        .await;
}

/// With `initialize` sent but its answer not yet read (initialisation in progress or
/// just finished), and again right after its answer, before `initialized`.
#[tokio::test]
async fn stdio_signal_during_initialization() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.mem");
    let mut p = stdio(&store);
    p.wait_for("serving MCP on stdio").await;
    let mut stdin = p.child.stdin.take().unwrap();
    stdin
        .write_all(line(&initialize(1)).as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    p.signal_and_expect_clean_exit("-TERM", "with initialize in flight")
        .await;
    drop(stdin);

    let mut p = stdio(&store);
    p.wait_for("serving MCP on stdio").await;
    let mut stdin = p.child.stdin.take().unwrap();
    let mut out = BufReader::new(p.child.stdout.take().unwrap()).lines();
    stdin
        .write_all(line(&initialize(1)).as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    let init = answers(&mut out, &[1]).await.remove(&1).unwrap();
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    p.signal_and_expect_clean_exit("-TERM", "after the initialize answer")
        .await;
    drop(stdin);
}

/// Writes acknowledged (durability periodic: only the flush on the signal makes them
/// durable), then the signal the moment the last answer is read: every write is
/// there after reopening. Repeated, since the signal lands at a different point of
/// rmcp's answer handling each time.
#[tokio::test]
async fn stdio_signal_after_acknowledged_writes_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.mem");
    let mut keys = Vec::new();
    for round in 0..3 {
        let mut p = stdio(&store);
        let mut stdin = p.child.stdin.take().unwrap();
        let mut out = BufReader::new(p.child.stdout.take().unwrap()).lines();
        let mut input = line(&initialize(1));
        input.push_str(&line(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ));
        for i in 0..5u64 {
            let key = format!("r{round}-k{i}");
            input.push_str(&line(&json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                "params": {"name": "memory_store", "arguments": {"key": key, "value": {"round": round, "i": i}}}})));
            keys.push(key);
        }
        stdin.write_all(input.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        let ids: Vec<u64> = (10..15).collect();
        for a in answers(&mut out, &ids)
            .await
            .values()
            .filter(|a| a["id"] != 1)
        {
            assert_eq!(a["result"]["structuredContent"]["success"], true, "{a}");
        }
        let err = p
            .signal_and_expect_clean_exit("-TERM", "after acknowledged writes")
            .await;
        assert!(err.contains("signal received"), "{err}");
        drop(stdin);
    }
    let found = read_back(&store, &keys).await;
    for k in &keys {
        assert!(
            found.get(k).is_some_and(|v| v.is_object()),
            "acknowledged write {k} lost: {found:?}"
        );
    }
}

/// The HTTP server: at its first line (store not yet open), and after a write through
/// `/mcp/v1/execute` with an API key; the write is there after reopening.
#[tokio::test]
async fn http_signal_while_starting_and_after_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.mem");
    let args = ["http", "--listen", "127.0.0.1:0", "--api-key", KEY];
    let mut p = Proc::spawn(&store, &args);
    p.wait_for("").await;
    p.signal_and_expect_clean_exit("-TERM", "at the HTTP server's first line")
        .await;

    let mut p = Proc::spawn(&store, &args);
    let l = p.wait_for("listening on http://").await;
    let addr = l
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no address in {l:?}"));
    let call = envelope(
        1,
        "memory_store",
        json!({"key": "over-http", "value": {"v": 1}}),
    );
    let r = http(addr, "POST", "/mcp/v1/execute", Some(KEY), Some(&call)).await;
    assert_eq!(r.body["result"]["success"], true, "{r:?}");
    p.signal_and_expect_clean_exit("-TERM", "after an HTTP write")
        .await;
    let found = read_back(&store, &["over-http".to_owned()]).await;
    assert_eq!(found["over-http"], json!({"v": 1}));
}

/// `import` (an admin command that writes): a signal as soon as the import starts
/// lets it finish and flush, exit 0; every record is in the store afterwards.
#[tokio::test]
async fn import_signal_finishes_and_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.mem");
    let keys: Vec<String> = (0..50).map(|i| format!("imported-{i}")).collect();
    {
        let mut p = stdio(&src);
        let mut input = String::new();
        for (i, k) in keys.iter().enumerate() {
            input.push_str(&line(&envelope(
                i as u64 + 1,
                "memory_store",
                json!({"key": k, "value": {"i": i}}),
            )));
        }
        let mut stdin = p.child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).await.unwrap();
        drop(stdin);
        let (status, err) = p.exit().await;
        assert!(status.success(), "{err}");
    }
    let file = dir.path().join("export.jsonl");
    let out = std::process::Command::new(BIN)
        .arg("--store")
        .arg(&src)
        .arg("export")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dst = dir.path().join("dst.mem");
    let mut p = Proc::spawn(&dst, &["import", file.to_str().unwrap()]);
    p.wait_for("handling SIGINT and SIGTERM").await;
    p.signal("-TERM");
    let (status, err) = p.exit().await;
    assert!(status.success(), "exit {status:?}; stderr:\n{err}");
    assert!(
        err.contains("signal received: finishing the import") && err.contains("imported"),
        "{err}"
    );
    let found = read_back(&dst, &keys).await;
    for k in &keys {
        assert!(
            found.get(k).is_some_and(|v| v.is_object()),
            "{k} missing after the import"
        );
    }
}
