//! Several engines (instances) on one database: concurrent writes, serialised
//! read-modify-writes, paged scans, vector search following another instance's writes.

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use super::*;

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn two_instances_writing_concurrently_lose_nothing_and_see_each_other() {
    let dir = pg_dir();
    let url = dir.path();
    let a = separate_engine(&url);
    let b = separate_engine(&url);
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
fn read_modify_writes_are_serialised_across_instances() {
    let dir = pg_dir();
    let url = dir.path();
    let a = separate_engine(&url);
    let b = separate_engine(&url);
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
#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn vector_search_follows_another_instances_writes_through_the_index_log() {
    use memstrata::VectorQuery;
    let dir = pg_dir();
    let url = dir.path();
    let (a, b) = (separate_engine(&url), separate_engine(&url));
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
