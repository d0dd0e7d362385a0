//! In-process mixed load: T threads on one `Memory`, the mix of the MCP
//! bounded loopback load table (writes / reads / searches = 20 / 60 / 20 %:
//! `semantic().store` of a new key, `semantic().retrieve` of a pre-filled
//! key, `semantic().query` of one word, limit 10), for D seconds each, in
//! three modes measured back to back in one process:
//!
//! - `mixed`: the engine as shipped (a search sees index changes not yet
//!   committed through the in-memory overlay, without a commit);
//! - `mixed, soft search commits`: the behaviour before the overlay
//!   (`MEMSTRATA_SEARCH_COMMIT=soft`: every search that finds changes
//!   pending makes a soft tantivy commit), as a same-run baseline;
//! - `mixed, durable search commits`: the behaviour before soft commits
//!   (`MEMSTRATA_SEARCH_COMMIT=durable`: a durable commit instead);
//! - `writes only`: the same threads doing only the writes, which is what
//!   the mix's searches are measured against.
//!
//! Every search checks read-your-writes on its own thread's last write
//! (counted as an error if missed). Each row runs in a child process
//! (`compare mixed-row`), so the environment switch applies to it alone.
//! No timing assertions.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use memstrata::Memory;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::corpus::{Corpus, Rng};
use crate::stats::{Latency, fmt_ns};
use crate::sys::loadavg;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const PREFILL: usize = 300;
const WRITE: f64 = 0.2;
const READ: f64 = 0.6;

/// What a row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// The mix, engine as shipped.
    Mixed,
    /// The mix with `MEMSTRATA_SEARCH_COMMIT=soft` (before the overlay).
    MixedSoftSearchCommits,
    /// The mix with `MEMSTRATA_SEARCH_COMMIT=durable` (the old behaviour).
    MixedDurableSearchCommits,
    /// Writes only.
    WritesOnly,
}

impl Mode {
    /// The name on the `mixed-row` command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Mixed => "mixed",
            Mode::MixedSoftSearchCommits => "mixed-soft",
            Mode::MixedDurableSearchCommits => "mixed-durable",
            Mode::WritesOnly => "writes-only",
        }
    }

    /// Parse [`Mode::name`].
    pub fn parse(s: &str) -> Option<Mode> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }

    /// Every mode, in the order of the section.
    pub const ALL: [Mode; 4] = [
        Mode::Mixed,
        Mode::MixedSoftSearchCommits,
        Mode::MixedDurableSearchCommits,
        Mode::WritesOnly,
    ];

    /// `MEMSTRATA_SEARCH_COMMIT` for the row's process, if any.
    pub fn search_commit_env(self) -> Option<&'static str> {
        match self {
            Mode::MixedSoftSearchCommits => Some("soft"),
            Mode::MixedDurableSearchCommits => Some("durable"),
            Mode::Mixed | Mode::WritesOnly => None,
        }
    }

    /// The row's label.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Mixed => "mixed 20/60/20, overlay: no commit per search (as shipped)",
            Mode::MixedSoftSearchCommits => {
                "mixed 20/60/20, soft search commits (before the overlay, `MEMSTRATA_SEARCH_COMMIT=soft`)"
            }
            Mode::MixedDurableSearchCommits => {
                "mixed 20/60/20, durable search commits (before, `MEMSTRATA_SEARCH_COMMIT=durable`)"
            }
            Mode::WritesOnly => "writes only",
        }
    }
}

/// One measured row, as figures (what a child process prints as JSON).
#[derive(Debug, Serialize, Deserialize)]
pub struct RowFigures {
    /// What was measured.
    pub mode: Mode,
    /// Threads.
    pub threads: usize,
    /// Calls completed.
    pub calls: u64,
    /// Calls per second.
    pub rate: f64,
    /// p50, p95, p99 of every call (ns).
    pub all: [u64; 3],
    /// p50, p95 of writes, reads, searches (ns; 0 = none).
    pub by_op: [[u64; 2]; 3],
    /// Errors and read-your-writes misses.
    pub errors: usize,
}

/// One measured row.
#[derive(Debug)]
pub struct MixedRow {
    /// What was measured.
    pub mode: Mode,
    /// Threads.
    pub threads: usize,
    /// Wall time of the measured window.
    pub wall: Duration,
    /// Every call.
    pub all: Latency,
    /// Writes, reads, searches.
    pub by_op: [Latency; 3],
    /// Searches that missed their thread's last acknowledged write, and failed calls.
    pub errors: usize,
}

impl MixedRow {
    /// Calls per second.
    pub fn rate(&self) -> f64 {
        self.all.len() as f64 / self.wall.as_secs_f64()
    }

    /// The figures of the row.
    pub fn figures(&self) -> RowFigures {
        let op = |l: &Latency| {
            if l.is_empty() {
                [0, 0]
            } else {
                [l.p50(), l.q(0.95)]
            }
        };
        RowFigures {
            mode: self.mode,
            threads: self.threads,
            calls: self.all.len(),
            rate: self.rate(),
            all: [self.all.p50(), self.all.q(0.95), self.all.q(0.99)],
            by_op: [op(&self.by_op[0]), op(&self.by_op[1]), op(&self.by_op[2])],
            errors: self.errors,
        }
    }
}

fn fact(corpus: &Corpus, i: usize) -> Value {
    let v = corpus.kv_value(i);
    json!({"entityType": "fact", "observations": [v["text"], format!("step {}", v["step"]), v["refs"][0]]})
}

fn key(i: usize) -> String {
    format!("load-{i:06}")
}

/// Run one row on a fresh store under `dir`.
pub fn run(
    dir: &Path,
    corpus: &Corpus,
    words: &[String],
    threads: usize,
    seconds: f64,
    mode: Mode,
) -> Result<MixedRow> {
    let store = tempfile::Builder::new()
        .prefix("memstrata-mixed-")
        .tempdir_in(dir)?;
    let mem = Memory::open(store.path())?;
    for i in 0..PREFILL {
        mem.semantic().store(&key(i), fact(corpus, i))?;
    }
    mem.flush()?;
    let next = AtomicUsize::new(PREFILL);
    // Warm-up, then the measured window.
    let _ = drive(&mem, corpus, words, threads, 1.0, mode, &next, 1)?;
    let row = drive(&mem, corpus, words, threads, seconds, mode, &next, 2)?;
    drop(mem);
    Ok(row)
}

#[allow(clippy::too_many_arguments)]
fn drive(
    mem: &Memory,
    corpus: &Corpus,
    words: &[String],
    threads: usize,
    seconds: f64,
    mode: Mode,
    next: &AtomicUsize,
    seed: u64,
) -> Result<MixedRow> {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let t0 = Instant::now();
    let results: Vec<Result<(Latency, [Latency; 3], usize)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<(Latency, [Latency; 3], usize)> {
                    let mut rng = Rng::for_item(seed, 77, t as u64);
                    let mut all = Latency::new();
                    let mut by_op = [Latency::new(), Latency::new(), Latency::new()];
                    let mut errors = 0;
                    let mut last_write: Option<String> = None;
                    while Instant::now() < deadline {
                        let x = if mode == Mode::WritesOnly {
                            0.0
                        } else {
                            rng.f64()
                        };
                        let started = Instant::now();
                        let op = if x < WRITE {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let k = key(i);
                            if mem.semantic().store(&k, fact(corpus, i)).is_err() {
                                errors += 1;
                            }
                            last_write = Some(k);
                            0
                        } else if x < WRITE + READ {
                            let k = key(rng.range(0, PREFILL));
                            if !matches!(mem.semantic().retrieve(&k), Ok(Some(_))) {
                                errors += 1;
                            }
                            1
                        } else {
                            let w = &words[rng.range(0, words.len())];
                            if mem.semantic().query(w, 10).is_err() {
                                errors += 1;
                            }
                            2
                        };
                        let dt = started.elapsed();
                        all.record(dt);
                        by_op[op].record(dt);
                        // Read-your-writes, outside the timings: the thread's last
                        // write is found by a search for its key.
                        if op == 2
                            && let Some(k) = &last_write
                            && !mem
                                .semantic()
                                .query(k, 10)
                                .is_ok_and(|h| h.iter().any(|h| &h.key == k))
                        {
                            errors += 1;
                        }
                    }
                    Ok((all, by_op, errors))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("load thread panicked"))
            .collect()
    });
    let wall = t0.elapsed();
    let mut row = MixedRow {
        mode,
        threads,
        wall,
        all: Latency::new(),
        by_op: [Latency::new(), Latency::new(), Latency::new()],
        errors: 0,
    };
    for r in results {
        let (all, by_op, errors) = r?;
        row.all.add(&all);
        for (a, b) in row.by_op.iter_mut().zip(by_op.iter()) {
            a.add(b);
        }
        row.errors += errors;
    }
    Ok(row)
}

/// The section for docs/benchmarks.md.
pub fn markdown(rows: &[RowFigures], seconds: f64, load_before: &str, load_after: &str) -> String {
    let mut s = String::new();
    let w = &mut s;
    let threads = rows.first().map_or(0, |r| r.threads);
    let _ = writeln!(
        w,
        "## In-process mixed load: {threads} threads on one `Memory`\n"
    );
    let _ = writeln!(
        w,
        "The mix of the MCP bounded loopback load (below) without any transport: {threads} threads on one \
         on-disk `Memory` (default options, `Durability::Periodic(500)`), a pre-fill of {PREFILL} knowledge \
         entries, 1 s of warm-up, then {seconds:.0} s of writes / reads / searches = 20 / 60 / 20 %: \
         `semantic().store` of a new key (a fact with three observations), `semantic().retrieve` of a \
         pre-filled key, `semantic().query` of one word (limit 10). Each row is a fresh store in its own \
         process, run back to back (`compare mixed-load`, also part of every `compare` run). After each \
         search a thread also searches for its own last write (not timed) and counts a miss as an error: \
         read-your-writes under load. Load average (1/5/15 min) before: {load_before}; after: {load_after} \
         ({} cores).\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(
        w,
        "| mode | calls | calls/s | p50 | p95 | p99 | write p50 / p95 | read p50 / p95 | search p50 / p95 | errors |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let op = |o: [u64; 2]| {
            if o == [0, 0] {
                "–".to_owned()
            } else {
                format!("{} / {}", fmt_ns(o[0] as f64), fmt_ns(o[1] as f64))
            }
        };
        let _ = writeln!(
            w,
            "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
            r.mode.label(),
            r.calls,
            r.rate,
            fmt_ns(r.all[0] as f64),
            fmt_ns(r.all[1] as f64),
            fmt_ns(r.all[2] as f64),
            op(r.by_op[0]),
            op(r.by_op[1]),
            op(r.by_op[2]),
            r.errors
        );
    }
    let find = |m: Mode| rows.iter().find(|r| r.mode == m);
    if let (Some(mixed), Some(writes)) = (find(Mode::Mixed), find(Mode::WritesOnly)) {
        let mut line = format!(
            "\nMixed ÷ writes-only: {:.2}× the calls/s; write p50 in the mix ÷ in writes-only: {:.2}×.",
            mixed.rate / writes.rate,
            mixed.by_op[0][0] as f64 / writes.by_op[0][0] as f64
        );
        for (before, what) in [
            (Mode::MixedSoftSearchCommits, "soft search commits"),
            (Mode::MixedDurableSearchCommits, "durable search commits"),
        ] {
            if let Some(before) = find(before) {
                let _ = write!(
                    line,
                    " Overlay ÷ {what}, same mix: {:.2}× the calls/s, p99 {} → {}.",
                    mixed.rate / before.rate,
                    fmt_ns(before.all[2] as f64),
                    fmt_ns(mixed.all[2] as f64)
                );
            }
        }
        let _ = writeln!(w, "{line}");
    }
    let _ = writeln!(w);
    s
}

/// One row in this process (the child side of `compare mixed-row`).
pub fn row(dir: &Path, threads: usize, seconds: f64, mode: Mode) -> Result<RowFigures> {
    let corpus = Corpus::standard();
    let words: Vec<String> = corpus
        .keyword_queries(200)
        .into_iter()
        .filter_map(|q| q.split_whitespace().next().map(str::to_owned))
        .collect();
    Ok(run(dir, &corpus, &words, threads, seconds, mode)?.figures())
}

/// Run every row ([`Mode::ALL`]), each in a child process (`exe mixed-row ...`), and return the section.
pub fn section(exe: &Path, dir: &Path, threads: usize, seconds: f64) -> Result<String> {
    let load_before = loadavg();
    let mut rows = Vec::new();
    for mode in Mode::ALL {
        eprintln!(
            "== mixed load: {}, {threads} threads, {seconds} s",
            mode.label()
        );
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("mixed-row")
            .arg(mode.name())
            .arg(dir)
            .arg(threads.to_string())
            .arg(seconds.to_string())
            .env_remove("MEMSTRATA_SEARCH_COMMIT");
        if let Some(v) = mode.search_commit_env() {
            cmd.env("MEMSTRATA_SEARCH_COMMIT", v);
        }
        let out = cmd.output()?;
        if !out.status.success() {
            return Err(format!(
                "mixed-row {} failed: {}",
                mode.name(),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        let row: RowFigures = serde_json::from_slice(&out.stdout)?;
        eprintln!(
            "   {} calls, {:.0}/s, p99 {}, {} errors",
            row.calls,
            row.rate,
            fmt_ns(row.all[2] as f64),
            row.errors
        );
        rows.push(row);
    }
    Ok(markdown(&rows, seconds, &load_before, &loadavg()))
}
