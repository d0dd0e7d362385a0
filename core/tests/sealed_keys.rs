//! Encryption at rest without exceptions (issue #30, item 2 and its check):
//! distinctive words written through every layer — in record keys (context
//! names, knowledge, short-term and procedure names) as well as values — are
//! found nowhere in the files of an encrypted store, while every listing and
//! prefix scan the layers do still answers. A plaintext store keeps its keys
//! as they were (and the same words are found there: the control). Real sled
//! stores and tantivy indexes in temp dirs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memstrata::episodic::OnDuplicate;
use memstrata::{FORMAT_VERSION, FORMAT_VERSION_SEALED_KEYS, Memory, NewEpisode, SearchFilters};
use serde_json::json;

#[path = "common/sealed_words.rs"]
mod words;

use words::*;

fn open(path: &Path, keyed: bool) -> Memory {
    let mut b = Memory::builder().path(path);
    if keyed {
        b = b.encryption_key(key());
    }
    b.open().unwrap()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Each word (as written, and lowercased as the index keeps terms) with the
/// files under `dir` that hold it.
fn words_in_files(dir: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let files: Vec<(PathBuf, Vec<u8>)> = files_under(dir)
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    let mut out = BTreeMap::new();
    for w in WORDS {
        for form in [w.to_owned(), w.to_lowercase()] {
            let found: Vec<PathBuf> = files
                .iter()
                .filter(|(_, b)| contains(b, form.as_bytes()))
                .map(|(p, _)| p.clone())
                .collect();
            if !found.is_empty() {
                out.insert(form, found);
            }
        }
    }
    out
}

fn format_version(path: &Path) -> u32 {
    let db = memstrata::testing::open_raw_sled(path).unwrap();
    let v = db
        .open_tree("meta")
        .unwrap()
        .get("format_version")
        .unwrap()
        .unwrap();
    u32::from_be_bytes(v.as_ref().try_into().unwrap())
}

#[test]
fn no_word_of_any_layer_is_in_any_file_of_an_encrypted_store() {
    let dir = tempfile::tempdir().unwrap();
    // Control: a plaintext store holds every word somewhere (keys included).
    let plain = dir.path().join("plain");
    let mem = open(&plain, false);
    let id = write_words(&mem);
    check_words(&mem, &id);
    drop(mem);
    let found = words_in_files(&plain);
    for w in WORDS {
        assert!(
            found.contains_key(w),
            "control: {w} not found in the plaintext store"
        );
    }
    assert_eq!(format_version(&plain), FORMAT_VERSION);

    let sealed = dir.path().join("sealed");
    let mem = open(&sealed, true);
    let id = write_words(&mem);
    check_words(&mem, &id);
    drop(mem);
    let found = words_in_files(&sealed);
    assert!(
        found.is_empty(),
        "words found in the encrypted store: {found:?}"
    );
    assert_eq!(format_version(&sealed), FORMAT_VERSION_SEALED_KEYS);
    // Reopened: everything is found again, and still nothing is readable.
    let mem = open(&sealed, true);
    check_words(&mem, &id);
    mem.admin()
        .optimize(memstrata::admin::OptimizeLevel::Aggressive, None)
        .unwrap();
    check_words(&mem, &id);
    drop(mem);
    let found = words_in_files(&sealed);
    assert!(
        found.is_empty(),
        "words found after reopen and optimize: {found:?}"
    );
}

#[test]
fn a_plaintext_store_keeps_its_keys_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p");
    let mem = open(&path, false);
    mem.switch_context(CONTEXT, true).unwrap();
    mem.short_term().store(SHORT_KEY, json!(1), None).unwrap();
    mem.semantic().store("k", json!(2)).unwrap();
    drop(mem);
    let db = memstrata::testing::open_raw_sled(&path).unwrap();
    let st = db.open_tree("short_term").unwrap();
    let want = format!("{CONTEXT}\0{SHORT_KEY}");
    assert!(st.get(want.as_bytes()).unwrap().is_some());
    let ctxs: Vec<_> = db
        .open_tree("contexts")
        .unwrap()
        .iter()
        .keys()
        .map(|k| k.unwrap().to_vec())
        .collect();
    assert!(ctxs.contains(&CONTEXT.as_bytes().to_vec()));
    assert!(
        db.open_tree("semantic")
            .unwrap()
            .get(format!("{CONTEXT}\0k"))
            .unwrap()
            .is_some()
    );
}

#[test]
fn export_and_import_carry_sealed_keys_across_stores() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let mem = open(&a, true);
    let id = write_words(&mem);
    let mut dump = Vec::new();
    mem.admin().export(&mut dump).unwrap();
    drop(mem);
    let b = dir.path().join("b");
    let mem = open(&b, true);
    mem.admin().import(&mut dump.as_slice()).unwrap();
    check_words(&mem, &id);
    drop(mem);
    let found = words_in_files(&b);
    assert!(
        found.is_empty(),
        "words found in the imported store: {found:?}"
    );
}

/// Every raw key of every tree of the sled store at `path`.
fn raw_keys(path: &Path) -> Vec<Vec<u8>> {
    let db = memstrata::testing::open_raw_sled(path).unwrap();
    let mut out = Vec::new();
    for name in db.tree_names() {
        for k in db.open_tree(name).unwrap().iter().keys() {
            out.push(k.unwrap().to_vec());
        }
    }
    out
}

fn has(hay: &[u8], needle: &str) -> bool {
    contains(hay, needle.as_bytes())
}

/// An encrypted store written before keys were sealed (format version 2,
/// plaintext keys) is sealed when it opens; half-rewritten (what a crash in
/// the middle leaves: each batch is atomic) it is finished the same way.
#[test]
fn plaintext_keys_of_an_encrypted_store_are_sealed_on_open_even_half_done() {
    const CTX: &str = "ctxMigrationWord";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mem = open(&path, true);
    mem.switch_context(CTX, true).unwrap();
    mem.contexts()
        .set_on_duplicate(OnDuplicate::Merge, None)
        .unwrap();
    for i in 0..40 {
        mem.short_term()
            .store(&format!("stkey{i}"), json!(i), None)
            .unwrap();
    }
    mem.semantic().store("user:kwKey", json!({"a": 1})).unwrap();
    mem.semantic()
        .update("user:kwKey", json!({"a": 2}))
        .unwrap();
    let ep = mem
        .episodic()
        .record(NewEpisode::new("migrated summary").embedding(vec![1.0, 0.0]))
        .unwrap();
    let sid = mem.sessions().create("sess", json!({})).unwrap().session_id;
    mem.sessions().save(&sid, json!({"s": 1}), 1).unwrap();
    drop(mem);

    for every_other in [true, false] {
        let undone = memstrata::testing::unseal_keys(&path, &key(), every_other).unwrap();
        assert!(undone > 20, "{undone} entries unsealed");
        assert!(raw_keys(&path).iter().any(|k| has(k, CTX)));
        assert_eq!(format_version(&path), FORMAT_VERSION);

        let mem = open(&path, true);
        mem.switch_context(CTX, true).unwrap();
        assert_eq!(mem.short_term().keys("stkey").unwrap().len(), 40);
        assert_eq!(mem.short_term().retrieve("stkey7").unwrap(), Some(json!(7)));
        assert_eq!(mem.semantic().keys("user:").unwrap(), vec!["user:kwKey"]);
        assert_eq!(mem.semantic().history("user:kwKey").unwrap().len(), 2);
        assert!(mem.episodic().get(&ep).unwrap().is_some());
        let hits = mem
            .episodic()
            .search("migrated", &SearchFilters::default(), 5)
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(
            mem.contexts().on_duplicate(None).unwrap(),
            OnDuplicate::Merge
        );
        assert!(mem.contexts().list().unwrap().contains(&CTX.to_owned()));
        assert_eq!(
            mem.sessions().restore(&sid, None).unwrap().content,
            json!({"s": 1})
        );
        drop(mem);

        let keys = raw_keys(&path);
        for word in [CTX, "stkey", "kwKey"] {
            assert!(!keys.iter().any(|k| has(k, word)), "{word} left in a key");
        }
        // Generated ids stay as they are (no user text in them).
        assert!(keys.iter().any(|k| has(k, &sid)));
        assert!(keys.iter().any(|k| has(k, &ep)));
        assert_eq!(format_version(&path), FORMAT_VERSION_SEALED_KEYS);
    }
}
