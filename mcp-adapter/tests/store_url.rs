//! `--store` / `MEMSTRATA_STORE` given a PostgreSQL URL, without a server: the URL is a
//! store, not a path (no directory appears), bad URLs are refused naming the part at
//! fault, and the password never shows. And `--audit-file`, where the audit trail goes
//! when the store has no directory (the tests with a server are in tests/postgres.rs).

mod common;

use std::process::{Command, Output, Stdio};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_memstrata-mcp");

fn run(cwd: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.current_dir(cwd).args(args).env_remove("MEMSTRATA_STORE");
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::null()).output().expect("run memstrata-mcp")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// No command leaves a `postgres:` directory (or anything else) behind in the working directory.
fn assert_empty(dir: &std::path::Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn bad_urls_are_refused_by_part_without_creating_anything() {
    let cwd = tempfile::tempdir().unwrap();
    let long = format!("postgres://u@127.0.0.1/db?schema={}", "s".repeat(64));
    let cases: [(&str, &str); 7] = [
        (
            "postgres://u@127.0.0.1/db?schema=Team-A",
            "`schema` \"Team-A\": use 1-63 characters a-z",
        ),
        ("postgres://u@127.0.0.1/db?schema=", "`schema` is empty"),
        (
            &long,
            "`schema` is 64 characters, more than PostgreSQL's limit of 63",
        ),
        (
            "postgresql://u@127.0.0.1/db?schema=a&schema=b",
            "`schema` is given twice",
        ),
        (
            "postgres://u:hunter2@127.0.0.1:99999/db",
            "--store: store URL postgres://u:***@127.0.0.1:99999/db",
        ),
        // The client knows `password` only in lower case, and not `sslpassword`.
        (
            "postgres://u@127.0.0.1/db?PASSWORD=hunter2",
            "store URL postgres://u@127.0.0.1/db?PASSWORD=***: invalid connection string: unknown option `PASSWORD`",
        ),
        (
            "postgres://u@127.0.0.1/db?sslpassword=hunter2",
            "unknown option `sslpassword`",
        ),
    ];
    for (url, want) in cases {
        for cmd in [
            &["status"][..],
            &["export", "-"],
            &["stdio"],
            &["http", "--listen", "127.0.0.1:0"],
        ] {
            let mut args = vec!["--store", url];
            args.extend_from_slice(cmd);
            let o = run(cwd.path(), &args, &[]);
            let err = stderr(&o);
            assert!(!o.status.success(), "{args:?} succeeded");
            assert!(err.contains(want), "{args:?}: {err}");
            assert!(
                !err.contains("hunter2"),
                "{args:?} printed the password: {err}"
            );
        }
        // The same through MEMSTRATA_STORE.
        let o = run(cwd.path(), &["status"], &[("MEMSTRATA_STORE", url)]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains(want), "{}", stderr(&o));
    }
    assert_empty(cwd.path());
}

#[test]
fn an_unreachable_server_is_reported_without_the_password() {
    let cwd = tempfile::tempdir().unwrap();
    // Port 1 on loopback: nothing listens there.
    for (url, shown) in [
        (
            "postgres://bob:hunter2@127.0.0.1:1/mem?schema=team",
            "postgres://bob:***@127.0.0.1:1/mem?schema=team",
        ),
        (
            "postgres://bob@127.0.0.1:1/mem?password=hunter2&schema=team",
            "postgres://bob@127.0.0.1:1/mem?password=***&schema=team",
        ),
        (
            "POSTGRESQL://bob:hunter2@127.0.0.1:1/mem?schema=team",
            "POSTGRESQL://bob:***@127.0.0.1:1/mem?schema=team",
        ),
    ] {
        unreachable_without_the_password(cwd.path(), url, shown);
    }
    assert_empty(cwd.path());
}

fn unreachable_without_the_password(cwd: &std::path::Path, url: &str, shown: &str) {
    for cmd in [
        &["status"][..],
        &["status", "--json"],
        &["export", "out.jsonl"],
        &["optimize"],
    ] {
        let mut args = vec!["--store", url];
        args.extend_from_slice(cmd);
        let o = run(cwd, &args, &[]);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            err.contains(&format!("cannot connect to {shown}")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
        assert!(
            o.stdout.is_empty(),
            "{args:?} printed {:?}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
}

#[test]
fn audit_file_and_no_audit_exclude_each_other() {
    let cwd = tempfile::tempdir().unwrap();
    let o = run(
        cwd.path(),
        &[
            "--store",
            "s.mem",
            "--no-audit",
            "--audit-file",
            "a.jsonl",
            "status",
        ],
        &[],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("--no-audit") && err.contains("--audit-file"),
        "{err}"
    );
}

#[tokio::test]
async fn audit_file_takes_the_trail_out_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.mem");
    let trail = dir.path().join("logs").join("audit.jsonl");
    std::fs::create_dir(dir.path().join("logs")).unwrap();
    let mut child =
        common::binary::command(&store, &["--audit-file", trail.to_str().unwrap(), "stdio"])
            .spawn()
            .unwrap();
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve(io).await.expect("initialize");
    let r = client
        .call_tool(
            CallToolRequestParams::new("memory_store")
                .with_arguments(json!({"key": "k", "value": 1}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", common::text(&r));
    client.cancel().await.unwrap();
    assert!(child.wait().await.unwrap().success());

    let text = std::fs::read_to_string(&trail).unwrap();
    assert!(text.contains("\"tool\":\"memory_store\""), "{text}");
    assert!(
        !store.join("audit.jsonl").exists(),
        "the trail went to the store too"
    );

    // `status` reads the trail from the same --audit-file.
    let o = run(
        dir.path(),
        &[
            "--store",
            store.to_str().unwrap(),
            "--audit-file",
            trail.to_str().unwrap(),
            "status",
            "--json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["audit"][0]["tool"], "memory_store");
    assert_eq!(v["audit_file"], trail.to_str().unwrap());
}
