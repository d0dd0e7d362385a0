//! Searches see index changes not yet committed through the in-memory
//! overlay (`core/src/search/index/overlay.rs`), without a commit, and rank them as
//! the committed index would. Real sled, real tantivy, no timing assertions.
use std::time::Duration;

use memstrata::{Memory, NewEpisode, SearchFilters};
use serde_json::json;

fn open(dir: &std::path::Path) -> Memory {
    // No timer commit during the test: only searches (or flush) could commit.
    Memory::builder()
        .path(dir)
        .index_commit_interval(Duration::from_secs(3600))
        .open()
        .unwrap()
}

fn index_stats(mem: &Memory) -> memstrata::admin::IndexStats {
    mem.admin()
        .status(false, true)
        .unwrap()
        .metrics
        .unwrap()
        .index
}

fn episode_hits(mem: &Memory, q: &str, f: &SearchFilters) -> Vec<(String, f32)> {
    mem.episodic()
        .search(q, f, 50)
        .unwrap()
        .into_iter()
        .map(|h| (h.episode.id, h.score))
        .collect()
}

fn knowledge_hits(mem: &Memory, q: &str) -> Vec<(String, f32)> {
    mem.semantic()
        .query(q, 50)
        .unwrap()
        .into_iter()
        .map(|h| (h.key, h.score))
        .collect()
}

/// Same hits with the same scores, best first (documents with equal scores,
/// here those with identical text, may come in either order).
fn assert_same_ranking(before: &[(String, f32)], after: &[(String, f32)]) {
    let sorted = |v: &[(String, f32)]| {
        let mut ids: Vec<String> = v.iter().map(|(i, _)| i.clone()).collect();
        ids.sort();
        ids
    };
    assert_eq!(sorted(before), sorted(after), "different hits");
    for (id, a) in before {
        let b = after.iter().find(|(i, _)| i == id).unwrap().1;
        assert!(
            (a - b).abs() <= 1e-4 * a.abs().max(1.0),
            "score of {id}: {a} from the overlay, {b} after the commit"
        );
    }
    for v in [before, after] {
        assert!(
            v.windows(2).all(|w| w[0].1 >= w[1].1),
            "not best first: {v:?}"
        );
    }
}

#[test]
fn searches_see_uncommitted_writes_without_making_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mem = open(dir.path());
    assert_eq!(index_stats(&mem).segments, 0);
    let mut ids = Vec::new();
    for i in 0..30 {
        ids.push(
            mem.episodic()
                .record(NewEpisode::new(format!("overlay note {i} about caching")))
                .unwrap(),
        );
        let found = episode_hits(&mem, "caching", &SearchFilters::default());
        assert_eq!(found.len(), i + 1);
        assert!(found.iter().any(|(id, _)| id == &ids[i]));
    }
    // Thirty searches, each after a write, and not one commit: no segment yet.
    let st = index_stats(&mem);
    assert_eq!(st.segments, 0, "{st:?}");
    assert_eq!(st.documents, 30, "{st:?}");
    assert_eq!(st.committed_seq, 0, "{st:?}");
    // Forgetting is seen at once, too.
    assert!(mem.episodic().forget(&ids[7]).unwrap());
    let found = episode_hits(&mem, "caching", &SearchFilters::default());
    assert_eq!(found.len(), 29);
    assert!(!found.iter().any(|(id, _)| id == &ids[7]));
    assert_eq!(index_stats(&mem).documents, 29);
}

#[test]
fn overlay_ranking_matches_the_committed_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let mem = open(dir.path());
    let words = ["alpha", "beta", "gamma", "delta", "epsilon"];
    // A committed base...
    for i in 0..40 {
        let text = format!(
            "{} {} report {}",
            words[i % 5],
            words[(i * 3) % 5],
            "filler ".repeat(i % 7)
        );
        mem.semantic()
            .store(
                &format!("k{i:02}"),
                json!({"entityType": "fact", "observations": [text]}),
            )
            .unwrap();
    }
    mem.flush().unwrap();
    let committed_segments = index_stats(&mem).segments;
    assert!(committed_segments >= 1);
    // ...then changes on top of it: new keys, replaced keys (masking their
    // committed version) and a deleted key.
    for i in 30..55 {
        let text = format!(
            "{} gamma update {}",
            words[(i * 2) % 5],
            "pad ".repeat(i % 4)
        );
        mem.semantic()
            .store(
                &format!("k{i:02}"),
                json!({"entityType": "fact", "observations": [text]}),
            )
            .unwrap();
    }
    assert!(mem.semantic().forget("k05").unwrap());
    let queries = ["gamma", "alpha report", "beta gamma update", "filler delta"];
    let before: Vec<_> = queries.iter().map(|q| knowledge_hits(&mem, q)).collect();
    assert!(before.iter().all(|h| !h.is_empty()));
    assert!(
        !before.iter().flatten().any(|(k, _)| k == "k05"),
        "a forgotten key was found"
    );
    // Served from the overlay: those searches made no commit.
    assert_eq!(index_stats(&mem).segments, committed_segments);
    mem.flush().unwrap();
    for (q, b) in queries.iter().zip(&before) {
        assert_same_ranking(b, &knowledge_hits(&mem, q));
    }
}

#[test]
fn more_changes_than_the_overlay_holds_and_filter_only_searches_commit() {
    let dir = tempfile::tempdir().unwrap();
    let mem = open(dir.path());
    // Far more writes than the overlay keeps between two commits.
    for i in 0..700 {
        mem.episodic()
            .record(
                NewEpisode::new(format!("bulk entry {i}")).tags([if i % 2 == 0 {
                    "even"
                } else {
                    "odd"
                }]),
            )
            .unwrap();
    }
    assert_eq!(index_stats(&mem).segments, 0);
    let all = mem
        .episodic()
        .search("bulk", &SearchFilters::default(), 1000)
        .unwrap();
    assert_eq!(all.len(), 700);
    // That search had to commit (the overlay overflowed).
    assert!(index_stats(&mem).segments >= 1);
    // A filter-only search (no words: newest first) after a new write sees it.
    let id = mem
        .episodic()
        .record(NewEpisode::new("zzz").tags(["even"]))
        .unwrap();
    let f = SearchFilters {
        tags: vec!["even".into()],
        ..SearchFilters::default()
    };
    let hits = mem.episodic().search("", &f, 1000).unwrap();
    assert_eq!(hits.len(), 351);
    assert!(hits.iter().any(|h| h.episode.id == id));
    // Filters apply to overlay documents as to committed ones.
    let id2 = mem
        .episodic()
        .record(NewEpisode::new("bulk entry late").tags(["odd"]))
        .unwrap();
    let odd = SearchFilters {
        tags: vec!["odd".into()],
        ..SearchFilters::default()
    };
    let hits = mem.episodic().search("bulk", &odd, 1000).unwrap();
    assert_eq!(hits.len(), 351);
    assert!(hits.iter().any(|h| h.episode.id == id2));
    let even_hits = mem.episodic().search("bulk", &f, 1000).unwrap();
    assert_eq!(even_hits.len(), 350);
    assert!(!even_hits.iter().any(|h| h.episode.id == id2));
}
