//! Forgetting: a forgotten, deleted or expired item never comes back in any
//! read, search or export — after restart and after every optimize level.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use memstrata::{
    EncryptionKey, ManualClock, Memory, NewEpisode, SearchFilters, VectorQuery,
    admin::OptimizeLevel,
};
use serde_json::json;

const MARK: &str = "zebracorn";

fn open(path: &Path, clock: &Arc<ManualClock>, keyed: bool) -> Memory {
    let mut b = Memory::builder().path(path).clock(clock.clone());
    if keyed {
        b = b.encryption_key(EncryptionKey::new([0x17; 32]));
    }
    b.open().unwrap()
}

fn export_text(mem: &Memory) -> String {
    let mut out = Vec::new();
    mem.admin().export(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn assert_gone(mem: &Memory, ep_id: &str, session_id: &str, when: &str) {
    let ctx = mem.namespace("default").unwrap();
    assert_eq!(
        ctx.short_term().retrieve("forgotten").unwrap(),
        None,
        "{when}: forgotten key"
    );
    assert_eq!(
        ctx.short_term().retrieve("expiring").unwrap(),
        None,
        "{when}: expired key"
    );
    assert!(
        ctx.short_term()
            .keys("")
            .unwrap()
            .iter()
            .all(|k| k == "kept"),
        "{when}: keys"
    );
    assert!(
        ctx.episodic().get(ep_id).unwrap().is_none(),
        "{when}: episode get"
    );
    assert!(
        ctx.episodic()
            .search(MARK, &SearchFilters::default(), 100)
            .unwrap()
            .is_empty(),
        "{when}: episode search"
    );
    assert!(
        ctx.episodic()
            .recent(100)
            .unwrap()
            .iter()
            .all(|e| e.id != ep_id),
        "{when}: recent episodes"
    );
    assert!(
        ctx.semantic().retrieve("secret").unwrap().is_none(),
        "{when}: knowledge"
    );
    assert!(
        ctx.semantic().history("secret").unwrap().is_empty(),
        "{when}: knowledge history"
    );
    assert!(
        ctx.semantic().query(MARK, 100).unwrap().is_empty(),
        "{when}: knowledge query"
    );
    // Vector search: the forgotten episode's vector is the query itself.
    let near = VectorQuery::embedding(vec![1.0, 0.0, 0.0]);
    let hits = ctx
        .episodic()
        .search_hybrid("", &SearchFilters::default(), 100, &near)
        .unwrap();
    assert!(
        hits.iter().all(|h| h.episode.id != ep_id),
        "{when}: episode vector search"
    );
    assert_eq!(hits.len(), 1, "{when}: kept episode by vector");
    assert!(
        ctx.semantic()
            .query_hybrid("", 100, &near)
            .unwrap()
            .is_empty(),
        "{when}: knowledge vector search"
    );
    assert!(
        ctx.sessions().restore(session_id, None).is_err(),
        "{when}: deleted session restore"
    );
    assert!(
        ctx.sessions()
            .list()
            .unwrap()
            .iter()
            .all(|s| s.session_id != session_id),
        "{when}: session list"
    );
    let text = export_text(mem);
    assert!(
        !text.contains(MARK),
        "{when}: export still holds forgotten data"
    );
    // What was kept is still there.
    assert_eq!(
        ctx.short_term().retrieve("kept").unwrap(),
        Some(json!("safe")),
        "{when}: kept key"
    );
    assert_eq!(
        ctx.episodic()
            .search("keeper", &SearchFilters::default(), 10)
            .unwrap()
            .len(),
        1,
        "{when}: kept episode"
    );
}

#[test]
fn forgotten_items_never_come_back() {
    forgetting_run(false);
}

/// The same on an encrypted store (sealed records, sealed search index).
#[test]
fn forgotten_items_never_come_back_sealed() {
    forgetting_run(true);
}

fn forgetting_run(keyed: bool) {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::starting_now());
    let (ep_id, session_id);
    {
        let mem = open(&dir.path(), &clock, keyed);
        mem.short_term().store("kept", json!("safe"), None).unwrap();
        mem.short_term()
            .store("forgotten", json!(MARK), None)
            .unwrap();
        mem.short_term()
            .store("expiring", json!(MARK), Some(Duration::from_secs(5)))
            .unwrap();
        mem.episodic()
            .record(NewEpisode::new("keeper episode").embedding(vec![0.0, 1.0, 0.0]))
            .unwrap();
        ep_id = mem
            .episodic()
            .record(
                NewEpisode::new(format!("{MARK} sighting"))
                    .tags([MARK])
                    .embedding(vec![1.0, 0.0, 0.0]),
            )
            .unwrap();
        mem.semantic()
            .store_with_embedding("secret", json!({"v": MARK}), Some(vec![1.0, 0.0, 0.0]))
            .unwrap();
        // Load the vector index before forgetting, so removal from a live index is tested too.
        let near = VectorQuery::embedding(vec![1.0, 0.0, 0.0]);
        assert_eq!(
            mem.episodic()
                .search_hybrid("", &SearchFilters::default(), 10, &near)
                .unwrap()[0]
                .episode
                .id,
            ep_id
        );
        assert_eq!(mem.semantic().query_hybrid("", 10, &near).unwrap().len(), 1);
        mem.semantic().update("secret", json!({"w": MARK})).unwrap();
        let s = mem.sessions().create(MARK, json!({"m": MARK})).unwrap();
        session_id = s.session_id.clone();
        for level in 0..=3 {
            mem.sessions()
                .save(
                    &session_id,
                    json!({"notes": format!("{MARK} {level}")}),
                    level,
                )
                .unwrap();
        }
        mem.flush().unwrap();

        assert!(mem.short_term().forget("forgotten").unwrap());
        assert!(mem.episodic().forget(&ep_id).unwrap());
        assert!(mem.semantic().forget("secret").unwrap());
        assert!(mem.sessions().delete(&session_id).unwrap());
        clock.advance(Duration::from_secs(6));
        assert_gone(&mem, &ep_id, &session_id, "immediately");
    }
    {
        let mem = open(&dir.path(), &clock, keyed);
        assert_gone(&mem, &ep_id, &session_id, "after restart");
        for level in [
            OptimizeLevel::Light,
            OptimizeLevel::Medium,
            OptimizeLevel::Aggressive,
        ] {
            mem.admin().optimize(level, None).unwrap();
            assert_gone(
                &mem,
                &ep_id,
                &session_id,
                &format!("after optimize({})", level.as_str()),
            );
        }
    }
    // Index rebuilt from sled must not resurrect anything either.
    // (A PostgreSQL store's index is a local copy rebuilt on every open.)
    if !common::backend_is_postgres() {
        std::fs::remove_dir_all(dir.join("index")).unwrap();
    }
    let mem = open(&dir.path(), &clock, keyed);
    assert_gone(&mem, &ep_id, &session_id, "after index rebuild");
}

/// Episodes evicted by a retention policy (on write, when the policy is set,
/// and by optimize for `max_age`) never come back either: not by get, search
/// (text or vector), recent or export, after restart, after every optimize
/// level and after an index rebuild. Their audit entries hold no user text.
#[test]
fn evicted_items_never_come_back() {
    evicted_run(false);
}

/// The same on an encrypted store.
#[test]
fn evicted_items_never_come_back_sealed() {
    evicted_run(true);
}

fn assert_evicted(mem: &Memory, evicted: &[String], kept: usize, when: &str) {
    let ctx = mem.namespace("default").unwrap();
    for id in evicted {
        assert!(
            ctx.episodic().get(id).unwrap().is_none(),
            "{when}: get {id}"
        );
    }
    assert!(
        ctx.episodic()
            .search(MARK, &SearchFilters::default(), 100)
            .unwrap()
            .is_empty(),
        "{when}: search"
    );
    let near = VectorQuery::embedding(vec![1.0, 0.0, 0.0]);
    let hits = ctx
        .episodic()
        .search_hybrid("", &SearchFilters::default(), 100, &near)
        .unwrap();
    assert!(
        hits.iter().all(|h| !evicted.contains(&h.episode.id)),
        "{when}: vector search"
    );
    let recent = ctx.episodic().recent(100).unwrap();
    assert!(
        recent.iter().all(|e| !evicted.contains(&e.id)),
        "{when}: recent"
    );
    assert_eq!(recent.len(), kept, "{when}: kept episodes");
    assert!(!export_text(mem).contains(MARK), "{when}: export");
    let audit = ctx.contexts().evictions(None, 100).unwrap();
    assert_eq!(audit.len(), evicted.len(), "{when}: audit entries");
    for a in &audit {
        assert!(evicted.contains(&a.id), "{when}: audited {}", a.id);
        assert!(!serde_json::to_string(a).unwrap().contains(MARK));
    }
    let status = mem.admin().status(false, false).unwrap();
    assert_eq!(status.retention[0].evicted, evicted.len() as u64, "{when}");
}

fn evicted_run(keyed: bool) {
    use memstrata::retention::Retention;
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::starting_now());
    let mut evicted = Vec::new();
    {
        let mem = open(&dir.path(), &clock, keyed);
        let now = memstrata::Clock::now(&*clock);
        for i in 0..3 {
            mem.episodic()
                .record(
                    NewEpisode::new(format!("keeper episode {i}"))
                        .importance(9)
                        .embedding(vec![0.0, 1.0, 0.0]),
                )
                .unwrap();
        }
        // Load the vector index first, so removal from a live index is tested too.
        let near = VectorQuery::embedding(vec![1.0, 0.0, 0.0]);
        mem.episodic()
            .search_hybrid("", &SearchFilters::default(), 10, &near)
            .unwrap();
        evicted.push(
            mem.episodic()
                .record(
                    NewEpisode::new(format!("{MARK} first sighting"))
                        .importance(1)
                        .embedding(vec![1.0, 0.0, 0.0]),
                )
                .unwrap(),
        );
        // Evicted when the policy is set (4 episodes, at most 3).
        mem.contexts()
            .set_retention(
                Retention::new()
                    .max_episodes(3)
                    .max_age(Duration::from_secs(86_400)),
                None,
            )
            .unwrap();
        // Evicted on write (lowest utility: importance 1, older than the keepers).
        evicted.push(
            mem.episodic()
                .record(
                    NewEpisode::new(format!("{MARK} second sighting"))
                        .importance(1)
                        .tags([MARK])
                        .timestamp(now - chrono::Duration::hours(20))
                        .embedding(vec![1.0, 0.0, 0.0]),
                )
                .unwrap(),
        );
        assert_evicted(&mem, &evicted, 3, "after eviction on write");
    }
    {
        let mem = open(&dir.path(), &clock, keyed);
        assert_evicted(&mem, &evicted, 3, "after restart");
        for level in [
            OptimizeLevel::Light,
            OptimizeLevel::Medium,
            OptimizeLevel::Aggressive,
        ] {
            mem.admin().optimize(level, None).unwrap();
            assert_evicted(
                &mem,
                &evicted,
                3,
                &format!("after optimize({})", level.as_str()),
            );
        }
    }
    if !common::backend_is_postgres() {
        std::fs::remove_dir_all(dir.join("index")).unwrap();
    }
    let mem = open(&dir.path(), &clock, keyed);
    assert_evicted(&mem, &evicted, 3, "after index rebuild");
    // Past max_age: optimize evicts the keepers too, and they stay gone.
    clock.advance(Duration::from_secs(2 * 86_400));
    let report = mem.admin().optimize(OptimizeLevel::Light, None).unwrap();
    assert_eq!(
        report.optimization_details["retention"]["episodes_evicted"],
        3
    );
    drop(mem);
    let mem = open(&dir.path(), &clock, keyed);
    assert!(mem.episodic().recent(100).unwrap().is_empty());
    assert!(
        mem.episodic()
            .search("keeper", &SearchFilters::default(), 100)
            .unwrap()
            .is_empty()
    );
}
