//! The short-term floor: Memstrata's short-term `store` / `retrieve` vs raw sled.

use std::path::Path;
use std::time::Instant;

use memstrata_benches::corpus::Corpus;
use memstrata_benches::engines::memstrata_engine::{self, MemstrataKv};
use memstrata_benches::engines::sled_raw::{RawSled, RawSledDecoded};
use memstrata_benches::engines::{KvEngine, KvItem, Result};
use memstrata_benches::stats::median;

use crate::BATCH;
use crate::progress::{phase, tick};

#[derive(Debug)]
pub(crate) struct KvResult {
    pub(crate) n: usize,
    /// engine -> median ns/op over batches
    pub(crate) store: Vec<(&'static str, f64)>,
    pub(crate) retrieve: Vec<(&'static str, f64)>,
}

pub(crate) fn kv_items(corpus: &Corpus, range: std::ops::Range<usize>, now_ms: i64) -> Vec<KvItem> {
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

pub(crate) fn kv_tier(corpus: &Corpus, n: usize, dir: &Path) -> Result<KvResult> {
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
