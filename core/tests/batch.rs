//! Batch writes (`record_many`, `store_many`) through the public API, on real
//! stores (sled + tantivy in temp dirs; PostgreSQL with
//! `MEMSTRATA_TEST_BACKEND=postgres`): order of ids, searchability, the same
//! validation as the single calls with the item's index in the field, all or
//! nothing, and the batch limits.

mod common;

use std::sync::Arc;

use memstrata::semantic::NewKnowledge;
use memstrata::{Error, Limits, Memory, NewEpisode, SearchFilters, VectorQuery};
use serde_json::json;

fn field_of(e: &Error) -> String {
    match e {
        Error::InvalidInput { field, .. } | Error::LimitExceeded { field, .. } => field.clone(),
        other => panic!("expected a field error, got {other:?}"),
    }
}

fn episodes(prefix: &str, n: usize) -> Vec<NewEpisode> {
    (0..n)
        .map(|i| {
            NewEpisode::new(format!("{prefix} turn{i} about batching"))
                .content(json!({"i": i}))
                .tags(["batch"])
        })
        .collect()
}

#[test]
fn record_many_returns_ids_in_order_and_every_episode_is_searchable() {
    let mem = common::temporary().unwrap();
    let ids = mem.episodic().record_many(episodes("alpha", 50)).unwrap();
    assert_eq!(ids.len(), 50);
    for (i, id) in ids.iter().enumerate() {
        let ep = mem.episodic().get(id).unwrap().expect("recorded");
        assert_eq!(ep.summary, format!("alpha turn{i} about batching"));
        assert_eq!(ep.content, json!({"i": i}));
        assert_eq!(ep.importance, 5);
    }
    let f = SearchFilters {
        tags: vec!["batch".into()],
        ..Default::default()
    };
    assert_eq!(mem.episodic().search("", &f, 100).unwrap().len(), 50);
    let hits = mem
        .episodic()
        .search("turn17", &SearchFilters::default(), 5)
        .unwrap();
    assert_eq!(hits[0].episode.id, ids[17]);
    // An empty batch writes nothing and is not an error.
    assert!(mem.episodic().record_many(vec![]).unwrap().is_empty());
}

#[test]
fn per_item_options_are_kept() {
    let mem = common::temporary().unwrap();
    let ts = chrono::DateTime::parse_from_rfc3339("2025-03-04T05:06:07Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let ids = mem
        .episodic()
        .record_many(vec![
            NewEpisode::new("first")
                .participants(["ann"])
                .importance(9)
                .timestamp(ts),
            NewEpisode::new("second").embedding(vec![1.0, 0.0, 0.5]),
        ])
        .unwrap();
    let a = mem.episodic().get(&ids[0]).unwrap().unwrap();
    assert_eq!(
        (a.participants.clone(), a.importance, a.timestamp),
        (vec!["ann".to_owned()], 9, ts)
    );
    let hits = mem
        .episodic()
        .search_hybrid(
            "",
            &SearchFilters::default(),
            5,
            &VectorQuery::embedding(vec![1.0, 0.0, 0.5]),
        )
        .unwrap();
    assert_eq!(hits[0].episode.id, ids[1]);
}

#[test]
fn a_bad_item_rejects_the_whole_batch_and_names_its_index_and_field() {
    let mem = Memory::builder()
        .temporary()
        .limits(Limits {
            max_value_bytes: 4096,
            ..Limits::default()
        })
        .open()
        .unwrap();
    // Something stored before: the failed batch must leave it alone.
    let before = mem
        .episodic()
        .record(NewEpisode::new("kept before"))
        .unwrap();
    let cases: Vec<(usize, NewEpisode, &str)> = vec![
        (
            3,
            NewEpisode::new("huge").content(json!("x".repeat(10_000))),
            "items[3].content",
        ),
        (1, NewEpisode::new("   "), "items[1].summary"),
        (
            4,
            NewEpisode::new("loud").importance(11),
            "items[4].importance",
        ),
        (
            2,
            NewEpisode::new("tagged").tags(vec!["t"; 65]),
            "items[2].tags",
        ),
        (
            0,
            NewEpisode::new("bad vector").embedding(vec![f32::NAN]),
            "items[0].embedding",
        ),
    ];
    for (at, bad, field) in cases {
        let mut items = episodes("poisoned", 6);
        items[at] = bad;
        let err = mem.episodic().record_many(items).unwrap_err();
        assert_eq!(field_of(&err), field, "{err}");
        assert!(err.to_string().contains(field), "{err}");
    }
    // A content over the value limit says which limit.
    let mut items = episodes("poisoned", 6);
    items[3] = NewEpisode::new("huge").content(json!("x".repeat(10_000)));
    let err = mem.episodic().record_many(items).unwrap_err();
    assert!(
        matches!(&err, Error::LimitExceeded { limit: 4096, .. }),
        "{err:?}"
    );
    // Two dimensions in one batch: the second vector's item is named.
    let items = vec![
        NewEpisode::new("a").embedding(vec![1.0, 2.0]),
        NewEpisode::new("b"),
        NewEpisode::new("c").embedding(vec![1.0, 2.0, 3.0]),
    ];
    let err = mem.episodic().record_many(items).unwrap_err();
    assert_eq!(field_of(&err), "items[2].embedding");
    // Nothing of any rejected batch is stored or searchable.
    let recent = mem.episodic().recent(100).unwrap();
    assert_eq!(recent.len(), 1);
    assert_eq!(recent[0].id, before);
    for q in ["poisoned", "turn2", "huge", "tagged", "loud"] {
        assert!(
            mem.episodic()
                .search(q, &SearchFilters::default(), 10)
                .unwrap()
                .is_empty(),
            "{q}"
        );
    }
    assert!(
        mem.episodic()
            .search(
                "",
                &SearchFilters {
                    tags: vec!["batch".into()],
                    ..Default::default()
                },
                10
            )
            .unwrap()
            .is_empty()
    );
    // The failed batch with vectors fixed no dimension for the context.
    mem.episodic()
        .record(NewEpisode::new("any dim").embedding(vec![1.0; 5]))
        .unwrap();
}

#[test]
fn a_vector_of_another_dimension_than_the_context_is_named() {
    let mem = common::temporary().unwrap();
    mem.episodic()
        .record(NewEpisode::new("fixes dim").embedding(vec![1.0, 2.0, 3.0]))
        .unwrap();
    let err = mem
        .episodic()
        .record_many(vec![
            NewEpisode::new("plain"),
            NewEpisode::new("other dim").embedding(vec![1.0, 2.0]),
        ])
        .unwrap_err();
    assert_eq!(field_of(&err), "items[1].embedding");
    assert_eq!(mem.episodic().recent(10).unwrap().len(), 1);
}

#[test]
fn batch_limits_are_enforced_with_their_own_error() {
    let mem = Memory::builder()
        .temporary()
        .limits(Limits {
            max_batch_items: 5,
            max_batch_bytes: 2000,
            ..Limits::default()
        })
        .open()
        .unwrap();
    let err = mem.episodic().record_many(episodes("many", 6)).unwrap_err();
    assert!(
        matches!(&err, Error::LimitExceeded { field, limit: 5, actual: 6, .. } if field == "items"),
        "{err:?}"
    );
    assert!(err.to_string().contains("items per batch"), "{err}");
    // Content that does not compress: ~1 KB encoded per item, 5 KB in all.
    let mut x = 0x9e37_79b9_u32;
    let big: Vec<NewEpisode> = (0..5)
        .map(|i| {
            let nums: Vec<u32> = (0..200)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x
                })
                .collect();
            NewEpisode::new(format!("big {i}")).content(json!(nums))
        })
        .collect();
    let err = mem.episodic().record_many(big).unwrap_err();
    assert!(
        matches!(&err, Error::LimitExceeded { field, limit: 2000, .. } if field == "items"),
        "{err:?}"
    );
    assert!(err.to_string().contains("bytes per batch"), "{err}");
    let items: Vec<NewKnowledge> = (0..6)
        .map(|i| NewKnowledge::new(format!("k{i}"), json!(i)))
        .collect();
    let err = mem.semantic().store_many(items).unwrap_err();
    assert!(
        matches!(&err, Error::LimitExceeded { field, limit: 5, .. } if field == "items"),
        "{err:?}"
    );
    assert!(mem.episodic().recent(10).unwrap().is_empty());
    assert!(mem.semantic().keys("").unwrap().is_empty());
    // At the limit it passes.
    assert_eq!(
        mem.episodic()
            .record_many(episodes("five", 5))
            .unwrap()
            .len(),
        5
    );
}

#[test]
fn store_many_stores_in_order_with_versions_history_and_query() {
    let mem = common::temporary().unwrap();
    mem.semantic()
        .store("user:ann", json!({"role": "dev"}))
        .unwrap();
    let got = mem
        .semantic()
        .store_many(vec![
            NewKnowledge::new("user:bob", json!({"role": "ops", "city": "Lyon"})),
            NewKnowledge::new("user:ann", json!({"role": "lead"})),
            NewKnowledge::new("user:bob", json!({"role": "sre", "city": "Lyon"})),
        ])
        .unwrap();
    let versions: Vec<(String, u64)> = got.iter().map(|k| (k.key.clone(), k.version)).collect();
    assert_eq!(
        versions,
        vec![
            ("user:bob".to_owned(), 1),
            ("user:ann".to_owned(), 2),
            ("user:bob".to_owned(), 2)
        ]
    );
    assert_eq!(
        mem.semantic().retrieve("user:bob").unwrap(),
        Some(json!({"role": "sre", "city": "Lyon"}))
    );
    assert_eq!(mem.semantic().history("user:ann").unwrap().len(), 2);
    assert_eq!(mem.semantic().history("user:bob").unwrap().len(), 2);
    let hits = mem.semantic().query("Lyon", 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].knowledge["role"], "sre");
}

#[test]
fn store_many_rejects_a_bad_item_and_stores_nothing() {
    let mem = common::temporary().unwrap();
    mem.semantic().store("kept", json!("before")).unwrap();
    let deep = (0..200).fold(json!(1), |v, _| json!([v]));
    let cases: Vec<(NewKnowledge, &str)> = vec![
        (NewKnowledge::new("", json!(1)), "items[2].key"),
        (
            NewKnowledge::new("k".repeat(2000), json!(1)),
            "items[2].key",
        ),
        (NewKnowledge::new("deep", deep), "items[2].knowledge"),
        (
            NewKnowledge::new("vec", json!(1)).embedding(vec![0.0, 0.0]),
            "items[2].embedding",
        ),
    ];
    for (bad, field) in cases {
        let mut items: Vec<NewKnowledge> = (0..4)
            .map(|i| NewKnowledge::new(format!("poisoned{i}"), json!({"text": "zebra"})))
            .collect();
        items.insert(2, bad);
        let err = mem.semantic().store_many(items).unwrap_err();
        assert_eq!(field_of(&err), field, "{err}");
    }
    assert_eq!(mem.semantic().keys("").unwrap(), vec!["kept".to_owned()]);
    assert!(mem.semantic().query("zebra", 10).unwrap().is_empty());
    assert!(mem.semantic().query("poisoned0", 10).unwrap().is_empty());
}

#[test]
fn an_embedder_is_called_once_for_the_items_without_a_vector() {
    let mem = common::temporary().unwrap();
    let calls = Arc::new(std::sync::Mutex::new(Vec::<usize>::new()));
    let seen = Arc::clone(&calls);
    mem.set_embedder(Some(Arc::new(
        move |texts: &[&str]| -> memstrata::Result<Vec<Vec<f32>>> {
            seen.lock().unwrap().push(texts.len());
            Ok(texts
                .iter()
                .map(|t| vec![1.0, t.len() as f32, 0.5])
                .collect())
        },
    )));
    let ids = mem
        .episodic()
        .record_many(vec![
            NewEpisode::new("one"),
            NewEpisode::new("two").embedding(vec![0.0, 1.0, 0.0]),
            NewEpisode::new("three"),
        ])
        .unwrap();
    assert_eq!(ids.len(), 3);
    mem.semantic()
        .store_many(vec![
            NewKnowledge::new("a", json!("x")),
            NewKnowledge::new("b", json!("y")),
        ])
        .unwrap();
    assert_eq!(*calls.lock().unwrap(), vec![2, 2]);
    // An embedder that fails rejects the batch: nothing stored.
    mem.set_embedder(Some(Arc::new(
        |_: &[&str]| -> memstrata::Result<Vec<Vec<f32>>> { Ok(vec![]) },
    )));
    let err = mem
        .episodic()
        .record_many(vec![NewEpisode::new("lost")])
        .unwrap_err();
    assert_eq!(field_of(&err), "embedder");
    assert_eq!(mem.episodic().recent(10).unwrap().len(), 3);
}

#[test]
fn a_batch_survives_reopen() {
    let dir = common::tempdir();
    let path = dir.join("s");
    let ids = {
        let mem = Memory::open(&path).unwrap();
        let ids = mem.episodic().record_many(episodes("durable", 20)).unwrap();
        mem.semantic()
            .store_many(vec![NewKnowledge::new("k", json!({"v": "durable"}))])
            .unwrap();
        ids
    };
    let mem = Memory::open(&path).unwrap();
    for id in &ids {
        assert!(mem.episodic().get(id).unwrap().is_some());
    }
    let hits = mem
        .episodic()
        .search("durable", &SearchFilters::default(), 100)
        .unwrap();
    assert_eq!(hits.len(), 20);
    assert_eq!(mem.semantic().query("durable", 5).unwrap().len(), 1);
}

#[test]
fn new_episodes_indexed_without_a_delete_are_replaced_and_removed_like_any() {
    // New episodes enter the text index without the delete-by-id an update
    // needs (their ids are new); a later change to one replaces it, and
    // forgetting one removes it, in the index as in the store, before and
    // after a reopen.
    let dir = common::tempdir();
    let path = dir.join("s");
    let any = SearchFilters::default();
    let ids = {
        let mem = Memory::open(&path).unwrap();
        let mut ids = mem.episodic().record_many(episodes("fresh", 30)).unwrap();
        ids.push(
            mem.episodic()
                .record(NewEpisode::new("fresh turn30 about batching"))
                .unwrap(),
        );
        // The same text again, merged into the stored episode: one document.
        let merged = mem
            .episodic()
            .record_detailed(
                NewEpisode::new("fresh turn17 about batching")
                    .content(json!({"i": 17}))
                    .tags(["batch", "again"])
                    .on_duplicate(memstrata::episodic::OnDuplicate::Merge),
            )
            .unwrap();
        assert_eq!(merged.id, ids[17]);
        assert!(!merged.created);
        assert!(mem.episodic().forget(&ids[3]).unwrap());
        for (word, want) in [
            ("turn17", vec![&ids[17]]),
            ("turn3", vec![]),
            ("turn30", vec![&ids[30]]),
        ] {
            let got: Vec<String> = mem
                .episodic()
                .search(word, &any, 10)
                .unwrap()
                .into_iter()
                .map(|h| h.episode.id)
                .collect();
            assert_eq!(got.iter().collect::<Vec<_>>(), want, "{word}");
        }
        ids
    };
    let mem = Memory::open(&path).unwrap();
    let hits = mem.episodic().search("batching", &any, 100).unwrap();
    assert_eq!(hits.len(), 30);
    let mut found: Vec<&String> = hits.iter().map(|h| &h.episode.id).collect();
    found.sort();
    found.dedup();
    assert_eq!(found.len(), 30);
    assert!(!found.contains(&&ids[3]));
    let tagged = SearchFilters {
        tags: vec!["again".into()],
        ..Default::default()
    };
    let again = mem.episodic().search("", &tagged, 10).unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].episode.id, ids[17]);
}
