//! Hybrid search over a context large enough that its vector scan runs on a
//! thread of its own beside the BM25 list, and is itself shared out among
//! threads: the lists fused are the ones each search alone gives, and
//! searches on several threads go on while episodes are written.

mod common;

use std::sync::Barrier;

use memstrata::{Fusion, FusionMethod, NewEpisode, SearchFilters, VectorQuery};

const DIM: usize = 384;
/// 6,000 rows of 384 int8 codes (2.2 MiB): above the 1 MiB from which the scan runs
/// beside the BM25 list, and above the 2 MiB per scan thread.
const ROWS: usize = 6_000;

const WORDS: [&str; 12] = [
    "harbour", "ledger", "violet", "engine", "meadow", "quartz", "lantern", "orbit", "saddle",
    "thistle", "canyon", "pepper",
];

/// A deterministic vector per item: 317 directions, each shifted a little by `i % 7`.
fn vector(i: usize) -> Vec<f32> {
    let mut state = ((i % 317) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..DIM)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2001) as f32 / 1000.0 - 1.0 + (i % 7) as f32 * 0.001
        })
        .collect()
}

fn episode(i: usize) -> NewEpisode {
    let text = format!(
        "note {i}: {} {} {}",
        WORDS[i % 12],
        WORDS[(i / 12) % 12],
        WORDS[(i / 144) % 12]
    );
    NewEpisode::new(text).embedding(vector(i))
}

fn rrf() -> Fusion {
    Fusion {
        method: FusionMethod::Rrf,
        bm25_weight: 1.0,
        vector_weight: 1.0,
        rrf_k: 60.0,
    }
}

#[test]
fn a_large_hybrid_search_fuses_the_lists_each_search_gives_alone() {
    let mem = common::temporary().unwrap();
    let ids = mem
        .episodic()
        .record_many((0..ROWS).map(episode).collect())
        .unwrap();
    assert_eq!(ids.len(), ROWS);
    let any = SearchFilters::default();
    for (q, probe) in [
        ("violet orbit", 5usize),
        ("harbour", 1234),
        ("quartz canyon pepper", 4321),
    ] {
        let qv = vector(probe);
        // Each list alone, as deep as the hybrid search reads it (5 × limit 10).
        let bm25: Vec<String> = mem
            .episodic()
            .search(q, &any, 50)
            .unwrap()
            .into_iter()
            .map(|h| h.episode.id)
            .collect();
        let vectors: Vec<String> = mem
            .episodic()
            .search_hybrid("", &any, 50, &VectorQuery::embedding(qv.clone()))
            .unwrap()
            .into_iter()
            .map(|h| h.episode.id)
            .collect();
        assert_eq!(vectors.len(), 50);
        let hits = mem
            .episodic()
            .search_hybrid(q, &any, 10, &VectorQuery::embedding(qv).fusion(rrf()))
            .unwrap();
        assert_eq!(hits.len(), 10, "{q}");
        assert!(hits.iter().any(|h| h.vector_rank.is_some()), "{q}");
        assert!(hits.iter().any(|h| h.bm25_rank.is_some()), "{q}");
        for h in &hits {
            let id = &h.episode.id;
            let in_bm25 = bm25.iter().position(|x| x == id).map(|p| p as u32 + 1);
            let in_vectors = vectors.iter().position(|x| x == id).map(|p| p as u32 + 1);
            assert_eq!(h.bm25_rank, in_bm25, "{q}: {id}");
            assert_eq!(h.vector_rank, in_vectors, "{q}: {id}");
        }
    }
}

#[test]
fn hybrid_searches_on_several_threads_go_on_while_episodes_are_written() {
    let mem = common::temporary().unwrap();
    mem.episodic()
        .record_many((0..ROWS).map(episode).collect())
        .unwrap();
    let any = SearchFilters::default();
    let start = Barrier::new(3);
    let written = std::thread::scope(|s| {
        let searchers: Vec<_> = (0..2)
            .map(|t| {
                let (mem, any, start) = (&mem, &any, &start);
                s.spawn(move || {
                    start.wait();
                    for k in 0..20 {
                        let qv = vector(t * 100 + k);
                        let hits = mem
                            .episodic()
                            .search_hybrid(WORDS[k % 12], any, 10, &VectorQuery::embedding(qv))
                            .unwrap();
                        assert_eq!(hits.len(), 10);
                    }
                })
            })
            .collect();
        start.wait();
        let mut written = Vec::new();
        for i in ROWS..ROWS + 200 {
            written.push((i, mem.episodic().record(episode(i)).unwrap()));
        }
        for h in searchers {
            h.join().unwrap();
        }
        written
    });
    // Every episode written meanwhile is in the vector list: its own vector
    // finds it among the rows of its direction (about 20 here) at the top.
    for (i, id) in written.iter().step_by(40) {
        let hits = mem
            .episodic()
            .search_hybrid("", &any, 50, &VectorQuery::embedding(vector(*i)))
            .unwrap();
        assert!(hits[0].score > 0.99, "{}", hits[0].score);
        assert!(
            hits.iter().any(|h| &h.episode.id == id),
            "episode {i} not found by its own vector"
        );
    }
}
