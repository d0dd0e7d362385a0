//! Profiling entry points.
//!
//! For `valgrind --tool=callgrind` (see scripts/bench.sh `profile`): build a
//! store natively, then profile only the operation of interest.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use memstrata_benches::corpus::{Corpus, EpisodeDoc};
use memstrata_benches::engines::memstrata_engine::{self, MemstrataKv, MemstrataSearch};
use memstrata_benches::engines::sled_raw::RawSled;
use memstrata_benches::engines::tantivy_raw::{RawTantivy, Scoping};
use memstrata_benches::engines::{KvEngine, Result, SearchEngine};
use memstrata_benches::stats::Latency;

use crate::binding::per_call;
use crate::kv::kv_items;
use crate::{BATCH, LIMIT};

/// How long decoding a short-term record takes, by encoding: the cost that
/// separates `retrieve` from a bare sled `get` (profiling aid).
pub(crate) fn decode_micro() -> Result<()> {
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
    let n = mp.len();
    let m = per_call(n * 5, 1000, |i| {
        let r = memstrata_engine::decode_short_term_record(&mp[i % n])?;
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

pub(crate) fn build_store(dir: &Path, n: usize) -> Result<()> {
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

pub(crate) fn profile_search(engine: &str, dir: &Path, queries: usize) -> Result<()> {
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
pub(crate) fn inspect_store(store: &Path) -> Result<serde_json::Value> {
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

pub(crate) fn profile_kv(engine: &str, n: usize, lookups: usize) -> Result<()> {
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
