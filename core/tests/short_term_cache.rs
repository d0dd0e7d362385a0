//! The decoded short-term cache behind `short_term().retrieve/entry` and
//! `context_retrieve` never serves stale data: every write path (store,
//! overwrite, forget, TTL expiry, the TTL sweep, import, context switches)
//! is seen by the next read, also with writers and readers racing on the same
//! keys, and the cache stays within its byte budget.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memstrata::{ManualClock, Memory, admin::OptimizeLevel};
use serde_json::{Value, json};

fn open(path: &Path, clock: &Arc<ManualClock>) -> Memory {
    Memory::builder()
        .path(path)
        .clock(clock.clone())
        .open()
        .unwrap()
}

#[test]
fn store_overwrite_forget_then_retrieve() {
    let mem = Memory::temporary().unwrap();
    let st = mem.short_term();
    st.store("k", json!({"v": 1}), None).unwrap();
    // Miss then hit: both must give the stored value.
    assert_eq!(st.retrieve("k").unwrap(), Some(json!({"v": 1})));
    assert_eq!(st.retrieve("k").unwrap(), Some(json!({"v": 1})));
    assert!(st.cache_usage().0 >= 1, "a retrieve fills the cache");

    st.store("k", json!({"v": 2, "list": [1, 2, 3]}), None)
        .unwrap();
    assert_eq!(
        st.retrieve("k").unwrap(),
        Some(json!({"v": 2, "list": [1, 2, 3]}))
    );
    let entry = st.entry("k").unwrap().unwrap();
    assert_eq!(entry.value, json!({"v": 2, "list": [1, 2, 3]}));
    assert_eq!(entry.expires_at, None);
    assert_eq!(
        mem.contexts().retrieve("k", None).unwrap().unwrap().value,
        json!({"v": 2, "list": [1, 2, 3]})
    );

    // A caller mutating what it got back does not change what is cached.
    let mut got = st.retrieve("k").unwrap().unwrap();
    got["v"] = json!(99);
    assert_eq!(st.retrieve("k").unwrap().unwrap()["v"], json!(2));

    assert!(st.forget("k").unwrap());
    assert_eq!(st.retrieve("k").unwrap(), None);
    assert_eq!(st.entry("k").unwrap(), None);
    assert_eq!(mem.contexts().retrieve("k", None).unwrap(), None);
    assert!(!st.forget("k").unwrap());

    // Stored again after the forget.
    mem.contexts()
        .store("k", json!("back"), None, None)
        .unwrap();
    assert_eq!(st.retrieve("k").unwrap(), Some(json!("back")));
}

/// The cache holds records packed (timestamps and a compact form of the
/// value); a hit must hand back exactly what the store holds.
#[test]
fn a_hit_gives_the_stored_value_and_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let mem = open(dir.path(), &clock);
    let st = mem.short_term();
    let value = json!({
        "text": "héllo \u{1F600} \"quoted\"\n",
        "big": u64::MAX,
        "neg": i64::MIN,
        "float": -2.5,
        "whole_float": 3.0,
        "flags": [true, false, null],
        "nested": {"deep": [[1, {"x": []}], {}], "": "empty key"},
    });
    let stored = st
        .store("k", value.clone(), Some(Duration::from_secs(60)))
        .unwrap();
    st.store("plain", json!(7), None).unwrap();
    // The first read fills the cache, the second is served from it.
    for _ in 0..2 {
        let entry = st.entry("k").unwrap().unwrap();
        assert_eq!(entry, stored);
        assert!(entry.expires_at.is_some());
        assert!(entry.value["whole_float"].is_f64());
        assert!(entry.value["big"].is_u64() && entry.value["neg"].is_i64());
        assert_eq!(st.retrieve("k").unwrap(), Some(value.clone()));
        let plain = st.entry("plain").unwrap().unwrap();
        assert_eq!((plain.value, plain.expires_at), (json!(7), None));
    }
    assert!(st.cache_usage().0 >= 2, "both records cached");
    assert_eq!(
        mem.contexts().retrieve("k", None).unwrap().unwrap().value,
        value
    );
}

#[test]
fn ttl_is_checked_on_every_hit_and_the_sweep_invalidates() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let mem = open(dir.path(), &clock);
    let st = mem.short_term();
    st.store("brief", json!("soon gone"), Some(Duration::from_secs(10)))
        .unwrap();
    st.store("kept", json!("stays"), Some(Duration::from_secs(10)))
        .unwrap();
    // Cached while valid.
    assert_eq!(st.retrieve("brief").unwrap(), Some(json!("soon gone")));
    assert_eq!(st.retrieve("kept").unwrap(), Some(json!("stays")));
    // Overwritten without a TTL: the cached TTL must not survive the overwrite.
    st.store("kept", json!("stays forever"), None).unwrap();
    assert_eq!(st.retrieve("kept").unwrap(), Some(json!("stays forever")));

    clock.advance(Duration::from_secs(9));
    assert_eq!(st.retrieve("brief").unwrap(), Some(json!("soon gone")));
    clock.advance(Duration::from_secs(1));
    // Expired while cached: never returned by any read path.
    assert_eq!(st.retrieve("brief").unwrap(), None);
    assert_eq!(st.entry("brief").unwrap(), None);
    assert_eq!(mem.contexts().retrieve("brief", None).unwrap(), None);
    assert_eq!(st.keys("").unwrap(), vec!["kept".to_string()]);
    assert_eq!(st.retrieve("kept").unwrap(), Some(json!("stays forever")));

    // The sweep removes it from the store and the cache; a new value is served.
    mem.admin().optimize(OptimizeLevel::Light, None).unwrap();
    assert_eq!(st.retrieve("brief").unwrap(), None);
    st.store("brief", json!("renewed"), Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(st.retrieve("brief").unwrap(), Some(json!("renewed")));

    // A record cached before the sweep ran is gone after it.
    st.store("swept", json!(1), Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(st.retrieve("swept").unwrap(), Some(json!(1)));
    clock.advance(Duration::from_secs(6));
    mem.admin().optimize(OptimizeLevel::Light, None).unwrap();
    assert_eq!(st.retrieve("swept").unwrap(), None);
    drop(st);
    drop(mem);
    // And the store agrees after reopen (nothing expired came back).
    let mem = open(dir.path(), &clock);
    let st = mem.short_term();
    assert_eq!(st.retrieve("swept").unwrap(), None);
    assert_eq!(st.retrieve("brief").unwrap(), Some(json!("renewed")));
    assert_eq!(st.retrieve("kept").unwrap(), Some(json!("stays forever")));
}

#[test]
fn contexts_do_not_share_entries_and_switching_keeps_short_term() {
    let mem = Memory::temporary().unwrap();
    let a = mem.namespace("a").unwrap();
    let b = mem.namespace("b").unwrap();
    a.short_term().store("k", json!("in a"), None).unwrap();
    assert_eq!(a.short_term().retrieve("k").unwrap(), Some(json!("in a")));
    assert_eq!(b.short_term().retrieve("k").unwrap(), None);
    b.short_term().store("k", json!("in b"), None).unwrap();
    assert_eq!(a.short_term().retrieve("k").unwrap(), Some(json!("in a")));
    assert_eq!(b.short_term().retrieve("k").unwrap(), Some(json!("in b")));
    assert!(b.short_term().forget("k").unwrap());
    assert_eq!(b.short_term().retrieve("k").unwrap(), None);
    assert_eq!(a.short_term().retrieve("k").unwrap(), Some(json!("in a")));
    // `context_store` into a named context is seen by that context's handle.
    mem.contexts()
        .store("k", json!("b again"), None, Some("b"))
        .unwrap();
    assert_eq!(
        b.short_term().retrieve("k").unwrap(),
        Some(json!("b again"))
    );

    // Leaving a context without preserving it clears its working memory, not
    // its short-term layer (documented); the cached value stays the stored one.
    a.switch_context("elsewhere", false).unwrap();
    assert_eq!(a.short_term().retrieve("k").unwrap(), None);
    a.switch_context("a", true).unwrap();
    assert_eq!(a.short_term().retrieve("k").unwrap(), Some(json!("in a")));
}

#[test]
fn import_replacing_a_cached_value_is_seen() {
    let mem = Memory::temporary().unwrap();
    let st = mem.short_term();
    st.store("k", json!({"v": "exported"}), None).unwrap();
    st.store("gone", json!(1), None).unwrap();
    let mut out = Vec::new();
    mem.admin().export(&mut out).unwrap();

    st.store("k", json!({"v": "changed after export"}), None)
        .unwrap();
    assert_eq!(
        st.retrieve("k").unwrap(),
        Some(json!({"v": "changed after export"}))
    );
    assert!(st.forget("gone").unwrap());
    assert_eq!(st.retrieve("gone").unwrap(), None);

    mem.admin().import(&mut out.as_slice()).unwrap();
    // Import replaces records with the same key: both reads see the imported ones.
    assert_eq!(st.retrieve("k").unwrap(), Some(json!({"v": "exported"})));
    assert_eq!(st.retrieve("gone").unwrap(), Some(json!(1)));
    assert_eq!(
        st.entry("k").unwrap().unwrap().value,
        json!({"v": "exported"})
    );
}

/// Writers on the same keys, readers reading them: a reader never sees a value
/// older than one whose `store` returned before the read started. Each writer
/// writes `{"w": w, "n": n}` with `n` increasing, so a value `(w, n)` cannot be
/// in the store once `(w, n' > n)` was acknowledged (writer `w` never writes it
/// again); other writers' values may legitimately win the race in between.
#[test]
fn concurrent_writers_and_readers_never_read_stale() {
    const KEYS: usize = 6;
    const WRITERS: usize = 3;
    const READERS: usize = 3;
    const WRITES: u64 = 400;
    let mem = Memory::temporary().unwrap();
    // acked[key][writer]: the latest `n` of that writer acknowledged on that key.
    let acked: Arc<Vec<Vec<AtomicU64>>> = Arc::new(
        (0..KEYS)
            .map(|_| (0..WRITERS).map(|_| AtomicU64::new(0)).collect())
            .collect(),
    );
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for t in 0..READERS {
        let (mem, acked, done, reads) = (
            mem.clone(),
            Arc::clone(&acked),
            Arc::clone(&done),
            Arc::clone(&reads),
        );
        readers.push(std::thread::spawn(move || {
            let st = mem.short_term();
            let mut i = t;
            while !done.load(Ordering::Acquire) {
                let k = i % KEYS;
                let before: Vec<u64> = acked[k].iter().map(|a| a.load(Ordering::Acquire)).collect();
                let got = if i % 2 == 0 {
                    st.retrieve(&format!("key{k}")).unwrap()
                } else {
                    st.entry(&format!("key{k}")).unwrap().map(|e| e.value)
                };
                if let Some(v) = got {
                    let w = v["w"].as_u64().unwrap() as usize;
                    let n = v["n"].as_u64().unwrap();
                    assert!(
                        n >= before[w],
                        "key{k}: read ({w}, {n}) after ({w}, {}) was acknowledged",
                        before[w]
                    );
                } else {
                    assert!(
                        before.iter().all(|&n| n == 0),
                        "key{k}: read nothing after a store was acknowledged"
                    );
                }
                reads.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        }));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (mem, acked) = (mem.clone(), Arc::clone(&acked));
        writers.push(std::thread::spawn(move || {
            let st = mem.short_term();
            for n in 1..=WRITES {
                let k = (n as usize + w) % KEYS;
                st.store(&format!("key{k}"), json!({"w": w, "n": n}), None)
                    .unwrap();
                acked[k][w].store(n, Ordering::Release);
                if n % 64 == 0 {
                    std::thread::yield_now();
                }
            }
        }));
    }
    for h in writers {
        h.join().unwrap();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
    // Quiescent: what the cache serves is what the store holds (a fresh engine reads it).
    let path = mem.path();
    let served: Vec<Option<Value>> = (0..KEYS)
        .map(|k| mem.short_term().retrieve(&format!("key{k}")).unwrap())
        .collect();
    let mut out = Vec::new();
    mem.admin().export(&mut out).unwrap();
    let fresh = Memory::temporary().unwrap();
    fresh.admin().import(&mut out.as_slice()).unwrap();
    for (k, v) in served.iter().enumerate() {
        assert!(v.is_some(), "key{k}");
        assert_eq!(
            &fresh.short_term().retrieve(&format!("key{k}")).unwrap(),
            v,
            "key{k} at {}",
            path.display()
        );
    }
}

/// Readers filling the cache while forgets and re-stores race them: after the
/// forget returned, the forgotten value is never served.
#[test]
fn concurrent_forget_never_resurrects() {
    let mem = Memory::temporary().unwrap();
    let st = mem.short_term();
    for i in 0..200 {
        st.store(&format!("k{i}"), json!(i), None).unwrap();
    }
    let forgotten: Arc<Mutex<Vec<bool>>> = Arc::new(Mutex::new(vec![false; 200]));
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for t in 0..3 {
        let (mem, forgotten, done) = (mem.clone(), Arc::clone(&forgotten), Arc::clone(&done));
        readers.push(std::thread::spawn(move || {
            let st = mem.short_term();
            let mut i = t;
            while !done.load(Ordering::Acquire) {
                let k = i % 200;
                let gone = forgotten.lock().unwrap()[k];
                let got = st.retrieve(&format!("k{k}")).unwrap();
                assert!(!(gone && got.is_some()), "k{k} served after its forget");
                if let Some(v) = got {
                    assert_eq!(v, json!(k));
                }
                i += 7;
            }
        }));
    }
    for i in 0..200 {
        if i % 3 != 0 {
            assert!(st.forget(&format!("k{i}")).unwrap());
            forgotten.lock().unwrap()[i] = true;
        }
        if i % 25 == 0 {
            std::thread::yield_now();
        }
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    let forgotten = forgotten.lock().unwrap();
    for (i, gone) in forgotten.iter().enumerate() {
        assert_eq!(
            st.retrieve(&format!("k{i}")).unwrap().is_none(),
            *gone,
            "k{i}"
        );
    }
}

#[test]
fn cache_stays_within_its_budget() {
    let mem = Memory::temporary().unwrap();
    let st = mem.short_term();
    let (_, _, budget) = st.cache_usage();
    assert!(budget > 0, "the cache is on for a sled store");
    // About three times the budget of decoded values, each read twice.
    let big = "x".repeat(6000);
    let n = 3 * budget / 6000;
    for i in 0..n {
        st.store(&format!("k{i}"), json!({"i": i, "pad": big}), None)
            .unwrap();
    }
    for round in 0..2 {
        for i in 0..n {
            let v = st.retrieve(&format!("k{i}")).unwrap().unwrap();
            assert_eq!(v["i"], json!(i), "round {round}");
            let (_, bytes, _) = st.cache_usage();
            assert!(bytes <= budget, "{bytes} > {budget} after k{i}");
        }
    }
    let (entries, bytes, _) = st.cache_usage();
    assert!(entries > 0 && entries < n, "{entries} of {n}");
    assert!(bytes <= budget);
    // A value too large to cache is still served, and stays correct.
    let huge = json!({"pad": "y".repeat(budget / 8)});
    st.store("huge", huge.clone(), None).unwrap();
    assert_eq!(st.retrieve("huge").unwrap(), Some(huge.clone()));
    assert_eq!(st.retrieve("huge").unwrap(), Some(huge));
    assert!(st.cache_usage().1 <= budget);
}
