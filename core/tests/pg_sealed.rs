//! Encryption at rest on PostgreSQL (issue #30): with a key, no word a user
//! wrote is readable in any column of any table of the store's schema — not
//! in the tree tables' keys nor in `search_docs` — while every listing, lookup
//! and search answers as on a plaintext store (the control, where every word
//! is found). Search results of a keyed and a plaintext store agree.
//!
//! Needs `--features postgres` and `MEMSTRATA_TEST_PG_URL`; `#[ignore]`d like
//! `pg_backend.rs` (run by `make test-pg`, `--include-ignored`).
#![cfg(feature = "postgres")]

mod common;

#[path = "common/sealed_words.rs"]
mod words;

use std::collections::BTreeMap;
use std::path::Path;

use memstrata::{FORMAT_VERSION, FORMAT_VERSION_SEALED_KEYS, Memory, NewEpisode, SearchFilters};
use serde_json::json;
use words::*;

fn client() -> postgres::Client {
    let url = std::env::var("MEMSTRATA_TEST_PG_URL")
        .expect("the PostgreSQL tests need MEMSTRATA_TEST_PG_URL");
    postgres::Client::connect(&url, postgres::NoTls).expect("connect")
}

fn open(path: &Path, keyed: bool) -> Memory {
    let mut b = Memory::builder().path(path);
    if keyed {
        b = b.encryption_key(key());
    }
    b.open().unwrap()
}

/// Every row of every table of `schema`, as text (`t::text`: `bytea` columns
/// show as hexadecimal), each with its table's name.
fn all_rows(schema: &str) -> Vec<(String, String)> {
    let mut c = client();
    let tables: Vec<String> = c
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
            &[&schema],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(tables.len() >= 15, "{tables:?}");
    let mut out = Vec::new();
    for t in tables {
        let sql = format!("SELECT t::text FROM \"{schema}\".\"{t}\" t");
        for r in c.query(&sql, &[]).unwrap() {
            out.push((t.clone(), r.get::<_, String>(0)));
        }
    }
    out
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Each word found in the schema (as written, lowercased as search terms
/// are, or as the hexadecimal of either in a `bytea` column), with the tables.
fn words_in_schema(schema: &str) -> BTreeMap<String, Vec<String>> {
    let rows = all_rows(schema);
    let mut out = BTreeMap::new();
    for w in WORDS {
        let lower = w.to_lowercase();
        let forms = [w.to_owned(), lower.clone(), hex(w), hex(&lower)];
        let tables: Vec<String> = rows
            .iter()
            .filter(|(_, row)| forms.iter().any(|f| row.contains(f.as_str())))
            .map(|(t, _)| t.clone())
            .collect();
        if !tables.is_empty() {
            out.insert(w.to_owned(), tables);
        }
    }
    out
}

fn format_version(schema: &str) -> u32 {
    let row = client()
        .query_one(
            &format!("SELECT value FROM \"{schema}\".meta WHERE key = 'format_version'::bytea"),
            &[],
        )
        .unwrap();
    u32::from_be_bytes(row.get::<_, &[u8]>(0).try_into().unwrap())
}

/// Whether `search_docs.tsv` is a generated column (`ALWAYS`) or written (`NEVER`).
fn tsv_generated(schema: &str) -> String {
    client()
        .query_one(
            "SELECT is_generated::text FROM information_schema.columns \
             WHERE table_schema = $1 AND table_name = 'search_docs' AND column_name = 'tsv'",
            &[&schema],
        )
        .unwrap()
        .get(0)
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn no_word_of_any_layer_is_in_any_column_of_a_keyed_postgres_store() {
    let d = common::pg_tempdir();
    // Control: a plaintext store holds every word somewhere.
    let plain = d.join("plain");
    let mem = open(&plain, false);
    let id = write_words(&mem);
    check_words(&mem, &id);
    drop(mem);
    let schema = common::schema_of(&plain);
    let found = words_in_schema(&schema);
    for w in WORDS {
        assert!(found.contains_key(w), "control: {w} not found in {found:?}");
    }
    assert_eq!(format_version(&schema), FORMAT_VERSION);
    // A plaintext store keeps its search table as it was (no migration 5).
    assert!(!common::migration_versions(&mut client(), &schema).contains(&5));
    assert_eq!(tsv_generated(&schema), "ALWAYS");

    let sealed = d.join("sealed");
    let mem = open(&sealed, true);
    let id = write_words(&mem);
    check_words(&mem, &id);
    drop(mem);
    let schema = common::schema_of(&sealed);
    let found = words_in_schema(&schema);
    assert!(
        found.is_empty(),
        "words found in the keyed store: {found:?}"
    );
    assert_eq!(format_version(&schema), FORMAT_VERSION_SEALED_KEYS);
    assert!(common::migration_versions(&mut client(), &schema).contains(&5));
    assert_eq!(tsv_generated(&schema), "NEVER");
    let text: i64 = client()
        .query_one(
            &format!(
                "SELECT count(*) FROM \"{schema}\".search_docs WHERE summary IS NOT NULL OR body IS NOT NULL"
            ),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(text, 0, "search rows keep no text");
    // Reopened and optimized: everything answers, nothing is readable.
    let mem = open(&sealed, true);
    check_words(&mem, &id);
    mem.admin()
        .optimize(memstrata::admin::OptimizeLevel::Aggressive, None)
        .unwrap();
    check_words(&mem, &id);
    drop(mem);
    let found = words_in_schema(&schema);
    assert!(found.is_empty(), "words found after reopen: {found:?}");
}

/// Short sentences over a small vocabulary: many documents share words, so
/// scores tie and ranks depend on term frequency, weights and length.
fn corpus() -> Vec<(String, Vec<String>, Vec<String>, String)> {
    const WORDS: &[&str] = &[
        "garden", "tomato", "river", "boat", "coffee", "meeting", "budget", "report", "music",
        "guitar", "travel", "train", "ticket", "dinner", "recipe", "sister", "birthday", "gift",
        "running", "runner", "planted", "plants", "paris", "london",
    ];
    const PEOPLE: &[&str] = &["Alice", "Bob", "Chen", "Dana"];
    const TAGS: &[&str] = &["home", "work", "trip"];
    let mut out = Vec::new();
    let mut x: u64 = 7;
    for i in 0..120 {
        let mut pick = |n: usize| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((x >> 33) as usize) % n
        };
        let len = 3 + pick(6);
        let mut words: Vec<&str> = (0..len).map(|_| WORDS[pick(WORDS.len())]).collect();
        words.insert(pick(words.len()), "the");
        let summary = format!("n{i} {}", words.join(" "));
        let body = format!(
            "we talked about the {} and {}",
            WORDS[pick(WORDS.len())],
            WORDS[pick(WORDS.len())]
        );
        let people = vec![PEOPLE[pick(PEOPLE.len())].to_owned()];
        let tags = vec![TAGS[pick(TAGS.len())].to_owned()];
        out.push((summary, people, tags, body));
    }
    out
}

/// The hits of `text` as (summary, score), best first.
fn hits(mem: &Memory, text: &str, f: &SearchFilters, limit: usize) -> Vec<(String, f32)> {
    mem.episodic()
        .search(text, f, limit)
        .unwrap()
        .into_iter()
        .map(|h| (h.episode.summary, h.score))
        .collect()
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn keyed_and_plaintext_postgres_stores_rank_alike() {
    let d = common::pg_tempdir();
    let stores = [open(&d.join("p"), false), open(&d.join("k"), true)];
    for mem in &stores {
        for (summary, people, tags, body) in corpus() {
            mem.episodic()
                .record(
                    NewEpisode::new(summary)
                        .content(json!({"text": body}))
                        .participants(people)
                        .tags(tags),
                )
                .unwrap();
        }
    }
    let tag = SearchFilters {
        tags: vec!["work".into()],
        ..SearchFilters::default()
    };
    let person = SearchFilters {
        participants: vec!["Bob".into(), "Dana".into()],
        ..SearchFilters::default()
    };
    let none = SearchFilters::default();
    let queries: [(&str, &SearchFilters); 8] = [
        ("garden tomato", &none),
        ("the running runner", &none),
        ("coffee meeting budget report", &none),
        ("planted plants in paris", &none),
        ("guitar", &tag),
        ("train ticket", &person),
        ("alice", &none),
        ("the of and", &tag),
    ];
    for (text, f) in queries {
        for limit in [5, 10, 200] {
            let [p, k] = [&stores[0], &stores[1]].map(|m| hits(m, text, f, limit));
            assert_eq!(p.len(), k.len(), "{text:?} limit {limit}: {p:?} vs {k:?}");
            assert!(!p.is_empty(), "{text:?}: no hits");
            for ((ps, pscore), (_, kscore)) in p.iter().zip(&k) {
                assert!(
                    (pscore - kscore).abs() < 1e-5,
                    "{text:?}: {ps} {pscore} vs {kscore}"
                );
            }
            // Ties at the cut of a full page may be cut differently (ties go
            // newest first, then by uid, and a keyed row's uid is a hash):
            // every hit scoring above the last one must be the same.
            let cut = p.last().unwrap().1;
            let above = |v: &[(String, f32)]| {
                let mut s: Vec<String> = v
                    .iter()
                    .filter(|(_, sc)| *sc > cut + 1e-5 || p.len() < limit)
                    .map(|(s, _)| s.clone())
                    .collect();
                s.sort();
                s
            };
            assert_eq!(above(&p), above(&k), "{text:?} limit {limit}");
        }
    }
}

/// A keyed store written by a build that sealed values only (plaintext keys,
/// format version 2, plaintext search rows) is sealed when it opens: keys in
/// atomic batches (a half-sealed store, as a crash leaves it, is finished the
/// same way) and the search rows in one transaction.
#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn a_keyed_store_with_plaintext_keys_and_search_rows_is_sealed_on_open() {
    for every_other in [true, false] {
        let d = common::pg_tempdir();
        let url = d.join("old");
        let schema = common::schema_of(&url);
        let mem = open(&url, true);
        let id = write_words(&mem);
        drop(mem);
        // What a build before this one left: plaintext keys, stamped 2, and a
        // plaintext search table (migration 2's form, with a row of text).
        let undone = memstrata::testing::unseal_keys(&url, &key(), every_other).unwrap();
        assert!(undone > 20, "{undone} entries unsealed");
        client()
            .batch_execute(&format!(
                "DELETE FROM \"{schema}\".search_docs;
                 ALTER TABLE \"{schema}\".search_docs DROP COLUMN sealed_uid, DROP COLUMN tsv;
                 ALTER TABLE \"{schema}\".search_docs ADD COLUMN tsv tsvector GENERATED ALWAYS AS
                     (to_tsvector('english'::regconfig, summary || ' ' || body)) STORED;
                 CREATE INDEX search_docs_tsv ON \"{schema}\".search_docs USING gin (tsv);
                 DELETE FROM \"{schema}\".schema_migrations WHERE version = 5;"
            ))
            .unwrap();
        client()
            .execute(
                &format!(
                    "INSERT INTO \"{schema}\".search_docs (uid, kind, ctx, summary, body, participants, tags, ts_ms, importance) \
                     VALUES ($1, 'e', $2, $3, '', ARRAY[$4], ARRAY[$5], 0, 0)"
                ),
                &[&format!("e/{CONTEXT}/{id}"), &CONTEXT, &format!("meeting {SUMMARY} today"), &PARTICIPANT, &TAG],
            )
            .unwrap();
        assert_eq!(format_version(&schema), FORMAT_VERSION);
        let found = words_in_schema(&schema);
        for w in [CONTEXT, SUMMARY, KNOWLEDGE_KEY, SHORT_KEY, PROCEDURE] {
            assert!(found.contains_key(w), "before: {w} not in {found:?}");
        }

        let mem = open(&url, true);
        check_words(&mem, &id);
        drop(mem);
        let found = words_in_schema(&schema);
        assert!(found.is_empty(), "words left after the upgrade: {found:?}");
        assert_eq!(format_version(&schema), FORMAT_VERSION_SEALED_KEYS);
        assert_eq!(tsv_generated(&schema), "NEVER");
        // Opened again: nothing to do, everything answers.
        let mem = open(&url, true);
        check_words(&mem, &id);
    }
}

/// A keyed store's search row whose sealed uid was altered or moved to
/// another row answers `CORRUPTED`, never another record; the rows are
/// rebuilt from the records, so the next search answers.
#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn a_moved_sealed_uid_is_corrupted_not_another_record() {
    let d = common::pg_tempdir();
    let url = d.join("k");
    let schema = common::schema_of(&url);
    let mem = open(&url, true);
    for s in ["heron one", "heron two"] {
        mem.episodic().record(NewEpisode::new(s)).unwrap();
    }
    let f = SearchFilters::default();
    assert_eq!(hits(&mem, "heron", &f, 10).len(), 2);
    client()
        .batch_execute(&format!(
            "UPDATE \"{schema}\".search_docs SET sealed_uid = (SELECT sealed_uid FROM \"{schema}\".search_docs ORDER BY uid LIMIT 1)"
        ))
        .unwrap();
    match mem.episodic().search("heron", &f, 10) {
        Err(memstrata::Error::Corrupted { .. }) => {}
        other => panic!("expected CORRUPTED, got {other:?}"),
    }
    let mut found: Vec<String> = hits(&mem, "heron", &f, 10)
        .into_iter()
        .map(|h| h.0)
        .collect();
    found.sort();
    assert_eq!(found, ["heron one", "heron two"]);
}
