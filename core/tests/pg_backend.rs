//! PostgreSQL-only behaviour: URL and schema handling, migrations, several
//! engines (instances) on one database, moving a store between backends.
//!
//! Always on PostgreSQL (the layers themselves are covered on both backends by
//! the conformance suites): needs `--features postgres` and
//! `MEMSTRATA_TEST_PG_URL`, and fails without the URL rather than skip. The
//! tests are `#[ignore]`d so that `cargo test --workspace` (where the adapter's
//! dependency turns the `postgres` feature on) does not run them without a
//! server; `make test-pg` runs them with `--include-ignored`.
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
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
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
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
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
    assert_eq!(versions, vec![1, 2]);
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
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
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
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
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
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
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
    // A password in the URL never shows in the message (the test server trusts loopback,
    // so the password is not checked and the open reaches the key check).
    let text = url.to_str().unwrap();
    if let Some((scheme, rest)) = text.split_once("://")
        && let Some((user, host)) = rest.split_once('@')
        && !user.contains(':')
    {
        let with_password = format!("{scheme}://{user}:hunter2@{host}");
        match Memory::open(&with_password) {
            Err(e @ Error::InvalidInput { .. }) => {
                let msg = e.to_string();
                assert!(!msg.contains("hunter2"), "{msg}");
                assert!(msg.contains(":***@"), "{msg}");
            }
            other => panic!("{other:?}"),
        }
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

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn read_modify_writes_are_serialised_across_instances() {
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
    let sid = a.session_create("shared", json!({})).unwrap().session_id;
    let threads_per_instance = 3;
    let saves = 8;
    let barrier = Arc::new(Barrier::new(threads_per_instance * 2));
    let mut handles = Vec::new();
    for (name, mem) in [("a", a.clone()), ("b", b.clone())] {
        for t in 0..threads_per_instance {
            let mem = mem.clone();
            let barrier = barrier.clone();
            let sid = sid.clone();
            handles.push(std::thread::spawn(move || {
                barrier.wait();
                let mut versions = Vec::new();
                for i in 0..saves {
                    let saved = mem
                        .session_save(&sid, json!({ "by": format!("{name}{t}"), "i": i }), 1)
                        .unwrap();
                    versions.push((saved.version, format!("{name}{t}"), i));
                }
                // Both instances try to create the same procedure: exactly one wins.
                let created = mem
                    .procedural()
                    .learn(
                        &format!("p{t}"),
                        vec![memstrata::Step::new("s", "set").parameters(json!({"v": 1}))],
                    )
                    .is_ok();
                (versions, created)
            }));
        }
    }
    let mut versions = Vec::new();
    let mut created = 0;
    for h in handles {
        let (v, c) = h.join().unwrap();
        versions.extend(v);
        created += usize::from(c);
    }
    let total = threads_per_instance * 2 * saves;
    let distinct: HashSet<u64> = versions.iter().map(|(v, _, _)| *v).collect();
    assert_eq!(distinct.len(), total, "every save got its own version");
    assert_eq!(
        created, threads_per_instance,
        "one creation per procedure name"
    );
    // Every acknowledged save restores its own content, from either instance.
    for (v, by, i) in &versions {
        for mem in [&a, &b] {
            let r = mem.session_restore(&sid, Some(*v)).unwrap();
            assert_eq!(r.content, json!({ "by": by, "i": i }), "version {v}");
        }
    }
    assert_eq!(b.session_versions(&sid).unwrap().len(), total);
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn ordered_scans_span_pages_from_both_ends() {
    // Scans are fetched 512 rows a page: go past a few pages forward and backward.
    let dir = pg_dir();
    let mem = Memory::open(dir.path()).unwrap();
    let st = mem.short_term();
    for i in 0..1300 {
        st.store(&format!("a{i:05}"), json!(i), None).unwrap();
        if i % 2 == 0 {
            st.store(&format!("b{i:05}"), json!(i), None).unwrap();
        }
    }
    let a = st.keys("a").unwrap();
    assert_eq!(a.len(), 1300);
    assert!(a.windows(2).all(|w| w[0] < w[1]), "sorted");
    assert_eq!(a.first().map(String::as_str), Some("a00000"));
    assert_eq!(st.keys("b").unwrap().len(), 650);
    assert_eq!(st.keys("").unwrap().len(), 1950);
    // The latest session version is read from the back of a multi-page scan.
    let sid = mem.session_create("long", json!({})).unwrap().session_id;
    for i in 0..600 {
        mem.session_save(&sid, json!({ "i": i }), 0).unwrap();
    }
    let latest = mem.session_restore(&sid, None).unwrap();
    assert_eq!(latest.version, 600);
    assert_eq!(latest.content, json!({ "i": 599 }));
    let versions: Vec<u64> = mem
        .session_versions(&sid)
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(versions, (1..=600).collect::<Vec<u64>>());
    let listed = mem.session_list().unwrap();
    assert_eq!(listed[0].version_count, 600);
    assert_eq!(listed[0].latest_version, Some(600));
}
