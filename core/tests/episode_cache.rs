//! The decoded-episode cache behind `episodic().get/search` never serves stale
//! data: forgotten or replaced episodes are never returned, also with searches
//! racing forgets on other threads, and what the cache hands back is exactly
//! what sled holds (compared against a fresh engine after reopen).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use memstrata::{Memory, NewEpisode, SearchFilters, episodic::Episode};
use serde_json::json;

fn any() -> SearchFilters {
    SearchFilters::default()
}

fn ids(mem: &Memory, q: &str) -> Vec<String> {
    mem.episodic()
        .search(q, &any(), 50)
        .unwrap()
        .into_iter()
        .map(|h| h.episode.id)
        .collect()
}

#[test]
fn forget_then_get_and_search() {
    let mem = Memory::temporary().unwrap();
    let ep = mem.episodic();
    let id = ep
        .record(NewEpisode::new("quokka migration plan").tags(["ops"]))
        .unwrap();
    let keep = ep.record(NewEpisode::new("quokka budget review")).unwrap();
    // Cached by `record` (write-through) and by the search hit and the get.
    assert_eq!(ids(&mem, "quokka").len(), 2);
    assert!(ep.get(&id).unwrap().is_some());

    assert!(ep.forget(&id).unwrap());
    assert_eq!(ep.get(&id).unwrap(), None);
    assert_eq!(ids(&mem, "quokka"), vec![keep.clone()]);
    assert_eq!(ids(&mem, "migration"), Vec::<String>::new());
    assert!(ep.summarize(std::slice::from_ref(&id)).is_err());
    // Forgetting again is a no-op and the other episode is still served.
    assert!(!ep.forget(&id).unwrap());
    assert_eq!(
        ep.get(&keep).unwrap().unwrap().summary,
        "quokka budget review"
    );
}

#[test]
fn namespaces_do_not_share_entries() {
    let mem = Memory::temporary().unwrap();
    let a = mem.namespace("a").unwrap();
    let b = mem.namespace("b").unwrap();
    let id = a
        .episodic()
        .record(NewEpisode::new("narwhal sighting"))
        .unwrap();
    assert!(a.episodic().get(&id).unwrap().is_some());
    assert_eq!(b.episodic().get(&id).unwrap(), None);
    assert!(ids(&b, "narwhal").is_empty());
    assert!(!b.episodic().forget(&id).unwrap());
    assert!(a.episodic().get(&id).unwrap().is_some());
}

#[test]
fn import_replacing_an_episode_is_seen_by_search_and_get() {
    let mem = Memory::temporary().unwrap();
    let ep = mem.episodic();
    let id = ep
        .record(NewEpisode::new("axolotl original wording").content(json!({"v": 1})))
        .unwrap();
    // Warm the cache through every read path.
    assert_eq!(ids(&mem, "axolotl"), vec![id.clone()]);
    assert_eq!(ep.get(&id).unwrap().unwrap().content, json!({"v": 1}));

    let mut out = Vec::new();
    mem.admin().export(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("axolotl original wording"));
    let text = text
        .replace("axolotl original wording", "axolotl replaced wording")
        .replace("{\"v\":1}", "{\"v\":2}");
    mem.admin().import(&mut text.as_bytes()).unwrap();

    let got = ep.get(&id).unwrap().unwrap();
    assert_eq!(got.summary, "axolotl replaced wording");
    assert_eq!(got.content, json!({"v": 2}));
    let hits = ep.search("axolotl", &any(), 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].episode.summary, "axolotl replaced wording");
    assert_eq!(hits[0].episode.content, json!({"v": 2}));
    assert!(ids(&mem, "original").is_empty());
    assert_eq!(ids(&mem, "replaced"), vec![id]);
}

#[test]
fn concurrent_forget_never_resurrects() {
    let mem = Memory::temporary().unwrap();
    let ep = mem.episodic();
    let mut all = Vec::new();
    for i in 0..300 {
        all.push(
            ep.record(NewEpisode::new(format!("pangolin report number {i}")))
                .unwrap(),
        );
    }
    // Ids whose `forget` has returned: from then on no read may return them.
    let forgotten: Arc<Mutex<HashSet<String>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for t in 0..3 {
        let mem = mem.clone();
        let forgotten = Arc::clone(&forgotten);
        let done = Arc::clone(&done);
        let all = all.clone();
        readers.push(std::thread::spawn(move || {
            let ep = mem.episodic();
            let mut i = t;
            while !done.load(Ordering::Acquire) {
                let before: HashSet<String> = forgotten.lock().unwrap().clone();
                for h in ep.search("pangolin report", &any(), 50).unwrap() {
                    assert!(
                        !before.contains(&h.episode.id),
                        "search returned forgotten {}",
                        h.episode.id
                    );
                }
                let id = &all[i % all.len()];
                let before = forgotten.lock().unwrap().contains(id);
                let got = ep.get(id).unwrap();
                assert!(!(before && got.is_some()), "get returned forgotten {id}");
                i += 7;
            }
        }));
    }
    for (n, id) in all.iter().enumerate() {
        if n % 3 != 0 {
            assert!(ep.forget(id).unwrap());
            forgotten.lock().unwrap().insert(id.clone());
        }
        if n % 50 == 0 {
            std::thread::yield_now();
        }
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    let left: HashSet<String> = ids(&mem, "pangolin").into_iter().collect();
    let forgotten = forgotten.lock().unwrap();
    assert!(left.is_disjoint(&forgotten));
    for id in &all {
        assert_eq!(
            ep.get(id).unwrap().is_some(),
            !forgotten.contains(id),
            "{id}"
        );
    }
}

#[test]
fn cached_episodes_equal_stored_ones_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let contents = [
        json!(null),
        json!({"n": 1, "neg": -7, "f": 1.5, "big": u64::MAX, "small": i64::MIN, "z": -0.0}),
        json!({"nested": {"list": [1, "two", 3.25, false, null, {"k": "v"}]}, "a": "ünïcødé ✓"}),
        json!("x".repeat(2000)),
        json!([1.0, 2.0, 1e300, -1e-300]),
    ];
    let mut recorded: Vec<(String, Episode)> = Vec::new();
    let forgotten;
    {
        let mem = Memory::open(dir.path()).unwrap();
        let ep = mem.episodic();
        for (i, c) in contents.iter().enumerate() {
            let id = ep
                .record(
                    NewEpisode::new(format!("okapi entry {i}"))
                        .content(c.clone())
                        .participants(["ann", "bo"])
                        .tags(["t1"])
                        .importance(7),
                )
                .unwrap();
            // Served by the write-through entry.
            recorded.push((id.clone(), ep.get(&id).unwrap().unwrap()));
        }
        forgotten = ep.record(NewEpisode::new("okapi to forget")).unwrap();
        assert_eq!(ids(&mem, "okapi").len(), contents.len() + 1);
        assert!(ep.forget(&forgotten).unwrap());
    }
    let mem = Memory::open(dir.path()).unwrap();
    let ep = mem.episodic();
    for (id, cached) in &recorded {
        let stored = ep.get(id).unwrap().unwrap();
        assert_eq!(&stored, cached, "{id}");
        assert_eq!(stored.content.to_string(), cached.content.to_string());
    }
    assert_eq!(ep.get(&forgotten).unwrap(), None);
    let found = ids(&mem, "okapi");
    assert_eq!(found.len(), contents.len());
    assert!(!found.contains(&forgotten));
}
