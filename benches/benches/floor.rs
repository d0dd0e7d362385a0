//! Criterion micro-benches for the floor comparisons (short-term vs raw sled,
//! episode search vs raw tantivy vs SQLite FTS5) on a 10k-item corpus.
//!
//! `cargo bench -p memstrata-benches --bench floor`. Kept short (1 s warm-up,
//! 2 s measurement per function); the published ratios come from the
//! `compare` binary, which interleaves engines in one run.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memstrata_benches::corpus::Corpus;
use memstrata_benches::engines::fts5::Fts5;
use memstrata_benches::engines::memstrata_engine::{
    MemstrataKv, MemstrataSearch, short_term_record_bytes,
};
use memstrata_benches::engines::sled_raw::RawSled;
use memstrata_benches::engines::tantivy_raw::RawTantivy;
use memstrata_benches::engines::{KvEngine, KvItem, SearchEngine};
use memstrata_benches::stats::Latency;

const N: usize = 10_000;

fn items(corpus: &Corpus, n: usize) -> Vec<KvItem> {
    let now = chrono::Utc::now().timestamp_millis();
    (0..n)
        .map(|i| {
            let value = corpus.kv_value(i);
            KvItem {
                key: Corpus::kv_key(i),
                bytes: short_term_record_bytes(&value, now),
                value,
            }
        })
        .collect()
}

fn short_term(c: &mut Criterion) {
    let corpus = Corpus::standard();
    let dir = tempfile::tempdir().unwrap();
    let mem = MemstrataKv::open(&dir.path().join("m")).unwrap();
    let raw = RawSled::open(&dir.path().join("s")).unwrap();
    let data = items(&corpus, N);
    let engines: [&dyn KvEngine; 2] = [&mem, &raw];
    for e in engines {
        for it in &data {
            e.store(it.clone()).unwrap();
        }
    }
    let mut g = c.benchmark_group("short_term");
    for e in engines {
        let mut i = 0usize;
        g.bench_function(BenchmarkId::new("retrieve", e.name()), |b| {
            b.iter(|| {
                i = (i + 7919) % N;
                black_box(e.retrieve(&data[i].key).unwrap())
            })
        });
        let mut i = 0usize;
        g.bench_function(BenchmarkId::new("store", e.name()), |b| {
            b.iter_batched(
                || {
                    i = (i + 7919) % N;
                    data[i].clone()
                },
                |it| e.store(it).unwrap(),
                criterion::BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn search(c: &mut Criterion) {
    let corpus = Corpus::standard();
    let dir = tempfile::tempdir().unwrap();
    let docs: Vec<_> = (0..N).map(|i| corpus.episode(i)).collect();
    let mut mem = MemstrataSearch::open(&dir.path().join("m"), HashMap::new()).unwrap();
    let mut tan = RawTantivy::create(&dir.path().join("t")).unwrap();
    let mut fts = Fts5::open(&dir.path().join("f.sqlite")).unwrap();
    {
        let engines: [&mut dyn SearchEngine; 3] = [&mut mem, &mut tan, &mut fts];
        for e in engines {
            let mut lat = Latency::new();
            for chunk in docs.chunks(1000) {
                e.ingest(chunk, &mut lat).unwrap();
            }
            e.finish().unwrap();
        }
    }
    let queries = corpus.keyword_queries(200);
    let mut g = c.benchmark_group("episode_search_10k");
    let engines: [&dyn SearchEngine; 3] = [&mem, &tan, &fts];
    for e in engines {
        let mut i = 0usize;
        g.bench_function(e.name(), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                black_box(e.search(&queries[i], 10).unwrap())
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = short_term, search
}
criterion_main!(benches);
