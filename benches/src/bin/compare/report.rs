//! The markdown report: machine, targets, and one section per measurement.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use memstrata_benches::engines::fts5::Fts5;
use memstrata_benches::stats::{fmt_bytes, fmt_ns, fmt_rate};
use memstrata_benches::sys::Hardware;

use crate::kv::KvResult;
use crate::search::SearchResult;
use crate::sessions::{SESSION_BASE_BYTES, SESSION_VERSIONS, SessionResult};
use crate::{BATCH, LIMIT};

#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) kv: Vec<KvResult>,
    pub(crate) search: Vec<SearchResult>,
    pub(crate) sessions: Option<SessionResult>,
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
    pub(crate) fn markdown(&self, hw: &Hardware, elapsed: Duration) -> String {
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
