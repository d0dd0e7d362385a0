//! The workload: the facts and search words of `mcp_latency.py`, and the mix of calls.

use std::sync::atomic::{AtomicUsize, Ordering};

use memstrata_benches::corpus::{Corpus, Rng};
use serde_json::{Value, json};

use crate::{KV_TEXTS, PREFILL, QUERIES, READ_PCT, WRITE_PCT};

/// The facts and search words of `mcp_latency.py` (`binding-data` of the standard corpus).
pub(crate) struct Data {
    texts: Vec<String>,
    words: Vec<String>,
}

impl Data {
    pub(crate) fn standard() -> Data {
        let corpus = Corpus::standard();
        let texts = (0..KV_TEXTS)
            .map(|i| corpus.kv_value(i)["text"].as_str().unwrap_or("").to_owned())
            .collect();
        let words = corpus
            .keyword_queries(QUERIES)
            .iter()
            .filter_map(|q| q.split_whitespace().next().map(str::to_owned))
            .collect();
        Data { texts, words }
    }

    pub(crate) fn store(&self, i: usize) -> (&'static str, Value) {
        const KINDS: [&str; 6] = [
            "person", "project", "service", "decision", "incident", "tool",
        ];
        let obs: Vec<&str> = (0..3)
            .map(|j| self.texts[(i * 3 + j) % self.texts.len()].as_str())
            .collect();
        (
            "knowledge_store",
            json!({"key": key(i), "knowledge": {"entityType": KINDS[i % KINDS.len()], "observations": obs}}),
        )
    }
}

pub(crate) fn key(i: usize) -> String {
    format!("load-{i:06}")
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Kind {
    Write,
    Read,
    Search,
}

/// The next call of the mix; `writes` numbers the new keys.
pub(crate) fn next_op(
    rng: &mut Rng,
    d: &Data,
    writes: &AtomicUsize,
) -> (Kind, &'static str, Value) {
    let x = rng.range(0, 100);
    if x < WRITE_PCT {
        let (tool, args) = d.store(PREFILL + writes.fetch_add(1, Ordering::Relaxed));
        (Kind::Write, tool, args)
    } else if x < WRITE_PCT + READ_PCT {
        (
            Kind::Read,
            "knowledge_retrieve",
            json!({"key": key(rng.range(0, PREFILL))}),
        )
    } else {
        let w = &d.words[rng.range(0, d.words.len())];
        (
            Kind::Search,
            "knowledge_query",
            json!({"text": w, "limit": 10}),
        )
    }
}

pub(crate) fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Write => "write",
        Kind::Read => "read",
        Kind::Search => "search",
    }
}
