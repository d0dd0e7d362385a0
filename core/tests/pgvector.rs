//! Vector search in SQL with pgvector (PostgreSQL stores whose database has the
//! `vector` extension): same ranks and scores as the in-process scan, filters
//! applied before ranking, rows following every write, and a store opened
//! first without the extension backfilled by a later open with it.
//!
//! Needs `--features postgres`, `MEMSTRATA_TEST_PG_URL` of a superuser on a
//! server that has pgvector, and `MEMSTRATA_TEST_PGVECTOR=1`:
//! `scripts/pgvector-test.sh` provides all three (`make test-pgvector`). The
//! tests are `#[ignore]`d for `cargo test --workspace`, and fail, never skip,
//! when run without the extension.
#![cfg(feature = "postgres")]

mod common;

use chrono::{TimeZone, Utc};
use memstrata::{Memory, NewEpisode, SearchFilters, VectorQuery};
use serde_json::json;

const DIM: usize = 8;
const N: usize = 30;

fn base_url() -> String {
    let url = std::env::var("MEMSTRATA_TEST_PG_URL").unwrap_or_else(|_| {
        panic!("the pgvector tests need MEMSTRATA_TEST_PG_URL: run them through scripts/pgvector-test.sh")
    });
    assert_eq!(
        std::env::var("MEMSTRATA_TEST_PGVECTOR").as_deref(),
        Ok("1"),
        "the pgvector tests need a server with pgvector (MEMSTRATA_TEST_PGVECTOR=1): run them through scripts/pgvector-test.sh"
    );
    url
}

fn client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("connect")
}

fn vector_search(mem: &Memory) -> String {
    mem.admin()
        .status(false, true)
        .unwrap()
        .metrics
        .unwrap()
        .index
        .vector_search
}

fn vector_rows(url: &str, schema: &str) -> i64 {
    client(url)
        .query_one(&format!("SELECT count(*) FROM \"{schema}\".vectors"), &[])
        .unwrap()
        .get(0)
}

fn vq(v: &[f32]) -> VectorQuery {
    VectorQuery::embedding(v.to_vec())
}

/// Episode `i` of the hand-built case: its cosine to `query()` is exactly
/// `1 - 0.065 i` (so neighbours differ by far more than the int8 scan's error),
/// at a norm and in a direction off the query axis that vary with `i`.
fn embedding(i: usize) -> Vec<f32> {
    let c = 1.0 - 0.065 * i as f64;
    let s = (1.0 - c * c).max(0.0).sqrt();
    let u: Vec<f64> = (1..DIM).map(|j| 1.0 + ((i + j) % 4) as f64).collect();
    let un = u.iter().map(|x| x * x).sum::<f64>().sqrt();
    let norm = 1.0 + (i % 3) as f64;
    let mut v = vec![(norm * c) as f32];
    v.extend(u.iter().map(|x| (norm * s * x / un) as f32));
    v
}

fn query() -> Vec<f32> {
    let mut q = vec![0.0f32; DIM];
    q[0] = 2.5;
    q
}

fn episode(i: usize) -> NewEpisode {
    let mut tags = Vec::new();
    if i.is_multiple_of(2) {
        tags.push("even");
    }
    if i.is_multiple_of(3) {
        tags.push("three");
    }
    NewEpisode::new(format!("episode {i}"))
        .tags(tags)
        .participants([format!("p{}", i % 4)])
        .importance(1 + (i % 5) as u8)
        .timestamp(
            Utc.timestamp_opt(1_700_000_000 + 3600 * i as i64, 0)
                .unwrap(),
        )
        .embedding(embedding(i))
}

fn fill(mem: &Memory) {
    for i in 0..N {
        mem.episodic().record(episode(i)).unwrap();
    }
    for i in 0..10 {
        mem.semantic()
            .store_with_embedding(
                &format!("fact {i}"),
                json!({"i": i}),
                Some(embedding(i * 3)),
            )
            .unwrap();
    }
}

/// Every filter the vector list takes, alone and combined.
fn filter_cases() -> Vec<(&'static str, SearchFilters)> {
    let t = |i: i64| Utc.timestamp_opt(1_700_000_000 + 3600 * i, 0).unwrap();
    vec![
        ("none", SearchFilters::default()),
        (
            "tags all",
            SearchFilters {
                tags: vec!["even".into(), "three".into()],
                ..Default::default()
            },
        ),
        (
            "participants any",
            SearchFilters {
                participants: vec!["p1".into(), "p2".into()],
                ..Default::default()
            },
        ),
        (
            "time window",
            SearchFilters {
                since: Some(t(10)),
                until: Some(t(20)),
                ..Default::default()
            },
        ),
        (
            "importance",
            SearchFilters {
                min_importance: Some(4),
                ..Default::default()
            },
        ),
        (
            "combined",
            SearchFilters {
                tags: vec!["even".into()],
                participants: vec!["p0".into(), "p2".into()],
                since: Some(t(5)),
                min_importance: Some(2),
                ..Default::default()
            },
        ),
    ]
}

/// (summary, vector_rank, score) of a pure vector search.
fn episode_hits(mem: &Memory, f: &SearchFilters, limit: usize) -> Vec<(String, Option<u32>, f32)> {
    mem.episodic()
        .search_hybrid("", f, limit, &vq(&query()))
        .unwrap()
        .into_iter()
        .map(|h| (h.episode.summary, h.vector_rank, h.score))
        .collect()
}

fn assert_same_hits(
    what: &str,
    sql: &[(String, Option<u32>, f32)],
    scan: &[(String, Option<u32>, f32)],
) {
    let names = |v: &[(String, Option<u32>, f32)]| {
        v.iter()
            .map(|(s, r, _)| (s.clone(), *r))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(sql), names(scan), "{what}: ranks differ");
    for ((name, _, a), (_, _, b)) in sql.iter().zip(scan) {
        // pgvector computes the exact cosine; the in-process scan an int8 one.
        assert!((a - b).abs() < 0.02, "{what}: {name}: {a} vs {b}");
    }
}

#[test]
#[ignore = "needs PostgreSQL with pgvector: run by make test-pgvector"]
fn sql_search_matches_the_in_process_scan_with_every_filter_before_ranking() {
    base_url();
    let pg_dir = common::pg_tempdir();
    let sled_dir = tempfile::tempdir().unwrap();
    let pg = Memory::open(pg_dir.path()).unwrap();
    let scan = Memory::open(sled_dir.path()).unwrap();
    assert_eq!(vector_search(&pg), "pgvector");
    assert_eq!(vector_search(&scan), "in-process");
    fill(&pg);
    fill(&scan);

    for (what, f) in filter_cases() {
        for limit in [3, 10, 40] {
            let a = episode_hits(&pg, &f, limit);
            let b = episode_hits(&scan, &f, limit);
            assert_same_hits(&format!("{what}, limit {limit}"), &a, &b);
            // The limit counts only rows that pass the filters.
            let passing = (0..N)
                .filter(|i| {
                    let ep = episode(*i);
                    let ep_tags = ep.tags.clone();
                    f.tags.iter().all(|t| ep_tags.contains(t))
                        && (f.participants.is_empty()
                            || f.participants.iter().any(|p| ep.participants.contains(p)))
                        && f.since.is_none_or(|s| ep.timestamp.unwrap() >= s)
                        && f.until.is_none_or(|u| ep.timestamp.unwrap() <= u)
                        && f.min_importance.is_none_or(|m| ep.importance.unwrap() >= m)
                })
                .collect::<Vec<_>>();
            assert_eq!(a.len(), passing.len().min(limit), "{what}, limit {limit}");
            // Best first: the passing episodes in order of i (cosine 1 - 0.065 i).
            let expected: Vec<String> = passing
                .iter()
                .take(limit)
                .map(|i| format!("episode {i}"))
                .collect();
            let got: Vec<String> = a.iter().map(|(s, _, _)| s.clone()).collect();
            assert_eq!(got, expected, "{what}, limit {limit}");
            for ((name, _, score), i) in a.iter().zip(&passing) {
                let exact = 1.0 - 0.065 * *i as f32;
                assert!(
                    (score - exact).abs() < 2e-3,
                    "{what}: {name}: {score} vs {exact}"
                );
            }
        }
    }

    // Knowledge: the same ranks and scores.
    let knowledge = |mem: &Memory| -> Vec<(String, Option<u32>, f32)> {
        mem.semantic()
            .query_hybrid("", 20, &vq(&query()))
            .unwrap()
            .into_iter()
            .map(|h| (h.key, h.vector_rank, h.score))
            .collect()
    };
    let k = knowledge(&pg);
    assert_eq!(k.len(), 10);
    assert_same_hits("knowledge", &k, &knowledge(&scan));

    // Hybrid search fuses the SQL list like the in-process one.
    let fused = |mem: &Memory| -> Vec<(String, Option<u32>)> {
        mem.episodic()
            .search_hybrid("episode", &SearchFilters::default(), 5, &vq(&query()))
            .unwrap()
            .into_iter()
            .map(|h| (h.episode.summary, h.vector_rank))
            .collect()
    };
    // The text lists differ (BM25 on sled, `ts_rank` in SQL: every episode
    // holds the word, so their text ranks are the rankings' own tie-breaks);
    // the vector list is the same. So: the exact fused order on sled, and on
    // PostgreSQL the vector ranks the fusion carries and the best vector hit.
    assert_eq!(fused(&scan)[0], ("episode 0".to_owned(), Some(1)));
    // (The vector list a hybrid search fuses is 50 deep: a hit the text list
    // holds a place for can come from anywhere in it.)
    let vector_ranks: std::collections::HashMap<String, Option<u32>> =
        episode_hits(&pg, &SearchFilters::default(), 50)
            .into_iter()
            .map(|(name, rank, _)| (name, rank))
            .collect();
    let on_pg = fused(&pg);
    assert_eq!(on_pg.len(), fused(&scan).len());
    for (name, rank) in &on_pg {
        assert_eq!(
            vector_ranks.get(name),
            Some(rank),
            "{name}: fused vector rank"
        );
    }
    // The vector list took part (the best vector hit itself need not: where
    // the text list is the stronger one, the vectors' few places go to the
    // hits with the best fused evidence, docs/api.md).
    assert!(on_pg.iter().any(|(_, rank)| rank.is_some()), "{on_pg:?}");

    // Contexts are apart: another context's rows never show up.
    let other = pg.namespace("other").unwrap();
    other
        .episodic()
        .record(NewEpisode::new("elsewhere").embedding(query()))
        .unwrap();
    assert_eq!(
        episode_hits(&pg, &SearchFilters::default(), 1)[0].0,
        "episode 0"
    );
    assert_eq!(
        episode_hits(&other, &SearchFilters::default(), 5)
            .iter()
            .map(|h| h.0.as_str())
            .collect::<Vec<_>>(),
        ["elsewhere"]
    );
}

#[test]
#[ignore = "needs PostgreSQL with pgvector: run by make test-pgvector"]
fn vector_rows_follow_writes_forget_replace_and_import() {
    let base = base_url();
    let dir = common::pg_tempdir();
    let url = dir.path();
    let schema = common::schema_of(&url);
    let mem = Memory::open(&url).unwrap();
    let versions = common::migration_versions(&mut client(&base), &schema);
    assert!(versions.contains(&3), "{versions:?}");
    assert_eq!(vector_rows(&base, &schema), 0);

    let a = mem
        .episodic()
        .record(NewEpisode::new("a").embedding(vec![1.0, 0.0]))
        .unwrap();
    let b = mem
        .episodic()
        .record(NewEpisode::new("b").embedding(vec![0.0, 1.0]))
        .unwrap();
    mem.episodic().record(NewEpisode::new("no vector")).unwrap();
    mem.semantic()
        .store_with_embedding("k", json!("v"), Some(vec![0.6, 0.8]))
        .unwrap();
    assert_eq!(vector_rows(&base, &schema), 3);
    let row: (String, i32, Vec<String>) = {
        let r = client(&base)
            .query_one(
                &format!(
                    "SELECT ctx, dim, participants FROM \"{schema}\".vectors WHERE kind = 'e' AND key = $1"
                ),
                &[&a],
            )
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!(row, ("default".to_owned(), 2, Vec::<String>::new()));

    // Forgetting removes the row in the same write.
    assert!(mem.episodic().forget(&a).unwrap());
    assert_eq!(vector_rows(&base, &schema), 2);
    let hits = mem
        .episodic()
        .search_hybrid("", &SearchFilters::default(), 5, &vq(&[1.0, 0.0]))
        .unwrap();
    assert_eq!(hits.iter().map(|h| &h.episode.id).collect::<Vec<_>>(), [&b]);
    // A plain store replaces the knowledge and its embedding: no row left.
    mem.semantic().store("k", json!("plain")).unwrap();
    assert_eq!(vector_rows(&base, &schema), 1);
    mem.semantic()
        .store_with_embedding("k", json!("again"), Some(vec![0.6, 0.8]))
        .unwrap();
    assert_eq!(vector_rows(&base, &schema), 2);
    assert!(mem.semantic().forget("k").unwrap());
    assert!(mem.episodic().forget(&b).unwrap());
    assert_eq!(vector_rows(&base, &schema), 0);

    // Import writes the rows with the records.
    let src = tempfile::tempdir().unwrap();
    let sled = Memory::open(src.path()).unwrap();
    fill(&sled);
    let mut out = Vec::new();
    sled.admin().export(&mut out).unwrap();
    let dst_dir = common::pg_tempdir();
    let dst = Memory::open(dst_dir.path()).unwrap();
    dst.admin().import(&mut out.as_slice()).unwrap();
    assert_eq!(
        vector_rows(&base, &common::schema_of(&dst_dir.path())),
        (N + 10) as i64
    );
    assert_same_hits(
        "imported",
        &episode_hits(&dst, &SearchFilters::default(), 10),
        &episode_hits(&sled, &SearchFilters::default(), 10),
    );
}

/// `postgres://user:password@host/db` with another user, password and database.
fn url_as(base: &str, user: &str, password: &str, db: &str) -> String {
    let (_, rest) = base.split_once("://").unwrap();
    let (_, hostpart) = rest.rsplit_once('@').unwrap();
    let (host, _) = hostpart.split_once('/').unwrap();
    format!("postgres://{user}:{password}@{host}/{db}")
}

#[test]
#[ignore = "needs PostgreSQL with pgvector: run by make test-pgvector"]
fn a_store_opened_first_without_the_extension_is_backfilled_when_it_gets_it() {
    let base = base_url();
    // A database without the extension and a role that may not create it
    // (pgvector is not a trusted extension): the store falls back to the scan.
    let tag = format!(
        "{}_{}",
        std::process::id(),
        Utc::now().timestamp_subsec_nanos()
    );
    let (db, role) = (format!("nv_{tag}"), format!("nv_{tag}"));
    let mut admin = client(&base);
    // One statement per call: CREATE / DROP DATABASE refuse a transaction block.
    for sql in [
        format!("CREATE ROLE \"{role}\" LOGIN PASSWORD 'pw'"),
        format!("CREATE DATABASE \"{db}\" OWNER \"{role}\""),
    ] {
        admin.batch_execute(&sql).unwrap();
    }
    let cleanup = |admin: &mut postgres::Client| {
        for sql in [
            format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"),
            format!("DROP ROLE IF EXISTS \"{role}\""),
        ] {
            if let Err(e) = admin.batch_execute(&sql) {
                eprintln!("test cleanup: {sql}: {e}");
            }
        }
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let store = format!("{}?schema=s", url_as(&base, &role, "pw", &db));
        let old = Memory::open(&store).unwrap();
        assert_eq!(vector_search(&old), "in-process");
        fill(&old);
        let before = episode_hits(&old, &SearchFilters::default(), 12);

        // The administrator installs pgvector; the next open of the store (same
        // role) creates the table and fills it from the records.
        let mut db_admin = {
            let mut cfg: postgres::Config = base.parse().unwrap();
            cfg.dbname(&db);
            cfg.connect(postgres::NoTls).unwrap()
        };
        db_admin
            .batch_execute("CREATE EXTENSION vector SCHEMA public")
            .unwrap();
        let new = Memory::builder()
            .path(&store)
            .separate_engine()
            .open()
            .unwrap();
        assert_eq!(vector_search(&new), "pgvector");
        let rows: i64 = db_admin
            .query_one("SELECT count(*) FROM s.vectors", &[])
            .unwrap()
            .get(0);
        assert_eq!(rows, (N + 10) as i64);
        assert_same_hits(
            "backfilled",
            &episode_hits(&new, &SearchFilters::default(), 12),
            &before,
        );

        // The instance opened before the extension still runs; its next write
        // sees the migration and writes its row too, so the SQL search misses nothing.
        old.episodic()
            .record(NewEpisode::new("late").embedding(query()))
            .unwrap();
        assert_eq!(vector_search(&old), "pgvector");
        let rows: i64 = db_admin
            .query_one("SELECT count(*) FROM s.vectors", &[])
            .unwrap()
            .get(0);
        assert_eq!(rows, (N + 11) as i64);
        let top = episode_hits(&new, &SearchFilters::default(), 2);
        let mut top: Vec<String> = top.into_iter().map(|h| h.0).collect();
        top.sort();
        assert_eq!(top, ["episode 0", "late"]);
        // Opening again does not migrate twice.
        drop(new);
        let again = Memory::builder()
            .path(&store)
            .separate_engine()
            .open()
            .unwrap();
        let versions: i64 = db_admin
            .query_one(
                "SELECT count(*) FROM s.schema_migrations WHERE version = 3",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(versions, 1);
        assert_eq!(
            episode_hits(&again, &SearchFilters::default(), 50).len(),
            N + 1
        );
    }));
    cleanup(&mut admin);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

#[test]
#[ignore = "needs PostgreSQL with pgvector: run by make test-pgvector"]
fn an_encrypted_store_keeps_its_vectors_out_of_sql() {
    let base = base_url();
    let dir = common::pg_tempdir();
    let url = dir.path();
    let mem = Memory::builder()
        .path(&url)
        .encryption_key(memstrata::EncryptionKey::new([7; 32]))
        .open()
        .unwrap();
    assert_eq!(vector_search(&mem), "in-process");
    fill(&mem);
    assert_eq!(
        episode_hits(&mem, &SearchFilters::default(), 3)
            .iter()
            .map(|h| h.0.as_str())
            .collect::<Vec<_>>(),
        ["episode 0", "episode 1", "episode 2"]
    );
    let exists: bool = client(&base)
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL",
            &[&format!("\"{}\".vectors", common::schema_of(&url))],
        )
        .unwrap()
        .get(0);
    assert!(
        !exists,
        "an encrypted store must not hold embeddings in the clear"
    );
}
