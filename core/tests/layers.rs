//! Layer semantics through the public API, on real stores in temp dirs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use memstrata::{Error, Limits, ManualClock, Memory, NewEpisode, SearchFilters};
use serde_json::json;

fn store_with_clock() -> (common::TestDir, Memory, Arc<ManualClock>) {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap(),
    ));
    let mem = Memory::builder()
        .path(dir.join("s"))
        .clock(clock.clone())
        .open()
        .unwrap();
    (dir, mem, clock)
}

#[test]
fn short_term_store_retrieve_forget_keys() {
    let (_d, mem, _c) = store_with_clock();
    let st = mem.short_term();
    assert_eq!(st.retrieve("a").unwrap(), None);
    st.store("a", json!({"x": 1}), None).unwrap();
    st.store("ab", json!([1, 2]), None).unwrap();
    st.store("b", json!("text"), None).unwrap();
    assert_eq!(st.retrieve("a").unwrap(), Some(json!({"x": 1})));
    assert_eq!(
        st.keys("a").unwrap(),
        vec!["a".to_string(), "ab".to_string()]
    );
    st.store("a", json!(2), None).unwrap();
    assert_eq!(st.retrieve("a").unwrap(), Some(json!(2)));
    assert!(st.forget("a").unwrap());
    assert!(!st.forget("a").unwrap());
    assert_eq!(st.retrieve("a").unwrap(), None);
    assert_eq!(
        st.keys("").unwrap(),
        vec!["ab".to_string(), "b".to_string()]
    );
}

#[test]
fn short_term_ttl_expires_with_injected_clock() {
    let (_d, mem, clock) = store_with_clock();
    let st = mem.short_term();
    let e = st
        .store("k", json!(1), Some(Duration::from_secs(60)))
        .unwrap();
    assert_eq!(
        e.expires_at.unwrap() - e.stored_at,
        chrono::Duration::seconds(60)
    );
    clock.advance(Duration::from_secs(59));
    assert_eq!(st.retrieve("k").unwrap(), Some(json!(1)));
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        st.retrieve("k").unwrap(),
        None,
        "expired at exactly the TTL"
    );
    assert!(st.keys("").unwrap().is_empty());
    assert!(
        !st.forget("k").unwrap(),
        "forgetting an expired key reports nothing removed"
    );
    // A value without TTL never expires.
    st.store("forever", json!(true), None).unwrap();
    clock.advance(Duration::from_secs(10 * 365 * 86400));
    assert_eq!(st.retrieve("forever").unwrap(), Some(json!(true)));
}

#[test]
fn contexts_isolate_data() {
    let (_d, mem, _c) = store_with_clock();
    let proj = mem.namespace("proj").unwrap();
    mem.short_term().store("k", json!("default"), None).unwrap();
    proj.short_term().store("k", json!("proj"), None).unwrap();
    assert_eq!(
        mem.short_term().retrieve("k").unwrap(),
        Some(json!("default"))
    );
    assert_eq!(
        proj.short_term().retrieve("k").unwrap(),
        Some(json!("proj"))
    );
    assert_eq!(proj.active_context(), "proj");
    assert_eq!(mem.active_context(), "default");
    assert_eq!(
        mem.contexts().list().unwrap(),
        vec!["default".to_string(), "proj".to_string()]
    );
    assert!(
        matches!(mem.namespace("bad name"), Err(Error::InvalidInput { ref field, .. }) if field == "name")
    );
    assert!(mem.namespace(&"x".repeat(129)).is_err());
}

#[test]
fn switch_context_preserve_and_clear() {
    let (_d, mem, _c) = store_with_clock();
    mem.working().focus("task A").unwrap();
    let r = mem.switch_context("other", true).unwrap();
    assert_eq!(r.previous_context, "default");
    assert!(!r.context_loaded);
    assert_eq!(mem.active_context(), "other");
    assert!(mem.working().current_focus().unwrap().is_empty());
    let r = mem.switch_context("default", false).unwrap();
    assert!(r.context_loaded, "default held working memory");
    assert_eq!(
        mem.working().current_focus().unwrap(),
        vec!["task A".to_string()]
    );
    mem.switch_context("other", false).unwrap();
    let r = mem.switch_context("default", true).unwrap();
    assert!(
        !r.context_loaded,
        "working memory of default was cleared when left with preserve_current=false"
    );
    assert!(mem.working().current_focus().unwrap().is_empty());
}

#[test]
fn working_memory_evicts_oldest_and_persists() {
    let dir = common::tempdir();
    let path = dir.join("w");
    {
        let mem = Memory::builder()
            .path(&path)
            .limits(Limits {
                focus_capacity: 3,
                workspace_capacity: 2,
                ..Limits::default()
            })
            .open()
            .unwrap();
        let w = mem.working();
        assert!(w.focus("a").unwrap());
        assert!(!w.focus("a").unwrap(), "already in focus");
        assert!(w.focus("b").unwrap());
        assert!(w.focus("c").unwrap());
        assert!(w.focus("d").unwrap());
        assert_eq!(w.current_focus().unwrap(), vec!["b", "c", "d"]);
        let id1 = w.add_to_workspace(json!(1)).unwrap();
        w.add_to_workspace(json!(2)).unwrap();
        w.add_to_workspace(json!(3)).unwrap();
        assert_eq!(w.workspace().unwrap(), vec![json!(2), json!(3)]);
        assert!(w.workspace_items().unwrap().iter().all(|i| i.id != id1));
    }
    let mem = Memory::open(&path).unwrap();
    assert_eq!(mem.working().current_focus().unwrap(), vec!["b", "c", "d"]);
    assert_eq!(mem.working().workspace().unwrap(), vec![json!(2), json!(3)]);
    mem.working().clear().unwrap();
    assert!(mem.working().current_focus().unwrap().is_empty());
    assert!(mem.working().workspace().unwrap().is_empty());
}

#[test]
fn episodes_record_get_search_forget() {
    let (_d, mem, clock) = store_with_clock();
    let ep = mem.episodic();
    let deploy = ep
        .record(
            NewEpisode::new("Deployed v2 to staging")
                .content(json!({"pr": 42, "notes": "rollout went smoothly"}))
                .participants(["alice"])
                .tags(["deploy", "staging"])
                .importance(7),
        )
        .unwrap();
    clock.advance(Duration::from_secs(3600));
    let bug = ep
        .record(
            NewEpisode::new("Investigated flaky login test")
                .content(json!({"file": "auth_test.rs"}))
                .participants(["bob"])
                .tags(["bug"])
                .importance(4),
        )
        .unwrap();
    // Read-your-writes: found by the very next search.
    let hits = ep
        .search("staging deploy", &SearchFilters::default(), 10)
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].episode.id, deploy);
    assert!(hits[0].score > 0.0);
    let got = ep.get(&deploy).unwrap().unwrap();
    assert_eq!(got.summary, "Deployed v2 to staging");
    assert_eq!(got.importance, 7);
    assert_eq!(got.content["pr"], 42);
    // Content text, participants and tags are searched too.
    assert_eq!(
        ep.search("rollout", &SearchFilters::default(), 10).unwrap()[0]
            .episode
            .id,
        deploy
    );
    assert_eq!(
        ep.search("bob", &SearchFilters::default(), 10).unwrap()[0]
            .episode
            .id,
        bug
    );
    assert_eq!(
        ep.search("bug", &SearchFilters::default(), 10).unwrap()[0]
            .episode
            .id,
        bug
    );
    // Natural language with punctuation and quotes never errors.
    let hits = ep
        .search(
            "what \"happened\" with (login) tests?! AND OR:",
            &SearchFilters::default(),
            10,
        )
        .unwrap();
    assert_eq!(hits[0].episode.id, bug);
    // Filters.
    let f = SearchFilters {
        tags: vec!["deploy".into(), "staging".into()],
        ..Default::default()
    };
    assert_eq!(ep.search("", &f, 10).unwrap().len(), 1);
    let f = SearchFilters {
        tags: vec!["deploy".into(), "bug".into()],
        ..Default::default()
    };
    assert!(
        ep.search("", &f, 10).unwrap().is_empty(),
        "tags filter is all-of"
    );
    let f = SearchFilters {
        participants: vec!["carol".into(), "bob".into()],
        ..Default::default()
    };
    let hits = ep.search("", &f, 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].episode.id, bug, "participants filter is any-of");
    let f = SearchFilters {
        min_importance: Some(5),
        ..Default::default()
    };
    assert_eq!(ep.search("", &f, 10).unwrap()[0].episode.id, deploy);
    let t0 = got.timestamp;
    let f = SearchFilters {
        since: Some(t0 + chrono::Duration::seconds(1)),
        ..Default::default()
    };
    assert_eq!(ep.search("", &f, 10).unwrap()[0].episode.id, bug);
    let f = SearchFilters {
        until: Some(t0),
        ..Default::default()
    };
    assert_eq!(ep.search("", &f, 10).unwrap()[0].episode.id, deploy);
    // Empty query: newest first.
    let all = ep.search("", &SearchFilters::default(), 10).unwrap();
    assert_eq!(
        all.iter().map(|h| h.episode.id.clone()).collect::<Vec<_>>(),
        vec![bug.clone(), deploy.clone()]
    );
    // Forget: gone from get and search at once.
    assert!(ep.forget(&deploy).unwrap());
    assert!(!ep.forget(&deploy).unwrap());
    assert!(ep.get(&deploy).unwrap().is_none());
    assert!(
        ep.search("staging", &SearchFilters::default(), 10)
            .unwrap()
            .is_empty()
    );
    // Other contexts do not see these episodes.
    assert!(
        mem.namespace("other")
            .unwrap()
            .episodic()
            .search("login", &SearchFilters::default(), 10)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn search_ranking_prefers_more_relevant() {
    let (_d, mem, _c) = store_with_clock();
    let ep = mem.episodic();
    for i in 0..20 {
        ep.record(NewEpisode::new(format!(
            "routine standup meeting number {i}"
        )))
        .unwrap();
    }
    let target = ep
        .record(
            NewEpisode::new("database migration failed")
                .content(json!("the database migration of the orders table failed")),
        )
        .unwrap();
    ep.record(NewEpisode::new("read about database indexing"))
        .unwrap();
    let hits = ep
        .search("database migration", &SearchFilters::default(), 5)
        .unwrap();
    assert_eq!(hits[0].episode.id, target);
    assert!(hits.len() >= 2);
    assert!(hits[0].score > hits[1].score);
    assert!(hits.len() <= 5);
    let hits = ep.search("standup", &SearchFilters::default(), 3).unwrap();
    assert_eq!(hits.len(), 3, "limit respected");
}

#[test]
fn summarize_is_chronological_and_bounded() {
    let (_d, mem, clock) = store_with_clock();
    let ep = mem.episodic();
    let a = ep
        .record(NewEpisode::new("first thing").tags(["x"]))
        .unwrap();
    clock.advance(Duration::from_secs(60));
    let b = ep
        .record(NewEpisode::new("second thing").participants(["ann"]))
        .unwrap();
    let s = ep.summarize(&[b.clone(), a.clone()]).unwrap();
    let first = s.find("first thing").unwrap();
    let second = s.find("second thing").unwrap();
    assert!(first < second, "chronological: {s}");
    assert_eq!(
        s,
        ep.summarize(&[a.clone(), b.clone()]).unwrap(),
        "deterministic"
    );
    let mut ids = Vec::new();
    for i in 0..200 {
        ids.push(
            ep.record(NewEpisode::new(format!(
                "episode {i} {}",
                "word ".repeat(20)
            )))
            .unwrap(),
        );
    }
    let s = ep.summarize(&ids).unwrap();
    assert!(s.chars().count() <= memstrata::episodic::SUMMARY_MAX_CHARS + 100);
    assert!(s.contains("more episode"));
    assert!(matches!(
        ep.summarize(&["nope".into()]),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn semantic_store_update_history_query_forget() {
    let (_d, mem, _c) = store_with_clock();
    let sem = mem.semantic();
    let k = sem
        .store("user:alice", json!({"role": "admin", "team": "core"}))
        .unwrap();
    assert_eq!(k.version, 1);
    let k = sem
        .update("user:alice", json!({"team": "infra", "role": null}))
        .unwrap();
    assert_eq!(
        k.knowledge,
        json!({"team": "infra"}),
        "RFC 7386: null removes"
    );
    assert_eq!(k.version, 2);
    assert_eq!(
        sem.retrieve("user:alice").unwrap(),
        Some(json!({"team": "infra"}))
    );
    let h = sem.history("user:alice").unwrap();
    assert_eq!(h.iter().map(|v| v.version).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(h[0].knowledge, json!({"role": "admin", "team": "core"}));
    assert!(matches!(
        sem.update("user:nobody", json!({"a": 1})),
        Err(Error::NotFound { .. })
    ));
    sem.store(
        "service:billing",
        json!({"owner": "payments team", "lang": "go"}),
    )
    .unwrap();
    let hits = sem.query("billing", 10).unwrap();
    assert_eq!(hits[0].key, "service:billing");
    let hits = sem.query("infra", 10).unwrap();
    assert_eq!(hits[0].key, "user:alice", "updates are indexed");
    assert!(sem.forget("user:alice").unwrap());
    assert!(sem.retrieve("user:alice").unwrap().is_none());
    assert!(
        sem.history("user:alice").unwrap().is_empty(),
        "history forgotten too"
    );
    assert!(sem.query("infra", 10).unwrap().is_empty());
    // store replaces
    sem.store("service:billing", json!({"lang": "rust"}))
        .unwrap();
    assert_eq!(
        sem.retrieve("service:billing").unwrap(),
        Some(json!({"lang": "rust"}))
    );
}

#[test]
fn semantic_history_is_bounded() {
    let dir = common::tempdir();
    let mem = Memory::builder()
        .path(dir.path())
        .limits(Limits {
            semantic_history: 3,
            ..Limits::default()
        })
        .open()
        .unwrap();
    for i in 0..10 {
        mem.semantic().store("k", json!(i)).unwrap();
    }
    let h = mem.semantic().history("k").unwrap();
    assert_eq!(
        h.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![8, 9, 10]
    );
    assert_eq!(h[2].knowledge, json!(9));
}

#[test]
fn same_path_twice_in_process_shares_engine() {
    let dir = common::tempdir();
    let a = Memory::open(dir.path()).unwrap();
    let b = Memory::open(dir.path()).unwrap();
    a.short_term().store("k", json!(1), None).unwrap();
    assert_eq!(b.short_term().retrieve("k").unwrap(), Some(json!(1)));
    b.episodic()
        .record(NewEpisode::new("shared engine episode"))
        .unwrap();
    assert_eq!(
        a.episodic()
            .search("shared", &SearchFilters::default(), 5)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn data_survives_reopen() {
    let dir = common::tempdir();
    let id;
    {
        let mem = Memory::open(dir.path()).unwrap();
        mem.short_term().store("k", json!({"v": 1}), None).unwrap();
        mem.semantic()
            .store("fact", json!("the sky is blue"))
            .unwrap();
        id = mem
            .episodic()
            .record(NewEpisode::new("persisted across reopen"))
            .unwrap();
    }
    let mem = Memory::open(dir.path()).unwrap();
    assert_eq!(
        mem.short_term().retrieve("k").unwrap(),
        Some(json!({"v": 1}))
    );
    assert_eq!(mem.semantic().query("sky", 5).unwrap()[0].key, "fact");
    assert_eq!(
        mem.episodic()
            .search("reopen", &SearchFilters::default(), 5)
            .unwrap()[0]
            .episode
            .id,
        id
    );
}

#[test]
fn temporary_store_is_removed_on_close() {
    // About `Memory::temporary()` itself (a sled store in a temporary directory): same on every backend run.
    let mem = Memory::temporary().unwrap();
    let path = mem.path();
    assert!(mem.is_temporary());
    mem.short_term().store("k", json!(1), None).unwrap();
    assert!(path.exists());
    drop(mem);
    assert!(!path.exists());
}

#[test]
fn unfiltered_search_is_exact_when_other_contexts_dominate() {
    // The unfiltered path searches all contexts and drops out-of-scope hits,
    // widening its window: it must return exactly what the scoped query returns.
    let (_d, mem, _c) = store_with_clock();
    let other = mem.namespace("other").unwrap();
    for i in 0..300 {
        other
            .episodic()
            .record(NewEpisode::new(format!("alpha beta gamma noise {i}")))
            .unwrap();
    }
    let mut mine = Vec::new();
    for i in 0..5 {
        mine.push(
            mem.episodic()
                .record(NewEpisode::new(format!("alpha report {i}")).importance(5))
                .unwrap(),
        );
    }
    let unfiltered = mem
        .episodic()
        .search("alpha", &SearchFilters::default(), 10)
        .unwrap();
    let filtered = mem
        .episodic()
        .search(
            "alpha",
            &SearchFilters {
                min_importance: Some(1),
                ..Default::default()
            },
            10,
        )
        .unwrap();
    let mut a: Vec<_> = unfiltered.iter().map(|h| h.episode.id.clone()).collect();
    let mut b: Vec<_> = filtered.iter().map(|h| h.episode.id.clone()).collect();
    a.sort();
    b.sort();
    mine.sort();
    assert_eq!(a, mine);
    assert_eq!(b, mine);
    let top3 = mem
        .episodic()
        .search("alpha", &SearchFilters::default(), 3)
        .unwrap();
    assert_eq!(top3.len(), 3);
    assert!(top3.iter().all(|h| mine.contains(&h.episode.id)));
    assert_eq!(
        other
            .episodic()
            .search("alpha", &SearchFilters::default(), 1000)
            .unwrap()
            .len(),
        300
    );
    assert!(
        mem.namespace("empty")
            .unwrap()
            .episodic()
            .search("alpha", &SearchFilters::default(), 10)
            .unwrap()
            .is_empty()
    );
}
