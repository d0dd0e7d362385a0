//! Many threads on one engine: nothing lost, invariants hold, no deadlock.

use std::sync::Arc;
use std::thread;

use memstrata::{Memory, NewEpisode, SearchFilters};
use serde_json::json;

#[test]
fn threads_mixing_operations_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mem = Memory::open(dir.path()).unwrap();
    let threads = 8;
    let per = 60;
    for ctx in ["even", "odd"] {
        mem.namespace(ctx)
            .unwrap()
            .semantic()
            .store("shared", json!({}))
            .unwrap();
    }
    let barrier = Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let mem = mem
                .namespace(if t % 2 == 0 { "even" } else { "odd" })
                .unwrap();
            let barrier = barrier.clone();
            thread::spawn(move || {
                barrier.wait();
                for i in 0..per {
                    mem.short_term()
                        .store(&format!("t{t}-{i}"), json!(i), None)
                        .unwrap();
                    mem.episodic()
                        .record(
                            NewEpisode::new(format!("thread {t} step {i}")).tags([format!("t{t}")]),
                        )
                        .unwrap();
                    // Concurrent merge-patch updates on one shared key: each adds its own field.
                    let sem = mem.semantic();
                    sem.update("shared", json!({ format!("t{t}-{i}"): i }))
                        .unwrap();
                    mem.working().focus(&format!("t{t}")).unwrap();
                    if i % 10 == 0 {
                        let hits = mem
                            .episodic()
                            .search(
                                &format!("thread {t}"),
                                &SearchFilters {
                                    tags: vec![format!("t{t}")],
                                    ..Default::default()
                                },
                                1000,
                            )
                            .unwrap();
                        assert!(hits.len() > i, "read-your-writes under concurrency");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    for (ctx, ts) in [("even", [0, 2, 4, 6]), ("odd", [1, 3, 5, 7])] {
        let m = mem.namespace(ctx).unwrap();
        let shared = m.semantic().get("shared").unwrap().unwrap();
        let obj = shared.knowledge.as_object().unwrap();
        for t in ts {
            for i in 0..per {
                assert_eq!(
                    m.short_term().retrieve(&format!("t{t}-{i}")).unwrap(),
                    Some(json!(i))
                );
                assert_eq!(
                    obj.get(&format!("t{t}-{i}")),
                    Some(&json!(i)),
                    "no lost merge-patch update"
                );
            }
            let f = SearchFilters {
                tags: vec![format!("t{t}")],
                ..Default::default()
            };
            assert_eq!(m.episodic().search("", &f, 1000).unwrap().len(), per);
        }
        let focus = m.working().current_focus().unwrap();
        assert_eq!(focus.len(), 4);
    }
}
