//! Key rotation in place (issue #30, item 4): `Memory::rekey` and
//! `admin::rekey_store` re-seal every record and index file under the new
//! key, the old key is refused afterwards, and a rotation killed with SIGKILL
//! in the middle (a child process, stopped at a chosen point of its progress)
//! leaves a store that refuses to open until the rotation runs again, which
//! finishes it. Real sled stores and tantivy indexes in temp dirs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use memstrata::admin::rekey_store;
use memstrata::{EncryptionKey, Error, Memory, NewEpisode, SearchFilters};
use serde_json::json;

const WORD: &str = "RotationHeronWord";
const CTX: &str = "CtxRotationName";
const CHILD_ENV: &str = "MEMSTRATA_REKEY_CHILD";
const STOP_ENV: &str = "MEMSTRATA_REKEY_STOP";

fn key(b: u8) -> EncryptionKey {
    EncryptionKey::new([b; 32])
}

fn open(path: &Path, k: u8) -> memstrata::Result<Memory> {
    Memory::builder().path(path).encryption_key(key(k)).open()
}

fn assert_refused(r: memstrata::Result<Memory>, needle: &str) {
    match r {
        Err(Error::InvalidInput { field, reason }) => {
            assert_eq!(field, "encryption_key");
            assert!(reason.contains(needle), "{reason:?} lacks {needle:?}");
        }
        Err(other) => panic!("expected InvalidInput on encryption_key, got {other:?}"),
        Ok(_) => panic!("expected a refusal, the store opened"),
    }
}

/// Enough records for several rewrite batches in each layer.
fn write(mem: &Memory) -> String {
    mem.switch_context(CTX, true).unwrap();
    for i in 0..300 {
        mem.short_term()
            .store(&format!("k{i}"), json!({"v": i, "w": WORD}), None)
            .unwrap();
    }
    let mut first = String::new();
    for i in 0..300 {
        let id = mem
            .episodic()
            .record(
                NewEpisode::new(format!("episode {i} about {WORD}"))
                    .content(json!({"n": i}))
                    .tags(["t"]),
            )
            .unwrap();
        if i == 0 {
            first = id;
        }
    }
    mem.semantic().store("user:a", json!({"w": WORD})).unwrap();
    mem.semantic()
        .update("user:a", json!({"w": WORD, "v": 2}))
        .unwrap();
    let sid = mem.sessions().create("s", json!({})).unwrap().session_id;
    mem.sessions().save(&sid, json!({"w": WORD}), 1).unwrap();
    mem.flush().unwrap();
    first
}

fn check(mem: &Memory, first: &str) {
    mem.switch_context(CTX, true).unwrap();
    assert_eq!(mem.short_term().keys("k").unwrap().len(), 300);
    assert_eq!(
        mem.short_term().retrieve("k7").unwrap(),
        Some(json!({"v": 7, "w": WORD}))
    );
    assert!(mem.episodic().get(first).unwrap().is_some());
    let hits = mem
        .episodic()
        .search(WORD, &SearchFilters::default(), 500)
        .unwrap();
    assert_eq!(hits.len(), 300);
    assert_eq!(mem.semantic().history("user:a").unwrap().len(), 2);
    assert_eq!(mem.semantic().keys("user:").unwrap(), vec!["user:a"]);
    assert!(mem.contexts().list().unwrap().contains(&CTX.to_owned()));
    assert_eq!(mem.sessions().list().unwrap().len(), 1);
}

#[test]
fn rekey_reseals_everything_and_the_old_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mem = open(&path, 1).unwrap();
    let first = write(&mem);
    check(&mem, &first);
    // Another handle keeps the store open: refused, nothing changed.
    let other = mem.clone();
    let mem = match other.clone().rekey(key(2)) {
        Err(Error::StoreLocked { .. }) => mem,
        r => panic!("expected StoreLocked, got {r:?}"),
    };
    drop(other);
    check(&mem, &first);
    let index_before = index_files(&path);
    let mem = mem.rekey(key(2)).unwrap();
    check(&mem, &first);
    drop(mem);
    // Index files were sealed again in place, not left for a rebuild.
    let index_after = index_files(&path);
    assert_eq!(index_before.len(), index_after.len());
    for (name, bytes) in &index_before {
        let now = &index_after.iter().find(|(n, _)| n == name).unwrap().1;
        assert!(bytes.is_empty() || now != bytes, "{name:?} not re-sealed");
    }
    assert_refused(open(&path, 1), "wrong encryption key");
    let mem = open(&path, 2).unwrap();
    check(&mem, &first);
    // The same key again, or a plaintext store, is refused.
    let mem = match mem.rekey(key(2)) {
        Err(Error::InvalidInput { field, .. }) => {
            assert_eq!(field, "new_key");
            open(&path, 2).unwrap()
        }
        r => panic!("expected InvalidInput on new_key, got {r:?}"),
    };
    drop(mem);
    let plain = dir.path().join("plain");
    let p = Memory::builder().path(&plain).open().unwrap();
    assert!(matches!(
        p.rekey(key(3)),
        Err(Error::InvalidInput { ref field, .. }) if field == "encryption_key"
    ));
    // An encrypted store rotated twice, through the path API.
    let stats = rekey_store(&path, &key(2), &key(3), &|_| {}).unwrap();
    assert!(stats.records > 600 && stats.index_files > 0 && !stats.resumed);
    assert_refused(open(&path, 2), "wrong encryption key");
    check(&open(&path, 3).unwrap(), &first);
}

fn index_files(path: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(path.join("index"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().into(), std::fs::read(&p).unwrap()))
        .collect();
    out.sort();
    out
}

/// Run the rotation 1 -> 2 in a child that stops at `stop` (`stage:count`,
/// e.g. `records:1`: after the first progress report of that stage), then
/// kill it with SIGKILL.
fn kill_child_at(path: &Path, stop: &str) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "rekey_child",
            "--nocapture",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, path)
        .env(STOP_ENV, stop)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stopped = false;
    for line in BufReader::new(stdout).lines() {
        if line.unwrap().contains("STOPPED at") {
            stopped = true;
            break;
        }
    }
    assert!(stopped, "the child never reached {stop}");
    // The child now blocks reading its stdin, in the middle of the rotation.
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
#[ignore = "child process of the rekey crash test"]
fn rekey_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let stop = std::env::var(STOP_ENV).unwrap();
    let (stage, n) = stop.split_once(':').unwrap();
    let n: u64 = n.parse().unwrap();
    let seen = std::cell::Cell::new(0u64);
    rekey_store(&path, &key(1), &key(2), &|p| {
        if p.stage == stage {
            seen.set(seen.get() + 1);
            if seen.get() == n {
                println!("STOPPED at {} {}", p.stage, p.done);
                let _ = std::io::stdin().read_line(&mut String::new());
            }
        }
    })
    .unwrap();
    println!("FINISHED");
}

#[test]
fn a_rotation_killed_midway_is_refused_then_finished_by_running_it_again() {
    for stop in ["records:1", "records:3", "index:1"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mem = open(&path, 1).unwrap();
        let first = write(&mem);
        drop(mem);
        kill_child_at(&path, stop);
        // Records under two keys: every open is refused, with what to do.
        assert_refused(open(&path, 1), "interrupted");
        assert_refused(open(&path, 2), "interrupted");
        // Only the same new key may go on.
        match rekey_store(&path, &key(1), &key(9), &|_| {}) {
            Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "new_key"),
            r => panic!("{stop}: expected InvalidInput on new_key, got {r:?}"),
        }
        let stats = rekey_store(&path, &key(1), &key(2), &|_| {}).unwrap();
        assert!(stats.resumed, "{stop}");
        assert_refused(open(&path, 1), "wrong encryption key");
        let mem = open(&path, 2).unwrap();
        check(&mem, &first);
    }
}
