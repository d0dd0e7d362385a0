//! Side-by-side comparison: Memstrata vs the floor (raw sled, raw tantivy) vs
//! SQLite FTS5, on the deterministic corpus, in one process, interleaved.
//!
//! ```text
//! compare [--sizes 10000,100000] [--out FILE] [--dir DIR] [--queries N]
//! compare probe-open <memstrata|tantivy|fts5> <path> <query>   (internal: open in a fresh process)
//! ```
//!
//! Prints markdown (also written to `--out`). Run through `scripts/bench.sh`.

mod binding;
mod kv;
mod profile;
mod progress;
mod report;
mod search;
mod sessions;

use std::path::{Path, PathBuf};
use std::time::Instant;

use memstrata_benches::corpus::Corpus;
use memstrata_benches::engines::Result;
use memstrata_benches::sys::Hardware;

use binding::{binding_baseline, binding_data};
use kv::kv_tier;
use profile::{build_store, decode_micro, inspect_store, profile_kv, profile_search};
use progress::watchdog;
use report::Report;
use search::{probe_open, search_tier};
use sessions::sessions_bench;

const BATCH: usize = 1000;
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
