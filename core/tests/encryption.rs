//! Encryption at rest: every layer round-trips through a sealed store, the raw
//! sled files hold no plaintext, wrong / missing / unexpected keys are refused
//! without writing anything, crash recovery works sealed, and keys rotate by
//! export → import. Real sled stores and a real tantivy index in temp dirs.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memstrata::{
    Durability, EncryptionKey, Error, Memory, NewEpisode, SearchFilters, VectorQuery,
    admin::OptimizeLevel, procedural::Actions, procedural::Step,
};
use serde_json::json;

/// Appears only inside record values (never in keys), in every layer.
const MARKER: &str = "ZebraQuartzMarker";

fn key(b: u8) -> EncryptionKey {
    EncryptionKey::new([b; 32])
}

fn open(path: &Path, k: Option<EncryptionKey>) -> memstrata::Result<Memory> {
    let mut b = Memory::builder().path(path);
    if let Some(k) = k {
        b = b.encryption_key(k);
    }
    b.open()
}

fn assert_key_error(r: memstrata::Result<Memory>, needle: &str) {
    match r {
        Err(Error::InvalidInput { field, reason }) => {
            assert_eq!(field, "encryption_key");
            assert!(reason.contains(needle), "{reason:?} lacks {needle:?}");
        }
        Err(other) => panic!("expected InvalidInput on encryption_key, got {other:?}"),
        Ok(_) => panic!("expected InvalidInput on encryption_key, the store opened"),
    }
}

/// Ids that [`check_every_layer`] needs to find the data again.
struct Written {
    episode: String,
    session: String,
    run: String,
    task: String,
}

/// Write the marker into every layer (values only).
fn write_every_layer(mem: &Memory) -> Written {
    mem.short_term()
        .store("st", json!({"note": MARKER}), None)
        .unwrap();
    // A large value exercises the lz4 path under the seal.
    mem.short_term()
        .store(
            "big",
            json!({"text": format!("{MARKER} ").repeat(400)}),
            None,
        )
        .unwrap();
    mem.working().focus(&format!("focus {MARKER}")).unwrap();
    mem.working()
        .add_to_workspace(json!({"ws": MARKER}))
        .unwrap();
    let episode = mem
        .episodic()
        .record(
            NewEpisode::new(format!("meeting about {MARKER}")).content(json!({"detail": MARKER})),
        )
        .unwrap();
    mem.semantic()
        .store("fact", json!({"v": 1, "text": MARKER}))
        .unwrap();
    mem.semantic().update("fact", json!({"v": 2})).unwrap();
    let session = mem
        .sessions()
        .create("s", json!({"meta": MARKER}))
        .unwrap()
        .session_id;
    for level in 0..=3u8 {
        mem.sessions()
            .save(
                &session,
                json!({"level": level, "state": MARKER, "pad": "x".repeat(2000)}),
                level,
            )
            .unwrap();
    }
    let p = mem.procedural();
    let mut step = Step::new("one", "set");
    step.parameters = json!({"out": MARKER});
    p.learn("proc", vec![step]).unwrap();
    let run = p
        .execute("proc", json!({"in": MARKER}), &Actions::new())
        .unwrap()
        .run_id;
    let task = mem
        .timesheet()
        .punch_in("llm", &format!("task {MARKER}"), Some(MARKER), None)
        .unwrap()
        .task_id;
    mem.flush().unwrap();
    Written {
        episode,
        session,
        run,
        task,
    }
}

fn check_every_layer(mem: &Memory, w: &Written) {
    assert_eq!(
        mem.short_term().retrieve("st").unwrap(),
        Some(json!({"note": MARKER}))
    );
    let big = mem.short_term().retrieve("big").unwrap().unwrap();
    assert!(big["text"].as_str().unwrap().starts_with(MARKER));
    assert_eq!(
        mem.working().current_focus().unwrap(),
        vec![format!("focus {MARKER}")]
    );
    assert!(
        mem.working()
            .workspace()
            .unwrap()
            .contains(&json!({"ws": MARKER}))
    );
    let ep = mem.episodic().get(&w.episode).unwrap().unwrap();
    assert_eq!(ep.content, json!({"detail": MARKER}));
    let hits = mem
        .episodic()
        .search(MARKER, &SearchFilters::default(), 5)
        .unwrap();
    assert!(hits.iter().any(|h| h.episode.id == w.episode));
    assert_eq!(
        mem.semantic().retrieve("fact").unwrap(),
        Some(json!({"v": 2, "text": MARKER}))
    );
    assert_eq!(mem.semantic().history("fact").unwrap().len(), 2);
    assert!(
        mem.semantic()
            .query(MARKER, 5)
            .unwrap()
            .iter()
            .any(|h| h.key == "fact")
    );
    for v in 1..=4u64 {
        let r = mem.sessions().restore(&w.session, Some(v)).unwrap();
        assert_eq!(r.content["level"], json!(v - 1));
        assert_eq!(r.content["state"], json!(MARKER));
        assert_eq!(r.metadata, json!({"meta": MARKER}));
    }
    assert_eq!(mem.sessions().versions(&w.session).unwrap().len(), 4);
    let run = mem.procedural().run(&w.run).unwrap().unwrap();
    assert_eq!(run.outputs["one"], json!({"out": MARKER}));
    assert!(mem.procedural().get("proc").unwrap().is_some());
    let task = mem.timesheet().task(&w.task).unwrap().unwrap();
    assert_eq!(task.task_description, format!("task {MARKER}"));
}

/// Bytes of every file under `dir` except the tantivy index (documented as plaintext).
fn store_bytes(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n == "index") {
                    continue;
                }
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn files_with_marker(dir: &Path) -> Vec<PathBuf> {
    store_bytes(dir)
        .into_iter()
        .filter(|(_, b)| contains(b, MARKER.as_bytes()))
        .map(|(p, _)| p)
        .collect()
}

#[test]
fn every_layer_round_trips_sealed_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mem = open(&path, Some(key(7))).unwrap();
    let w = write_every_layer(&mem);
    check_every_layer(&mem, &w);
    mem.admin()
        .optimize(OptimizeLevel::Aggressive, None)
        .unwrap();
    check_every_layer(&mem, &w);
    drop(mem);
    let mem = open(&path, Some(key(7))).unwrap();
    check_every_layer(&mem, &w);
    // Medium optimize re-encodes kept session versions: they must stay sealed and readable.
    let before = mem.sessions().versions(&w.session).unwrap();
    mem.admin()
        .optimize(OptimizeLevel::Medium, Some(&w.session))
        .unwrap();
    assert_eq!(
        mem.sessions().versions(&w.session).unwrap().len(),
        before.len()
    );
    check_every_layer(&mem, &w);
}

#[test]
fn raw_sled_files_hold_no_plaintext_of_an_encrypted_store() {
    let dir = tempfile::tempdir().unwrap();
    // Control: the same writes in a plaintext store do leave the marker in sled's files.
    let plain = dir.path().join("plain");
    let mem = open(&plain, None).unwrap();
    write_every_layer(&mem);
    drop(mem);
    assert!(
        !files_with_marker(&plain).is_empty(),
        "control: a plaintext store should contain the marker"
    );

    let sealed = dir.path().join("sealed");
    let mem = open(&sealed, Some(key(1))).unwrap();
    let w = write_every_layer(&mem);
    mem.admin().optimize(OptimizeLevel::Medium, None).unwrap();
    drop(mem);
    let found = files_with_marker(&sealed);
    assert!(found.is_empty(), "plaintext marker found in {found:?}");
    // Nor the key itself.
    let k = [1u8; 32];
    for (p, b) in store_bytes(&sealed) {
        assert!(!contains(&b, &k), "key bytes found in {}", p.display());
    }
    let mem = open(&sealed, Some(key(1))).unwrap();
    check_every_layer(&mem, &w);
}

#[test]
fn wrong_key_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mem = open(&path, Some(key(3))).unwrap();
    let w = write_every_layer(&mem);
    drop(mem);
    // The key is checked before sled opens: every file stays byte for byte the same.
    let before = store_bytes(&path);
    assert!(before.keys().any(|p| p.ends_with("db/db")));
    assert!(before.keys().any(|p| p.ends_with("KEYCHECK")));
    assert_key_error(open(&path, Some(key(4))), "wrong encryption key");
    assert_key_error(open(&path, None), "is encrypted");
    let after = store_bytes(&path);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "files were added or removed by a refused open"
    );
    for (p, b) in &before {
        if p.file_name().is_some_and(|n| n == "LOCK") {
            continue;
        }
        assert!(after[p] == *b, "{} changed by a refused open", p.display());
    }
    let mem = open(&path, Some(key(3))).unwrap();
    check_every_layer(&mem, &w);
    drop(mem);
    // Without the KEYCHECK file the copy inside sled still tells keys apart (and the
    // right key writes the file again).
    std::fs::remove_file(path.join("KEYCHECK")).unwrap();
    assert_key_error(open(&path, Some(key(4))), "wrong encryption key");
    assert_key_error(open(&path, None), "is encrypted");
    let mem = open(&path, Some(key(3))).unwrap();
    check_every_layer(&mem, &w);
    drop(mem);
    assert!(path.join("KEYCHECK").exists());
}

#[test]
fn plaintext_store_refuses_a_key_and_keeps_working_without() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mem = open(&path, None).unwrap();
    mem.short_term().store("a", json!(MARKER), None).unwrap();
    drop(mem);
    assert_key_error(open(&path, Some(key(9))), "is not encrypted");
    let mem = open(&path, None).unwrap();
    assert_eq!(mem.short_term().retrieve("a").unwrap(), Some(json!(MARKER)));
}

#[test]
fn a_second_handle_in_the_same_process_must_bring_the_same_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mem = open(&path, Some(key(5))).unwrap();
    mem.short_term().store("a", json!(1), None).unwrap();
    assert_key_error(open(&path, Some(key(6))), "wrong encryption key");
    assert_key_error(open(&path, None), "is encrypted");
    let again = open(&path, Some(key(5))).unwrap();
    assert_eq!(again.short_term().retrieve("a").unwrap(), Some(json!(1)));
}

#[test]
fn keys_rotate_by_export_and_import() {
    let dir = tempfile::tempdir().unwrap();
    let old_path = dir.path().join("old");
    let new_path = dir.path().join("new");
    let old = open(&old_path, Some(key(10))).unwrap();
    let w = write_every_layer(&old);
    let mut dump = Vec::new();
    old.admin().export(&mut dump).unwrap();
    drop(old);
    let new = open(&new_path, Some(key(11))).unwrap();
    new.admin().import(&mut dump.as_slice()).unwrap();
    check_every_layer(&new, &w);
    new.flush().unwrap();
    drop(new);
    assert_key_error(open(&new_path, Some(key(10))), "wrong encryption key");
    assert!(files_with_marker(&new_path).is_empty());
    let new = open(&new_path, Some(key(11))).unwrap();
    check_every_layer(&new, &w);
}

#[test]
fn key_file_contents_raw_or_hex_else_a_clear_error() {
    let raw = [0xABu8; 32];
    assert_eq!(
        EncryptionKey::from_key_file_contents(&raw).unwrap(),
        EncryptionKey::new(raw)
    );
    let hex = format!("{}\n", "ab".repeat(32));
    assert_eq!(
        EncryptionKey::from_key_file_contents(hex.as_bytes()).unwrap(),
        EncryptionKey::new(raw)
    );
    assert_eq!(
        EncryptionKey::from_key_file_contents("AB".repeat(32).as_bytes()).unwrap(),
        EncryptionKey::new(raw)
    );
    for bad in [
        &b"short"[..],
        &[0u8; 33][..],
        "zz".repeat(32).as_bytes(),
        b"",
    ] {
        match EncryptionKey::from_key_file_contents(bad) {
            Err(Error::InvalidInput { field, reason }) => {
                assert_eq!(field, "encryption_key");
                assert!(
                    reason.contains("32 raw bytes or 64 hexadecimal"),
                    "{reason}"
                );
            }
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }
    match EncryptionKey::from_slice(&[1; 16]) {
        Err(Error::InvalidInput { field, reason }) => {
            assert_eq!(field, "encryption_key");
            assert_eq!(reason, "must be exactly 32 bytes, got 16 bytes");
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    assert_eq!(
        format!("{:?}", EncryptionKey::new(raw)),
        "EncryptionKey(<redacted>)"
    );
}

// ---- crash under Immediate durability, sealed ----

const CHILD_ENV: &str = "MEMSTRATA_ENC_CRASH_WRITER";

/// Child half of [`sealed_store_survives_sigkill_under_immediate_durability`].
#[test]
#[ignore = "child process of the crash test"]
fn encrypted_crash_writer_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mem = Memory::builder()
        .path(path)
        .durability(Durability::Immediate)
        .encryption_key(key(42))
        .open()
        .unwrap();
    for n in 0u64.. {
        mem.short_term()
            .store(&format!("k{}", n % 50), json!(n), None)
            .unwrap();
        let id = mem
            .episodic()
            .record(NewEpisode::new(format!("sealed crash marker{n}")).content(json!(n)))
            .unwrap();
        println!("ACK {n} {id}");
    }
}

#[test]
fn sealed_store_survives_sigkill_under_immediate_durability() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    for round in 0..2u64 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "encrypted_crash_writer_child",
                "--nocapture",
                "--include-ignored",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut acked: Vec<(u64, String)> = Vec::new();
        let started = Instant::now();
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            if let ["ACK", n, id] = line.split(' ').collect::<Vec<_>>().as_slice() {
                acked.push((n.parse().unwrap(), (*id).to_owned()));
            }
            if acked.len() >= 40 || started.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
        child.kill().unwrap(); // SIGKILL mid-write
        child.wait().unwrap();
        assert!(
            !acked.is_empty(),
            "round {round}: the child acknowledged nothing"
        );
        let mem = open(&path, Some(key(42))).unwrap();
        let mut latest: BTreeMap<String, u64> = BTreeMap::new();
        for (n, id) in &acked {
            latest.insert(format!("k{}", n % 50), *n);
            let ep = mem
                .episodic()
                .get(id)
                .unwrap()
                .unwrap_or_else(|| panic!("acknowledged episode {n} lost"));
            assert_eq!(ep.content, json!(n));
        }
        for (k, n) in latest {
            let got = mem
                .short_term()
                .retrieve(&k)
                .unwrap()
                .and_then(|v| v.as_u64());
            assert!(got.is_some_and(|g| g >= n), "{k}={n} lost, found {got:?}");
        }
        let (n, id) = acked.last().unwrap();
        let hits = mem
            .episodic()
            .search(&format!("marker{n}"), &SearchFilters::default(), 5)
            .unwrap();
        assert!(hits.iter().any(|h| &h.episode.id == id));
        drop(mem);
        assert_key_error(open(&path, None), "is encrypted");
    }
}

#[test]
fn vectors_of_an_encrypted_store_are_found_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mem = open(&path, Some(key(9))).unwrap();
    let near = mem
        .episodic()
        .record(NewEpisode::new(format!("{MARKER} near")).embedding(vec![1.0, 0.0, 0.0]))
        .unwrap();
    mem.episodic()
        .record(NewEpisode::new(format!("{MARKER} far")).embedding(vec![0.0, 1.0, 0.0]))
        .unwrap();
    drop(mem);
    // The vector set is rebuilt from the sealed episode records on first use.
    let mem = open(&path, Some(key(9))).unwrap();
    let hits = mem
        .episodic()
        .search_hybrid(
            "",
            &SearchFilters::default(),
            1,
            &VectorQuery::embedding(vec![0.9, 0.1, 0.0]),
        )
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].episode.id, near);
    assert_eq!(hits[0].vector_rank, Some(1));
}
