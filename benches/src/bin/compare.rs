//! Side-by-side comparison: Memstrata vs the floor (raw sled, raw tantivy) vs
//! SQLite FTS5, on the deterministic corpus, in one process, interleaved.
//!
//! ```text
//! compare [--sizes 10000,100000] [--out FILE] [--dir DIR] [--queries N]
//! compare probe-open <memstrata|tantivy|fts5> <path> <query>   (internal: open in a fresh process)
//! ```
//!
//! Prints markdown (also written to `--out`). Run through `scripts/bench.sh`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memstrata_benches::corpus::{Corpus, EpisodeDoc};

use memstrata_benches::engines::fts5::Fts5;
use memstrata_benches::engines::memstrata_engine::{self, MemstrataKv, MemstrataSearch};
use memstrata_benches::engines::sled_raw::{RawSled, RawSledDecoded};
use memstrata_benches::engines::tantivy_raw::{RawTantivy, Scoping};
use memstrata_benches::engines::{KvEngine, KvItem, Result, SearchEngine};
use memstrata_benches::stats::{Latency, fmt_bytes, fmt_ns, fmt_rate, median};
use memstrata_benches::sys::{self, Hardware};

const BATCH: usize = 1000;

/// Progress counter watched by [`watchdog`].
static PROGRESS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static PHASE: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

fn tick() {
    PROGRESS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

fn phase(p: String) {
    eprintln!("   {p}");
    *PHASE.lock().unwrap_or_else(|e| e.into_inner()) = p;
    tick();
}

/// Exit with status 75 when nothing progresses for `BENCH_STALL_SECS`
/// (default 180 s). Unpatched sled 0.34.7 could deadlock under sustained
/// writes (its segment accountant waited, under its mutex, for a file
/// truncation queued on its own starved I/O pool; fixed in `vendor/sled`);
/// the watchdog stays so that any stall is reported, and `scripts/bench.sh`
/// retries the run and says so in the report rather than hanging for ever.
fn watchdog() {
    let stall = std::env::var("BENCH_STALL_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180u64);
    std::thread::spawn(move || {
        let mut last = PROGRESS.load(std::sync::atomic::Ordering::Relaxed);
        let mut since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_secs(5));
            let now = PROGRESS.load(std::sync::atomic::Ordering::Relaxed);
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= Duration::from_secs(stall) {
                let p = PHASE.lock().map(|p| p.clone()).unwrap_or_default();
                eprintln!(
                    "STALLED: no progress for {stall} s during \"{p}\" (pid {})",
                    std::process::id()
                );
                if let Ok(dir) = std::env::var("BENCH_STALL_DUMP") {
                    let _ = std::process::Command::new("gdb")
                        .args([
                            "-p",
                            &std::process::id().to_string(),
                            "-batch",
                            "-ex",
                            "thread apply all bt 30",
                        ])
                        .stdout(
                            std::fs::File::create(Path::new(&dir).join("stall-backtrace.txt"))
                                .map_or(std::process::Stdio::null(), Into::into),
                        )
                        .stderr(std::process::Stdio::null())
                        .status();
                }
                std::process::exit(75);
            }
        }
    });
}
const LIMIT: usize = 10;
/// Search engines compared: memstrata, raw tantivy, FTS5, then two diagnostic variants of raw tantivy.
const NE: usize = 5;

#[derive(Debug, Clone)]
struct Args {
    sizes: Vec<usize>,
    out: Option<PathBuf>,
    dir: PathBuf,
    queries: Option<usize>,
    skip_kv: bool,
    skip_search: bool,
    skip_sessions: bool,
    skip_mixed: bool,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        sizes: vec![10_000, 100_000],
        out: None,
        dir: std::env::temp_dir(),
        queries: None,
        skip_kv: false,
        skip_search: false,
        skip_sessions: false,
        skip_mixed: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--sizes" => {
                a.sizes = it
                    .next()
                    .ok_or("--sizes needs a value")?
                    .split(',')
                    .map(|s| s.trim().replace('_', "").parse::<usize>())
                    .collect::<std::result::Result<_, _>>()?
            }
            "--out" => a.out = Some(it.next().ok_or("--out needs a value")?.into()),
            "--dir" => a.dir = it.next().ok_or("--dir needs a value")?.into(),
            "--queries" => a.queries = Some(it.next().ok_or("--queries needs a value")?.parse()?),
            "--skip-kv" => a.skip_kv = true,
            "--skip-search" => a.skip_search = true,
            "--skip-sessions" => a.skip_sessions = true,
            "--skip-mixed" => a.skip_mixed = true,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    Ok(a)
}

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    match argv.get(1).map(String::as_str) {
        Some("probe-open") => return probe_open(&argv[2], Path::new(&argv[3]), &argv[4]),
        Some("build-store") => return build_store(Path::new(&argv[2]), argv[3].parse()?),
        Some("profile-search") => {
            return profile_search(&argv[2], Path::new(&argv[3]), argv[4].parse()?);
        }
        Some("profile-kv") => return profile_kv(&argv[2], argv[3].parse()?, argv[4].parse()?),
        Some("decode-micro") => return decode_micro(),
        Some("binding-data") => return binding_data(Path::new(&argv[2])),
        // compare mixed-load DIR OUT.md [THREADS] [SECONDS]
        Some("mixed-load") => {
            let md = memstrata_benches::mixed::section(
                &std::env::current_exe()?,
                Path::new(&argv[2]),
                argv.get(4).map_or(Ok(8), |t| t.parse())?,
                argv.get(5).map_or(Ok(10.0), |t| t.parse())?,
            )
            .map_err(|e| e.to_string())?;
            println!("{md}");
            std::fs::write(&argv[3], md)?;
            return Ok(());
        }
        // compare mixed-row MODE DIR THREADS SECONDS: one row, figures as JSON on stdout.
        Some("mixed-row") => {
            let mode = memstrata_benches::mixed::Mode::parse(&argv[2]).ok_or("unknown mode")?;
            let fig = memstrata_benches::mixed::row(
                Path::new(&argv[3]),
                argv[4].parse()?,
                argv[5].parse()?,
                mode,
            )
            .map_err(|e| e.to_string())?;
            println!("{}", serde_json::to_string(&fig)?);
            return Ok(());
        }
        Some("binding-baseline") => return binding_baseline(Path::new(&argv[2])),
        Some("inspect-store") => {
            let v = inspect_store(Path::new(&argv[2]))?;
            println!("{v}");
            return Ok(());
        }
        _ => {}
    }
    let args = parse_args()?;
    std::fs::create_dir_all(&args.dir)?;
    watchdog();
    let mut report = Report::default();
    let hw = Hardware::detect();
    let t0 = Instant::now();
    let corpus = Corpus::standard();
    for &n in &args.sizes {
        eprintln!("== tier {n}");
        if !args.skip_kv {
            report.kv.push(kv_tier(&corpus, n, &args.dir)?);
        }
        if !args.skip_search {
            report.search.push(search_tier(&corpus, n, &args)?);
        }
    }
    if !args.skip_sessions {
        report.sessions = Some(sessions_bench(&corpus, &args.dir)?);
    }
    let mut md = report.markdown(&hw, t0.elapsed());
    if !args.skip_mixed {
        // BENCH_MIXED_SECONDS: the measured window of each row (default 10 s).
        let secs = std::env::var("BENCH_MIXED_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10.0);
        md.push_str(
            &memstrata_benches::mixed::section(&std::env::current_exe()?, &args.dir, 8, secs)
                .map_err(|e| e.to_string())?,
        );
    }
    println!("{md}");
    if let Some(out) = &args.out {
        if let Some(p) = out.parent() {
            std::fs::create_dir_all(p)?;
        }
        std::fs::write(out, &md)?;
    }
    Ok(())
}

// ---------------------------------------------------------------- short-term floor

#[derive(Debug)]
struct KvResult {
    n: usize,
    /// engine -> median ns/op over batches
    store: Vec<(&'static str, f64)>,
    retrieve: Vec<(&'static str, f64)>,
}

fn kv_items(corpus: &Corpus, range: std::ops::Range<usize>, now_ms: i64) -> Vec<KvItem> {
    range
        .map(|i| {
            let value = corpus.kv_value(i);
            let bytes = memstrata_engine::short_term_record_bytes(&value, now_ms);
            KvItem {
                key: Corpus::kv_key(i),
                value,
                bytes,
            }
        })
        .collect()
}

/// Time `op` over a batch; ns per op.
fn time_batch(k: usize, mut op: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    let t = Instant::now();
    for i in 0..k {
        op(i)?;
    }
    Ok(t.elapsed().as_nanos() as f64 / k as f64)
}

fn kv_tier(corpus: &Corpus, n: usize, dir: &Path) -> Result<KvResult> {
    phase(format!("{n}: short-term store/retrieve"));
    let root = tempfile::Builder::new()
        .prefix("memstrata-bench-kv-")
        .tempdir_in(dir)?;
    let mem = MemstrataKv::open(&root.path().join("memstrata"))?;
    let raw = RawSled::open(&root.path().join("sled"))?;
    let raw_dec = RawSledDecoded(raw.clone());
    let now_ms = chrono::Utc::now().timestamp_millis();

    // Store: the same N fresh keys into each engine, batch by batch, engines alternating.
    let engines: [&dyn KvEngine; 2] = [&mem, &raw];
    let mut store: Vec<Vec<f64>> = vec![Vec::new(); 2];
    for (b, start) in (0..n).step_by(BATCH).enumerate() {
        let end = (start + BATCH).min(n);
        let items = kv_items(corpus, start..end, now_ms);
        for j in 0..2 {
            let e = (b + j) % 2;
            let mut batch = items.clone();
            let k = batch.len();
            let mut drain = batch.drain(..);
            let ns = time_batch(k, |_| engines[e].store(drain.next().expect("item")))?;
            drop(drain);
            store[e].push(ns);
        }
        tick();
    }
    mem.flush()?;
    raw.flush()?;

    // Retrieve: uniformly random existing keys, same sequence for every engine.
    let engines: [&dyn KvEngine; 3] = [&mem, &raw, &raw_dec];
    let mut retrieve: Vec<Vec<f64>> = vec![Vec::new(); 3];
    let mut rng = memstrata_benches::corpus::Rng::new(99);
    let lookups = n.clamp(50_000, 200_000);
    // Warm the caches once.
    for e in engines {
        for i in 0..n.min(20_000) {
            e.retrieve(&Corpus::kv_key(i))?;
        }
    }
    for b in 0..lookups / BATCH {
        let keys: Vec<String> = (0..BATCH)
            .map(|_| Corpus::kv_key(rng.range(0, n)))
            .collect();
        for j in 0..3 {
            let e = (b + j) % 3;
            let ns = time_batch(keys.len(), |i| {
                if engines[e].retrieve(&keys[i])? {
                    Ok(())
                } else {
                    Err(format!("{}: key {} missing", engines[e].name(), keys[i]).into())
                }
            })?;
            retrieve[e].push(ns);
        }
        tick();
    }
    let names2 = [mem.name(), raw.name()];
    let names3 = [mem.name(), raw.name(), raw_dec.name()];
    let r = KvResult {
        n,
        store: names2
            .iter()
            .zip(&store)
            .map(|(nm, v)| (*nm, median(v)))
            .collect(),
        retrieve: names3
            .iter()
            .zip(&retrieve)
            .map(|(nm, v)| (*nm, median(v)))
            .collect(),
    };
    eprintln!("   kv: {:?}", r);
    Ok(r)
}

// ---------------------------------------------------------------- episodes

#[derive(Debug, Default)]
struct EngineSearch {
    name: &'static str,
    ingest_lat: Latency,
    ingest_time: Duration,
    finish_time: Duration,
    /// Closing the store after the final flush (Memstrata: index writer,
    /// sled, and the close-time log checkpoint after a large session).
    close_time: Duration,
    disk_apparent: u64,
    disk_allocated: u64,
    disk_split: Vec<(String, u64)>,
    segments: Option<usize>,
    /// query class -> latency
    search: Vec<(&'static str, Latency)>,
    /// query class -> mean top-10 overlap with raw tantivy
    agreement: Vec<(&'static str, f64)>,
    /// First open after the writing process closed the store.
    open: Option<OpenProbe>,
    /// A second open (a store that was opened and closed cleanly since).
    reopen: Option<OpenProbe>,
    /// Memstrata: live key + value bytes in sled.
    live_bytes: Option<u64>,
    /// Memstrata: allocated bytes after `optimize(aggressive)` and close, and the time it took.
    after_optimize: Option<(u64, Duration)>,
}

#[derive(Debug, Default, Clone)]
struct OpenProbe {
    open_ns: f64,
    first_search_ns: f64,
    rss_before: u64,
    rss_after_open: u64,
    rss_after_search: u64,
}

#[derive(Debug)]
struct SearchResult {
    n: usize,
    engines: Vec<EngineSearch>,
    queries: Vec<(&'static str, usize)>,
    /// After `optimize(aggressive)`: (class, memstrata p50 ns, raw tantivy p50 ns, memstrata segments).
    optimized: Vec<(&'static str, u64, u64, Option<usize>)>,
}

fn search_tier(corpus: &Corpus, n: usize, args: &Args) -> Result<SearchResult> {
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
fn probe_open(kind: &str, path: &Path, query: &str) -> Result<()> {
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

// ---------------------------------------------------------------- sessions

/// Versions saved per level.
const SESSION_VERSIONS: usize = 40;
/// JSON size of version 1 and growth per version (an agent checkpointing a growing transcript).
const SESSION_BASE_BYTES: usize = 16 * 1024;
const SESSION_STEP_BYTES: usize = 2 * 1024;

#[derive(Debug)]
struct SessionLevel {
    level: u8,
    raw: u64,
    stored: u64,
    last_raw: u64,
    last_stored: u64,
    save: Latency,
    restore: Latency,
    save_ns: f64,
    restore_ns: f64,
}

#[derive(Debug)]
struct SessionResult {
    levels: Vec<SessionLevel>,
    json_bytes_last: usize,
}

fn sessions_bench(corpus: &Corpus, dir: &Path) -> Result<SessionResult> {
    phase("sessions: save/restore per compression level".into());
    let root = tempfile::Builder::new()
        .prefix("memstrata-bench-sessions-")
        .tempdir_in(dir)?;
    let mem = memstrata_engine::open(root.path())?;
    let contents: Vec<serde_json::Value> = (1..=SESSION_VERSIONS)
        .map(|v| corpus.session_content(v, SESSION_BASE_BYTES + v * SESSION_STEP_BYTES))
        .collect();
    let json_bytes_last = contents.last().map_or(0, |c| c.to_string().len());
    let mut levels = Vec::new();
    let mut ids = Vec::new();
    for level in 0..=3u8 {
        ids.push(
            mem.sessions()
                .create(
                    &format!("level-{level}"),
                    serde_json::json!({"level": level}),
                )?
                .session_id,
        );
        levels.push(SessionLevel {
            level,
            raw: 0,
            stored: 0,
            last_raw: 0,
            last_stored: 0,
            save: Latency::new(),
            restore: Latency::new(),
            save_ns: 0.0,
            restore_ns: 0.0,
        });
    }
    // Save every version at every level, levels rotating.
    for (v, content) in contents.iter().enumerate() {
        for j in 0..4 {
            let l = (v + j) % 4;
            let c = content.clone();
            let t = Instant::now();
            mem.sessions().save(&ids[l], c, l as u8)?;
            let d = t.elapsed();
            levels[l].save.record(d);
            levels[l].save_ns += d.as_nanos() as f64;
        }
        tick();
    }
    // Restore every version at every level (checking it is exact, untimed).
    for (v, content) in contents.iter().enumerate() {
        for j in 0..4 {
            let l = (v + j) % 4;
            let t = Instant::now();
            let r = mem.sessions().restore(&ids[l], Some(v as u64 + 1))?;
            let d = t.elapsed();
            levels[l].restore.record(d);
            levels[l].restore_ns += d.as_nanos() as f64;
            if &r.content != content {
                return Err(format!("level {l} version {} did not restore exactly", v + 1).into());
            }
        }
        tick();
    }
    for (l, id) in ids.iter().enumerate() {
        let vs = mem.sessions().versions(id)?;
        levels[l].raw = vs.iter().map(|v| v.raw_bytes).sum();
        levels[l].stored = vs.iter().map(|v| v.stored_bytes).sum();
        if let Some(last) = vs.last() {
            levels[l].last_raw = last.raw_bytes;
            levels[l].last_stored = last.stored_bytes;
        }
    }
    Ok(SessionResult {
        levels,
        json_bytes_last,
    })
}

/// How long decoding a short-term record takes, by encoding: the cost that
/// separates `retrieve` from a bare sled `get` (profiling aid).
fn decode_micro() -> Result<()> {
    let corpus = Corpus::standard();
    let vals: Vec<serde_json::Value> = (0..10_000).map(|i| corpus.kv_value(i)).collect();
    let mp: Vec<Vec<u8>> = vals
        .iter()
        .map(|v| memstrata_engine::short_term_record_bytes(v, 0))
        .collect();
    let js: Vec<Vec<u8>> = vals
        .iter()
        .map(|v| serde_json::to_vec(v).expect("json"))
        .collect();
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct R {
        value: serde_json::Value,
        stored_at: i64,
        expires_at: Option<i64>,
    }
    let n = mp.len();
    let m = per_call(n * 5, 1000, |i| {
        let b = &mp[i % n];
        let r: R = if b[0] == 1 {
            rmp_serde::from_slice(&lz4_flex::decompress_size_prepended(&b[1..])?)?
        } else {
            rmp_serde::from_slice(&b[1..])?
        };
        std::hint::black_box(r);
        Ok(())
    })?;
    let j = per_call(n * 5, 1000, |i| {
        let v: serde_json::Value = serde_json::from_slice(&js[i % n])?;
        std::hint::black_box(v);
        Ok(())
    })?;
    let mean_len = |b: &[Vec<u8>]| b.iter().map(Vec::len).sum::<usize>() as f64 / b.len() as f64;
    println!(
        "{}",
        serde_json::json!({"msgpack_record_ns": m, "json_value_ns": j,
                           "msgpack_bytes": mean_len(&mp), "json_bytes": mean_len(&js)})
    );
    Ok(())
}

// ---------------------------------------------------------------- binding overhead baseline
//
// `benches/python/binding_overhead.py` times the same calls through the
// Python binding; both read the data `binding-data` writes, so both sides
// store, read and search exactly the same things in the same order.

const BINDING_KV: usize = 5000;
const BINDING_LOOKUPS: usize = 20_000;
const BINDING_EPISODES: usize = 1000;
const BINDING_QUERIES: usize = 200;

fn binding_data(out: &Path) -> Result<()> {
    let corpus = Corpus::standard();
    let mut rng = memstrata_benches::corpus::Rng::new(11);
    let kv: Vec<serde_json::Value> = (0..BINDING_KV)
        .map(|i| serde_json::json!([Corpus::kv_key(i), corpus.kv_value(i)]))
        .collect();
    let lookups: Vec<String> = (0..BINDING_LOOKUPS)
        .map(|_| Corpus::kv_key(rng.range(0, BINDING_KV)))
        .collect();
    let episodes: Vec<serde_json::Value> = (0..BINDING_EPISODES)
        .map(|i| {
            let d = corpus.episode(i);
            serde_json::json!({"summary": d.summary, "content": d.content, "participants": d.participants,
                               "tags": d.tags, "importance": d.importance, "timestamp_ms": d.ts_ms})
        })
        .collect();
    let queries = corpus.keyword_queries(BINDING_QUERIES);
    std::fs::write(
        out,
        serde_json::to_vec(
            &serde_json::json!({"kv": kv, "lookups": lookups, "episodes": episodes, "queries": queries}),
        )?,
    )?;
    Ok(())
}

/// Median ns per call over batches of `batch`.
fn per_call(n: usize, batch: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    let mut meds = Vec::new();
    let mut i = 0;
    while i < n {
        let end = (i + batch).min(n);
        let t = Instant::now();
        for j in i..end {
            f(j)?;
        }
        meds.push(t.elapsed().as_nanos() as f64 / (end - i) as f64);
        i = end;
    }
    Ok(median(&meds))
}

fn binding_baseline(data: &Path) -> Result<()> {
    let d: serde_json::Value = serde_json::from_slice(&std::fs::read(data)?)?;
    let dir = tempfile::tempdir()?;
    let mem = memstrata_engine::open(dir.path())?;
    let st = mem.short_term();
    let kv: Vec<(String, serde_json::Value)> = d["kv"]
        .as_array()
        .ok_or("kv")?
        .iter()
        .map(|p| (p[0].as_str().unwrap_or_default().to_owned(), p[1].clone()))
        .collect();
    let lookups: Vec<String> = d["lookups"]
        .as_array()
        .ok_or("lookups")?
        .iter()
        .map(|k| k.as_str().unwrap_or_default().to_owned())
        .collect();
    let mut out = serde_json::Map::new();
    // The value is built by the caller in both languages: Rust clones a prepared
    // Value per call (outside nothing: the clone is part of the call site).
    out.insert(
        "short_term.store".into(),
        per_call(kv.len(), 500, |i| {
            st.store(&kv[i].0, kv[i].1.clone(), None)?;
            Ok(())
        })?
        .into(),
    );
    out.insert(
        "short_term.retrieve (hit)".into(),
        per_call(lookups.len(), 1000, |i| {
            std::hint::black_box(st.retrieve(&lookups[i])?.ok_or("missing")?);
            Ok(())
        })?
        .into(),
    );
    let misses: Vec<String> = (0..lookups.len())
        .map(|i| format!("missing:{i:08}"))
        .collect();
    out.insert(
        "short_term.retrieve (miss)".into(),
        per_call(misses.len(), 1000, |i| {
            std::hint::black_box(st.retrieve(&misses[i])?);
            Ok(())
        })?
        .into(),
    );
    out.insert(
        "active_context".into(),
        per_call(20_000, 1000, |_| {
            std::hint::black_box(mem.active_context());
            Ok(())
        })?
        .into(),
    );
    let ep = mem.episodic();
    for e in d["episodes"].as_array().ok_or("episodes")? {
        let mut ne: memstrata::NewEpisode = serde_json::from_value(serde_json::json!({
            "summary": e["summary"], "content": e["content"], "participants": e["participants"],
            "tags": e["tags"], "importance": e["importance"]}))?;
        ne.timestamp =
            chrono::DateTime::from_timestamp_millis(e["timestamp_ms"].as_i64().unwrap_or(0));
        ep.record(ne)?;
    }
    // One index segment on both sides: the segment layout otherwise depends on commit timing.
    mem.admin()
        .optimize(memstrata::admin::OptimizeLevel::Aggressive, None)?;
    let queries: Vec<String> = d["queries"]
        .as_array()
        .ok_or("queries")?
        .iter()
        .map(|q| q.as_str().unwrap_or_default().to_owned())
        .collect();
    let filters = memstrata::SearchFilters::default();
    for q in &queries[..20] {
        ep.search(q, &filters, 10)?;
    }
    out.insert(
        "episodic.search (10 hits)".into(),
        per_call(queries.len(), 50, |i| {
            std::hint::black_box(ep.search(&queries[i], &filters, 10)?);
            Ok(())
        })?
        .into(),
    );
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}

// ---------------------------------------------------------------- profiling entry points
//
// For `valgrind --tool=callgrind` (see scripts/bench.sh `profile`): build a
// store natively, then profile only the operation of interest.

fn build_store(dir: &Path, n: usize) -> Result<()> {
    let corpus = Corpus::standard();
    let docs: Vec<EpisodeDoc> = (0..n).map(|i| corpus.episode(i)).collect();
    let mut lat = Latency::new();
    let mut mem = MemstrataSearch::open(&dir.join("memstrata"), HashMap::new())?;
    let mut tan = RawTantivy::create(&dir.join("tantivy"))?;
    for e in [&mut mem as &mut dyn SearchEngine, &mut tan] {
        for b in docs.chunks(BATCH) {
            e.ingest(b, &mut lat)?;
        }
        e.finish()?;
    }
    let ids = mem.close();
    std::fs::write(dir.join("ids.json"), serde_json::to_vec(&ids)?)?;
    Ok(())
}

fn profile_search(engine: &str, dir: &Path, queries: usize) -> Result<()> {
    let corpus = Corpus::standard();
    let e: Box<dyn SearchEngine> = match engine {
        "memstrata" => {
            let ids: HashMap<String, usize> =
                serde_json::from_slice(&std::fs::read(dir.join("ids.json"))?)?;
            Box::new(MemstrataSearch::open(&dir.join("memstrata"), ids)?)
        }
        "tantivy" => Box::new(RawTantivy::open(&dir.join("tantivy"))?),
        "tantivy-must" => {
            Box::new(RawTantivy::open(&dir.join("tantivy"))?.with_scoping(Scoping::MustClauses))
        }
        "tantivy-overfetch" => {
            Box::new(RawTantivy::open(&dir.join("tantivy"))?.with_scoping(Scoping::OverFetch))
        }
        other => return Err(format!("unknown engine {other}").into()),
    };
    let mut hits = 0;
    for q in corpus
        .keyword_queries(queries)
        .iter()
        .chain(&corpus.question_queries(queries))
    {
        hits += e.search(q, LIMIT)?.len();
    }
    eprintln!("{engine}: {hits} hits");
    Ok(())
}

/// Open a closed Memstrata store's sled database directly (in this fresh
/// process): time the bare sled open, and sum the live key + value bytes of
/// every tree, to separate sled's space amplification from the data itself.
fn inspect_store(store: &Path) -> Result<serde_json::Value> {
    let t = Instant::now();
    let db = sled::Config::new()
        .path(store.join("db"))
        .cache_capacity(memstrata_benches::engines::SLED_CACHE_BYTES)
        .open()?;
    let sled_open_ns = t.elapsed().as_nanos() as f64;
    let mut trees = serde_json::Map::new();
    let mut live = 0u64;
    for name in db.tree_names() {
        let tree = db.open_tree(&name)?;
        let mut bytes = 0u64;
        let mut n = 0u64;
        for kv in tree.iter() {
            let (k, v) = kv?;
            bytes += (k.len() + v.len()) as u64;
            n += 1;
        }
        live += bytes;
        trees.insert(
            String::from_utf8_lossy(&name).into_owned(),
            serde_json::json!({"items": n, "bytes": bytes}),
        );
    }
    drop(db);
    Ok(serde_json::json!({"sled_open_ns": sled_open_ns, "live_bytes": live, "trees": trees}))
}

fn profile_kv(engine: &str, n: usize, lookups: usize) -> Result<()> {
    let corpus = Corpus::standard();
    let dir = tempfile::tempdir()?;
    let e: Box<dyn KvEngine> = match engine {
        "memstrata" => Box::new(MemstrataKv::open(&dir.path().join("m"))?),
        "sled" => Box::new(RawSled::open(&dir.path().join("s"))?),
        other => return Err(format!("unknown engine {other}").into()),
    };
    for it in kv_items(&corpus, 0..n, 0) {
        e.store(it)?;
    }
    let mut rng = memstrata_benches::corpus::Rng::new(5);
    for _ in 0..lookups {
        e.retrieve(&Corpus::kv_key(rng.range(0, n)))?;
    }
    Ok(())
}

// ---------------------------------------------------------------- report

#[derive(Debug, Default)]
struct Report {
    kv: Vec<KvResult>,
    search: Vec<SearchResult>,
    sessions: Option<SessionResult>,
}

fn status(ok: bool) -> &'static str {
    if ok { "met" } else { "**missed**" }
}

/// A ratio as printed (two decimals), so the status agrees with the figure shown.
fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn size_label(n: usize) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

fn lookup(v: &[(&'static str, f64)], name: &str) -> f64 {
    v.iter()
        .find(|(n, _)| *n == name)
        .map_or(f64::NAN, |(_, x)| *x)
}

fn dep_versions() -> Vec<(String, String)> {
    let lock = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock"))
        .unwrap_or_default();
    let mut out = Vec::new();
    for name in ["sled", "tantivy", "rusqlite"] {
        let needle = format!("name = \"{name}\"\nversion = \"");
        if let Some(p) = lock.find(&needle) {
            let rest = &lock[p + needle.len()..];
            let mut version = rest[..rest.find('"').unwrap_or(0)].to_owned();
            // A package without a `source` is a path dependency: the vendored, patched copy.
            let block = &rest[..rest.find("\n\n").unwrap_or(rest.len())];
            if !block.contains("source = ") {
                version.push_str(" (vendored, `vendor/sled/PATCHES.md`)");
            }
            out.push((name.to_owned(), version));
        }
    }
    out.push(("SQLite".into(), Fts5::sqlite_version()));
    out
}

impl Report {
    fn markdown(&self, hw: &Hardware, elapsed: Duration) -> String {
        let mut s = String::new();
        let w = &mut s;
        let _ = writeln!(w, "## Machine\n");
        let _ = writeln!(
            w,
            "- CPU: {} ({} logical cores)\n- RAM: {}\n- OS: {}",
            hw.cpu,
            hw.cores,
            fmt_bytes(hw.ram_bytes as f64),
            hw.kernel
        );
        let vers: Vec<String> = dep_versions()
            .into_iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect();
        let _ = writeln!(
            w,
            "- Engines: memstrata {}, {}",
            env!("CARGO_PKG_VERSION"),
            vers.join(", ")
        );
        let _ = writeln!(w, "- Build: `--release`; this run took {:.0?}\n", elapsed);

        // Headline: targets.
        let _ = writeln!(w, "## Targets\n");
        let _ = writeln!(
            w,
            "| target | size | measured | goal | status |\n|---|---|---|---|---|"
        );
        for k in &self.kv {
            let r = lookup(&k.retrieve, "memstrata short_term") / lookup(&k.retrieve, "raw sled");
            let st = lookup(&k.store, "memstrata short_term") / lookup(&k.store, "raw sled");
            let _ = writeln!(
                w,
                "| short-term `retrieve` vs raw sled `get` (median) | {} | {r:.2}× | ≤ 1.5× | {} |",
                size_label(k.n),
                status(r2(r) <= 1.5)
            );
            let _ = writeln!(
                w,
                "| short-term `store` vs raw sled `insert` (median) | {} | {st:.2}× | ≤ 2× | {} |",
                size_label(k.n),
                status(r2(st) <= 2.0)
            );
        }
        for t in &self.search {
            let (m, tv, f) = (&t.engines[0], &t.engines[1], &t.engines[2]);
            for (ci, (class, _)) in t.queries.iter().enumerate() {
                let r = m.search[ci].1.p50() as f64 / tv.search[ci].1.p50() as f64;
                let _ = writeln!(
                    w,
                    "| episode search vs raw tantivy, {class} queries (p50) | {} | {r:.2}× | ≤ 1.3× | {} |",
                    size_label(t.n),
                    status(r2(r) <= 1.3)
                );
            }
            for (ci, (class, _)) in t.queries.iter().enumerate() {
                let r = f.search[ci].1.p50() as f64 / m.search[ci].1.p50() as f64;
                let goal = if t.n >= 100_000 {
                    "≥ 2× faster"
                } else {
                    "(informative)"
                };
                let st = if t.n >= 100_000 {
                    status(r2(r) >= 2.0)
                } else {
                    "–"
                };
                let _ = writeln!(
                    w,
                    "| episode search speed-up over SQLite FTS5, {class} queries (p50) | {} | {r:.2}× faster | {goal} | {st} |",
                    size_label(t.n)
                );
            }
            let d = m.disk_allocated as f64 / f.disk_allocated as f64;
            let _ = writeln!(
                w,
                "| disk footprint vs SQLite FTS5 | {} | {d:.2}× | ≤ 1.5× | {} |",
                size_label(t.n),
                status(r2(d) <= 1.5)
            );
        }
        let _ = writeln!(w);

        // Short-term floor detail.
        if !self.kv.is_empty() {
            let _ = writeln!(w, "## Short-term layer vs raw sled\n");
            let _ = writeln!(
                w,
                "Median time per operation over batches of {BATCH}, engines alternating batch by batch. \
                 Both stores use sled {} with a 32 MiB cache and `flush_every_ms = 500` \
                 (Memstrata's `Durability::Periodic(500)`); raw sled writes the exact key and record bytes \
                 Memstrata writes. `retrieve` reads uniformly random existing keys. \"raw sled + decode\" also \
                 decodes the record into a `serde_json::Value`, as a hand-written store would have to.\n",
                dep_versions()
                    .first()
                    .map_or(String::new(), |v| v.1.clone())
            );
            let _ = writeln!(
                w,
                "| keys | op | memstrata | raw sled | raw sled + decode | memstrata / raw sled |\n|---|---|---|---|---|---|"
            );
            for k in &self.kv {
                let ms = lookup(&k.store, "memstrata short_term");
                let rs = lookup(&k.store, "raw sled");
                let _ = writeln!(
                    w,
                    "| {} | store | {} | {} | – | {:.2}× |",
                    size_label(k.n),
                    fmt_ns(ms),
                    fmt_ns(rs),
                    ms / rs
                );
                let mr = lookup(&k.retrieve, "memstrata short_term");
                let rr = lookup(&k.retrieve, "raw sled");
                let rd = lookup(&k.retrieve, "raw sled + decode");
                let _ = writeln!(
                    w,
                    "| {} | retrieve | {} | {} | {} | {:.2}× |",
                    size_label(k.n),
                    fmt_ns(mr),
                    fmt_ns(rr),
                    fmt_ns(rd),
                    mr / rr
                );
            }
            let _ = writeln!(w);
        }

        if !self.search.is_empty() {
            let _ = writeln!(
                w,
                "## Episode search: Memstrata vs raw tantivy vs SQLite FTS5\n"
            );
            let _ = writeln!(
                w,
                "Same documents, same queries, top {LIMIT} with each hit's document decoded. Queries run \
                 interleaved (every query on every engine, engine order rotating) after a warm-up of 50 \
                 queries per class. *keywords*: 2–4 content words; *question*: a natural-language question \
                 with function words (\"what did we decide about the …?\"). *agreement*: share of raw \
                 tantivy's top {LIMIT} that the engine also returned. The *diag* rows are the raw tantivy index \
                 searched with Memstrata's scoping (`kind`/`ctx` as `Must` clauses) and with the proposed \
                 alternative (pure disjunction, over-fetch, filter on a fast field); they explain the overhead \
                 and are not targets.\n"
            );
            let _ = writeln!(
                w,
                "| episodes | queries | engine | p50 | p95 | p99 | mean | vs memstrata (p50) | agreement |\n|---|---|---|---|---|---|---|---|---|"
            );
            for t in &self.search {
                for (ci, (class, nq)) in t.queries.iter().enumerate() {
                    let base = t.engines[0].search[ci].1.p50() as f64;
                    for e in &t.engines {
                        let l = &e.search[ci].1;
                        let _ = writeln!(
                            w,
                            "| {} | {class} ({nq}) | {} | {} | {} | {} | {} | {:.2}× | {:.0}% |",
                            size_label(t.n),
                            e.name,
                            fmt_ns(l.p50() as f64),
                            fmt_ns(l.q(0.95) as f64),
                            fmt_ns(l.q(0.99) as f64),
                            fmt_ns(l.mean()),
                            l.p50() as f64 / base,
                            e.agreement[ci].1 * 100.0
                        );
                    }
                }
            }
            let _ = writeln!(w);
            for t in &self.search {
                let parts: Vec<String> = t
                    .optimized
                    .iter()
                    .map(|(class, m, r, segs)| {
                        format!(
                            "{class}: memstrata {} vs raw tantivy {} = {:.2}× ({} segment(s))",
                            fmt_ns(*m as f64),
                            fmt_ns(*r as f64),
                            *m as f64 / *r as f64,
                            segs.map_or("?".into(), |s| s.to_string())
                        )
                    })
                    .collect();
                if !parts.is_empty() {
                    let _ = writeln!(
                        w,
                        "After `optimize(aggressive)` at {} (index merged; second interleaved pass, p50): {}.\n",
                        size_label(t.n),
                        parts.join("; ")
                    );
                }
            }

            let _ = writeln!(w, "## Ingest, footprint, open\n");
            let _ = writeln!(
                w,
                "Each engine's normal per-item write path: Memstrata `episodic().record()` under \
                 `Durability::Periodic(500)` (one sled transaction + one tantivy `add_document` per episode, \
                 index committed every 250 ms); raw tantivy `add_document` with one commit at the end; \
                 FTS5 one transaction per episode (WAL, `synchronous = NORMAL`). Throughput includes the final \
                 flush/commit. Disk is allocated bytes of the closed store. Open time and RSS are measured in a \
                 fresh process (`VmRSS` from `/proc/self/status`), then one search.\n"
            );
            let _ = writeln!(
                w,
                "| episodes | engine | ingest | record p50 | record p99 | disk | bytes/episode | segments | first open | reopen | RSS after reopen | first search | RSS after search |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
            );
            for t in &self.search {
                for e in &t.engines[..3] {
                    let secs = e.ingest_time.as_secs_f64();
                    let first = e.open.clone().unwrap_or_default();
                    let o = e.reopen.clone().unwrap_or_default();
                    let _ = writeln!(
                        w,
                        "| {} | {} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} |",
                        size_label(t.n),
                        e.name,
                        fmt_rate(t.n as f64 / secs),
                        fmt_ns(e.ingest_lat.p50() as f64),
                        fmt_ns(e.ingest_lat.q(0.99) as f64),
                        fmt_bytes(e.disk_allocated as f64),
                        e.disk_allocated as f64 / t.n as f64,
                        e.segments.map_or("–".into(), |s| s.to_string()),
                        fmt_ns(first.open_ns),
                        fmt_ns(o.open_ns),
                        fmt_bytes(o.rss_after_open as f64),
                        fmt_ns(o.first_search_ns),
                        fmt_bytes(o.rss_after_search as f64),
                    );
                }
            }
            let _ = writeln!(w);
            if let Some(o) = self.search.last().and_then(|t| t.engines[0].open.clone()) {
                let _ = writeln!(
                    w,
                    "A fresh probe process has an RSS of {} before it opens anything.\n",
                    fmt_bytes(o.rss_before as f64)
                );
            }
            let split: Vec<String> = self
                .search
                .iter()
                .map(|t| {
                    let m = &t.engines[0];
                    let mut parts: Vec<String> =
                        m.disk_split.iter().map(|(p, b)| format!("{p} {}", fmt_bytes(*b as f64))).collect();
                    if let (Some(live), Some((_, db))) = (m.live_bytes, m.disk_split.first()) {
                        parts.push(format!(
                            "live records in sled {} (sled file / live = {:.2}×)",
                            fmt_bytes(live as f64),
                            *db as f64 / live as f64
                        ));
                    }
                    let ingest: Vec<String> = t.engines[..3]
                        .iter()
                        .map(|e| format!("{} {}", e.name, fmt_ns(e.finish_time.as_nanos() as f64)))
                        .collect();
                    let close: Vec<String> = t.engines[..3]
                        .iter()
                        .map(|e| format!("{} {}", e.name, fmt_ns(e.close_time.as_nanos() as f64)))
                        .collect();
                    if let Some((bytes, took)) = m.after_optimize {
                        parts.push(format!(
                            "after `optimize(aggressive)` ({}) {} = {:.2}× FTS5",
                            fmt_ns(took.as_nanos() as f64),
                            fmt_bytes(bytes as f64),
                            bytes as f64 / t.engines[2].disk_allocated as f64
                        ));
                    }
                    format!(
                        "{}: {}; Memstrata `record`: wall time per episode {}, slowest call {}, {:.0}% of the time inside `record` spent in calls slower than 1 ms; final flush: {}; close after it: {}",
                        size_label(t.n),
                        parts.join(", "),
                        fmt_ns(m.ingest_time.as_nanos() as f64 / t.n as f64),
                        fmt_ns(m.ingest_lat.max() as f64),
                        m.ingest_lat.share_above(1_000_000) * 100.0,
                        ingest.join(", "),
                        close.join(", ")
                    )
                })
                .collect();
            let _ = writeln!(
                w,
                "Memstrata's footprint by part (sled `db/`, tantivy `index/`), and ingest detail — {}.\n",
                split.join("; ")
            );
        }

        if let Some(sr) = &self.sessions {
            let _ = writeln!(w, "## Session compression levels\n");
            let _ = writeln!(
                w,
                "One session per level; {SESSION_VERSIONS} versions of an agent checkpoint that grows by appending \
                 conversation turns (version 1 ≈ {} of JSON, the last ≈ {}), saved at every level in turn, then every \
                 version restored (and checked equal to what was saved). *raw* is the content as canonical \
                 MessagePack (`session_versions().raw_bytes`), *stored* the record written \
                 (`stored_bytes`). MB/s is raw bytes over the summed call time.\n",
                fmt_bytes(SESSION_BASE_BYTES as f64),
                fmt_bytes(sr.json_bytes_last as f64)
            );
            let _ = writeln!(
                w,
                "| level | all versions raw → stored | ratio | last version raw → stored | save p50 | save MB/s | restore p50 | restore MB/s |\n|---|---|---|---|---|---|---|---|"
            );
            for l in &sr.levels {
                let _ = writeln!(
                    w,
                    "| {} | {} → {} | {:.2}× | {} → {} | {} | {:.0} | {} | {:.0} |",
                    l.level,
                    fmt_bytes(l.raw as f64),
                    fmt_bytes(l.stored as f64),
                    l.raw as f64 / l.stored as f64,
                    fmt_bytes(l.last_raw as f64),
                    fmt_bytes(l.last_stored as f64),
                    fmt_ns(l.save.p50() as f64),
                    l.raw as f64 / (l.save_ns / 1e9) / 1e6,
                    fmt_ns(l.restore.p50() as f64),
                    l.raw as f64 / (l.restore_ns / 1e9) / 1e6,
                );
            }
            let _ = writeln!(w);
        }
        s
    }
}
