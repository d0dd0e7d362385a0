//! The binding overhead baseline.
//!
//! `benches/python/binding_overhead.py` times the same calls through the
//! Python binding; both read the data `binding-data` writes, so both sides
//! store, read and search exactly the same things in the same order.

use std::path::Path;
use std::time::Instant;

use memstrata_benches::corpus::Corpus;
use memstrata_benches::engines::{Result, memstrata_engine};
use memstrata_benches::stats::median;

const BINDING_KV: usize = 5000;
const BINDING_LOOKUPS: usize = 20_000;
const BINDING_EPISODES: usize = 1000;
const BINDING_QUERIES: usize = 200;

pub(crate) fn binding_data(out: &Path) -> Result<()> {
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
pub(crate) fn per_call(
    n: usize,
    batch: usize,
    mut f: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
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

pub(crate) fn binding_baseline(data: &Path) -> Result<()> {
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
