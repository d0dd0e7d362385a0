//! PostgreSQL-only behaviour: URL and schema handling, migrations, several
//! engines (instances) on one database, moving a store between backends.
//!
//! Always on PostgreSQL (the layers themselves are covered on both backends by
//! the conformance suites): needs `--features postgres` and
//! `MEMSTRATA_TEST_PG_URL`, and fails without the URL rather than skip.
#![cfg(feature = "postgres")]

mod common;

use std::collections::HashSet;
use std::io::Cursor;
use std::sync::{Arc, Barrier};

use memstrata::{Error, Memory, NewEpisode, SearchFilters};
use serde_json::json;

fn base_url() -> String {
    std::env::var("MEMSTRATA_TEST_PG_URL").unwrap_or_else(|_| {
        panic!("the PostgreSQL backend tests need MEMSTRATA_TEST_PG_URL (e.g. postgres://postgres@127.0.0.1:54329/postgres)")
    })
}

/// A store location on PostgreSQL whatever MEMSTRATA_TEST_BACKEND says.
fn pg_dir() -> common::TestDir {
    assert!(!base_url().is_empty());
    common::pg_tempdir()
}

fn client() -> postgres::Client {
    postgres::Client::connect(&base_url(), postgres::NoTls).expect("connect")
}

fn schema_of(url: &std::path::Path) -> String {
    url.to_str()
        .unwrap()
        .split("schema=")
        .nth(1)
        .unwrap()
        .to_owned()
}

#[test]
fn bad_urls_are_invalid_input_naming_path() {
    for schema in ["Upper", "1digit", "pg_reserved", "with-dash", ""] {
        let url = format!("{}?schema={schema}", base_url());
        match Memory::open(&url) {
            Err(Error::InvalidInput { field, reason }) => {
                assert_eq!(field, "path", "{schema}");
                assert!(reason.contains("schema"), "{reason}");
            }
            other => panic!("schema {schema:?}: {other:?}"),
        }
    }
    // Nothing listens on port 1: a storage error naming the server, without the password.
    match Memory::open("postgres://someone:s3cret@127.0.0.1:1/db?schema=x") {
        Err(e @ Error::Storage { .. }) => {
            let text = e.to_string();
            assert!(text.contains("cannot connect"), "{text}");
            assert!(text.contains("127.0.0.1:1"), "{text}");
            assert!(!text.contains("s3cret"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // A sled store cannot get a separate engine.
    let d = tempfile::tempdir().unwrap();
    match Memory::builder().path(d.path()).separate_engine().open() {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "path"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn schema_is_created_with_a_versioned_migration_and_one_table_per_tree() {
    let dir = pg_dir();
    let url = dir.path();
    let schema = schema_of(&url);
    {
        let mem = Memory::open(&url).unwrap();
        mem.short_term().store("k", json!("v"), None).unwrap();
        assert!(!mem.is_temporary());
    }
    // Opening again neither fails nor migrates twice.
    let mem = Memory::open(&url).unwrap();
    assert_eq!(mem.short_term().retrieve("k").unwrap(), Some(json!("v")));
    let mut c = client();
    let versions: Vec<i32> = c
        .query(
            &format!("SELECT version FROM \"{schema}\".schema_migrations ORDER BY version"),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, vec![1]);
    let tables: i64 = c
        .query_one(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 \
             AND column_name = 'key' AND data_type = 'bytea'",
            &[&schema],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 13, "one (key bytea, value bytea) table per tree");
    // No LOCK file anywhere: a second engine on the same URL opens fine.
    let other = Memory::builder()
        .path(&url)
        .separate_engine()
        .open()
        .unwrap();
    assert_eq!(other.short_term().retrieve("k").unwrap(), Some(json!("v")));
}

#[test]
fn two_instances_writing_concurrently_lose_nothing_and_see_each_other() {
    let dir = pg_dir();
    let url = dir.path();
    let a = Memory::builder()
        .path(&url)
        .separate_engine()
        .open()
        .unwrap();
    let b = Memory::builder()
        .path(&url)
        .separate_engine()
        .open()
        .unwrap();
    let threads_per_instance = 3;
    let per = 40;
    let barrier = Arc::new(Barrier::new(threads_per_instance * 2));
    let mut handles = Vec::new();
    for (name, mem) in [("a", a.clone()), ("b", b.clone())] {
        for t in 0..threads_per_instance {
            let mem = mem.clone();
            let barrier = barrier.clone();
            handles.push(std::thread::spawn(move || {
                barrier.wait();
                let mut ids = Vec::new();
                for i in 0..per {
                    let tag = format!("{name}{t}");
                    ids.push(
                        mem.episodic()
                            .record(
                                NewEpisode::new(format!("zebra{name}{t}x{i} walked")).tags([tag]),
                            )
                            .unwrap(),
                    );
                    mem.semantic()
                        .store(&format!("{name}-{t}-{i}"), json!({ "i": i }))
                        .unwrap();
                    mem.short_term()
                        .store(&format!("{name}-{t}-{i}"), json!(i), None)
                        .unwrap();
                }
                ids
            }));
        }
    }
    let mut all_ids = Vec::new();
    for h in handles {
        all_ids.extend(h.join().unwrap());
    }
    let total = threads_per_instance * 2 * per;
    let distinct: HashSet<&String> = all_ids.iter().collect();
    assert_eq!(all_ids.len(), total);
    assert_eq!(distinct.len(), total, "no duplicate ids across instances");

    for (reader, writer) in [(&a, "b"), (&b, "a")] {
        for t in 0..threads_per_instance {
            for i in 0..per {
                let key = format!("{writer}-{t}-{i}");
                assert!(reader.semantic().get(&key).unwrap().is_some(), "{key}");
                assert_eq!(reader.short_term().retrieve(&key).unwrap(), Some(json!(i)));
            }
            // Every episode the other instance recorded is found by search here.
            let hits = reader
                .episodic()
                .search(
                    "walked",
                    &SearchFilters {
                        tags: vec![format!("{writer}{t}")],
                        ..Default::default()
                    },
                    1000,
                )
                .unwrap();
            assert_eq!(
                hits.len(),
                per,
                "instance sees {writer}{t}'s episodes in search"
            );
            let one = reader
                .episodic()
                .search(&format!("zebra{writer}{t}x7"), &SearchFilters::default(), 5)
                .unwrap();
            assert_eq!(one.len(), 1, "exact token of the other instance");
        }
    }
    for id in &all_ids {
        assert!(a.episodic().get(id).unwrap().is_some());
        assert!(b.episodic().get(id).unwrap().is_some());
    }
    // A forget on one instance disappears from the other's search.
    let victim = &all_ids[0];
    assert!(a.episodic().forget(victim).unwrap());
    let ep_summary_hits = b
        .episodic()
        .search("zebraa0x0", &SearchFilters::default(), 5)
        .unwrap();
    assert!(ep_summary_hits.is_empty(), "{ep_summary_hits:?}");
    assert!(b.episodic().get(victim).unwrap().is_none());
}

#[test]
fn a_store_moves_from_sled_to_postgres_and_back_losslessly() {
    let sled_dir = tempfile::tempdir().unwrap();
    let src = Memory::open(sled_dir.path()).unwrap();
    src.short_term()
        .store("k", json!({"a": [1, 2]}), None)
        .unwrap();
    src.working().focus("writing").unwrap();
    for i in 0..20 {
        src.episodic()
            .record(NewEpisode::new(format!("episode number {i}")).tags(["t"]))
            .unwrap();
    }
    src.semantic().store("fact", json!({"v": 1})).unwrap();
    src.semantic().update("fact", json!({"w": 2})).unwrap();
    let sid = src.session_create("s", json!({})).unwrap().session_id;
    src.session_save(&sid, json!({"step": 1}), 3).unwrap();
    src.session_save(&sid, json!({"step": 2}), 3).unwrap();
    let mut exported = Vec::new();
    let stats = src.export(&mut exported).unwrap();

    let dir = pg_dir();
    let pg = Memory::open(dir.path()).unwrap();
    let istats = pg.import(&mut Cursor::new(&exported)).unwrap();
    let nonzero = |m: &std::collections::BTreeMap<String, u64>| -> Vec<(String, u64)> {
        m.iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect()
    };
    assert_eq!(nonzero(&istats.counts), nonzero(&stats.counts));
    let mut again = Vec::new();
    pg.export(&mut again).unwrap();
    // Same records (the header line carries the export time).
    let body = |b: &[u8]| -> Vec<String> {
        String::from_utf8(b.to_vec())
            .unwrap()
            .lines()
            .skip(1)
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(body(&again), body(&exported));
    assert_eq!(
        pg.episodic()
            .search("episode", &SearchFilters::default(), 100)
            .unwrap()
            .len(),
        20
    );

    let back_dir = tempfile::tempdir().unwrap();
    let back = Memory::open(back_dir.path()).unwrap();
    back.import(&mut Cursor::new(&again)).unwrap();
    let mut third = Vec::new();
    back.export(&mut third).unwrap();
    assert_eq!(body(&third), body(&exported));
}

#[test]
fn an_encrypted_store_on_postgres_needs_its_key() {
    let dir = pg_dir();
    let url = dir.path();
    let key = memstrata::EncryptionKey::new([7; 32]);
    {
        let mem = Memory::builder()
            .path(&url)
            .encryption_key(key.clone())
            .open()
            .unwrap();
        mem.semantic().store("secret", json!("plans")).unwrap();
    }
    match Memory::open(&url) {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "encryption_key"),
        other => panic!("{other:?}"),
    }
    match Memory::builder()
        .path(&url)
        .encryption_key(memstrata::EncryptionKey::new([8; 32]))
        .open()
    {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "encryption_key"),
        other => panic!("{other:?}"),
    }
    // The stored bytes are sealed: the plaintext is nowhere in the table.
    let schema = schema_of(&url);
    let rows = client()
        .query(&format!("SELECT value FROM \"{schema}\".semantic"), &[])
        .unwrap();
    assert_eq!(rows.len(), 1);
    let v: &[u8] = rows[0].get(0);
    assert!(!v.windows(5).any(|w| w == b"plans"));
    let mem = Memory::builder()
        .path(&url)
        .encryption_key(key)
        .open()
        .unwrap();
    assert_eq!(
        mem.semantic().get("secret").unwrap().unwrap().knowledge,
        json!("plans")
    );
}
