//! `mcp-load`: the bounded loopback load of issue #14 (docs/benchmarks.md,
//! *Bounded loopback load*) from a Rust client, so that the table measures the
//! server, not a Python client process.
//!
//! Per row: one fresh `memstrata-mcp` (release build, a fresh store, `--no-audit`),
//! C clients that each keep one call in flight, a pre-fill of 300 keys, a warm-up,
//! then D seconds of the mix of `benches/python/mcp_latency.py` — writes / reads /
//! searches = 20 / 60 / 20 %: `knowledge_store` of a new key (a fact with three
//! observations), `knowledge_retrieve` of a pre-filled key (a miss is an error),
//! `knowledge_query` of one word, limit 10 — the same facts and words (the standard
//! corpus). Afterwards every acknowledged write (pre-fill, warm-up, measured) is
//! read back by key on the same instance: LOST = acknowledged but not found.
//!
//! Transports (rows): `stdio` (one server process per row; the C clients share its
//! one stdio connection, C requests in flight, answers matched by id),
//! `http-session` (streamable HTTP as the SDK clients use it: `initialize`,
//! `notifications/initialized`, then `tools/call` with `Mcp-Session-Id`; one session
//! and one keep-alive connection per client), `http-stateless` (stateless
//! 2026-07-28 `tools/call` on `/mcp`, one keep-alive connection per client), `ws`
//! (one WebSocket per client, `initialize`d), `execute` (`POST /mcp/v1/execute`,
//! one keep-alive connection per client), and the wide row `execute-wide` /
//! `http-stateless-wide` / `http-session-wide` with the wide client count.
//!
//! Usage:
//!   mcp-load BINARY [--seconds D] [--warmup W] [--clients C] [--wide C64]
//!            [--rows stdio,http-session,...] [--threads T] [--dir DIR]
//!            [--md OUT.md] [--json OUT.json]
//! The JSON is the format `benches/python/quick_report.py` reads. Nothing here
//! asserts on time.

mod report;
mod row;
mod server;
mod transport;
mod workload;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use report::{fmt_ns, markdown, target};
use row::run_row;
use transport::Transport;
use workload::Data;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const PREFILL: usize = 300;
const WRITE_PCT: usize = 20;
const READ_PCT: usize = 60; // the rest are searches
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Issue #14: C = 8 on every transport ≥ 2000 calls/s, p95 < 25 ms, p99 < 100 ms;
/// the wide HTTP row ≥ 1500 calls/s, p99 < 100 ms, 0 errors, 0 lost.
const TARGET_P95_NS: f64 = 25e6;
const TARGET_P99_NS: f64 = 100e6;
const KV_TEXTS: usize = 5000; // as `compare binding-data`
const QUERIES: usize = 200;
const SESSION_VERSION: &str = "2025-06-18";
const STATELESS_VERSION: &str = "2026-07-28";

struct Args {
    binary: PathBuf,
    secs: f64,
    warmup: f64,
    clients: usize,
    wide: usize,
    rows: Vec<(Transport, bool)>,
    threads: usize,
    dir: PathBuf,
    md: Option<PathBuf>,
    json: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let binary: PathBuf = it
        .next()
        .ok_or("usage: mcp-load BINARY [--seconds D] [--warmup W] [--clients C] [--wide C] [--rows LIST] [--threads T] [--dir DIR] [--md FILE] [--json FILE]")?
        .into();
    let mut a = Args {
        binary,
        secs: 10.0,
        warmup: 1.0,
        clients: 8,
        wide: 64,
        rows: Vec::new(),
        threads: 1,
        dir: std::env::temp_dir(),
        md: None,
        json: None,
    };
    let mut rows =
        "stdio,http-session,http-stateless,ws,execute,execute-wide,http-stateless-wide".to_owned();
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => a.secs = val()?.parse()?,
            "--warmup" => a.warmup = val()?.parse()?,
            "--clients" => a.clients = val()?.parse()?,
            "--wide" => a.wide = val()?.parse()?,
            "--rows" => rows = val()?,
            "--threads" => a.threads = val()?.parse()?,
            "--dir" => a.dir = val()?.into(),
            "--md" => a.md = Some(val()?.into()),
            "--json" => a.json = Some(val()?.into()),
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    for r in rows.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let (name, wide) = match r.strip_suffix("-wide") {
            Some(n) => (n, true),
            None => (r, false),
        };
        let t = Transport::parse(name).ok_or_else(|| format!("--rows: unknown row {r:?}"))?;
        a.rows.push((t, wide));
    }
    if a.clients == 0 || a.wide == 0 || a.threads == 0 || a.secs <= 0.0 {
        return Err("--clients, --wide, --threads and --seconds must be > 0".into());
    }
    Ok(a)
}

fn main() -> Result<()> {
    let a = parse_args()?;
    std::fs::create_dir_all(&a.dir)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(a.threads)
        .enable_all()
        .build()?;
    let data = Arc::new(Data::standard());
    let dir = tempfile::Builder::new()
        .prefix("mcp-load-")
        .tempdir_in(&a.dir)?;
    let started = Instant::now();
    let mut results = Vec::new();
    for (i, &(t, wide)) in a.rows.iter().enumerate() {
        let c = if wide { a.wide } else { a.clients };
        eprintln!("== mcp-load: {}", t.label(c));
        let r = rt.block_on(run_row(
            &a.binary,
            dir.path(),
            t,
            c,
            a.secs,
            a.warmup,
            Arc::clone(&data),
            7 + i as u64 * 10,
        ));
        eprintln!(
            "   {} calls, {}/s, p50 {} p95 {} p99 {}, {} errors, lost {:?}{}",
            r.calls,
            r.rate.map_or("–".into(), |x| format!("{x:.0}")),
            fmt_ns(r.p[0]),
            fmt_ns(r.p[1]),
            fmt_ns(r.p[2]),
            r.errors,
            r.lost,
            r.failure
                .as_ref()
                .map_or(String::new(), |f| format!(", FAILED: {f}"))
        );
        results.push((r, wide));
    }
    let total = started.elapsed().as_secs_f64();
    if let Some(path) = &a.json {
        let rows: Vec<Value> = results
            .iter()
            .map(|(r, wide)| {
                let ok = r.rate.is_some() && r.failure.is_none();
                json!({
                    "short": r.transport.short(), "label": r.transport.label(r.clients),
                    "clients": r.clients, "baseline": Value::Null, "calls": r.calls,
                    "rate": r.rate, "p50_ns": ok.then_some(r.p[0]), "p95_ns": ok.then_some(r.p[1]),
                    "p99_ns": ok.then_some(r.p[2]), "errors": r.errors, "lost": r.lost,
                    "acked": r.acked, "failure": r.failure, "target": target(r, *wide),
                    "client_cpu_s": r.client_cpu, "server_cpu_s": r.server_cpu, "wall_s": r.wall_s,
                    "load_before": r.load_before, "load_after": r.load_after,
                })
            })
            .collect();
        std::fs::write(path, serde_json::to_vec_pretty(&rows)?)?;
    }
    let md = markdown(&a, &results, total);
    if let Some(path) = &a.md {
        std::fs::write(path, &md)?;
    }
    println!("{md}");
    Ok(())
}
