//! Hybrid (BM25 + vector) search cost against BM25 alone, in the same run and store.
//!
//! `cargo run --release -p memstrata-benches --bin hybrid` (part of `make bench`; env `HYBRID_N`,
//! default 100000; `HYBRID_DIM`, default 384; `HYBRID_QUERIES`, default 500;
//! `BENCH_DIR` for the scratch stores; `HYBRID_REUSE=1` keeps the stores a
//! previous run left in `BENCH_DIR` and skips the ingest, for iterating on
//! search code). Episodes come from the standard
//! synthetic corpus; vectors are synthetic (64 cluster centres plus noise,
//! so neighbourhoods exist), which is enough for cost: an exact scan costs
//! the same whatever the values. Prints a Markdown report; no assertions.
//!
//! Measured: search p50/p95 for BM25 only, hybrid (the default adaptive fusion,
//! linear and RRF), pure
//! vector and a filtered hybrid search, limit 10; the first vector search of a
//! context (it builds the in-memory matrix from sled); and the bytes a vector
//! adds, on disk (store with vectors minus the same store without, both
//! closed) and as live bytes in sled (every tree's keys and values summed by
//! opening the closed database with sled directly), which separates the record's
//! own growth from sled's space amplification.

use std::time::Instant;

use memstrata::{Durability, Fusion, FusionMethod, Memory, NewEpisode, SearchFilters, VectorQuery};
use memstrata_benches::corpus::{Corpus, EpisodeDoc, Rng};
use memstrata_benches::stats::Latency;
use memstrata_benches::sys::{disk_usage, env_usize};

fn centres(dim: usize) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(7);
    (0..64)
        .map(|_| (0..dim).map(|_| rng.normal() as f32).collect())
        .collect()
}

fn vector(centres: &[Vec<f32>], stream: u64, i: usize) -> Vec<f32> {
    let mut rng = Rng::for_item(11, stream, i as u64);
    let c = &centres[rng.range(0, centres.len())];
    c.iter().map(|x| x + 0.6 * rng.normal() as f32).collect()
}

fn new_episode(d: &EpisodeDoc) -> NewEpisode {
    NewEpisode::new(d.summary.clone())
        .content(d.content.clone())
        .participants(d.participants.clone())
        .tags(d.tags.clone())
        .importance(d.importance)
        .timestamp(chrono::DateTime::from_timestamp_millis(d.ts_ms).unwrap_or_default())
}

/// Live key + value bytes of every tree of a closed store's sled database.
fn live_bytes(db: &std::path::Path) -> Result<u64, sled::Error> {
    let db = sled::Config::new().path(db).open()?;
    let mut live = 0u64;
    for name in db.tree_names() {
        let tree = db.open_tree(&name)?;
        for kv in tree.iter() {
            let (k, v) = kv?;
            live += (k.len() + v.len()) as u64;
        }
    }
    Ok(live)
}

fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

/// Which vector instructions the scan can use here (it picks the best at run time).
fn simd_note() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        // The AVX-512 build needs the whole Ice Lake-class set (`multiversion`'s rule).
        if std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512cd")
            && std::is_x86_feature_detected!("avx512dq")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512ifma")
            && std::is_x86_feature_detected!("avx512vbmi")
            && std::is_x86_feature_detected!("avx512vbmi2")
            && std::is_x86_feature_detected!("avx512vnni")
            && std::is_x86_feature_detected!("avx512bitalg")
            && std::is_x86_feature_detected!("avx512vpopcntdq")
            && std::is_x86_feature_detected!("gfni")
            && std::is_x86_feature_detected!("vaes")
            && std::is_x86_feature_detected!("vpclmulqdq")
        {
            return "x86-64 with AVX-512 (the scan runs its AVX-512BW build)";
        }
        if std::is_x86_feature_detected!("avx2") {
            return "x86-64 with AVX2 (the scan runs its AVX2 build)";
        }
        if std::is_x86_feature_detected!("sse4.1") {
            return "x86-64 with SSE4.1, no AVX2 (the scan runs its SSE4.1 build)";
        }
        "x86-64 baseline (SSE2)"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH
    }
}

fn main() -> memstrata::Result<()> {
    let n = env_usize("HYBRID_N", 100_000);
    let dim = env_usize("HYBRID_DIM", 384);
    let nq = env_usize("HYBRID_QUERIES", 500);
    let scratch = std::env::var("BENCH_DIR").map_or_else(
        |_| std::env::temp_dir().join("memstrata-hybrid-bench"),
        std::path::PathBuf::from,
    );
    let reuse = std::env::var("HYBRID_REUSE").is_ok_and(|v| v == "1")
        && scratch.join("plain").join("db").exists()
        && scratch.join("vectors").join("db").exists();
    if !reuse {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    std::fs::create_dir_all(&scratch)?;
    let corpus = Corpus::standard();
    let centres = centres(dim);

    let open = |name: &str| {
        Memory::builder()
            .path(scratch.join(name))
            .durability(Durability::Manual)
            .open()
    };
    let mut ingest = None;
    if !reuse {
        let plain = open("plain")?;
        let vec_store = open("vectors")?;
        let t = Instant::now();
        for i in 0..n {
            plain.episodic().record(new_episode(&corpus.episode(i)))?;
        }
        plain.flush()?;
        let ingest_plain = t.elapsed();
        let t = Instant::now();
        for i in 0..n {
            vec_store
                .episodic()
                .record(new_episode(&corpus.episode(i)).embedding(vector(&centres, 1, i)))?;
        }
        vec_store.flush()?;
        ingest = Some((ingest_plain, t.elapsed()));
    }
    let live_plain =
        live_bytes(&scratch.join("plain").join("db")).map_err(std::io::Error::other)?;
    let live_vec =
        live_bytes(&scratch.join("vectors").join("db")).map_err(std::io::Error::other)?;
    // Reopen both: sizes after a clean close, and the vector matrix built from sled.
    let plain = open("plain")?;
    let mem = open("vectors")?;
    let (plain_bytes, _) = disk_usage(&scratch.join("plain").join("db"));
    let (vec_bytes, _) = disk_usage(&scratch.join("vectors").join("db"));
    let per_vector_disk = (vec_bytes as f64 - plain_bytes as f64) / n as f64;
    // The record encoding alone: one episode with and without its vector.
    let d = corpus.episode(0);
    let enc = |v: Option<Vec<f32>>| -> usize {
        let mut ep = new_episode(&d);
        ep.embedding = v;
        let m = Memory::temporary().unwrap();
        let id = m.episodic().record(ep).unwrap();
        let mut out = Vec::new();
        m.admin().export(&mut out).unwrap();
        let _ = id;
        out.len()
    };
    let raw_vector_bytes = dim * 4;

    let texts = corpus.question_queries(nq);
    let qvecs: Vec<Vec<f32>> = (0..nq).map(|i| vector(&centres, 2, i)).collect();
    let none = SearchFilters::default();
    let t = Instant::now();
    mem.episodic()
        .search_hybrid("", &none, 10, &VectorQuery::embedding(qvecs[0].clone()))?;
    let first_vector_search = t.elapsed();

    let adaptive = Fusion::default();
    let linear = Fusion {
        method: FusionMethod::Linear,
        ..Fusion::default()
    };
    let rrf = Fusion {
        method: FusionMethod::Rrf,
        ..Fusion::default()
    };
    let filtered = SearchFilters {
        min_importance: Some(6),
        ..Default::default()
    };
    let mut rows: Vec<(&str, Latency)> = Vec::new();
    type Case<'a> = (&'a str, &'a Memory, Option<Fusion>, bool, &'a SearchFilters);
    let cases: [Case<'_>; 7] = [
        (
            "BM25 only (store without vectors)",
            &plain,
            None,
            true,
            &none,
        ),
        ("BM25 only (store with vectors)", &mem, None, true, &none),
        (
            "hybrid, adaptive fusion (the default)",
            &mem,
            Some(adaptive),
            true,
            &none,
        ),
        ("hybrid, linear fusion", &mem, Some(linear), true, &none),
        ("hybrid, RRF", &mem, Some(rrf), true, &none),
        (
            "pure vector (empty query)",
            &mem,
            Some(adaptive),
            false,
            &none,
        ),
        (
            "hybrid, adaptive, min_importance ≥ 6",
            &mem,
            Some(adaptive),
            true,
            &filtered,
        ),
    ];
    // A warm-up pass, then the measured pass. Within a pass the cases take turns
    // query by query, so a change in the machine's load falls on every case alike
    // and the ratios to BM25 stay comparable.
    let mut lats: Vec<Latency> = cases.iter().map(|_| Latency::new()).collect();
    for pass in 0..2 {
        for i in 0..nq {
            for (c, (_, m, fusion, with_text, filters)) in cases.iter().enumerate() {
                let q = if *with_text { texts[i].as_str() } else { "" };
                let vq = match fusion {
                    Some(f) => VectorQuery::embedding(qvecs[i].clone()).fusion(*f),
                    None => VectorQuery::default(),
                };
                let t = Instant::now();
                let hits = m.episodic().search_hybrid(q, filters, 10, &vq)?;
                if pass == 1 {
                    lats[c].record(t.elapsed());
                }
                std::hint::black_box(hits);
            }
        }
    }
    for ((name, ..), lat) in cases.iter().zip(lats) {
        rows.push((name, lat));
    }

    println!("## Hybrid search: cost of the vector list\n");
    println!(
        "{n} episodes of the standard corpus, each with a synthetic {dim}-dimension vector, {nq} question queries with a query vector, limit 10; two stores side by side (with and without vectors), `Durability::Manual`, reopened before searching. CPU: {}.\n",
        simd_note()
    );
    println!(
        "| search | p50 ms | p95 ms | p99 ms | p50 vs BM25 only | p95 vs BM25 only | p99 vs BM25 only |"
    );
    println!("|---|---|---|---|---|---|---|");
    let base = &rows[1].1;
    let ratio = |lat: &Latency, q: f64| lat.q(q) as f64 / base.q(q) as f64;
    for (name, lat) in &rows {
        println!(
            "| {name} | {} | {} | {} | {:.2}× | {:.2}× | {:.2}× |",
            ms(lat.p50()),
            ms(lat.q(0.95)),
            ms(lat.q(0.99)),
            ratio(lat, 0.5),
            ratio(lat, 0.95),
            ratio(lat, 0.99),
        );
    }
    println!();
    println!(
        "- first vector search after open (builds the int8 matrix from sled): {:.0} ms",
        first_vector_search.as_secs_f64() * 1e3
    );
    match ingest {
        Some((ingest_plain, ingest_vec)) => println!(
            "- ingest: {:.1} s without vectors, {:.1} s with ({:.0} vs {:.0} episodes/s)",
            ingest_plain.as_secs_f64(),
            ingest_vec.as_secs_f64(),
            n as f64 / ingest_plain.as_secs_f64(),
            n as f64 / ingest_vec.as_secs_f64()
        ),
        None => println!("- ingest: not measured (`HYBRID_REUSE=1`: the stores of an earlier run)"),
    }
    println!(
        "- on disk (sled `db/` after a clean close): {:.1} MiB without vectors, {:.1} MiB with: {per_vector_disk:.0} bytes per vector (raw f32 would be {raw_vector_bytes} bytes; stored as half floats: {} + 6)",
        plain_bytes as f64 / (1 << 20) as f64,
        vec_bytes as f64 / (1 << 20) as f64,
        dim * 2,
    );
    println!(
        "- live bytes in sled (keys + values of every tree): {:.1} MiB without vectors, {:.1} MiB with: {:.0} bytes per vector in the record; sled file / live = {:.2}× without vectors, {:.2}× with",
        live_plain as f64 / (1 << 20) as f64,
        live_vec as f64 / (1 << 20) as f64,
        (live_vec as f64 - live_plain as f64) / n as f64,
        plain_bytes as f64 / live_plain.max(1) as f64,
        vec_bytes as f64 / live_vec.max(1) as f64,
    );
    let export_with = enc(Some(vector(&centres, 1, 0)));
    let export_without = enc(None);
    println!(
        "- export line: {} bytes more with the vector (JSON text, not the storage format)",
        export_with - export_without
    );
    println!(
        "- in memory: {} bytes of int8 codes + 4 bytes of scale per vector",
        dim
    );
    Ok(())
}
