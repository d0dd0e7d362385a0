//! The memory budgets of `Options`: the `low_memory` preset opens a store that
//! works through every cached path, caches can be turned off, and a budget
//! over its limit is refused before anything is opened, naming the field.
//! (Resident memory itself is measured by benches/footprint/probe.py, never
//! asserted here.)

use memstrata::{Error, Memory, NewEpisode, Options, SearchFilters};
use serde_json::json;

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

#[test]
fn low_memory_preset_sets_every_budget_and_works() {
    let o = Options::low_memory();
    let d = Options::default();
    assert!(o.cache_bytes < d.cache_bytes);
    assert!(o.episode_cache_bytes < d.episode_cache_bytes);
    assert!(o.short_term_cache_bytes < d.short_term_cache_bytes);
    assert!(o.index_cache_bytes < d.index_cache_bytes);
    assert!(o.index_writer_bytes <= d.index_writer_bytes);

    let dir = tempfile::tempdir().unwrap();
    let mem = Memory::builder()
        .path(dir.path().join("store"))
        .low_memory()
        .open()
        .unwrap();
    exercise(&mem);
    drop(mem);
    // Reopened with the default budgets, the data is all there.
    let mem = Memory::open(dir.path().join("store")).unwrap();
    let hits = mem
        .episodic()
        .search("deploy", &SearchFilters::default(), 500)
        .unwrap();
    assert_eq!(hits.len(), 200);
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
