//! What a clean close leaves on disk after a write session: sled's file
//! compacted (the close-time checkpoint relocates the pages of sparse
//! segments and truncates the file) and a search index folder holding only
//! the segments its `meta.json` names. Sizes are compared with the data
//! written, never with timings.

use std::collections::HashSet;
use std::path::Path;

use memstrata::{Memory, NewEpisode, SearchFilters};
use serde_json::json;

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

/// A deterministic chat-like line of about 100 characters for episode `i`.
fn line(i: usize) -> String {
    const WORDS: [&str; 12] = [
        "deploy", "build", "failed", "retry", "config", "token", "cache", "server", "request",
        "timeout", "review", "merge",
    ];
    let mut s = format!("#{i}");
    let mut x = i.wrapping_mul(0x9e37_79b9) | 1;
    while s.len() < 95 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push(' ');
        s.push_str(WORDS[x % WORDS.len()]);
    }
    s.truncate(100);
    s
}

/// Segment ids (32 hex digits, no dashes) that `index/meta.json` names.
fn named_segments(store: &Path) -> HashSet<String> {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("index/meta.json")).unwrap()).unwrap();
    meta["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["segment_id"].as_str().unwrap().replace('-', ""))
        .collect()
}

/// Segment ids of the segment files in `index/`.
fn segment_files(store: &Path) -> HashSet<String> {
    std::fs::read_dir(store.join("index"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let id = name.get(..32)?.to_owned();
            (id.bytes().all(|b| b.is_ascii_hexdigit()) && name.as_bytes().get(32) == Some(&b'.'))
                .then_some(id)
        })
        .collect()
}

#[test]
fn closing_after_a_short_episode_ingest_compacts_sled_and_settles_the_index() {
    const N: usize = 30_000;
    let dir = tempfile::tempdir().unwrap();
    let mut ids = Vec::with_capacity(N);
    {
        let mem = Memory::open(dir.path()).unwrap();
        for start in (0..N).step_by(1_000) {
            let batch = (start..start + 1_000)
                .map(|i| NewEpisode::new(line(i)))
                .collect();
            ids.extend(mem.episodic().record_many(batch).unwrap());
        }
    }
    let db = dir.path().join("db/db");
    let closed = file_len(&db);
    // ~100-byte summaries are ~150 live bytes per episode in sled; the
    // ingest writes several times that (node images, the index log), and
    // before the close-time compaction the file kept 2.5-3 times the live
    // bytes. Compacted (it is when above 1.2 times them), it keeps at most
    // 1.5 times them (plus the segment being written and one spare, 512 KiB
    // each).
    let bound = (N as u64) * 225 + (1 << 20);
    assert!(
        closed <= bound,
        "sled's file after close: {closed} bytes for {N} short episodes (bound {bound})"
    );
    // The index folder holds exactly the segments of the durable commit.
    let named = named_segments(dir.path());
    assert!(!named.is_empty());
    assert_eq!(segment_files(dir.path()), named);

    // Everything reads back, and reopening does not grow the store.
    let mem = Memory::open(dir.path()).unwrap();
    for (i, id) in ids.iter().enumerate() {
        let ep = mem.episodic().get(id).unwrap().unwrap();
        assert_eq!(ep.summary, line(i));
    }
    let hits = mem
        .episodic()
        .search("deploy", &SearchFilters::default(), 10)
        .unwrap();
    assert_eq!(hits.len(), 10);
    drop(mem);
    assert!(file_len(&db) <= closed.max(bound));
}

#[test]
fn closing_after_deletes_gives_their_space_back_and_keeps_the_rest() {
    const N: usize = 3_000;
    const MORE: usize = 2_100;
    let dir = tempfile::tempdir().unwrap();
    let value = |i: usize| json!(format!("{i:06}-{}", "x".repeat(2_000)));
    {
        let mem = Memory::open(dir.path()).unwrap();
        for i in 0..N {
            mem.short_term()
                .store(&format!("k{i}"), value(i), None)
                .unwrap();
        }
    }
    {
        let mem = Memory::open(dir.path()).unwrap();
        // Forget nine in ten, then write more (the session's log growth
        // arms the close-time checkpoint).
        for i in (0..N).filter(|i| i % 10 != 0) {
            assert!(mem.short_term().forget(&format!("k{i}")).unwrap());
        }
        for i in N..N + MORE {
            mem.short_term()
                .store(&format!("k{i}"), value(i), None)
                .unwrap();
        }
    }
    let closed = file_len(&dir.path().join("db/db"));
    // Live: 2,400 values of ~2 KB. Without giving the forgotten values'
    // space back the file would hold the 5,100 written.
    let live = ((N / 10 + MORE) * 2_000) as u64;
    let bound = live * 3 / 2 + (1 << 20);
    assert!(
        closed <= bound,
        "file after deletes and close: {closed} bytes for {live} live (bound {bound})"
    );
    let mem = Memory::open(dir.path()).unwrap();
    for i in 0..N + MORE {
        let got = mem.short_term().retrieve(&format!("k{i}")).unwrap();
        if i < N && i % 10 != 0 {
            assert_eq!(got, None, "k{i} was forgotten");
        } else {
            assert_eq!(got, Some(value(i)), "k{i} was kept");
        }
    }
}
