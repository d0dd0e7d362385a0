//! The memory budgets of `Options`: the `low_memory` preset opens a store that
//! works through every cached path, caches can be turned off, and a budget
//! over its limit is refused before anything is opened, naming the field.
//! (Resident memory itself is measured by benches/footprint/probe.py, never
//! asserted here.)

use std::time::Duration;

use memstrata::{Error, Memory, NewEpisode, Options, SearchFilters};
use serde_json::json;

fn index_stats(mem: &Memory) -> memstrata::admin::IndexStats {
    mem.admin()
        .status(false, true)
        .unwrap()
        .metrics
        .unwrap()
        .index
}

fn exercise(mem: &Memory) {
    let ep = mem.episodic();
    let mut ids = Vec::new();
    for i in 0..200 {
        ids.push(
            ep.record(NewEpisode::new(format!(
                "episode {i} about the deploy of build {}",
                i % 7
            )))
            .unwrap(),
        );
    }
    // Read back through the episode cache (or the store when it is off).
    for (i, id) in ids.iter().enumerate().step_by(17) {
        let got = ep.get(id).unwrap().expect("recorded episode");
        assert_eq!(
            got.summary,
            format!("episode {i} about the deploy of build {}", i % 7)
        );
    }
    let hits = ep
        .search("deploy build", &SearchFilters::default(), 500)
        .unwrap();
    assert_eq!(hits.len(), 200);
    let st = mem.short_term();
    st.store("k", json!({"a": 1, "b": [1, 2, 3]}), None)
        .unwrap();
    assert_eq!(
        st.retrieve("k").unwrap(),
        Some(json!({"a": 1, "b": [1, 2, 3]}))
    );
    st.store("k", json!("replaced"), None).unwrap();
    assert_eq!(st.retrieve("k").unwrap(), Some(json!("replaced")));
}

/// Reopen `store` with the default budgets: the 200 episodes of [`exercise`]
/// are all there.
fn reopens_whole(store: &std::path::Path, what: &str) {
    let mem = Memory::open(store).unwrap();
    let hits = mem
        .episodic()
        .search("deploy", &SearchFilters::default(), 500)
        .unwrap();
    assert_eq!(hits.len(), 200, "{what}");
}

#[test]
fn low_memory_preset_sets_every_budget_and_works() {
    let o = Options::low_memory();
    let d = Options::default();
    assert!(o.cache_bytes < d.cache_bytes);
    assert!(o.episode_cache_bytes < d.episode_cache_bytes);
    assert!(o.short_term_cache_bytes < d.short_term_cache_bytes);
    assert!(o.index_cache_bytes < d.index_cache_bytes);
    assert!(o.index_writer_bytes <= d.index_writer_bytes);
    // The preset bounds index merges; the default leaves tantivy's policy.
    assert!(o.index_merge_max_docs > 0);
    assert_eq!(d.index_merge_max_docs, 0);
    assert!(!o.release_memory_interval.is_zero());
    assert!(o.release_memory_interval < d.release_memory_interval);
    // The preset caps glibc's malloc arenas; the default leaves glibc's limit.
    assert_eq!(o.malloc_arena_max, 2);
    assert_eq!(d.malloc_arena_max, 0);

    let dir = tempfile::tempdir().unwrap();
    let mem = Memory::builder()
        .path(dir.path().join("store"))
        .low_memory()
        .open()
        .unwrap();
    exercise(&mem);
    drop(mem);
    reopens_whole(&dir.path().join("store"), "low_memory");
}

#[test]
fn budgets_set_after_the_preset_override_it() {
    let dir = tempfile::tempdir().unwrap();
    let mem = Memory::builder()
        .path(dir.path().join("store"))
        .low_memory()
        .episode_cache_bytes(0)
        .short_term_cache_bytes(0)
        .open()
        .unwrap();
    // Both caches off: every read comes from the store, with the same results.
    exercise(&mem);
}

#[test]
fn a_cache_budget_over_the_limit_is_refused_naming_the_field() {
    for (field, builder) in [
        (
            "episode_cache_bytes",
            Memory::builder().episode_cache_bytes(Options::MAX_DECODED_CACHE_BYTES + 1),
        ),
        (
            "short_term_cache_bytes",
            Memory::builder().short_term_cache_bytes(Options::MAX_DECODED_CACHE_BYTES + 1),
        ),
        (
            "index_cache_bytes",
            Memory::builder().index_cache_bytes(Options::MAX_DECODED_CACHE_BYTES + 1),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        match builder.path(&store).open() {
            Err(Error::InvalidInput { field: f, reason }) => {
                assert_eq!(f, field);
                assert!(reason.contains("1073741824"), "{reason}");
            }
            other => panic!("{field}: expected InvalidInput, got {other:?}"),
        }
        // Refused before anything was created.
        assert!(!store.exists(), "{field}: store directory was created");
    }
    // The limit itself is accepted.
    let mem = Memory::builder()
        .temporary()
        .episode_cache_bytes(Options::MAX_DECODED_CACHE_BYTES)
        .open()
        .unwrap();
    mem.episodic().record(NewEpisode::new("fits")).unwrap();
}

#[test]
fn a_malloc_arena_cap_over_the_limit_is_refused_and_one_arena_works() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    match Memory::builder()
        .path(&store)
        .malloc_arena_max(Options::MAX_MALLOC_ARENAS + 1)
        .open()
    {
        Err(Error::InvalidInput { field, reason }) => {
            assert_eq!(field, "malloc_arena_max");
            assert!(reason.contains("1024"), "{reason}");
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    assert!(!store.exists(), "store directory was created");
    // The tightest cap there is: every path still works, the data reopens.
    let mem = Memory::builder()
        .path(&store)
        .malloc_arena_max(1)
        .open()
        .unwrap();
    exercise(&mem);
    drop(mem);
    reopens_whole(&store, "one malloc arena");
}

#[test]
fn freeing_heap_while_writing_keeps_every_write_and_can_be_turned_off() {
    for interval in [Duration::from_millis(1), Duration::ZERO] {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let mem = Memory::builder()
            .path(&store)
            .release_memory_interval(interval)
            .index_commit_interval(Duration::from_millis(5))
            .open()
            .unwrap();
        exercise(&mem);
        drop(mem);
        reopens_whole(&store, &format!("interval {interval:?}"));
    }
}

#[test]
fn the_index_log_is_pruned_whole_past_one_pruning_batch() {
    // More pending entries than one pruning batch (256 keys) removes.
    let dir = tempfile::tempdir().unwrap();
    let mem = Memory::builder()
        .path(dir.path())
        .index_commit_interval(Duration::from_secs(3600))
        .open()
        .unwrap();
    for i in 0..1000 {
        mem.episodic()
            .record(NewEpisode::new(format!("pruned note {i}")))
            .unwrap();
    }
    let st = index_stats(&mem);
    assert!(st.log_entries >= 1000, "{st:?}");
    mem.flush().unwrap();
    let st = index_stats(&mem);
    assert_eq!(st.committed_seq, st.applied_seq, "{st:?}");
    assert_eq!(st.log_entries, 0, "{st:?}");
    assert_eq!(
        mem.episodic()
            .search("pruned", &SearchFilters::default(), 1000)
            .unwrap()
            .len(),
        1000
    );
}

#[test]
fn a_replaced_document_leaves_the_index_within_and_across_commits() {
    // Every upsert deletes the uid's earlier document (the writer's
    // delete-by-uid): in the same commit as the first version, and after it.
    let dir = tempfile::tempdir().unwrap();
    let mem = Memory::builder()
        .path(dir.path())
        .index_commit_interval(Duration::from_secs(3600))
        .open()
        .unwrap();
    let sem = mem.semantic();
    sem.store("fact", json!("the sky is amber")).unwrap();
    sem.store("fact", json!("the sky is violet")).unwrap();
    mem.flush().unwrap();
    sem.store("fact", json!("the sky is green")).unwrap();
    mem.flush().unwrap();
    drop(sem);
    drop(mem);
    let mem = Memory::open(dir.path()).unwrap();
    let sem = mem.semantic();
    for gone in ["amber", "violet"] {
        assert!(sem.query(gone, 5).unwrap().is_empty(), "{gone}");
    }
    let hits = sem.query("green", 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].key, "fact");
    assert_eq!(index_stats(&mem).documents, 1);
}
