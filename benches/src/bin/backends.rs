//! Per-call latency of the same calls on the sled and the PostgreSQL backend,
//! in one run (docs/benchmarks.md, "Storage backends").
//!
//! `MEMSTRATA_BENCH_PG_URL=postgres://postgres@127.0.0.1:54329/postgres \
//!  cargo run --release -p memstrata-benches --features postgres --bin backends`
//! (env `BACKENDS_N`, episodes pre-filled, default 5000; `BACKENDS_CALLS`, calls
//! per operation, default 2000). Each backend gets a fresh store (sled: a
//! temporary directory with the default `Periodic(500)` durability;
//! PostgreSQL: a fresh schema, dropped at the end). One thread, one call at a
//! time: this is per-call latency, not throughput. Prints a Markdown table
//! (p50, p95, p99 per backend); no assertions.

use std::time::Instant;

use memstrata::{Memory, NewEpisode, SearchFilters};
use memstrata_benches::corpus::Corpus;
use memstrata_benches::stats::{Latency, fmt_ns};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

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

fn main() {
    let n = env_usize("BACKENDS_N", 5000);
    let calls = env_usize("BACKENDS_CALLS", 2000);
    let base = std::env::var("MEMSTRATA_BENCH_PG_URL")
        .expect("MEMSTRATA_BENCH_PG_URL (e.g. postgres://postgres@127.0.0.1:54329/postgres)");
    let corpus = Corpus::standard();

    let dir = tempfile::tempdir().expect("tempdir");
    let sled = {
        let mem = Memory::open(dir.path()).expect("open sled");
        run(&mem, &corpus, n, calls)
    };
    let schema = format!("bench_{}", std::process::id());
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}schema={schema}");
    let pg = {
        let mem = Memory::open(&url).expect("open postgres");
        run(&mem, &corpus, n, calls)
    };
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
}
