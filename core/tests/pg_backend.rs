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

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn a_password_parameter_never_shows_in_debug_status_or_errors() {
    // The test URL's password moves to a `password=` parameter (scripts/pg-test.sh
    // gives the server a random one; a trusting server gets a made-up one).
    let d = pg_dir();
    let given = d.path().display().to_string();
    let (scheme, rest) = given.split_once("://").unwrap();
    let (user, host) = rest.split_once('@').unwrap();
    let (user, secret) = user.split_once(':').unwrap_or((user, "hunter2"));
    let url = format!("{scheme}://{user}@{host}&password={secret}");
    let m = Memory::open(&url).unwrap();
    let debug = format!("{m:?}");
    assert!(debug.contains("password=***"), "{debug}");
    let status = m.admin().status(true, true).unwrap();
    let shown = format!(
        "{debug} {status:?} {}",
        serde_json::to_string(&status).unwrap()
    );
    assert!(!shown.contains(secret), "{shown}");
    // The key check's error names the store too.
    let e = Memory::builder()
        .path(&url)
        .encryption_key(memstrata::EncryptionKey::new([8; 32]))
        .open()
        .unwrap_err();
    assert!(!format!("{e} {e:?}").contains(secret), "{e}");
    drop(m);
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
    let schema = common::schema_of(&url);
    {
        let mem = Memory::open(&url).unwrap();
        mem.short_term().store("k", json!("v"), None).unwrap();
        assert!(!mem.is_temporary());
    }
    // Opening again neither fails nor migrates twice.
    let mem = Memory::open(&url).unwrap();
    assert_eq!(mem.short_term().retrieve("k").unwrap(), Some(json!("v")));
    let mut c = client();
    let versions = common::migration_versions(&mut c, &schema);
    // Migration 3 (the pgvector `vectors` table) only where the extension exists.
    let pgvector = std::env::var("MEMSTRATA_TEST_PGVECTOR").as_deref() == Ok("1");
    assert_eq!(
        versions,
        if pgvector {
            vec![1, 2, 3, 4]
        } else {
            vec![1, 2, 4]
        }
    );
    let tables: i64 = c
        .query_one(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 \
             AND column_name = 'key' AND data_type = 'bytea'",
            &[&schema],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 14, "one (key bytea, value bytea) table per tree");
    // No LOCK file anywhere: a second engine on the same URL opens fine.
    let other = Memory::builder()
        .path(&url)
        .separate_engine()
        .open()
        .unwrap();
    assert_eq!(other.short_term().retrieve("k").unwrap(), Some(json!("v")));
}

/// A store created before migration 4 (no `dedup` table) gets it on its next
/// open, and its records are found as duplicates.
#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn a_store_without_the_dedup_table_is_migrated() {
    let dir = pg_dir();
    let url = dir.path();
    let schema = common::schema_of(&url);
    let id = {
        let mem = Memory::open(&url).unwrap();
        mem.episodic()
            .record(memstrata::NewEpisode::new(
                "an episode from before detection",
            ))
            .unwrap()
    };
    let mut c = client();
    c.batch_execute(&format!(
        "DROP TABLE \"{schema}\".dedup; DELETE FROM \"{schema}\".schema_migrations WHERE version = 4; \
         DELETE FROM \"{schema}\".meta WHERE key >= 'dedup_ready'::bytea AND key < 'dedup_readz'::bytea"
    ))
    .unwrap();
    let mem = Memory::open(&url).unwrap();
    assert!(common::migration_versions(&mut c, &schema).contains(&4));
    let r = mem
        .episodic()
        .record_detailed(
            memstrata::NewEpisode::new("an episode from before detection")
                .on_duplicate(memstrata::episodic::OnDuplicate::Skip),
        )
        .unwrap();
    assert_eq!(r.id, id);
    assert!(!r.created);
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
    let sid = src.sessions().create("s", json!({})).unwrap().session_id;
    src.sessions().save(&sid, json!({"step": 1}), 3).unwrap();
    src.sessions().save(&sid, json!({"step": 2}), 3).unwrap();
    let mut exported = Vec::new();
    let stats = src.admin().export(&mut exported).unwrap();

    let dir = pg_dir();
    let pg = Memory::open(dir.path()).unwrap();
    let istats = pg.admin().import(&mut Cursor::new(&exported)).unwrap();
    let nonzero = |m: &std::collections::BTreeMap<String, u64>| -> Vec<(String, u64)> {
        m.iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect()
    };
    assert_eq!(nonzero(&istats.counts), nonzero(&stats.counts));
    let mut again = Vec::new();
    pg.admin().export(&mut again).unwrap();
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
    back.admin().import(&mut Cursor::new(&again)).unwrap();
    let mut third = Vec::new();
    back.admin().export(&mut third).unwrap();
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
    let schema = common::schema_of(&url);
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
    let sid = a.sessions().create("shared", json!({})).unwrap().session_id;
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
                        .sessions()
                        .save(&sid, json!({ "by": format!("{name}{t}"), "i": i }), 1)
                        .unwrap();
                    versions.push((saved.version, format!("{name}{t}"), i));
                }
                // Both instances try to create the same procedure: exactly one wins.
                let created = mem
                    .procedural()
                    .learn(
                        &format!("p{t}"),
                        vec![
                            memstrata::procedural::Step::new("s", "set")
                                .parameters(json!({"v": 1})),
                        ],
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
            let r = mem.sessions().restore(&sid, Some(*v)).unwrap();
            assert_eq!(r.content, json!({ "by": by, "i": i }), "version {v}");
        }
    }
    assert_eq!(b.sessions().versions(&sid).unwrap().len(), total);
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
    let sid = mem.sessions().create("long", json!({})).unwrap().session_id;
    for i in 0..600 {
        mem.sessions().save(&sid, json!({ "i": i }), 0).unwrap();
    }
    let latest = mem.sessions().restore(&sid, None).unwrap();
    assert_eq!(latest.version, 600);
    assert_eq!(latest.content, json!({ "i": 599 }));
    let versions: Vec<u64> = mem
        .sessions()
        .versions(&sid)
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(versions, (1..=600).collect::<Vec<u64>>());
    let listed = mem.sessions().list().unwrap();
    assert_eq!(listed[0].version_count, 600);
    assert_eq!(listed[0].latest_version, Some(600));
}

// ---------------------------------------------------------------------------
// Full-text search in SQL (`search_docs`)

fn ids(hits: &[memstrata::episodic::EpisodeHit]) -> Vec<String> {
    hits.iter().map(|h| h.episode.id.clone()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn search_docs_rows(schema: &str, condition: &str) -> i64 {
    client()
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".search_docs WHERE {condition}"),
            &[],
        )
        .unwrap()
        .get(0)
}

fn memstrata_pgindex_dirs() -> usize {
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("memstrata-pgindex-")
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn search_sees_another_instances_write_with_no_local_index_or_catch_up() {
    let dir = pg_dir();
    let url = dir.path();
    let index_dirs_before = memstrata_pgindex_dirs();
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
    // No local index directory is made for a PostgreSQL store.
    assert_eq!(memstrata_pgindex_dirs(), index_dirs_before);
    let seq_before = a
        .admin()
        .status(false, true)
        .unwrap()
        .metrics
        .unwrap()
        .index;
    let id = b
        .episodic()
        .record(NewEpisode::new("the quokka escaped from the enclosure"))
        .unwrap();
    b.semantic()
        .store("quokka facts", json!("a small wallaby"))
        .unwrap();
    // `a` made no write and follows no index log: its search reads the rows
    // `b` committed, at once.
    let hits = a
        .episodic()
        .search("quokka", &SearchFilters::default(), 5)
        .unwrap();
    assert_eq!(ids(&hits), vec![id.clone()]);
    assert!(hits[0].score > 0.0);
    let k = a.semantic().query("wallaby", 5).unwrap();
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].key, "quokka facts");
    let seq_after = a
        .admin()
        .status(false, true)
        .unwrap()
        .metrics
        .unwrap()
        .index;
    assert_eq!(
        seq_after.applied_seq, seq_before.applied_seq,
        "the search applied no index-log entry"
    );
    assert_eq!(seq_after.documents, 2);
    // A forget on `b` is gone from `a`'s search as soon as it returns.
    assert!(b.episodic().forget(&id).unwrap());
    assert!(
        a.episodic()
            .search("quokka", &SearchFilters::default(), 5)
            .unwrap()
            .is_empty()
    );
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn every_search_filter_is_applied_in_sql() {
    use chrono::{TimeZone, Utc};
    let dir = pg_dir();
    let mem = Memory::open(dir.path()).unwrap();
    let ep = mem.episodic();
    let t = |h: u32| Utc.with_ymd_and_hms(2026, 3, 1, h, 0, 0).unwrap();
    let rec = |summary: &str, h: u32, tags: &[&str], who: &[&str], importance: u8| {
        ep.record(
            NewEpisode::new(summary)
                .timestamp(t(h))
                .tags(tags.iter().copied())
                .participants(who.iter().copied())
                .importance(importance),
        )
        .unwrap()
    };
    let e1 = rec("harbour crane inspection", 1, &["ops", "port"], &["ann"], 3);
    let e2 = rec("harbour crane repair", 2, &["ops"], &["bob"], 8);
    let e3 = rec("harbour crane audit", 3, &["port"], &["ann", "cy"], 6);
    let e4 = rec("lunch with the team", 4, &["ops", "port"], &["cy"], 9);
    // The same word in knowledge and in another context: never an episode hit here.
    mem.semantic()
        .store("harbour/crane/manual", json!("harbour crane manual"))
        .unwrap();
    mem.namespace("elsewhere")
        .unwrap()
        .episodic()
        .record(NewEpisode::new("harbour crane elsewhere"))
        .unwrap();

    let search = |text: &str, f: SearchFilters, limit: usize| {
        sorted(ids(&ep.search(text, &f, limit).unwrap()))
    };
    let all = || SearchFilters::default();
    assert_eq!(
        search("harbour", all(), 10),
        sorted(vec![e1.clone(), e2.clone(), e3.clone()])
    );
    for text in ["harbour", ""] {
        let with_text = |ids: Vec<&String>| -> Vec<String> {
            let ids: Vec<String> = ids.into_iter().cloned().collect();
            if text.is_empty() {
                sorted(ids)
            } else {
                sorted(ids.into_iter().filter(|i| *i != e4).collect())
            }
        };
        let tags = SearchFilters {
            tags: vec!["ops".into(), "port".into()],
            ..all()
        };
        assert_eq!(
            search(text, tags, 10),
            with_text(vec![&e1, &e4]),
            "tags are all-of"
        );
        let who = SearchFilters {
            participants: vec!["bob".into(), "cy".into()],
            ..all()
        };
        assert_eq!(
            search(text, who, 10),
            with_text(vec![&e2, &e3, &e4]),
            "participants are any-of"
        );
        let since = SearchFilters {
            since: Some(t(2)),
            ..all()
        };
        assert_eq!(
            search(text, since, 10),
            with_text(vec![&e2, &e3, &e4]),
            "since is inclusive"
        );
        let until = SearchFilters {
            until: Some(t(2)),
            ..all()
        };
        assert_eq!(
            search(text, until, 10),
            with_text(vec![&e1, &e2]),
            "until is inclusive"
        );
        let window = SearchFilters {
            since: Some(t(2)),
            until: Some(t(3)),
            ..all()
        };
        assert_eq!(search(text, window, 10), with_text(vec![&e2, &e3]));
        let important = SearchFilters {
            min_importance: Some(6),
            ..all()
        };
        assert_eq!(search(text, important, 10), with_text(vec![&e2, &e3, &e4]));
        let everything = SearchFilters {
            tags: vec!["port".into()],
            participants: vec!["ann".into()],
            since: Some(t(1)),
            until: Some(t(4)),
            min_importance: Some(4),
            ..all()
        };
        assert_eq!(search(text, everything, 10), with_text(vec![&e3]));
    }
    // Empty text: filters only, newest first; the limit holds.
    let newest = ids(&ep.search("", &all(), 10).unwrap());
    assert_eq!(newest, vec![e4.clone(), e3.clone(), e2.clone(), e1.clone()]);
    assert_eq!(
        ids(&ep.search("", &all(), 2).unwrap()),
        vec![e4.clone(), e3.clone()]
    );
    assert_eq!(ep.search("harbour", &all(), 2).unwrap().len(), 2);
    // Punctuation only, or stop words only: no lexeme, so filters only, newest first.
    for text in ["?!", "what is it"] {
        assert_eq!(
            ids(&ep.search(text, &all(), 10).unwrap()),
            newest,
            "{text:?}"
        );
    }
    // A summary match outranks a body match of the same word; equal scores
    // come newest first.
    let body = ep
        .record(
            NewEpisode::new("notes")
                .timestamp(t(5))
                .content(json!("a gantry and more words around it")),
        )
        .unwrap();
    let summary = ep
        .record(NewEpisode::new("gantry").timestamp(t(0)))
        .unwrap();
    assert_eq!(
        ids(&ep.search("gantry", &all(), 10).unwrap()),
        vec![summary, body]
    );
    let twin_old = ep
        .record(NewEpisode::new("twin words").timestamp(t(1)))
        .unwrap();
    let twin_new = ep
        .record(NewEpisode::new("twin words").timestamp(t(2)))
        .unwrap();
    let twins = ep.search("twin", &all(), 10).unwrap();
    assert_eq!(twins[0].score, twins[1].score);
    assert_eq!(ids(&twins), vec![twin_new, twin_old]);
    // Knowledge: its own kind, keys holding `/` come back whole.
    let k = mem.semantic().query("crane", 10).unwrap();
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].key, "harbour/crane/manual");
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn query_text_that_looks_like_sql_or_tsquery_is_searched_as_words() {
    let dir = pg_dir();
    let url = dir.path();
    let schema = common::schema_of(&url);
    let mem = Memory::open(&url).unwrap();
    let ep = mem.episodic();
    let robert = ep
        .record(NewEpisode::new("Robert enrolled the students"))
        .unwrap();
    let quoted = ep
        .record(
            NewEpisode::new("O'Brien's backslash\\path note").content(json!({
                "mail": "ops@example.com",
                "nul": "anchor\u{0}shoreline",
                // The parser keeps the quote in a URL path: a lexeme `/a'b`.
                "url": "http://ex.com/a'b",
            })),
        )
        .unwrap();
    for text in [
        "Robert'); DROP TABLE search_docs;--",
        "robert & !students | (x:*) <-> 'y'",
        "\"students\" OR robert AND NOT x",
        "robert\\' || '' ; SELECT 1",
        "robert:A* & students:!",
        "*) ( ! & | : ' \" \\",
    ] {
        let hits = ep.search(text, &SearchFilters::default(), 10).unwrap();
        if text.contains("robert") || text.contains("Robert") || text.contains("students") {
            assert_eq!(ids(&hits)[0], robert, "{text:?}");
        }
    }
    for text in [
        "O'Brien",
        "backslash\\path",
        "ops@example.com",
        "shoreline",
        "ex.com/a'b",
    ] {
        let hits = ep.search(text, &SearchFilters::default(), 10).unwrap();
        assert_eq!(ids(&hits), vec![quoted.clone()], "{text:?}");
    }
    // The table and both rows are still there.
    assert_eq!(search_docs_rows(&schema, "true"), 2);
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn forgetting_removes_the_search_row() {
    let dir = pg_dir();
    let url = dir.path();
    let schema = common::schema_of(&url);
    let mem = Memory::open(&url).unwrap();
    let id = mem
        .episodic()
        .record(NewEpisode::new("ephemeral marmot"))
        .unwrap();
    mem.semantic().store("marmot", json!("a rodent")).unwrap();
    let row = format!("uid = 'e/default/{id}'");
    assert_eq!(search_docs_rows(&schema, &row), 1);
    assert_eq!(search_docs_rows(&schema, "uid = 'k/default/marmot'"), 1);
    assert!(mem.episodic().forget(&id).unwrap());
    assert!(mem.semantic().forget("marmot").unwrap());
    assert_eq!(search_docs_rows(&schema, "true"), 0);
    assert!(
        mem.semantic().query("rodent", 5).unwrap().is_empty()
            && mem
                .episodic()
                .search("marmot", &SearchFilters::default(), 5)
                .unwrap()
                .is_empty()
    );
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn a_long_record_is_stored_and_its_first_words_are_searchable() {
    // ~1.3 MB of distinct words: its whole tsvector would pass PostgreSQL's
    // 1 MiB limit; the indexed prefix keeps it under.
    let dir = pg_dir();
    let mem = Memory::open(dir.path()).unwrap();
    let body: String = (0..150_000).map(|i| format!("w{i}x ")).collect();
    let id = mem
        .episodic()
        .record(NewEpisode::new("long").content(json!(body)))
        .unwrap();
    let f = SearchFilters::default();
    assert_eq!(ids(&mem.episodic().search("w5x", &f, 5).unwrap()), vec![id]);
    assert!(mem.episodic().search("w149999x", &f, 5).unwrap().is_empty());
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn a_version_1_schema_is_migrated_and_its_search_rows_backfilled() {
    for key in [None, Some(memstrata::EncryptionKey::new([3; 32]))] {
        let dir = pg_dir();
        let url = dir.path();
        let schema = common::schema_of(&url);
        let open = || {
            let b = Memory::builder().path(&url);
            match &key {
                Some(k) => b.encryption_key(k.clone()),
                None => b,
            }
            .open()
            .unwrap()
        };
        let mut expected = Vec::new();
        {
            let mem = open();
            for i in 0..30 {
                expected.push(
                    mem.episodic()
                        .record(NewEpisode::new(format!("backfilled heron {i}")).tags(["bird"]))
                        .unwrap(),
                );
            }
            mem.semantic()
                .store("heron", json!("a wading bird"))
                .unwrap();
        }
        // What a store made before migration 2 looks like: no search table, no version 2.
        client()
            .batch_execute(&format!(
                "DROP TABLE \"{schema}\".search_docs;
                 DROP FUNCTION \"{schema}\".search_words(text[]);
                 DELETE FROM \"{schema}\".schema_migrations WHERE version = 2;"
            ))
            .unwrap();
        let mem = open();
        let versions = common::migration_versions(&mut client(), &schema);
        assert!(versions.starts_with(&[1, 2]), "{versions:?}");
        assert_eq!(search_docs_rows(&schema, "true"), 31);
        let f = SearchFilters {
            tags: vec!["bird".into()],
            ..Default::default()
        };
        let hits = mem.episodic().search("heron", &f, 100).unwrap();
        assert_eq!(sorted(ids(&hits)), sorted(expected.clone()));
        assert_eq!(mem.semantic().query("wading", 5).unwrap()[0].key, "heron");
        // A second open (another instance) does not rebuild again: the rows
        // keep the transaction that wrote them.
        drop(mem);
        let writers = || -> String {
            client()
                .query_one(
                    &format!(
                        "SELECT string_agg(xmin::text, ',' ORDER BY uid) FROM \"{schema}\".search_docs"
                    ),
                    &[],
                )
                .unwrap()
                .get(0)
        };
        let before = writers();
        let again = open();
        assert_eq!(search_docs_rows(&schema, "true"), 31);
        assert_eq!(writers(), before, "no row rewritten by a second open");
        drop(again);
    }
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn vector_search_follows_another_instances_writes_through_the_index_log() {
    use memstrata::VectorQuery;
    let dir = pg_dir();
    let url = dir.path();
    let open = || {
        Memory::builder()
            .path(&url)
            .separate_engine()
            .open()
            .unwrap()
    };
    let (a, b) = (open(), open());
    let vector = |mem: &Memory, ns: &str, v: [f32; 3]| -> Vec<String> {
        let hits = mem
            .namespace(ns)
            .unwrap()
            .episodic()
            .search_hybrid(
                "",
                &SearchFilters::default(),
                10,
                &VectorQuery::embedding(v.to_vec()),
            )
            .unwrap();
        ids(&hits)
    };
    let rec = |mem: &Memory, ns: &str, v: [f32; 3]| {
        mem.namespace(ns)
            .unwrap()
            .episodic()
            .record(NewEpisode::new("point").embedding(v.to_vec()))
            .unwrap()
    };
    let x1 = rec(&b, "x", [1.0, 0.0, 0.0]);
    // `a` loads context x's vectors from the records.
    assert_eq!(vector(&a, "x", [1.0, 0.0, 0.0]), vec![x1.clone()]);
    // `b` writes to x (loaded in `a`) and to y (not loaded in `a`).
    let x2 = rec(&b, "x", [0.9, 0.1, 0.0]);
    let y1 = rec(&b, "y", [0.0, 1.0, 0.0]);
    assert_eq!(
        vector(&a, "x", [1.0, 0.0, 0.0]),
        vec![x1.clone(), x2.clone()]
    );
    assert_eq!(vector(&a, "y", [0.0, 1.0, 0.0]), vec![y1.clone()]);
    // A forget on `b` leaves `a`'s loaded sets.
    assert!(b.namespace("x").unwrap().episodic().forget(&x1).unwrap());
    let y2 = rec(&b, "y", [0.0, 0.9, 0.1]);
    assert_eq!(vector(&a, "x", [1.0, 0.0, 0.0]), vec![x2]);
    assert_eq!(vector(&a, "y", [0.0, 1.0, 0.0]), vec![y1, y2]);
}
