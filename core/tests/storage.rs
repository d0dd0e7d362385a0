//! Storage and indexing: rebuild, replay, locking, format version, bad input.

use std::process::Command;

use memstrata::{Durability, Error, Memory, NewEpisode, SearchFilters};
use serde_json::json;

fn search_ids(mem: &Memory, q: &str) -> Vec<String> {
    mem.episodic()
        .search(q, &SearchFilters::default(), 100)
        .unwrap()
        .into_iter()
        .map(|h| h.episode.id)
        .collect()
}

#[test]
fn deleted_index_is_rebuilt_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b);
    {
        let mem = Memory::open(dir.path()).unwrap();
        a = mem
            .episodic()
            .record(NewEpisode::new("alpha release notes"))
            .unwrap();
        b = mem
            .episodic()
            .record(NewEpisode::new("beta release notes"))
            .unwrap();
        mem.semantic()
            .store("topic:release", json!("release process"))
            .unwrap();
    }
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let mem = Memory::open(dir.path()).unwrap();
    let mut ids = search_ids(&mem, "release");
    ids.sort();
    let mut want = vec![a, b];
    want.sort();
    assert_eq!(ids, want);
    assert_eq!(
        mem.semantic().query("process", 5).unwrap()[0].key,
        "topic:release"
    );
}

#[test]
fn corrupt_index_is_rebuilt_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let a;
    {
        let mem = Memory::open(dir.path()).unwrap();
        a = mem
            .episodic()
            .record(NewEpisode::new("gamma ray burst observed"))
            .unwrap();
    }
    std::fs::write(dir.path().join("index").join("meta.json"), b"{ not json").unwrap();
    let mem = Memory::open(dir.path()).unwrap();
    assert_eq!(search_ids(&mem, "gamma"), vec![a]);
}

#[test]
fn unflushed_index_is_replayed_from_sled_log() {
    // Immediate durability makes sled durable; the index commit never happens
    // because the engine is leaked (no Drop), simulating a crash after the write.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_child_writes_then_aborts",
            "--nocapture",
            "--include-ignored",
        ])
        .env("MEMSTRATA_CRASH_CHILD", &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("EPISODE "))
        .unwrap_or_else(|| {
            panic!(
                "child printed no id: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_owned();
    let mem = Memory::open(&path).unwrap();
    assert_eq!(search_ids(&mem, "crashy"), vec![id]);
    assert_eq!(
        mem.semantic().query("replayed", 5).unwrap()[0].key,
        "after-crash"
    );
}

#[test]
#[ignore = "child process helper for unflushed_index_is_replayed_from_sled_log"]
fn crash_child_writes_then_aborts() {
    let Ok(path) = std::env::var("MEMSTRATA_CRASH_CHILD") else {
        return;
    };
    let mem = Memory::builder()
        .path(path)
        .durability(Durability::Immediate)
        .index_commit_interval(std::time::Duration::from_secs(3600))
        .open()
        .unwrap();
    let id = mem
        .episodic()
        .record(NewEpisode::new("crashy write before abort"))
        .unwrap();
    mem.semantic()
        .store("after-crash", json!("replayed from the log"))
        .unwrap();
    println!("EPISODE {id}");
    std::process::abort();
}

#[test]
fn second_process_gets_store_locked() {
    let dir = tempfile::tempdir().unwrap();
    let _mem = Memory::open(dir.path()).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_child_tries_to_open",
            "--nocapture",
            "--include-ignored",
        ])
        .env("MEMSTRATA_LOCK_CHILD", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("RESULT StoreLocked"),
        "child said: {stdout}"
    );
    assert!(
        stdout.contains(&dir.path().canonicalize().unwrap().display().to_string()),
        "path in message: {stdout}"
    );
}

#[test]
#[ignore = "child process helper for second_process_gets_store_locked"]
fn lock_child_tries_to_open() {
    let Ok(path) = std::env::var("MEMSTRATA_LOCK_CHILD") else {
        return;
    };
    match Memory::open(&path) {
        Err(e @ Error::StoreLocked { .. }) => println!("RESULT StoreLocked {e}"),
        Err(e) => println!("RESULT other error {e:?}"),
        Ok(_) => println!("RESULT opened"),
    }
}

/// The store's `LOCK` file, locked by the test: the engine that held it is
/// closed (it is released as soon as the last handle is dropped).
fn lock_closed_store(dir: &std::path::Path) -> std::fs::File {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("LOCK"))
        .unwrap();
    f.try_lock()
        .expect("the store stayed locked after its last handle was dropped");
    f
}

/// Segment file names of a closed store's index (a rebuild writes new ones).
fn segment_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("index"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".idx") || n.ends_with(".fast"))
        .collect();
    names.sort();
    names
}

#[test]
fn index_of_an_older_schema_version_is_rebuilt_on_open() {
    // Version 2 stored each document's uid; version 3 reads it from a fast
    // column. An index stamped with an older version is rebuilt from sled.
    let dir = tempfile::tempdir().unwrap();
    let mut want = Vec::new();
    {
        let mem = Memory::open(dir.path()).unwrap();
        for i in 0..30 {
            want.push(
                mem.episodic()
                    .record(NewEpisode::new(format!("schema upgrade note {i}")))
                    .unwrap(),
            );
        }
        mem.semantic()
            .store("topic:upgrade", json!("upgrade procedure"))
            .unwrap();
    }
    let lock = lock_closed_store(dir.path());
    let before = segment_files(dir.path());
    assert!(!before.is_empty());
    {
        let db = sled::open(dir.path().join("db")).unwrap();
        db.open_tree("meta")
            .unwrap()
            .insert("index_schema_version", &2u32.to_be_bytes())
            .unwrap();
        db.flush().unwrap();
    }
    drop(lock);
    {
        let mem = Memory::open(dir.path()).unwrap();
        let mut ids = search_ids(&mem, "upgrade");
        ids.sort();
        want.sort();
        assert_eq!(ids, want);
        assert_eq!(
            mem.semantic().query("procedure", 5).unwrap()[0].key,
            "topic:upgrade"
        );
    }
    let _lock = lock_closed_store(dir.path());
    let after = segment_files(dir.path());
    assert!(
        after.iter().all(|f| !before.contains(f)),
        "the index was reused, not rebuilt: {before:?} / {after:?}"
    );
    let db = sled::open(dir.path().join("db")).unwrap();
    let stamp = db
        .open_tree("meta")
        .unwrap()
        .get("index_schema_version")
        .unwrap()
        .unwrap();
    assert_ne!(stamp.as_ref(), &2u32.to_be_bytes()[..]);
}

#[test]
fn newer_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let _mem = Memory::open(dir.path()).unwrap();
    }
    {
        let db = sled::open(dir.path().join("db")).unwrap();
        db.open_tree("meta")
            .unwrap()
            .insert("format_version", &99u32.to_be_bytes())
            .unwrap();
        db.flush().unwrap();
    }
    match Memory::open(dir.path()) {
        Err(Error::Corrupted { message, .. }) => assert!(message.contains("99"), "{message}"),
        other => panic!("expected Corrupted, got {other:?}"),
    }
}

#[test]
fn bad_input_is_refused_and_data_stays_intact() {
    let dir = tempfile::tempdir().unwrap();
    let mem = Memory::open(dir.path()).unwrap();
    let st = mem.short_term();
    st.store("keep", json!({"v": 1}), None).unwrap();
    let ep_id = mem
        .episodic()
        .record(NewEpisode::new("keeper episode"))
        .unwrap();
    mem.semantic().store("keep", json!({"v": 2})).unwrap();

    fn field_of(e: Error) -> String {
        match e {
            Error::InvalidInput { field, .. } | Error::LimitExceeded { field, .. } => field,
            other => panic!("unexpected error kind {other:?}"),
        }
    }
    let big_key = "k".repeat(1025);
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    assert_eq!(field_of(st.store("", json!(1), None).unwrap_err()), "key");
    assert_eq!(
        field_of(st.store(&big_key, json!(1), None).unwrap_err()),
        "key"
    );
    assert_eq!(
        field_of(st.store("k\0", json!(1), None).unwrap_err()),
        "key"
    );
    assert_eq!(
        field_of(st.store("keep", deep.clone(), None).unwrap_err()),
        "value"
    );
    assert_eq!(
        field_of(
            st.store("keep", json!(1), Some(std::time::Duration::ZERO))
                .unwrap_err()
        ),
        "ttl"
    );
    assert_eq!(
        field_of(memstrata::short_term::ttl_from_secs(-1.0).unwrap_err()),
        "ttl"
    );
    assert_eq!(
        field_of(memstrata::short_term::ttl_from_secs(f64::NAN).unwrap_err()),
        "ttl"
    );
    assert_eq!(field_of(st.retrieve(&big_key).unwrap_err()), "key");
    assert_eq!(field_of(st.forget("").unwrap_err()), "key");
    let huge = json!("x".repeat(16 * 1024 * 1024 + 1));
    assert_eq!(field_of(st.store("keep", huge, None).unwrap_err()), "value");

    let w = mem.working();
    assert_eq!(field_of(w.focus("").unwrap_err()), "item");
    assert_eq!(
        field_of(w.add_to_workspace(deep.clone()).unwrap_err()),
        "value"
    );

    let ep = mem.episodic();
    assert_eq!(
        field_of(ep.record(NewEpisode::new("  ")).unwrap_err()),
        "summary"
    );
    assert_eq!(
        field_of(ep.record(NewEpisode::new("s").importance(0)).unwrap_err()),
        "importance"
    );
    assert_eq!(
        field_of(ep.record(NewEpisode::new("s").importance(11)).unwrap_err()),
        "importance"
    );
    assert_eq!(
        field_of(
            ep.record(NewEpisode::new("s").tags((0..65).map(|i| i.to_string())))
                .unwrap_err()
        ),
        "tags"
    );
    assert_eq!(
        field_of(ep.record(NewEpisode::new("s").tags([""])).unwrap_err()),
        "tags[0]"
    );
    assert_eq!(
        field_of(
            ep.record(NewEpisode::new("s").content(deep.clone()))
                .unwrap_err()
        ),
        "content"
    );
    assert_eq!(
        field_of(
            ep.search(&"q".repeat(4097), &SearchFilters::default(), 10)
                .unwrap_err()
        ),
        "query"
    );
    assert_eq!(
        field_of(ep.search("q", &SearchFilters::default(), 0).unwrap_err()),
        "limit"
    );
    assert_eq!(
        field_of(
            ep.search("q", &SearchFilters::default(), 1_000_000)
                .unwrap_err()
        ),
        "limit"
    );
    let f = SearchFilters {
        min_importance: Some(11),
        ..Default::default()
    };
    assert_eq!(
        field_of(ep.search("q", &f, 10).unwrap_err()),
        "min_importance"
    );
    assert_eq!(field_of(ep.get("").unwrap_err()), "id");

    let sem = mem.semantic();
    assert_eq!(field_of(sem.store("", json!(1)).unwrap_err()), "key");
    assert_eq!(
        field_of(sem.store("keep", deep.clone()).unwrap_err()),
        "knowledge"
    );
    assert_eq!(
        field_of(sem.update("keep", deep.clone()).unwrap_err()),
        "patch"
    );
    assert_eq!(
        field_of(sem.query(&"q".repeat(5000), 10).unwrap_err()),
        "text"
    );

    assert_eq!(
        field_of(mem.switch_context("has space", true).unwrap_err()),
        "target_context"
    );
    assert_eq!(field_of(mem.namespace("").unwrap_err()), "name");
    assert!(
        Memory::builder()
            .path(dir.path().join("x"))
            .durability("sometimes".parse().unwrap_or(Durability::Manual))
            .open()
            .is_ok()
    );
    assert_eq!(
        field_of("sometimes".parse::<Durability>().unwrap_err()),
        "durability"
    );

    // Nothing stored was lost or changed.
    assert_eq!(st.retrieve("keep").unwrap(), Some(json!({"v": 1})));
    assert_eq!(sem.retrieve("keep").unwrap(), Some(json!({"v": 2})));
    assert_eq!(sem.history("keep").unwrap().len(), 1);
    assert_eq!(ep.get(&ep_id).unwrap().unwrap().summary, "keeper episode");
    assert_eq!(search_ids(&mem, "keeper"), vec![ep_id]);
    assert_eq!(mem.active_context(), "default");
}

#[test]
fn many_writes_are_all_searchable_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let n = 300;
    {
        let mem = Memory::builder()
            .path(dir.path())
            .durability(Durability::Manual)
            .open()
            .unwrap();
        for i in 0..n {
            mem.episodic()
                .record(NewEpisode::new(format!("bulk episode number {i}")).tags(["bulk"]))
                .unwrap();
        }
    }
    let mem = Memory::open(dir.path()).unwrap();
    let f = SearchFilters {
        tags: vec!["bulk".into()],
        ..Default::default()
    };
    assert_eq!(mem.episodic().search("", &f, 1000).unwrap().len(), n);
    assert_eq!(mem.episodic().search("episode", &f, 1000).unwrap().len(), n);
}

mod decode_robustness {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
        /// Arbitrary bytes never panic any record decoder.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = memstrata::fuzzing::decode_records(&bytes);
        }

        /// Truncated or bit-flipped valid records never panic.
        #[test]
        fn damaged_records_never_panic(cut in 0usize..2000, flip in 0usize..2000, big in any::<bool>()) {
            let v = if big { serde_json::json!({"text": "lorem ipsum ".repeat(100), "n": [1, 2, 3]}) } else { serde_json::json!({"a": 1}) };
            let mut enc = memstrata::fuzzing::encode_value(&v);
            if !enc.is_empty() {
                let i = flip % enc.len();
                enc[i] ^= 0x5a;
                enc.truncate(cut % (enc.len() + 1));
            }
            let _ = memstrata::fuzzing::decode_records(&enc);
        }
    }
}

#[test]
fn reopen_right_after_drop_never_reports_locked() {
    // Reopening right after the last handle dropped, while the maintenance
    // thread commits every millisecond, never fails with StoreLocked and
    // loses nothing.
    let dir = tempfile::tempdir().unwrap();
    for i in 0..60 {
        let mem = Memory::builder()
            .path(dir.path())
            .index_commit_interval(std::time::Duration::from_millis(1))
            .open()
            .unwrap_or_else(|e| panic!("reopen {i} failed: {e}"));
        mem.episodic()
            .record(NewEpisode::new(format!("reopen probe {i}")))
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(i % 5));
    }
    let mem = Memory::open(dir.path()).unwrap();
    assert_eq!(search_ids(&mem, "probe").len(), 60);
}

#[test]
fn dropping_the_last_handle_releases_the_store_at_once() {
    // The store's LOCK is free as soon as the last handle is dropped, even when
    // the maintenance thread is busy at that moment (a commit every
    // millisecond): what lets another process open the store right after a
    // binding's close() returned.
    let dir = tempfile::tempdir().unwrap();
    for i in 0..60 {
        let mem = Memory::builder()
            .path(dir.path())
            .index_commit_interval(std::time::Duration::from_millis(1))
            .open()
            .unwrap();
        let ns = mem.namespace("other").unwrap();
        mem.episodic()
            .record(NewEpisode::new(format!("release probe {i}")))
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(i % 4));
        drop(mem);
        // Another handle on the engine keeps the store open.
        let lock = std::fs::File::options()
            .write(true)
            .open(dir.path().join("LOCK"))
            .unwrap();
        assert!(
            lock.try_lock().is_err(),
            "round {i}: released while a handle lives"
        );
        drop(ns);
        lock.try_lock()
            .unwrap_or_else(|e| panic!("round {i}: LOCK still held after the last handle: {e}"));
        lock.unlock().unwrap();
        // sled's own lock too: sled's I/O threads have let go of its file,
        // so a tool that opens sled directly (or a test) can at once.
        let data = std::fs::File::open(dir.path().join("db").join("db")).unwrap();
        data.try_lock().unwrap_or_else(|e| {
            panic!("round {i}: sled's file still locked after the last handle: {e}")
        });
        data.unlock().unwrap();
    }
}

/// Inputs found by the fuzz targets (`fuzz/regressions/<target>/`), replayed on every test run.
#[test]
fn fuzz_regressions_stay_fixed() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/decode_record");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert_eq!(
            memstrata::fuzzing::decode_records(&bytes),
            0,
            "damaged input must be refused by every decoder"
        );
        n += 1;
    }
    assert!(n > 0);
}

/// Names of sled's snapshot files (`snap.<lsn>`) in a store.
fn sled_snapshots(store: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(store.join("db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("snap."))
        .collect();
    v.sort();
    v
}

#[test]
fn a_large_write_session_leaves_a_fresh_sled_snapshot_at_close() {
    let dir = tempfile::tempdir().unwrap();
    let mem = Memory::open(dir.path()).unwrap();
    mem.short_term()
        .store("small", json!("kept"), None)
        .unwrap();
    drop(mem);

    // A write session that grows sled's file past the checkpoint threshold
    // (32 MiB): 48 values of ~1 MiB that do not compress. sled writes a
    // snapshot while opening; without the checkpoint, none is written later.
    let mem = Memory::open(dir.path()).unwrap();
    let before = sled_snapshots(dir.path());
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..48 {
        let s: String = (0..1_000_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'!' + (x % 90) as u8)
            })
            .collect();
        mem.short_term()
            .store(&format!("big-{i}"), json!(s), None)
            .unwrap();
    }
    drop(mem);
    let after = sled_snapshots(dir.path());
    assert_ne!(
        before, after,
        "closing after a large write session writes sled's snapshot, so the next open does not replay the log"
    );

    let mem = Memory::open(dir.path()).unwrap();
    assert_eq!(
        mem.short_term().retrieve("small").unwrap(),
        Some(json!("kept"))
    );
    for i in 0..48 {
        let v = mem
            .short_term()
            .retrieve(&format!("big-{i}"))
            .unwrap()
            .unwrap();
        assert_eq!(v.as_str().unwrap().len(), 1_000_000);
    }
}
