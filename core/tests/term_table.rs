//! A segment with many distinct terms indexes and finds every one of them.
//!
//! The vendored tantivy-stacker starts each segment writer's term table at
//! 8,192 entries instead of the 2^19 tantivy asks for, and the table grows
//! as it fills (`vendor/tantivy-stacker/PATCHES.md`). Here one segment
//! (the commit interval is longer than the test) receives 20,000 episodes
//! with a word of their own each, so its table doubles several times while
//! being written; a lost or misplaced entry would make its word find
//! nothing, or another episode. Checked before and after the commit, and
//! after a reopen.

use std::time::Duration;

use memstrata::{Memory, NewEpisode, SearchFilters};

const N: usize = 20_000;

fn word(i: usize) -> String {
    format!("zq{i}x")
}

fn check(mem: &Memory, when: &str) {
    for i in (0..N).step_by(97).chain([N - 1]) {
        let hits = mem
            .episodic()
            .search(&word(i), &SearchFilters::default(), 5)
            .unwrap();
        let found: Vec<&str> = hits.iter().map(|h| h.episode.summary.as_str()).collect();
        assert_eq!(
            found,
            [format!("turn {} {}", i, word(i))],
            "{when}: {}",
            word(i)
        );
    }
}

#[test]
fn every_distinct_term_of_a_large_segment_is_found() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mem = Memory::builder()
            .path(dir.path())
            .index_commit_interval(Duration::from_secs(3600))
            .open()
            .unwrap();
        for chunk in (0..N).collect::<Vec<_>>().chunks(5_000) {
            let batch = chunk
                .iter()
                .map(|&i| NewEpisode::new(format!("turn {} {}", i, word(i))))
                .collect();
            mem.episodic().record_many(batch).unwrap();
        }
        check(&mem, "before the commit");
        mem.flush().unwrap();
        check(&mem, "after the commit");
        drop(mem);
    }
    let mem = Memory::open(dir.path()).unwrap();
    check(&mem, "after a reopen");
}
