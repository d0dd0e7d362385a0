//! The cost of encryption at rest on PostgreSQL: the same workload on a
//! plaintext and on a keyed store (sealed values, sealed record keys, and
//! search rows of hashed lexemes instead of text: docs/security.md), in one
//! process, rounds interleaved, plus how far the two stores' result lists
//! differ (overlap@10 by summary: the stores' ids differ).
//!
//! `MEMSTRATA_BENCH_PG_URL=postgres://... encryption_pg [--episodes N] [--rounds R] [--queries Q] [--out FILE]`
//! (`MEMSTRATA_TEST_PG_URL`, as `scripts/pg-test.sh` sets it, is used when the
//! first is unset). Per round and side: record N episodes (synthetic corpus,
//! default 20k) one call each, clean the GIN index's pending list and analyze
//! (`optimize aggressive`), then run Q keyword searches (limit 10). Each
//! store is a schema of its own, dropped afterwards. Prints markdown (also
//! written to `--out`). No assertions on time.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Instant;

use memstrata::admin::OptimizeLevel;
use memstrata::{EncryptionKey, Memory, SearchFilters};
use memstrata_benches::corpus::Corpus;
use memstrata_benches::engines::memstrata_engine::to_new_episode;
use memstrata_benches::stats::{Latency, ratio_row};
use memstrata_benches::sys::Hardware;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

struct Args {
    episodes: usize,
    rounds: usize,
    queries: usize,
    out: Option<std::path::PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        episodes: 20_000,
        rounds: 2,
        queries: 500,
        out: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--episodes" => a.episodes = val()?.parse()?,
            "--rounds" => a.rounds = val()?.parse()?,
            "--queries" => a.queries = val()?.parse()?,
            "--out" => a.out = Some(val()?.into()),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(a)
}

#[derive(Default)]
struct Side {
    record: Latency,
    search: Latency,
    /// Top-10 summaries of each query (first round).
    lists: Vec<Vec<String>>,
    search_docs_bytes: u64,
    schema_bytes: u64,
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn run_side(
    base: &str,
    corpus: &Corpus,
    queries: &[String],
    args: &Args,
    key: Option<EncryptionKey>,
    tag: &str,
    side: &mut Side,
) -> Result<()> {
    let schema = format!("bench_enc_{}_{tag}", std::process::id());
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}schema={schema}");
    let mut b = Memory::builder().path(&url);
    if let Some(k) = key {
        b = b.encryption_key(k);
    }
    let mem = b.open()?;
    for i in 0..args.episodes {
        let ep = to_new_episode(&corpus.episode(i));
        let t = Instant::now();
        mem.episodic().record(ep)?;
        side.record.record(t.elapsed());
    }
    mem.admin().optimize(OptimizeLevel::Aggressive, None)?;
    let filters = SearchFilters::default();
    let keep = side.lists.is_empty();
    for q in queries {
        let t = Instant::now();
        let hits = mem.episodic().search(q, &filters, 10)?;
        side.search.record(t.elapsed());
        if keep {
            side.lists
                .push(hits.into_iter().map(|h| h.episode.summary).collect());
        }
    }
    drop(mem);
    let mut c = postgres::Client::connect(base, postgres::NoTls)?;
    let row = c.query_one(
        "SELECT pg_total_relation_size(format('%I.search_docs', $1::text)::regclass)::bigint, \
         (SELECT coalesce(sum(pg_total_relation_size(cl.oid)), 0)::bigint FROM pg_class cl \
          JOIN pg_namespace n ON n.oid = cl.relnamespace WHERE n.nspname = $1 AND cl.relkind = 'r')",
        &[&schema],
    )?;
    side.search_docs_bytes += u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
    side.schema_bytes += u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
    c.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))?;
    Ok(())
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let base = std::env::var("MEMSTRATA_BENCH_PG_URL")
        .or_else(|_| std::env::var("MEMSTRATA_TEST_PG_URL"))
        .map_err(|_| "MEMSTRATA_BENCH_PG_URL (or MEMSTRATA_TEST_PG_URL) is not set")?;
    let corpus = Corpus::standard();
    let queries = corpus.keyword_queries(args.queries);
    let started = Instant::now();
    let load_before = load_average();
    let mut plain = Side::default();
    let mut sealed = Side::default();
    let key = EncryptionKey::new([0x5a; 32]);
    for round in 0..args.rounds {
        let (p, k) = (format!("p{round}"), format!("k{round}"));
        if round % 2 == 0 {
            run_side(&base, &corpus, &queries, &args, None, &p, &mut plain)?;
            run_side(
                &base,
                &corpus,
                &queries,
                &args,
                Some(key.clone()),
                &k,
                &mut sealed,
            )?;
        } else {
            run_side(
                &base,
                &corpus,
                &queries,
                &args,
                Some(key.clone()),
                &k,
                &mut sealed,
            )?;
            run_side(&base, &corpus, &queries, &args, None, &p, &mut plain)?;
        }
        eprintln!(
            "encryption_pg bench: round {} of {} done",
            round + 1,
            args.rounds
        );
    }
    let load_after = load_average();
    // Overlap@10: the share of the plaintext store's top 10 that the keyed
    // store's top 10 holds too (by summary), per query.
    let mut overlap_sum = 0.0;
    let (mut same_order, mut same_set, mut min_overlap) = (0usize, 0usize, 1.0f64);
    for (p, k) in plain.lists.iter().zip(&sealed.lists) {
        let ps: HashSet<&String> = p.iter().collect();
        let ks: HashSet<&String> = k.iter().collect();
        let o = if ps.is_empty() && ks.is_empty() {
            1.0
        } else {
            ps.intersection(&ks).count() as f64 / ps.len().max(ks.len()) as f64
        };
        overlap_sum += o;
        min_overlap = min_overlap.min(o);
        same_order += usize::from(p == k);
        same_set += usize::from(ps == ks);
    }
    let n = plain.lists.len().max(1) as f64;
    let hw = Hardware::detect();
    let mut md = String::new();
    writeln!(md, "## Encryption at rest on PostgreSQL: cost\n")?;
    writeln!(
        md,
        "The same workload on a plaintext PostgreSQL store and on one opened with an \
         encryption key (values sealed, record keys hashed, search rows of keyed-hash \
         lexemes instead of text; see `docs/security.md`), {} rounds interleaved in one \
         process (`benches/src/bin/encryption_pg.rs`): per round and side, {} episodes \
         recorded one call each, the search index cleaned and analyzed, then {} keyword \
         searches (limit 10). Machine: {}, {} logical CPUs, {:.1} GiB RAM, {}; load average \
         {load_before} before, {load_after} after; this section took {:.0?}.\n",
        args.rounds,
        args.episodes,
        queries.len(),
        hw.cpu,
        hw.cores,
        hw.ram_bytes as f64 / (1024.0 * 1024.0 * 1024.0),
        hw.kernel,
        started.elapsed()
    )?;
    writeln!(
        md,
        "| operation | plaintext p50 | keyed p50 | ratio p50 | plaintext p95 | keyed p95 | ratio p95 |\n|---|---|---|---|---|---|---|"
    )?;
    for (name, p, s) in [
        ("episode record", &plain.record, &sealed.record),
        ("episode search", &plain.search, &sealed.search),
    ] {
        writeln!(md, "{}", ratio_row(name, p, s))?;
    }
    writeln!(
        md,
        "\nResult lists (first round, {} queries): mean overlap@10 {:.3} (min {:.2}); \
         identical top 10 in the same order for {:.1}% of the queries, as a set for {:.1}%. \
         Both stores rank with `ts_rank` over the same weights and positions; they differ \
         where PostgreSQL's parser and the engine's tokenizer split text differently \
         (hyphenated words, numbers with dots, e-mail addresses) and where ties are cut \
         (newest first, then by row uid, which is a hash on the keyed store).\n",
        plain.lists.len(),
        overlap_sum / n,
        min_overlap,
        100.0 * same_order as f64 / n,
        100.0 * same_set as f64 / n,
    )?;
    writeln!(
        md,
        "Sizes (summed over rounds): `search_docs` with its indexes plaintext {:.1} MiB, \
         keyed {:.1} MiB ({:.2}×); the whole schema plaintext {:.1} MiB, keyed {:.1} MiB \
         ({:.2}×).\n",
        plain.search_docs_bytes as f64 / 1048576.0,
        sealed.search_docs_bytes as f64 / 1048576.0,
        sealed.search_docs_bytes as f64 / plain.search_docs_bytes.max(1) as f64,
        plain.schema_bytes as f64 / 1048576.0,
        sealed.schema_bytes as f64 / 1048576.0,
        sealed.schema_bytes as f64 / plain.schema_bytes.max(1) as f64,
    )?;
    print!("{md}");
    if let Some(out) = &args.out {
        std::fs::write(out, &md)?;
    }
    Ok(())
}
