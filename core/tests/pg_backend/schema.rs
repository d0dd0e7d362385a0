//! The schema and its versioned migrations: created once, a missing `dedup` table, a
//! version 1 schema whose search rows are backfilled.

use super::*;

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
    let other = separate_engine(&url);
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
