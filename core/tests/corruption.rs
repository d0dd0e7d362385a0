//! Damaged store files give a clear error or a rebuilt index — never a panic
//! and never a silently wrong answer.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use memstrata::{EncryptionKey, Error, Memory, NewEpisode, SearchFilters};
use serde_json::json;

/// Opens the store, with the test key when `keyed` (an encrypted store).
fn open(path: &Path, keyed: bool) -> memstrata::Result<Memory> {
    let mut b = Memory::builder().path(path);
    if keyed {
        b = b.encryption_key(EncryptionKey::new([0x61; 32]));
    }
    b.open()
}

fn populate(path: &Path, keyed: bool) -> Vec<String> {
    let mem = open(path, keyed).unwrap();
    let mut ids = Vec::new();
    for i in 0..50 {
        mem.short_term()
            .store(
                &format!("k{i}"),
                json!({"i": i, "pad": "x".repeat(200)}),
                None,
            )
            .unwrap();
        ids.push(
            mem.episodic()
                .record(NewEpisode::new(format!("corruption probe {i}")))
                .unwrap(),
        );
        mem.semantic()
            .store(&format!("s{i}"), json!({"i": i}))
            .unwrap();
    }
    ids
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Open and read everything; Ok(()) when every answer is right, Err(msg) on a clean error.
/// In an encrypted store, a search over an index chunk that fails
/// authentication answers `CORRUPTED` (and rebuilds the index): the search is
/// then repeated once and must answer right.
fn open_and_verify(path: &Path, ids: &[String], keyed: bool) -> Result<(), String> {
    let mem = open(path, keyed).map_err(|e| e.to_string())?;
    for i in 0..50 {
        match mem.short_term().retrieve(&format!("k{i}")) {
            Ok(Some(v)) => assert_eq!(
                v["i"],
                json!(i),
                "wrong value read back from a damaged store"
            ),
            Ok(None) => return Err(format!("k{i} missing")),
            Err(e) => return Err(e.to_string()),
        }
    }
    let search = || {
        mem.episodic()
            .search("corruption probe", &SearchFilters::default(), 100)
    };
    let hits = match search() {
        Err(Error::Corrupted { .. }) if keyed => search(),
        other => other,
    }
    .map_err(|e| e.to_string())?;
    for h in &hits {
        assert!(
            ids.contains(&h.episode.id),
            "search returned an episode that was never stored"
        );
    }
    if hits.len() != ids.len() {
        return Err(format!(
            "search found {} of {} episodes",
            hits.len(),
            ids.len()
        ));
    }
    Ok(())
}

#[test]
fn damaged_index_files_are_rebuilt() {
    damaged_index_run(false);
}

/// The same with sealed index files (an encrypted store).
#[test]
fn damaged_sealed_index_files_are_rebuilt() {
    damaged_index_run(true);
}

fn damaged_index_run(keyed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let ids = populate(dir.path(), keyed);
    let mut damaged = 0;
    for damage in 0..3 {
        // Re-list every round: a rebuild renames the segment files.
        for i in 0.. {
            let files = files_under(&dir.path().join("index"));
            let Some(f) = files.get(i).cloned() else {
                break;
            };
            let original = std::fs::read(&f).unwrap();
            let mut bytes = original.clone();
            if damage == 0 {
                bytes.truncate(bytes.len() / 2);
            } else if damage == 1 && !bytes.is_empty() {
                let mid = bytes.len() / 2;
                let end = (mid + 64).min(bytes.len());
                bytes[mid..end].iter_mut().for_each(|b| *b = !*b);
            } else if !bytes.is_empty() {
                // One bit, a third of the way in: the kind of damage a
                // decoder takes for other data (another term, another
                // document) rather than failing on.
                let at = bytes.len() / 3;
                bytes[at] ^= 0x04;
            }
            std::fs::write(&f, &bytes).unwrap();
            damaged += 1;
            let r = catch_unwind(AssertUnwindSafe(|| {
                open_and_verify(dir.path(), &ids, keyed)
            }));
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!(
                    "damaging {} (mode {damage}) was not repaired: {e}",
                    f.display()
                ),
                Err(_) => panic!("panic after damaging {} (mode {damage})", f.display()),
            }
            if f.exists() {
                std::fs::write(&f, &original).unwrap();
            }
        }
    }
    assert!(
        damaged >= 15,
        "expected to damage every index file, did {damaged}"
    );
}

#[test]
fn damaged_sled_files_give_an_error_not_a_panic() {
    for damage in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let ids = populate(dir.path(), false);
        let db_files = files_under(&dir.path().join("db"));
        for f in &db_files {
            let mut bytes = std::fs::read(f).unwrap();
            match damage {
                0 => bytes.truncate(bytes.len() / 3),
                1 => {
                    let mid = bytes.len() / 2;
                    let end = (mid + 256).min(bytes.len());
                    bytes[mid..end].iter_mut().for_each(|b| *b ^= 0xa5);
                }
                _ => bytes.iter_mut().step_by(97).for_each(|b| *b = 0),
            }
            std::fs::write(f, &bytes).unwrap();
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            open_and_verify(dir.path(), &ids, false)
        }));
        match r {
            Ok(Ok(())) | Ok(Err(_)) => {}
            Err(_) => panic!(
                "damage mode {damage}: a damaged sled store panicked instead of returning an error"
            ),
        }
    }
}
