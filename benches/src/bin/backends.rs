//! Per-call latency of the same calls on the sled and the PostgreSQL backend,
//! in one run (docs/benchmarks/postgres.md).
//!
//! `MEMSTRATA_BENCH_PG_URL=postgres://postgres@127.0.0.1:54329/postgres \
//!  cargo run --release -p memstrata-benches --features postgres --bin backends`
//! (env `BACKENDS_N`, episodes pre-filled, default 5000; `BACKENDS_CALLS`, calls
//! per operation, default 2000). Each backend gets a fresh store (sled: a
//! temporary directory with the default `Periodic(500)` durability;
//! PostgreSQL: a fresh schema, dropped at the end). One thread, one call at a
//! time: this is per-call latency, not throughput. Prints a Markdown table
//! (p50, p95, p99 per backend); no assertions.
//!
//! Then vector search: `BACKENDS_VECTORS` episodes (default 10000) with random
//! `BACKENDS_DIM`-dimension embeddings (default 384) in a context of their own
//! on each backend, and `BACKENDS_VECTOR_CALLS` (default 300) pure vector
//! searches (limit 10), unfiltered and with a tag 1 in 10 episodes hold. On
//! PostgreSQL the search runs in SQL when the server has pgvector (run the bench
//! under `scripts/pgvector-test.sh`), else in process like on sled: the table
//! names which one ran (`status`). `BACKENDS_VECTORS=0` skips this part.

use std::time::Instant;

use memstrata::{Memory, NewEpisode, SearchFilters, VectorQuery};
use memstrata_benches::corpus::Corpus;
use memstrata_benches::stats::{Latency, fmt_ns};
use memstrata_benches::sys::env_usize;

struct Figures {
    ops: Vec<(&'static str, Latency)>,
}

fn run(mem: &Memory, corpus: &Corpus, n: usize, calls: usize) -> Figures {
    for i in 0..n {
        let d = corpus.episode(i);
        mem.episodic()
            .record(NewEpisode::new(d.summary.clone()).tags(d.tags.clone()))
            .expect("record");
    }
    let queries = corpus.keyword_queries(calls);
    let mut ops = Vec::new();
    let mut store = Latency::new();
    for i in 0..calls {
        let v = corpus.kv_value(i);
        let t = Instant::now();
        mem.short_term()
            .store(&format!("k{i}"), v, None)
            .expect("store");
        store.record(t.elapsed());
    }
    ops.push(("short_term.store", store));
    let mut retrieve = Latency::new();
    for i in 0..calls {
        let t = Instant::now();
        let v = mem
            .short_term()
            .retrieve(&format!("k{i}"))
            .expect("retrieve");
        retrieve.record(t.elapsed());
        assert!(v.is_some());
    }
    ops.push(("short_term.retrieve", retrieve));
    let mut record = Latency::new();
    for i in 0..calls {
        let d = corpus.episode(n + i);
        let t = Instant::now();
        mem.episodic()
            .record(NewEpisode::new(d.summary.clone()).tags(d.tags.clone()))
            .expect("record");
        record.record(t.elapsed());
    }
    ops.push(("episodic.record", record));
    let mut search = Latency::new();
    for q in &queries {
        let t = Instant::now();
        mem.episodic()
            .search(q, &SearchFilters::default(), 10)
            .expect("search");
        search.record(t.elapsed());
    }
    ops.push(("episodic.search", search));
    Figures { ops }
}

/// A small deterministic generator (xorshift64*): the same vectors on both backends.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }

    fn vector(&mut self, dim: usize) -> Vec<f32> {
        (0..dim).map(|_| self.unit()).collect()
    }
}

/// Vector search latency: (which search ran, unfiltered, tag-filtered).
fn vector_run(mem: &Memory, n: usize, dim: usize, calls: usize) -> (String, Latency, Latency) {
    let ctx = mem.namespace("vector_bench").expect("namespace");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..n {
        let mut ep = NewEpisode::new(format!("vector episode {i}")).embedding(rng.vector(dim));
        if i.is_multiple_of(10) {
            ep = ep.tags(["tenth"]);
        }
        ctx.episodic().record(ep).expect("record with embedding");
    }
    let which = mem
        .admin()
        .status(false, true)
        .expect("status")
        .metrics
        .expect("metrics")
        .index
        .vector_search;
    let queries: Vec<Vec<f32>> = (0..calls).map(|_| rng.vector(dim)).collect();
    let tenth = SearchFilters {
        tags: vec!["tenth".into()],
        ..Default::default()
    };
    let mut lat = [Latency::new(), Latency::new()];
    // Warm-up: the in-process scan builds its matrix on the first search.
    ctx.episodic()
        .search_hybrid(
            "",
            &SearchFilters::default(),
            10,
            &VectorQuery::embedding(queries[0].clone()),
        )
        .expect("vector search");
    for q in &queries {
        for (f, l) in [&SearchFilters::default(), &tenth]
            .into_iter()
            .zip(lat.iter_mut())
        {
            let vq = VectorQuery::embedding(q.clone());
            let t = Instant::now();
            let hits = ctx
                .episodic()
                .search_hybrid("", f, 10, &vq)
                .expect("vector search");
            l.record(t.elapsed());
            assert_eq!(hits.len(), 10.min(n / 10));
        }
    }
    let [all, filtered] = lat;
    (which, all, filtered)
}

fn main() {
    let n = env_usize("BACKENDS_N", 5000);
    let calls = env_usize("BACKENDS_CALLS", 2000);
    let base = std::env::var("MEMSTRATA_BENCH_PG_URL")
        .expect("MEMSTRATA_BENCH_PG_URL (e.g. postgres://postgres@127.0.0.1:54329/postgres)");
    let corpus = Corpus::standard();
    let vectors = env_usize("BACKENDS_VECTORS", 10_000);
    let dim = env_usize("BACKENDS_DIM", 384);
    let vector_calls = env_usize("BACKENDS_VECTOR_CALLS", 300);

    let dir = tempfile::tempdir().expect("tempdir");
    let sled = {
        let mem = Memory::open(dir.path()).expect("open sled");
        let ops = run(&mem, &corpus, n, calls);
        let v = (vectors > 0).then(|| vector_run(&mem, vectors, dim, vector_calls));
        (ops, v)
    };
    let schema = format!("bench_{}", std::process::id());
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}schema={schema}");
    let pg = {
        let mem = Memory::open(&url).expect("open postgres");
        let ops = run(&mem, &corpus, n, calls);
        let v = (vectors > 0).then(|| vector_run(&mem, vectors, dim, vector_calls));
        (ops, v)
    };
    let ((sled, sled_vectors), (pg, pg_vectors)) = (sled, pg);
    if let Ok(mut c) = postgres::Client::connect(&base, postgres::NoTls) {
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
    }

    println!("{n} episodes pre-filled, {calls} calls per operation, one thread\n");
    println!(
        "| call | sled p50 | sled p95 | sled p99 | PostgreSQL p50 | PostgreSQL p95 | PostgreSQL p99 | p50 ratio | p95 ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for ((name, s), (_, p)) in sled.ops.iter().zip(pg.ops.iter()) {
        println!(
            "| `{name}` | {} | {} | {} | {} | {} | {} | {:.1}x | {:.1}x |",
            fmt_ns(s.p50() as f64),
            fmt_ns(s.q(0.95) as f64),
            fmt_ns(s.q(0.99) as f64),
            fmt_ns(p.p50() as f64),
            fmt_ns(p.q(0.95) as f64),
            fmt_ns(p.q(0.99) as f64),
            p.p50() as f64 / s.p50().max(1) as f64,
            p.q(0.95) as f64 / s.q(0.95).max(1) as f64
        );
    }
    if let (Some((sw, sa, sf)), Some((pw, pa, pf))) = (sled_vectors, pg_vectors) {
        println!(
            "\nVector search: {vectors} episodes x {dim} dimensions in one context, {vector_calls} searches (limit 10) per row\n"
        );
        println!(
            "| search | sled ({sw}) p50 | sled p99 | PostgreSQL ({pw}) p50 | PostgreSQL p99 | p50 ratio |"
        );
        println!("|---|---|---|---|---|---|");
        for (name, s, p) in [("unfiltered", &sa, &pa), ("tag held by 1 in 10", &sf, &pf)] {
            println!(
                "| {name} | {} | {} | {} | {} | {:.1}x |",
                fmt_ns(s.p50() as f64),
                fmt_ns(s.q(0.99) as f64),
                fmt_ns(p.p50() as f64),
                fmt_ns(p.q(0.99) as f64),
                p.p50() as f64 / s.p50().max(1) as f64
            );
        }
    }
}
