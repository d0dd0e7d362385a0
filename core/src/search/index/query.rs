//! Text queries: the words of a query weighed (stop words count less), the filtered BM25 search over the committed index and the overlay, and its over-fetch for selective filters.

#[allow(unused_imports)]
use super::*;
use crate::error::DepResult;

/// Past this many candidates an unfiltered search falls back to the scoped query.
pub(super) const MAX_OVERFETCH: usize = 20_000;

/// Words weighted down in search text (not in the index), matched before stemming:
/// Lucene's English stop words plus the question words, pronouns and
/// auxiliaries of questions about one's own past ("what did I name my dog?"),
/// and the pieces the tokenizer splits contractions into ("I'm" → "i", "m").
/// In a disjunctive BM25 query these match nearly every conversational turn
/// and let short chit-chat outrank the turn with the answer.
#[rustfmt::skip]
pub const QUERY_STOP_WORDS: &[&str] = &[
    // Lucene's English list
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
    // question words
    "what", "when", "where", "which", "who", "whom", "whose", "why", "how",
    // pronouns
    "i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "you", "your", "yours", "he",
    "him", "his", "she", "her", "hers", "its", "them", "those",
    // auxiliaries and fillers
    "am", "been", "being", "do", "does", "did", "doing", "have", "has", "had", "having", "can",
    "could", "would", "should", "shall", "may", "might", "must", "about", "any", "some", "so",
    "than", "too", "very", "just", "also", "again", "were",
    // contraction pieces
    "s", "t", "m", "d", "ll", "re", "ve",
];

/// Weight of a stop word's term in a search (content words weigh 1). Dropping
/// them outright lost recall@10 on the retrieval harness (a turn that shares
/// only "what did I ..." with a question is still a better guess than
/// nothing); 0.5 was the best of 0, 0.05, 0.1, 0.25, 0.5 and 1 there
/// (docs/benchmarks/retrieval.md).
pub const STOP_WORD_WEIGHT: f32 = 0.5;

/// The index analyzer (tantivy's `en_stem`: simple tokenizer, long tokens
/// dropped, lower-cased, English Snowball stemmer) with [`QUERY_STOP_WORDS`]
/// removed before the stemmer: what is left are a search's content terms.
pub(crate) fn query_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            QUERY_STOP_WORDS.iter().map(|w| (*w).to_owned()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

impl SearchIndex {
    /// The distinct terms a search text asks for, each with its weight: the
    /// index analyzer's terms, [`QUERY_STOP_WORDS`] weighted [`STOP_WORD_WEIGHT`].
    pub(super) fn query_terms(&self, text: &str) -> Result<Vec<(String, f32)>> {
        let collect = |analyzer: &mut TextAnalyzer| {
            let mut stream = analyzer.token_stream(text);
            let mut out: Vec<String> = Vec::new();
            while stream.advance() {
                let t = &stream.token().text;
                if !out.contains(t) {
                    out.push(t.clone());
                }
            }
            out
        };
        let content = collect(&mut self.query_analyzer.clone());
        let mut analyzer = self
            .inner
            .read()
            .index
            .tokenizer_for_field(self.fields.summary)
            .dep()?;
        Ok(collect(&mut analyzer)
            .into_iter()
            .map(|t| {
                let w = if content.contains(&t) {
                    1.0
                } else {
                    STOP_WORD_WEIGHT
                };
                (t, w)
            })
            .collect())
    }

    /// Run a query against the last (soft or durable) commit. Callers go through
    /// `Engine::search_index`, which makes pending changes visible first (read-your-writes).
    pub(crate) fn search(&self, q: &IndexQuery<'_>) -> Result<Vec<(String, f32)>> {
        let f = &self.fields;
        let mut must: Vec<(Occur, Box<dyn Query>)> = vec![
            (Occur::Must, term(f.kind, q.kind.tag())),
            (Occur::Must, term(f.ctx, q.ctx)),
        ];
        for t in q.tags_all {
            must.push((Occur::Must, term(f.tag_raw, t)));
        }
        if !q.participants_any.is_empty() {
            let any: Vec<(Occur, Box<dyn Query>)> = q
                .participants_any
                .iter()
                .map(|p| (Occur::Should, term(f.participant_raw, p)))
                .collect();
            must.push((Occur::Must, Box::new(BooleanQuery::new(any))));
        }
        if q.since_ms.is_some() || q.until_ms.is_some() {
            let lo = q.since_ms.map_or(Bound::Unbounded, |v| {
                Bound::Included(Term::from_field_i64(f.ts, v))
            });
            let hi = q.until_ms.map_or(Bound::Unbounded, |v| {
                Bound::Included(Term::from_field_i64(f.ts, v))
            });
            must.push((Occur::Must, Box::new(RangeQuery::new(lo, hi))));
        }
        if let Some(min) = q.min_importance {
            must.push((
                Occur::Must,
                Box::new(RangeQuery::new(
                    Bound::Included(Term::from_field_u64(f.importance, min)),
                    Bound::Unbounded,
                )),
            ));
        }
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let qterms = self.query_terms(q.text)?;
        // (field, token, boost) of each `should` clause, for the overlay.
        let mut terms = Vec::new();
        for (field, boost) in [
            (f.summary, 1.5f32),
            (f.body, 1.0),
            (f.participants, 1.0),
            (f.tags, 1.2),
        ] {
            for (tok, weight) in &qterms {
                let tq: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(field, tok),
                    IndexRecordOption::WithFreqs,
                ));
                should.push((Occur::Should, Box::new(BoostQuery::new(tq, boost * weight))));
                terms.push((field, tok.clone(), boost * weight));
            }
        }
        let snap = self.snapshot(q, &terms)?;
        let searcher = &snap.searcher;
        // Committed hits the overlay masks are replaced by its own: fetch deeper.
        let limit = q.limit.max(1) + snap.masked.len();
        let unfiltered = q.tags_all.is_empty()
            && q.participants_any.is_empty()
            && q.since_ms.is_none()
            && q.until_ms.is_none()
            && q.min_importance.is_none();
        let overfetched = if unfiltered && !should.is_empty() {
            self.search_overfetch(&snap, scope_hash(q.kind, q.ctx), &should, limit)?
        } else {
            None
        };
        let addrs: Vec<(f32, tantivy::DocAddress)> = if let Some(addrs) = overfetched {
            addrs
        } else if should.is_empty() {
            // No searchable words: filters only, newest first.
            must.push((Occur::Must, Box::new(AllQuery)));
            let query = BooleanQuery::new(must);
            let hits: Vec<(Option<i64>, tantivy::DocAddress)> = searcher
                .search(
                    &query,
                    &TopDocs::with_limit(limit).order_by_fast_field::<i64>("ts", Order::Desc),
                )
                .dep()?;
            hits.into_iter().map(|(_, a)| (0.0, a)).collect()
        } else {
            must.push((Occur::Must, Box::new(BooleanQuery::new(should))));
            let query = BooleanQuery::new(must);
            searcher
                .search_with_statistics_provider(
                    &query,
                    &TopDocs::with_limit(limit).order_by_score(),
                    &snap,
                )
                .dep()?
        };
        let addrs: Vec<(f32, tantivy::DocAddress)> = addrs
            .into_iter()
            .filter(|(_, a)| !snap.masked.contains(a))
            .collect();
        // (A scope-hash collision is caught by the caller, which parses kind and
        // context from the uid.)
        let out = uids_of(&self.columns, searcher, addrs)?;
        Ok(snap.merge(out, q.limit.max(1)))
    }
}

/// The uid of each hit, read from the `uid` fast column of its segment: a
/// term-ordinal lookup and one block of the column's dictionary, where the
/// document store would decompress a 16 KiB block per hit (the fused search
/// of issue #15 resolves 50 hits per query).
pub(super) fn uids_of(
    kept: &columns::SegmentColumns,
    searcher: &tantivy::Searcher,
    addrs: Vec<(f32, tantivy::DocAddress)>,
) -> Result<Vec<(String, f32)>> {
    let mut columns: std::collections::HashMap<u32, tantivy::columnar::StrColumn> =
        Default::default();
    let mut out = Vec::with_capacity(addrs.len());
    for (score, addr) in addrs {
        let col = match columns.entry(addr.segment_ord) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(kept.uid(searcher, addr.segment_ord)?)
            }
        };
        let ord = col
            .term_ords(addr.doc_id)
            .next()
            .ok_or_else(|| Error::index(format!("index document {addr:?} without a uid")))?;
        let mut uid = String::new();
        if !col
            .ord_to_str(ord, &mut uid)
            .map_err(|e| Error::index_by("cannot read a uid from the index", e))?
        {
            return Err(Error::index(format!(
                "index document {addr:?}: uid ordinal {ord} out of range"
            )));
        }
        out.push((uid, score));
    }
    Ok(out)
}

impl SearchIndex {
    /// Unfiltered text search as a pure disjunction of term queries (which
    /// tantivy prunes with block-WAND), keeping hits whose `scope` matches and
    /// widening the candidate window ×4 until `limit` are kept or candidates run
    /// out. Exact: any better in-scope document lies inside the wider window.
    /// `None` when the window would exceed [`MAX_OVERFETCH`] (the caller then
    /// runs the scoped query).
    pub(super) fn search_overfetch(
        &self,
        snap: &overlay::Snapshot,
        scope: u64,
        should: &[(Occur, Box<dyn Query>)],
        limit: usize,
    ) -> Result<Option<Vec<(f32, tantivy::DocAddress)>>> {
        let searcher = &snap.searcher;
        let query = BooleanQuery::new(should.iter().map(|(o, q)| (*o, q.box_clone())).collect());
        let mut columns: std::collections::HashMap<u32, tantivy::columnar::Column<u64>> =
            Default::default();
        let mut fetch = limit;
        loop {
            let top: Vec<(f32, tantivy::DocAddress)> = searcher
                .search_with_statistics_provider(
                    &query,
                    &TopDocs::with_limit(fetch).order_by_score(),
                    snap,
                )
                .dep()?;
            let exhausted = top.len() < fetch;
            let mut kept = Vec::with_capacity(limit);
            for (score, addr) in top {
                let col = match columns.entry(addr.segment_ord) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(self.columns.scope(searcher, addr.segment_ord)?)
                    }
                };
                if col.first(addr.doc_id) == Some(scope) {
                    kept.push((score, addr));
                    if kept.len() == limit {
                        break;
                    }
                }
            }
            if kept.len() >= limit || exhausted {
                return Ok(Some(kept));
            }
            fetch = fetch.saturating_mul(4);
            if fetch > MAX_OVERFETCH {
                return Ok(None);
            }
        }
    }
}

pub(super) fn term(field: tantivy::schema::Field, text: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, text),
        IndexRecordOption::Basic,
    ))
}
