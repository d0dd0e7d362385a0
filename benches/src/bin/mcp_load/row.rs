//! One row: a fresh server, C clients, the pre-fill, the warm-up, the measured window,
//! then every acknowledged write read back (LOST).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use memstrata_benches::corpus::Rng;
use memstrata_benches::sys::loadavg;
use serde_json::{Value, json};

use crate::server::{Server, cpu_seconds, start_server};
use crate::transport::{Conn, Transport};
use crate::workload::{Data, Kind, key, kind_name, next_op};
use crate::{CALL_TIMEOUT, PREFILL, Result};

#[derive(Default)]
struct Tally {
    lat: Vec<u64>,
    by_kind: HashMap<&'static str, Vec<u64>>,
    errors: Vec<String>,
    setup_errors: Vec<String>,
    acked: Vec<String>,
}

pub(crate) struct RowResult {
    pub(crate) transport: Transport,
    pub(crate) clients: usize,
    pub(crate) calls: usize,
    pub(crate) by_kind: [(usize, f64, f64); 3], // calls, p50, p95 per write / read / search
    pub(crate) rate: Option<f64>,
    pub(crate) p: [f64; 3],
    pub(crate) errors: usize,
    pub(crate) error_examples: Vec<String>,
    pub(crate) acked: usize,
    pub(crate) lost: Option<usize>,
    pub(crate) wall_s: f64,
    pub(crate) client_cpu: f64,
    pub(crate) server_cpu: f64,
    pub(crate) load_before: String,
    pub(crate) load_after: String,
    pub(crate) failure: Option<String>,
}
/// Clients loop on the mix, one call in flight each, until `secs` have passed.
async fn drive(
    conns: Vec<Conn>,
    secs: f64,
    data: Arc<Data>,
    writes: Arc<AtomicUsize>,
    seed: u64,
    measured: bool,
) -> (Vec<Conn>, Tally, f64) {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(w, mut conn)| {
            let data = Arc::clone(&data);
            let writes = Arc::clone(&writes);
            tokio::spawn(async move {
                let mut rng = Rng::new(seed * 1000 + w as u64);
                let mut t = Tally::default();
                while Instant::now() < deadline {
                    let (kind, tool, args) = next_op(&mut rng, &data, &writes);
                    let wkey = (kind == Kind::Write)
                        .then(|| args["key"].as_str().unwrap_or("").to_owned());
                    let rkey = args.get("key").and_then(Value::as_str).map(str::to_owned);
                    let start = Instant::now();
                    let r = tokio::time::timeout(CALL_TIMEOUT, conn.call(tool, args)).await;
                    let ns = start.elapsed().as_nanos() as u64;
                    let err = match r {
                        Err(_) => Some(format!("{tool}: no answer within {CALL_TIMEOUT:?}")),
                        Ok(Err(e)) => Some(format!("{tool}: {e}")),
                        Ok(Ok(v))
                            if kind == Kind::Read
                                && v.get("found") == Some(&Value::Bool(false)) =>
                        {
                            Some(format!(
                                "{tool}: pre-filled key {} not found",
                                rkey.unwrap_or_default()
                            ))
                        }
                        Ok(Ok(_)) => None,
                    };
                    if let (Some(k), None) = (wkey, &err) {
                        t.acked.push(k);
                    }
                    match (measured, err) {
                        (false, Some(e)) => t.setup_errors.push(e),
                        (false, None) => {}
                        (true, Some(e)) => t.errors.push(e),
                        (true, None) => {
                            t.lat.push(ns);
                            t.by_kind.entry(kind_name(kind)).or_default().push(ns);
                        }
                    }
                }
                (conn, t)
            })
        })
        .collect();
    let mut all = Tally::default();
    let mut conns = Vec::new();
    for task in tasks {
        match task.await {
            Ok((conn, t)) => {
                conns.push(conn);
                all.lat.extend(t.lat);
                for (k, v) in t.by_kind {
                    all.by_kind.entry(k).or_default().extend(v);
                }
                all.errors.extend(t.errors);
                all.setup_errors.extend(t.setup_errors);
                all.acked.extend(t.acked);
            }
            Err(e) => all.errors.push(format!("client task failed: {e}")),
        }
    }
    (conns, all, t0.elapsed().as_secs_f64())
}

fn pct(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)] as f64
}

async fn connect(server: &Server, t: Transport, c: usize) -> Result<Vec<Conn>> {
    let mut conns = Vec::with_capacity(c);
    for _ in 0..c {
        conns.push(match t {
            Transport::Stdio => Conn::Stdio(Arc::clone(server.stdio.as_ref().ok_or("no stdio")?)),
            Transport::Ws => Conn::ws(server.port).await?,
            _ => Conn::http(server.port, t).await?,
        });
    }
    Ok(conns)
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_row(
    binary: &Path,
    dir: &Path,
    t: Transport,
    c: usize,
    secs: f64,
    warmup: f64,
    data: Arc<Data>,
    seed: u64,
) -> RowResult {
    let load_before = loadavg();
    let mut row = RowResult {
        transport: t,
        clients: c,
        calls: 0,
        by_kind: [(0, f64::NAN, f64::NAN); 3],
        rate: None,
        p: [f64::NAN; 3],
        errors: 0,
        error_examples: Vec::new(),
        acked: 0,
        lost: None,
        wall_s: 0.0,
        client_cpu: 0.0,
        server_cpu: 0.0,
        load_before,
        load_after: String::new(),
        failure: None,
    };
    let store = dir.join(format!("store-{seed}"));
    let _ = std::fs::remove_dir_all(&store);
    if let Err(e) = run_row_inner(binary, &store, &mut row, secs, warmup, data, seed).await {
        row.failure = Some(e.to_string());
    }
    let _ = std::fs::remove_dir_all(&store);
    row.load_after = loadavg();
    row
}

async fn run_row_inner(
    binary: &Path,
    store: &Path,
    row: &mut RowResult,
    secs: f64,
    warmup: f64,
    data: Arc<Data>,
    seed: u64,
) -> Result<()> {
    let (t, c) = (row.transport, row.clients);
    let mut server = start_server(binary, store, t).await?;
    let server_pid = server.child.id().map(|p| p.to_string()).unwrap_or_default();
    let mut conns = connect(&server, t, c).await?;
    // Pre-fill: the keys reads ask for, spread over the clients.
    let next = Arc::new(AtomicUsize::new(0));
    let mut acked: Vec<String> = Vec::new();
    let mut setup_errors = 0usize;
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut conn| {
            let (next, data) = (Arc::clone(&next), Arc::clone(&data));
            tokio::spawn(async move {
                let (mut ok, mut bad) = (Vec::new(), 0usize);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= PREFILL {
                        break;
                    }
                    let (tool, args) = data.store(i);
                    match conn.call(tool, args).await {
                        Ok(_) => ok.push(key(i)),
                        Err(_) => bad += 1,
                    }
                }
                (conn, ok, bad)
            })
        })
        .collect();
    conns = Vec::new();
    for task in tasks {
        let (conn, ok, bad) = task.await?;
        conns.push(conn);
        acked.extend(ok);
        setup_errors += bad;
    }
    let writes = Arc::new(AtomicUsize::new(0));
    let (conns, warm, _) = drive(
        conns,
        warmup,
        Arc::clone(&data),
        Arc::clone(&writes),
        seed,
        false,
    )
    .await;
    acked.extend(warm.acked);
    setup_errors += warm.setup_errors.len();
    let me = std::process::id().to_string();
    let (cpu_c0, cpu_s0) = (cpu_seconds(&me), cpu_seconds(&server_pid));
    let (mut conns, mut m, wall) = drive(
        conns,
        secs,
        Arc::clone(&data),
        Arc::clone(&writes),
        seed + 1,
        true,
    )
    .await;
    let (cpu_c1, cpu_s1) = (cpu_seconds(&me), cpu_seconds(&server_pid));
    row.client_cpu = cpu_c1.zip(cpu_c0).map_or(f64::NAN, |(a, b)| a - b);
    row.server_cpu = cpu_s1.zip(cpu_s0).map_or(f64::NAN, |(a, b)| a - b);
    acked.extend(std::mem::take(&mut m.acked));
    m.lat.sort_unstable();
    row.calls = m.lat.len();
    row.wall_s = wall;
    if !m.lat.is_empty() {
        row.rate = Some(m.lat.len() as f64 / wall);
        row.p = [pct(&m.lat, 0.5), pct(&m.lat, 0.95), pct(&m.lat, 0.99)];
    }
    for (i, k) in ["write", "read", "search"].iter().enumerate() {
        if let Some(v) = m.by_kind.get_mut(k) {
            v.sort_unstable();
            row.by_kind[i] = (v.len(), pct(v, 0.5), pct(v, 0.95));
        }
    }
    row.errors = m.errors.len();
    let mut seen: Vec<String> = Vec::new();
    for e in &m.errors {
        let short: String = e.chars().take(160).collect();
        if !seen.contains(&short) && seen.len() < 3 {
            seen.push(short);
        }
    }
    if setup_errors > 0 {
        seen.push(format!("{setup_errors} errors in the pre-fill and warm-up"));
    }
    row.error_examples = seen;
    // Lost writes: every acknowledged key read back, by key, on the same instance.
    row.acked = acked.len();
    let keys = Arc::new(acked);
    let pos = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = conns
        .drain(..)
        .map(|mut conn| {
            let (keys, pos) = (Arc::clone(&keys), Arc::clone(&pos));
            tokio::spawn(async move {
                let mut lost = 0usize;
                loop {
                    let i = pos.fetch_add(1, Ordering::Relaxed);
                    let Some(k) = keys.get(i) else { break };
                    match conn.call("knowledge_retrieve", json!({"key": k})).await {
                        Ok(v) if v.get("found") != Some(&Value::Bool(false)) => {}
                        _ => lost += 1,
                    }
                }
                (conn, lost)
            })
        })
        .collect();
    let mut lost = 0;
    for task in tasks {
        let (conn, l) = task.await?;
        lost += l;
        conn.close().await;
    }
    row.lost = Some(lost);
    // Stop the server: end of input for stdio, a kill for HTTP (the store is thrown away).
    if let Some(s) = server.stdio.take() {
        drop(s);
    }
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
    Ok(())
}
