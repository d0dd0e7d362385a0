//! Forgetting by utility: what a retention policy costs writes and searches
//! (docs/memory-hygiene.md).
//!
//! `cargo run --release -p memstrata --example retention_bench -- [N] [ROUNDS]`
//! records N distinct generated episodes (importance 1..=10) into a fresh
//! store per variant, the variants alternated over ROUNDS rounds (default 3):
//!
//! - `none`: no policy (the write without retention);
//! - `idle`: `max_episodes = 10 N` (a policy that never binds: the per-write
//!   bookkeeping alone);
//! - `evicting`: `max_episodes = N / 4` (the context is at its limit for three
//!   quarters of the run: every eviction, amortised, is in the time).
//!
//! - `manual`: no policy; the host forgets the episode written N / 4 writes
//!   earlier after each write (the same number of live episodes, by hand: the
//!   floor a policy's evictions can be compared with).
//!
//! Then 1,000 one-word searches on the `none` store and on the `idle` store
//! (the latter counts accesses). Prints each run's mean µs per call and each
//! variant's median over `none`'s.

use std::time::Instant;

use memstrata::retention::Retention;
use memstrata::{Memory, NewEpisode, SearchFilters};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

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
    "quarterly",
    "migration",
    "database",
    "backup",
    "release",
    "feature",
    "request",
    "support",
    "ticket",
    "kayak",
    "garden",
];

fn texts(n: usize) -> Vec<(String, u8)> {
    let mut r = Rng(7);
    (0..n)
        .map(|i| {
            let words: Vec<&str> = (0..8)
                .map(|_| WORDS[(r.next() % WORDS.len() as u64) as usize])
                .collect();
            (
                format!("{} #{i}", words.join(" ")),
                (r.next() % 10) as u8 + 1,
            )
        })
        .collect()
}

/// Mean µs per record into a fresh store with `policy`, and the store.
fn write_run(
    items: &[(String, u8)],
    policy: Option<Retention>,
) -> (f64, Memory, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tmp");
    let mem = Memory::open(dir.path()).expect("open");
    for i in 0..100 {
        mem.episodic()
            .record(NewEpisode::new(format!("warm up {i}")))
            .expect("record");
    }
    if let Some(p) = policy {
        mem.contexts().set_retention(p, None).expect("policy");
    }
    let started = Instant::now();
    for (t, imp) in items {
        mem.episodic()
            .record(NewEpisode::new(t.clone()).importance(*imp))
            .expect("record");
    }
    let us = started.elapsed().as_secs_f64() * 1e6 / items.len() as f64;
    (us, mem, dir)
}

/// Mean µs per record plus the host's own `forget` of the episode written `keep` writes earlier.
fn manual_run(items: &[(String, u8)], keep: usize) -> f64 {
    let dir = tempfile::tempdir().expect("tmp");
    let mem = Memory::open(dir.path()).expect("open");
    for i in 0..100 {
        mem.episodic()
            .record(NewEpisode::new(format!("warm up {i}")))
            .expect("record");
    }
    let mut ids = std::collections::VecDeque::new();
    let started = Instant::now();
    for (t, imp) in items {
        let id = mem
            .episodic()
            .record(NewEpisode::new(t.clone()).importance(*imp))
            .expect("record");
        ids.push_back(id);
        if ids.len() > keep {
            let old = ids.pop_front().expect("id");
            mem.episodic().forget(&old).expect("forget");
        }
    }
    started.elapsed().as_secs_f64() * 1e6 / items.len() as f64
}

fn search_run(mem: &Memory) -> f64 {
    let f = SearchFilters::default();
    let started = Instant::now();
    for i in 0..1000 {
        let q = WORDS[i % WORDS.len()];
        mem.episodic().search(q, &f, 10).expect("search");
    }
    started.elapsed().as_secs_f64() * 1e6 / 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5000);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let items = texts(n);
    let variants: [(&str, Option<Retention>); 3] = [
        ("none", None),
        ("idle", Some(Retention::new().max_episodes(10 * n as u64))),
        (
            "evicting",
            Some(Retention::new().max_episodes((n / 4).max(1) as u64)),
        ),
    ];
    let mut writes = vec![Vec::new(); 4];
    let mut searches = vec![Vec::new(); 2];
    for round in 0..rounds {
        for (v, (name, p)) in variants.iter().enumerate() {
            let (us, mem, _dir) = write_run(&items, *p);
            let status = mem.admin().status(false, true).expect("status");
            let kept = status.metrics.map_or(0, |m| m.items.episodes);
            println!("round {round}: {name}: {us:.1} µs per record ({kept} episodes kept)");
            writes[v].push(us);
            if v < 2 {
                let s = search_run(&mem);
                println!("round {round}: {name}: {s:.1} µs per search");
                searches[v].push(s);
            }
        }
        let us = manual_run(&items, (n / 4).max(1));
        println!("round {round}: manual: {us:.1} µs per record");
        writes[3].push(us);
    }
    println!("\n{n} records, median of {rounds}:");
    let base = median(writes[0].clone());
    for (v, name) in ["none", "idle", "evicting", "manual"].iter().enumerate() {
        let m = median(writes[v].clone());
        println!("  record, {name}: {m:.1} µs ({:.2}x none)", m / base);
    }
    let sbase = median(searches[0].clone());
    for (v, name) in ["none", "idle (counting accesses)"].iter().enumerate() {
        let m = median(searches[v].clone());
        println!("  search, {name}: {m:.1} µs ({:.2}x none)", m / sbase);
    }
}
