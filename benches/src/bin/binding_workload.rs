//! The Rust side of the Node binding benchmark (`bindings-node/bench/`, run by
//! `make bench` through `bindings-node/bench/run.sh`).
//!
//! `binding-workload data N DIR` writes the corpus once, as files both sides
//! load: `DIR/episodes.jsonl` (N episodes of the standard corpus),
//! `DIR/kv.jsonl` (N short-term `[key, value]` pairs) and `DIR/meta.json`
//! (the keys to retrieve, the search queries, and the facts and one-word
//! queries of the MCP store-then-search workload).
//!
//! `binding-workload run DIR` does, on a fresh store, exactly the calls
//! `bindings-node/bench/overhead.mjs` makes through the binding, in the same
//! order, and prints per-call latency (p50, p95, mean, in ns) as JSON.
//! No assertion on time.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::Instant;

use memstrata::{Durability, Memory, NewEpisode, SearchFilters, admin::OptimizeLevel};
use memstrata_benches::corpus::{Corpus, Rng};
use serde_json::{Value, json};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Retrieves of random existing keys per tier.
const LOOKUPS: usize = 20_000;
/// Warm-up searches before the measured ones.
const SEARCH_WARMUP: usize = 20;
/// Facts of the MCP store-then-search workload (the largest N).
const FACTS: usize = 3000;
/// One-word searches of that workload.
const WORDS: usize = 300;

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    match (argv.get(1).map(String::as_str), argv.len()) {
        (Some("data"), 4) => data(argv[2].parse()?, Path::new(&argv[3])),
        (Some("run"), 3) => run(Path::new(&argv[2])),
        _ => Err("usage: binding-workload data N DIR | run DIR".into()),
    }
}

/// Searches measured per tier (fewer at large tiers, where each costs more).
fn searches(n: usize) -> usize {
    if n <= 10_000 { 1000 } else { 500 }
}

fn data(n: usize, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let corpus = Corpus::standard();
    let mut w = std::io::BufWriter::new(std::fs::File::create(dir.join("episodes.jsonl"))?);
    for i in 0..n {
        let d = corpus.episode(i);
        serde_json::to_writer(
            &mut w,
            &json!({"id": d.id, "summary": d.summary, "content": d.content, "body": d.body(),
                    "participants": d.participants, "tags": d.tags, "importance": d.importance,
                    "timestamp_ms": d.ts_ms}),
        )?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    let mut w = std::io::BufWriter::new(std::fs::File::create(dir.join("kv.jsonl"))?);
    for i in 0..n {
        serde_json::to_writer(&mut w, &json!([Corpus::kv_key(i), corpus.kv_value(i)]))?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    let mut rng = Rng::new(13);
    let lookups: Vec<String> = (0..LOOKUPS)
        .map(|_| Corpus::kv_key(rng.range(0, n)))
        .collect();
    let queries = corpus.keyword_queries(searches(n) + SEARCH_WARMUP);
    // The facts of mcp_latency.py's workload: a name, a type, three observations of 8–50 words.
    let kinds = [
        "person", "project", "service", "decision", "incident", "tool",
    ];
    let facts: Vec<Value> = (0..FACTS)
        .map(|i| {
            let obs: Vec<Value> = (0..3).map(|j| corpus.kv_value(i * 3 + j)["text"].clone()).collect();
            json!({"name": format!("fact-{i:05}"), "entityType": kinds[i % kinds.len()], "observations": obs})
        })
        .collect();
    let words: Vec<String> = corpus
        .keyword_queries(WORDS)
        .iter()
        .map(|q| q.split(' ').next().unwrap_or_default().to_owned())
        .collect();
    std::fs::write(
        dir.join("meta.json"),
        serde_json::to_vec(&json!({"n": n, "lookups": lookups, "queries": queries,
                                   "search_warmup": SEARCH_WARMUP, "facts": facts, "words": words}))?,
    )?;
    Ok(())
}

fn jsonl(path: &Path) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for line in BufReader::new(std::fs::File::open(path)?).lines() {
        let line = line?;
        if !line.is_empty() {
            out.push(serde_json::from_str(&line)?);
        }
    }
    Ok(out)
}

fn summary(mut ns: Vec<u64>) -> Value {
    ns.sort_unstable();
    let q = |p: f64| ns[((ns.len() - 1) as f64 * p).round() as usize];
    let mean = ns.iter().sum::<u64>() as f64 / ns.len() as f64;
    json!({"n": ns.len(), "p50": q(0.5), "p95": q(0.95), "mean": mean})
}

fn timed(n: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<Value> {
    let mut ns = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i)?;
        ns.push(t.elapsed().as_nanos() as u64);
    }
    Ok(summary(ns))
}

fn run(dir: &Path) -> Result<()> {
    let meta: Value = serde_json::from_slice(&std::fs::read(dir.join("meta.json"))?)?;
    let strings = |k: &str| -> Vec<String> {
        meta[k]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| s.as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let kv: Vec<(String, Value)> = jsonl(&dir.join("kv.jsonl"))?
        .into_iter()
        .map(|p| (p[0].as_str().unwrap_or_default().to_owned(), p[1].clone()))
        .collect();
    let episodes = jsonl(&dir.join("episodes.jsonl"))?;
    let lookups = strings("lookups");
    let queries = strings("queries");
    let warmup = meta["search_warmup"].as_u64().unwrap_or(0) as usize;

    let tmp = tempfile::tempdir_in(dir)?;
    let mem = Memory::builder()
        .path(tmp.path().join("store"))
        .durability(Durability::default())
        .open()?;
    let mut out = serde_json::Map::new();
    let st = mem.short_term();
    // The caller builds the value in both languages: Rust clones a prepared Value per call.
    out.insert(
        "store".into(),
        timed(kv.len(), |i| {
            st.store(&kv[i].0, kv[i].1.clone(), None)?;
            Ok(())
        })?,
    );
    out.insert(
        "retrieve".into(),
        timed(lookups.len(), |i| {
            std::hint::black_box(st.retrieve(&lookups[i])?.ok_or("missing key")?);
            Ok(())
        })?,
    );
    let ep = mem.episodic();
    let t0 = Instant::now();
    out.insert(
        "record".into(),
        timed(episodes.len(), |i| {
            let e = &episodes[i];
            let mut ne: NewEpisode = serde_json::from_value(json!({
                "summary": e["summary"], "content": e["content"], "participants": e["participants"],
                "tags": e["tags"], "importance": e["importance"]}))?;
            ne.timestamp =
                chrono::DateTime::from_timestamp_millis(e["timestamp_ms"].as_i64().unwrap_or(0));
            ep.record(ne)?;
            Ok(())
        })?,
    );
    out.insert("record_wall_s".into(), t0.elapsed().as_secs_f64().into());
    // One index segment on both sides: the segment layout otherwise depends on commit timing.
    mem.admin().optimize(OptimizeLevel::Aggressive, None)?;
    let filters = SearchFilters::default();
    for q in &queries[..warmup] {
        ep.search(q, &filters, 10)?;
    }
    let measured = &queries[warmup..];
    out.insert(
        "search".into(),
        timed(measured.len(), |i| {
            std::hint::black_box(ep.search(&measured[i], &filters, 10)?);
            Ok(())
        })?,
    );
    mem.flush()?;
    drop(mem);
    println!("{}", Value::Object(out));
    Ok(())
}
