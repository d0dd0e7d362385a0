//! sled's I/O threads end when the last store of the process closes, and
//! start again with the next store's writes. Each of those threads keeps a
//! thread cache of freed heap chunks (glibc's tcache) and an epoch bag of
//! deferred garbage for as long as it lives, which pinned megabytes of heap
//! after `close()` (docs/benchmarks/footprint.md, *Sixth pass*).
//!
//! One test in this file, so no other store of the test process is open
//! while it checks the thread count (each file under `tests/` is its own
//! process).

use memstrata::{Memory, NewEpisode, SearchFilters};

fn write(mem: &Memory, from: usize, n: usize) -> Vec<String> {
    let batch: Vec<NewEpisode> = (from..from + n)
        .map(|i| NewEpisode::new(format!("episode {i} about deploy number {}", i * 7)))
        .collect();
    let ids = mem.episodic().record_many(batch).unwrap();
    mem.flush().unwrap();
    ids
}

fn check(mem: &Memory, ids: &[String], from: usize) {
    for (k, id) in ids.iter().enumerate() {
        let ep = mem.episodic().get(id).unwrap().unwrap();
        assert_eq!(
            ep.summary,
            format!(
                "episode {} about deploy number {}",
                from + k,
                (from + k) * 7
            )
        );
    }
}

#[test]
fn the_io_threads_end_with_the_last_store_and_start_again_with_the_next() {
    let a_dir = tempfile::tempdir().unwrap();
    let b_dir = tempfile::tempdir().unwrap();

    // One store: its writes start the threads, its close ends them.
    let mem = Memory::open(a_dir.path()).unwrap();
    let first = write(&mem, 0, 2_000);
    assert!(sled::io_threads() > 0, "writes run on sled's I/O threads");
    drop(mem);
    assert_eq!(
        sled::io_threads(),
        0,
        "the last close ends sled's I/O threads"
    );

    // Two stores: closing one keeps the threads for the other, whose writes
    // go on; closing the second ends them.
    let a = Memory::open(a_dir.path()).unwrap();
    check(&a, &first, 0);
    let b = Memory::open(b_dir.path()).unwrap();
    let more = write(&a, 2_000, 1_000);
    let in_b = write(&b, 0, 1_000);
    assert!(
        sled::io_threads() > 0,
        "the next writes start the threads again"
    );
    drop(a);
    assert!(sled::io_threads() > 0, "another store is still open");
    let later = write(&b, 1_000, 1_000);
    check(&b, &in_b, 0);
    check(&b, &later, 1_000);
    drop(b);
    assert_eq!(sled::io_threads(), 0);

    // Everything written through threads that ended and started again is there.
    let a = Memory::open(a_dir.path()).unwrap();
    check(&a, &first, 0);
    check(&a, &more, 2_000);
    let hits = a
        .episodic()
        .search("deploy", &SearchFilters::default(), 5)
        .unwrap();
    assert_eq!(hits.len(), 5);
    drop(a);
    let b = Memory::open(b_dir.path()).unwrap();
    check(&b, &in_b, 0);
    check(&b, &later, 1_000);
}
