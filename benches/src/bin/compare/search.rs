//! Episode search: Memstrata vs raw tantivy vs SQLite FTS5 (ingest, footprint, open,
//! interleaved searches, then the optimized store).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memstrata_benches::corpus::{Corpus, EpisodeDoc};
use memstrata_benches::engines::fts5::Fts5;
use memstrata_benches::engines::memstrata_engine::MemstrataSearch;
use memstrata_benches::engines::tantivy_raw::{RawTantivy, Scoping};
use memstrata_benches::engines::{Result, SearchEngine};
use memstrata_benches::stats::Latency;
use memstrata_benches::sys;

use crate::progress::{phase, tick};
use crate::{Args, BATCH, LIMIT, NE};

#[derive(Debug, Default)]
pub(crate) struct EngineSearch {
    pub(crate) name: &'static str,
    pub(crate) ingest_lat: Latency,
    pub(crate) ingest_time: Duration,
    pub(crate) finish_time: Duration,
    /// Closing the store after the final flush (Memstrata: index writer,
    /// sled, and the close-time log checkpoint after a large session).
    pub(crate) close_time: Duration,
    pub(crate) disk_apparent: u64,
    pub(crate) disk_allocated: u64,
    pub(crate) disk_split: Vec<(String, u64)>,
    pub(crate) segments: Option<usize>,
    /// query class -> latency
    pub(crate) search: Vec<(&'static str, Latency)>,
    /// query class -> mean top-10 overlap with raw tantivy
    pub(crate) agreement: Vec<(&'static str, f64)>,
    /// First open after the writing process closed the store.
    pub(crate) open: Option<OpenProbe>,
    /// A second open (a store that was opened and closed cleanly since).
    pub(crate) reopen: Option<OpenProbe>,
    /// Memstrata: live key + value bytes in sled.
    pub(crate) live_bytes: Option<u64>,
    /// Memstrata: allocated bytes after `optimize(aggressive)` and close, and the time it took.
    pub(crate) after_optimize: Option<(u64, Duration)>,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct OpenProbe {
    pub(crate) open_ns: f64,
    pub(crate) first_search_ns: f64,
    pub(crate) rss_before: u64,
    pub(crate) rss_after_open: u64,
    pub(crate) rss_after_search: u64,
}

#[derive(Debug)]
pub(crate) struct SearchResult {
    pub(crate) n: usize,
    pub(crate) engines: Vec<EngineSearch>,
    pub(crate) queries: Vec<(&'static str, usize)>,
    /// After `optimize(aggressive)`: (class, memstrata p50 ns, raw tantivy p50 ns, memstrata segments).
    pub(crate) optimized: Vec<(&'static str, u64, u64, Option<usize>)>,
}

pub(crate) fn search_tier(corpus: &Corpus, n: usize, args: &Args) -> Result<SearchResult> {
    let root = tempfile::Builder::new()
        .prefix("memstrata-bench-search-")
        .tempdir_in(&args.dir)?;
    let mem_dir = root.path().join("memstrata");
    let tan_dir = root.path().join("tantivy");
    let fts_path = root.path().join("fts5.sqlite");

    let mut results: Vec<EngineSearch> = ["memstrata", "raw tantivy", "sqlite fts5"]
        .iter()
        .map(|nm| EngineSearch {
            name: nm,
            ..Default::default()
        })
        .collect();

    // Ingest: each engine alone (so no engine's background indexing overlaps
    // another's timed work), through its normal per-item write path, batch by
    // batch; the clock covers preparing the engine's input, every add and the
    // final flush/commit, not generating the corpus.
    let docs: Vec<EpisodeDoc> = (0..n).map(|i| corpus.episode(i)).collect();
    let mut ids = HashMap::new();
    for (e, r) in results.iter_mut().enumerate() {
        let mut engine: Box<dyn SearchEngine> = match e {
            0 => Box::new(MemstrataSearch::open(&mem_dir, HashMap::with_capacity(n))?),
            1 => Box::new(RawTantivy::create(&tan_dir)?),
            _ => Box::new(Fts5::open(&fts_path)?),
        };
        let t = Instant::now();
        phase(format!("{n}: {} ingest", r.name));
        for batch in docs.chunks(BATCH) {
            engine.ingest(batch, &mut r.ingest_lat)?;
            tick();
        }
        let f = Instant::now();
        engine.finish()?;
        r.finish_time = f.elapsed();
        r.ingest_time = t.elapsed();
        if let Some(ids_of) = engine.take_ids() {
            ids = ids_of;
        }
        let c = Instant::now();
        drop(engine); // close (Memstrata: flush + close)
        r.close_time = c.elapsed();
        eprintln!("   {} ingested {n} in {:.1?}", r.name, r.ingest_time);
    }
    drop(docs);
    eprintln!("   ingest done");

    // Disk footprint of closed stores.
    for (e, paths) in [
        vec![mem_dir.clone()],
        vec![tan_dir.clone()],
        vec![
            fts_path.clone(),
            PathBuf::from(format!("{}-wal", fts_path.display())),
        ],
    ]
    .into_iter()
    .enumerate()
    {
        for p in paths {
            let (a, al) = sys::disk_usage(&p);
            results[e].disk_apparent += a;
            results[e].disk_allocated += al;
        }
    }
    for part in ["db", "index"] {
        results[0]
            .disk_split
            .push((part.into(), sys::disk_usage(&mem_dir.join(part)).1));
    }

    // Open time + RSS, each in a fresh process, twice: the first open after the
    // writer closed the store, then a reopen.
    let exe = std::env::current_exe()?;
    let probe_query = corpus.keyword_queries(1).remove(0);
    for (e, (kind, path)) in [
        ("memstrata", &mem_dir),
        ("tantivy", &tan_dir),
        ("fts5", &fts_path),
    ]
    .into_iter()
    .enumerate()
    {
        for round in 0..2 {
            phase(format!("{n}: {kind} open probe {round}"));
            let out = std::process::Command::new(&exe)
                .args(["probe-open", kind, &path.to_string_lossy(), &probe_query])
                .output()?;
            if !out.status.success() {
                return Err(format!(
                    "probe-open {kind}: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
            let probe = Some(OpenProbe {
                open_ns: f("open_ns"),
                first_search_ns: f("first_search_ns"),
                rss_before: f("rss_before") as u64,
                rss_after_open: f("rss_after_open") as u64,
                rss_after_search: f("rss_after_search") as u64,
            });
            if round == 0 {
                results[e].open = probe;
            } else {
                results[e].reopen = probe;
            }
        }
    }
    let out = std::process::Command::new(&exe)
        .args(["inspect-store", &mem_dir.to_string_lossy()])
        .output()?;
    if out.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        results[0].live_bytes = v["live_bytes"].as_u64();
    }

    // Search: reopen, warm up, then every query on every engine, engines rotating.
    let mem = MemstrataSearch::open(&mem_dir, ids)?;
    let tan = RawTantivy::open(&tan_dir)?;
    let fts = Fts5::open(&fts_path)?;
    let tan_must = tan.with_scoping(Scoping::MustClauses);
    let tan_over = tan.with_scoping(Scoping::OverFetch);
    let engines: [&dyn SearchEngine; NE] = [&mem, &tan, &fts, &tan_must, &tan_over];
    for (e, engine) in engines.iter().enumerate() {
        if e >= results.len() {
            results.push(EngineSearch {
                name: engine.name(),
                ..Default::default()
            });
        }
        results[e].segments = engine.segments();
    }
    let (nk, nq) = match args.queries {
        Some(q) => (q, q),
        None if n <= 10_000 => (1000, 1000),
        None if n <= 100_000 => (1000, 300),
        None => (300, 100),
    };
    let classes = [
        ("keywords", corpus.keyword_queries(nk)),
        ("question", corpus.question_queries(nq)),
    ];
    let mut queries = Vec::new();
    for (class, qs) in &classes {
        phase(format!("{n}: {class} searches"));
        queries.push((*class, qs.len()));
        let warm = qs.len().min(50);
        for engine in engines {
            for q in &qs[..warm] {
                engine.search(q, LIMIT)?;
            }
        }
        let mut lats: Vec<Latency> = (0..NE).map(|_| Latency::new()).collect();
        let mut overlap = [0.0f64; NE];
        let t = Instant::now();
        for (i, q) in qs.iter().enumerate() {
            let mut hits: [Vec<usize>; NE] = Default::default();
            tick();
            for j in 0..NE {
                let e = (i + j) % NE;
                let t = Instant::now();
                hits[e] = engines[e].search(q, LIMIT)?;
                lats[e].record(t.elapsed());
            }
            for e in 0..NE {
                overlap[e] += top_overlap(&hits[e], &hits[1]);
            }
        }
        eprintln!("   {class}: {} queries in {:.1?}", qs.len(), t.elapsed());
        for (e, lat) in lats.into_iter().enumerate() {
            results[e].search.push((class, lat));
            results[e]
                .agreement
                .push((class, overlap[e] / qs.len() as f64));
        }
    }
    // Then what `optimize(aggressive)` gives back (index segments merged, index files collected).
    phase(format!("{n}: optimize(aggressive)"));
    let t = Instant::now();
    mem.memory()
        .admin()
        .optimize(memstrata::admin::OptimizeLevel::Aggressive, None)?;
    let took = t.elapsed();
    drop(mem);
    results[0].after_optimize = Some((sys::disk_usage(&mem_dir).1, took));

    // Second pass: the optimized store (one index segment) against raw tantivy,
    // interleaved again, to separate the segment count from the query shape.
    let ids = HashMap::new();
    let mem = MemstrataSearch::open(&mem_dir, ids)?;
    let pair: [&dyn SearchEngine; 2] = [&mem, &tan];
    let mut optimized = Vec::new();
    for (class, qs) in &classes {
        phase(format!("{n}: {class} searches after optimize"));
        for e in pair {
            for q in &qs[..qs.len().min(50)] {
                e.search(q, LIMIT)?;
            }
        }
        let mut lats = [Latency::new(), Latency::new()];
        for (i, q) in qs.iter().enumerate() {
            tick();
            for j in 0..2 {
                let e = (i + j) % 2;
                let t = Instant::now();
                pair[e].search(q, LIMIT)?;
                lats[e].record(t.elapsed());
            }
        }
        optimized.push((*class, lats[0].p50(), lats[1].p50(), mem.segments()));
    }
    drop(mem);
    Ok(SearchResult {
        n,
        engines: results,
        queries,
        optimized,
    })
}

/// Share of `b`'s hits that `a` also returned.
fn top_overlap(a: &[usize], b: &[usize]) -> f64 {
    if b.is_empty() {
        return if a.is_empty() { 1.0 } else { 0.0 };
    }
    b.iter().filter(|x| a.contains(x)).count() as f64 / b.len() as f64
}

/// In a fresh process: open a store, run one search, report times and RSS.
pub(crate) fn probe_open(kind: &str, path: &Path, query: &str) -> Result<()> {
    let rss_before = sys::rss_bytes();
    let t = Instant::now();
    let engine: Box<dyn SearchEngine> = match kind {
        "memstrata" => Box::new(MemstrataSearch::open(path, HashMap::new())?),
        "tantivy" => Box::new(RawTantivy::open(path)?),
        "fts5" => Box::new(Fts5::open(path)?),
        other => return Err(format!("unknown engine {other}").into()),
    };
    let open_ns = t.elapsed().as_nanos();
    let rss_after_open = sys::rss_bytes();
    let t = Instant::now();
    engine.search(query, LIMIT)?;
    let first_search_ns = t.elapsed().as_nanos();
    let rss_after_search = sys::rss_bytes();
    println!(
        "{}",
        serde_json::json!({
            "open_ns": open_ns as f64,
            "first_search_ns": first_search_ns as f64,
            "rss_before": rss_before,
            "rss_after_open": rss_after_open,
            "rss_after_search": rss_after_search,
        })
    );
    Ok(())
}
