//! The cost of as-of reads (docs/memory-hygiene.md, "Facts with validity").
//!
//! `cargo run --release -p memstrata --example asof_bench -- N VERSIONS ROUNDS`
//! stores N knowledge entries with VERSIONS versions each (one minute apart,
//! on a manual clock), then times, alternated over ROUNDS rounds (default 5):
//!
//! - `get`: the plain read of every key (the current version);
//! - `get as_of now`: the same with `as_of` = now (the current version holds:
//!   answered from the entry without reading its history);
//! - `get as_of past`: `as_of` in the middle of the history (the history is
//!   read and the version that held then picked);
//! - `query` and `query as_of past`: 200 two-word queries, limit 10.
//!
//! It prints each variant's median time per call and its ratio to the plain
//! read (or query). No timing assertions: figures only.

use std::sync::Arc;
use std::time::Instant;

use chrono::{TimeZone, Utc};
use memstrata::semantic::ReadOptions;
use memstrata::{Clock, Durability, ManualClock, Memory, VectorQuery};
use serde_json::json;

const WORDS: &[&str] = &[
    "deploy",
    "billing",
    "service",
    "staging",
    "invoice",
    "customer",
    "meeting",
    "design",
    "review",
    "budget",
    "travel",
    "flight",
    "report",
    "migration",
    "database",
    "backup",
    "release",
    "feature",
    "support",
    "ticket",
    "contract",
    "vendor",
    "renewal",
    "pricing",
];

/// Passes over the keys per timed `get` measurement.
const GET_PASSES: usize = 20;

fn word(i: usize) -> &'static str {
    WORDS[i % WORDS.len()]
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(2000);
    let versions = args.get(1).copied().unwrap_or(5).max(2);
    let rounds = args.get(2).copied().unwrap_or(5).max(1);

    let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let clock = Arc::new(ManualClock::new(start));
    let dir = tempfile::tempdir().expect("tmp");
    let mem = Memory::builder()
        .path(dir.path())
        .durability(Durability::Manual)
        .clock(clock.clone())
        .open()
        .expect("open");
    let s = mem.semantic();
    let keys: Vec<String> = (0..n).map(|i| format!("fact:{i}")).collect();
    for v in 0..versions {
        clock.set(start + chrono::Duration::minutes(v as i64));
        for (i, k) in keys.iter().enumerate() {
            let text = format!(
                "{} {} {} version {v}",
                word(i),
                word(i / 7 + v),
                word(i / 3 + 2 * v)
            );
            s.store(k, json!({ "text": text })).expect("store");
        }
    }
    mem.flush().expect("flush");
    let now = ReadOptions::default().as_of(clock.now());
    let past = ReadOptions::default()
        .as_of(start + chrono::Duration::seconds(60 * (versions as i64 / 2) + 30));
    let plain = ReadOptions::default();
    let queries: Vec<String> = (0..200)
        .map(|i| format!("{} {}", word(i), word(i * 5 + 1)))
        .collect();
    let vq = VectorQuery::default();

    // Every key read GET_PASSES times per measurement: one pass is too short
    // to time on a loaded machine.
    let time_gets = |opts: &ReadOptions| -> f64 {
        let t = Instant::now();
        for _ in 0..GET_PASSES {
            for k in &keys {
                std::hint::black_box(s.get_with(k, opts).expect("get"));
            }
        }
        t.elapsed().as_secs_f64() * 1e6 / (keys.len() * GET_PASSES) as f64
    };
    let time_queries = |opts: &ReadOptions| -> f64 {
        let t = Instant::now();
        for q in &queries {
            std::hint::black_box(s.query_with(q, 10, &vq, opts).expect("query"));
        }
        t.elapsed().as_secs_f64() * 1e6 / queries.len() as f64
    };
    // Warm-up: caches and the index reader.
    time_gets(&plain);
    time_queries(&plain);

    let names = [
        "get",
        "get as_of now",
        "get as_of past",
        "query",
        "query as_of past",
    ];
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for round in 0..rounds {
        // The order of the variants rotates from round to round, so none
        // always runs first (after the queries have cooled the caches).
        let mut r = [0.0; 5];
        for j in 0..3 {
            let i = (j + round) % 3;
            r[i] = time_gets([&plain, &now, &past][i]);
        }
        for j in 0..2 {
            let i = (j + round) % 2;
            r[3 + i] = time_queries([&plain, &past][i]);
        }
        for (i, us) in r.iter().enumerate() {
            println!("round {round}: {}: {us:.1} µs per call", names[i]);
            runs[i].push(*us);
        }
    }
    let m: Vec<f64> = runs.iter_mut().map(|v| median(v)).collect();
    println!(
        "as-of reads ({n} entries x {versions} versions, median of {rounds}; ratios to the plain read):"
    );
    for (i, name) in names.iter().enumerate() {
        let base = if i < 3 { m[0] } else { m[3] };
        println!("  {name}: {:.1} µs per call ({:.2}x)", m[i], m[i] / base);
    }
}
