//! Sustained writes under `Durability::Periodic` from several threads, with a
//! watchdog: the shape of workload that used to hang sled 0.34.7 for good
//! (its segment accountant waited for a file truncation queued on an I/O
//! pool whose workers waited on the accountant; sled issue #1412, patched in
//! `vendor/sled`, see `vendor/sled/PATCHES.md`).
//!
//! Short-term overwrites and forgets plus episode records keep sled's
//! segment cleaner freeing segments (including the one at the end of the
//! file, which is what triggers a truncation) while the periodic flusher
//! writes. A hang is not detectable from inside a test that waits forever,
//! so a watchdog thread aborts the process, naming the stalled phase, when no
//! write completes for two minutes (a hang detector, not a timing
//! assertion: a healthy run completes writes every few microseconds).
//!
//! `make test` records 12,000 episodes; `MEMSTRATA_SUSTAINED_RECORDS=200000
//! cargo test --release -p memstrata --test sustained` is the long version.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use memstrata::{Durability, Memory, NewEpisode};
use serde_json::json;

const THREADS: u64 = 4;
const STALL: Duration = Duration::from_secs(120);

fn records() -> u64 {
    std::env::var("MEMSTRATA_SUSTAINED_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12_000)
}

#[test]
fn sustained_periodic_writes_make_progress_and_lose_nothing() {
    let total = records();
    let per_thread = total / THREADS;
    let dir = tempfile::tempdir().unwrap();
    let mem = Memory::builder()
        .path(dir.path())
        .durability(Durability::Periodic(50))
        // A small cache makes sled page out and clean segments sooner.
        .cache_bytes(2 * 1024 * 1024)
        .index_commit_interval(Duration::from_millis(100))
        .open()
        .unwrap();

    let progress = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let progress = progress.clone();
        let done = done.clone();
        thread::spawn(move || {
            let mut last = 0;
            let mut since = Instant::now();
            while !done.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(200));
                let now = progress.load(Ordering::Relaxed);
                if now != last {
                    last = now;
                    since = Instant::now();
                } else if since.elapsed() > STALL {
                    eprintln!(
                        "sustained writes stalled: no write completed for {STALL:?} \
                         after {now} writes (sled deadlock?)"
                    );
                    std::process::abort();
                }
            }
        })
    };

    let body = "the agent compared retrieval strategies for the release checklist \
                and decided to keep the lexical index while measuring recall";
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let mem = mem.clone();
            let progress = progress.clone();
            thread::spawn(move || {
                for i in 0..per_thread {
                    mem.episodic()
                        .record(
                            NewEpisode::new(format!("thread {t} step {i}: {body}"))
                                .content(json!({ "t": t, "i": i, "pad": body.repeat(1 + (i % 4) as usize) }))
                                .tags([format!("t{t}")]),
                        )
                        .unwrap();
                    // Overwrites and forgets leave dead space for the segment cleaner.
                    let key = format!("t{t}-k{}", i % 64);
                    mem.short_term()
                        .store(&key, json!({ "i": i, "pad": body }), None)
                        .unwrap();
                    if i % 3 == 0 {
                        mem.short_term().forget(&key).unwrap();
                    }
                    progress.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    mem.flush().unwrap();
    done.store(true, Ordering::Relaxed);
    watchdog.join().unwrap();

    let expected = per_thread * THREADS;
    assert_eq!(
        mem.admin()
            .status(false, true)
            .unwrap()
            .metrics
            .unwrap()
            .items
            .episodes,
        expected
    );
    drop(mem);

    let mem = Memory::open(dir.path()).unwrap();
    assert_eq!(
        mem.admin()
            .status(false, true)
            .unwrap()
            .metrics
            .unwrap()
            .items
            .episodes,
        expected,
        "every recorded episode survives a clean close and reopen"
    );
    let last = mem.episodic().recent(1).unwrap();
    assert_eq!(last.len(), 1);
}
