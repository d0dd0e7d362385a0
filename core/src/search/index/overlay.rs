//! Searches without a commit: an in-memory overlay of the index changes
//! applied since the reader's commit, searched next to the committed reader.
//!
//! tantivy makes documents searchable only through a commit, and every
//! commit, even a soft one (`index_dir`), serialises a new segment, starts a
//! fresh segment writer (its term table alone is a 2^19-entry allocation),
//! reloads the reader and feeds the merge threads more tiny segments. Under
//! a mixed load a search that had to see the write just before it paid all
//! of that, on the writer lock that writes need too.
//!
//! The overlay keeps, per uid, the last change applied since the commit the
//! committed searcher shows: the document (tokenized with the index's own
//! analyzers, so term frequencies and field lengths are what tantivy would
//! index) or its deletion. A search takes, under one lock, the committed
//! searcher and what the overlay contributes, so the two always describe the
//! same instant:
//!
//! - committed documents whose uid the overlay holds are masked (the overlay
//!   has the newer version or the deletion): their addresses in the committed
//!   searcher are looked up once, when the change is recorded, and the
//!   committed top-k is fetched that many hits deeper, so the result stays
//!   exact (new documents, the usual write, mask nothing);
//! - overlay documents matching the query's terms and filters are scored
//!   with tantivy's own BM25 (`Bm25Weight`, the field-norm code), with the
//!   statistics of the committed searcher plus the overlay's documents —
//!   the same statistics the committed side is scored with, through
//!   `search_with_statistics_provider`;
//! - both lists are merged by score.
//!
//! Read-your-writes holds because `WriterState::apply` records a change in
//! the overlay before the write is acknowledged, and a commit swaps in the
//! new searcher and empties the overlay in one step.
//!
//! The overlay is bounded ([`MAX_DOCS`]). Past it, and while its content
//! cannot be trusted (a rebuild or a writer repair in progress), it is
//! *incomplete*: the next search makes a soft commit as before, which
//! empties it. Filter-only searches (no words; ordered by timestamp) with
//! in-scope overlay entries also take that path. Commits stay on the timer
//! (durable), on flush and close, and on overflow; crash recovery is
//! unchanged, since the overlay only mirrors what the sled index log holds.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::{Bm25StatisticsProvider, Bm25Weight};
use tantivy::schema::Field;
use tantivy::tokenizer::{TextAnalyzer, TokenStream};
use tantivy::{DocAddress, Searcher, Term};

use super::columns::SegmentColumns;
use super::{IndexDoc, IndexOp, IndexQuery};

/// Changes (distinct uids) the overlay holds before a search commits instead.
pub(super) const MAX_DOCS: usize = 256;

/// How a search makes changes not yet committed visible
/// (`MEMSTRATA_SEARCH_COMMIT`, a benchmark baseline switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SearchCommit {
    /// The overlay (default): no commit while it holds every change.
    Overlay,
    /// `soft`: a soft commit per search that finds changes pending.
    Soft,
    /// `durable`: a durable commit per search that finds changes pending.
    Durable,
}

impl SearchCommit {
    pub(super) fn from_env() -> Self {
        match std::env::var("MEMSTRATA_SEARCH_COMMIT").as_deref() {
            Ok("durable") => SearchCommit::Durable,
            Ok("soft") => SearchCommit::Soft,
            _ => SearchCommit::Overlay,
        }
    }
}

/// A document as the index would hold it, per text field.
#[derive(Debug)]
struct Entry {
    doc: IndexDoc,
    /// Per text field: term → frequency.
    terms: [HashMap<String, u32>; 4],
    /// Per text field: length in tokens (what tantivy's field norm records).
    lens: [u32; 4],
}

#[derive(Debug)]
struct View {
    searcher: Searcher,
    /// `None`: incomplete (changes were applied that it does not hold).
    changes: Option<HashMap<String, Option<Entry>>>,
    /// Live documents of `searcher` whose uid is in `changes`.
    masked: HashSet<DocAddress>,
    /// Documents in `changes`, and their tokens per text field.
    docs: u64,
    tokens: [u64; 4],
}

impl View {
    fn fresh(searcher: Searcher, complete: bool) -> Self {
        View {
            searcher,
            changes: complete.then(HashMap::new),
            masked: HashSet::new(),
            docs: 0,
            tokens: [0; 4],
        }
    }
}

/// The overlay and the committed searcher it sits beside.
pub(super) struct Overlay {
    enabled: bool,
    /// The `uid_bucket` field and the opened `uid` columns (see `delete`).
    bucket_field: Field,
    columns: Arc<SegmentColumns>,
    /// summary, body, participants, tags: the fields a text query searches.
    text_fields: [Field; 4],
    /// Their analyzers (used under the index writer lock only).
    analyzers: Mutex<Vec<TextAnalyzer>>,
    view: RwLock<View>,
}

impl std::fmt::Debug for Overlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overlay")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

/// What one search sees: the committed searcher, the overlay's statistics
/// for the query's terms, its hits, and the uids it masks in the query's scope.
pub(super) struct Snapshot {
    pub searcher: Searcher,
    text_fields: [Field; 4],
    docs: u64,
    tokens: [u64; 4],
    doc_freq: HashMap<Term, u64>,
    hits: Vec<(String, f32)>,
    /// Committed documents to drop from the committed hits.
    pub masked: HashSet<DocAddress>,
}

impl Bm25StatisticsProvider for Snapshot {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let extra = self
            .text_fields
            .iter()
            .position(|f| *f == field)
            .map_or(0, |i| self.tokens[i]);
        Ok(Bm25StatisticsProvider::total_num_tokens(&self.searcher, field)? + extra)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(Bm25StatisticsProvider::total_num_docs(&self.searcher)? + self.docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        Ok(self.searcher.doc_freq(term)? + self.doc_freq.get(term).copied().unwrap_or(0))
    }
}

impl Snapshot {
    /// Committed hits (fetched `masked.len()` deeper, masked ones already
    /// dropped) merged with the overlay's hits by score, best `limit`.
    pub(super) fn merge(self, committed: Vec<(String, f32)>, limit: usize) -> Vec<(String, f32)> {
        let mut all = committed;
        all.extend(self.hits);
        // Stable: on equal scores committed hits stay first, in their order.
        all.sort_by(|a, b| b.1.total_cmp(&a.1));
        all.truncate(limit);
        all
    }
}

impl Overlay {
    pub(super) fn new(
        enabled: bool,
        bucket_field: Field,
        columns: Arc<SegmentColumns>,
        text_fields: [Field; 4],
        analyzers: Vec<TextAnalyzer>,
        searcher: Searcher,
    ) -> Self {
        Overlay {
            enabled,
            bucket_field,
            columns,
            text_fields,
            analyzers: Mutex::new(analyzers),
            view: RwLock::new(View::fresh(searcher, true)),
        }
    }

    /// A commit made every applied change visible: serve `searcher` with an
    /// empty overlay (caller holds the writer lock).
    pub(super) fn reset(&self, searcher: Searcher) {
        *self.view.write() = View::fresh(searcher, true);
    }

    /// Applied changes may be missing from the overlay until the next commit
    /// (a rebuild or a writer repair; caller holds the writer lock).
    pub(super) fn invalidate(&self, searcher: Option<Searcher>) {
        let mut v = self.view.write();
        let searcher = searcher.unwrap_or_else(|| v.searcher.clone());
        *v = View::fresh(searcher, false);
    }

    /// Whether a search can be served without a commit.
    pub(super) fn serves(&self) -> bool {
        self.enabled && self.view.read().changes.is_some()
    }

    /// Record changes just applied to the index writer (caller holds the
    /// writer lock, before the write is acknowledged).
    pub(super) fn record(&self, ops: &[IndexOp]) {
        if !self.enabled || ops.is_empty() || self.view.read().changes.is_none() {
            return;
        }
        // With whether the uid is fresh (never indexed: nothing to mask).
        let entries: Vec<(String, Option<Entry>, bool)> = {
            let mut analyzers = self.analyzers.lock();
            ops.iter()
                .map(|op| match op {
                    IndexOp::Upsert(d) => {
                        (d.uid.clone(), Some(tokenize(&mut analyzers, d)), d.fresh)
                    }
                    IndexOp::Delete(uid) => (uid.clone(), None, false),
                })
                .collect()
        };
        let mut v = self.view.write();
        let View {
            searcher,
            changes,
            masked,
            docs,
            tokens,
        } = &mut *v;
        let Some(map) = changes.as_mut() else {
            return;
        };
        for (uid, entry, fresh) in entries {
            if !fresh && !map.contains_key(&uid) {
                match live_docs(searcher, self.bucket_field, &self.columns, &uid) {
                    Ok(addrs) => masked.extend(addrs),
                    Err(_) => {
                        // Cannot tell what it masks: commit at the next search instead.
                        *changes = None;
                        return;
                    }
                }
            }
            if let Some(e) = &entry {
                *docs += 1;
                for (t, l) in tokens.iter_mut().zip(e.lens) {
                    *t += u64::from(l);
                }
            }
            if let Some(Some(old)) = map.insert(uid, entry) {
                *docs -= 1;
                for (t, l) in tokens.iter_mut().zip(old.lens) {
                    *t -= u64::from(l);
                }
            }
        }
        if map.len() > MAX_DOCS {
            *changes = None;
        }
    }

    /// Documents a search sees (committed, less masked, plus the overlay's),
    /// and segments of the committed searcher.
    pub(super) fn doc_stats(&self) -> (u64, usize) {
        let v = self.view.read();
        let committed = v.searcher.num_docs() - (v.masked.len() as u64).min(v.searcher.num_docs());
        (committed + v.docs, v.searcher.segment_readers().len())
    }

    /// The view for one search, or `None` when the overlay cannot serve it
    /// (incomplete, or a filter-only query with overlay entries in its scope:
    /// those are ordered by timestamp, which the overlay does not merge).
    /// `terms`: the query's (field, token, boost), as the committed query has them.
    pub(super) fn snapshot(
        &self,
        q: &IndexQuery<'_>,
        terms: &[(Field, String, f32)],
    ) -> tantivy::Result<Option<Snapshot>> {
        let v = self.view.read();
        let Some(map) = &v.changes else {
            return Ok(None);
        };
        let mut snap = Snapshot {
            searcher: v.searcher.clone(),
            text_fields: self.text_fields,
            docs: v.docs,
            tokens: v.tokens,
            doc_freq: HashMap::new(),
            hits: Vec::new(),
            masked: HashSet::new(),
        };
        if map.is_empty() {
            return Ok(Some(snap));
        }
        let prefix = super::uid(q.kind, q.ctx, "");
        if terms.is_empty() {
            let in_scope = map.keys().any(|uid| uid.starts_with(&prefix));
            return Ok((!in_scope).then_some(snap));
        }
        snap.masked = v.masked.clone();
        // Which text field each term is in, and the overlay's document frequencies.
        let slots: Vec<usize> = terms
            .iter()
            .map(|(f, _, _)| self.text_fields.iter().position(|x| x == f).unwrap_or(0))
            .collect();
        for ((field, tok, _), &slot) in terms.iter().zip(&slots) {
            let n = map
                .values()
                .flatten()
                .filter(|e| e.terms[slot].contains_key(tok.as_str()))
                .count() as u64;
            if n > 0 {
                snap.doc_freq.insert(Term::from_field_text(*field, tok), n);
            }
        }
        let mut weights = Vec::with_capacity(terms.len());
        for (field, tok, boost) in terms {
            let term = Term::from_field_text(*field, tok);
            let docs = snap.total_num_docs()?;
            let avg = snap.total_num_tokens(*field)? as f32 / docs.max(1) as f32;
            let w = Bm25Weight::for_one_term(snap.doc_freq(&term)?, docs, avg);
            weights.push(w.boost_by(*boost));
        }
        for (uid, entry) in map {
            let Some(e) = entry else { continue };
            if !uid.starts_with(&prefix) || !passes_filters(&e.doc, q) {
                continue;
            }
            let mut score = 0.0f32;
            let mut matched = false;
            for (((_, tok, _), &slot), w) in terms.iter().zip(&slots).zip(&weights) {
                if let Some(&tf) = e.terms[slot].get(tok.as_str()) {
                    matched = true;
                    score += w.score(FieldNormReader::fieldnorm_to_id(e.lens[slot]), tf);
                }
            }
            if matched {
                snap.hits.push((uid.clone(), score));
            }
        }
        Ok(Some(snap))
    }
}

/// Live documents of `searcher` with this uid.
fn live_docs(
    searcher: &Searcher,
    bucket_field: Field,
    columns: &SegmentColumns,
    uid: &str,
) -> tantivy::Result<Vec<DocAddress>> {
    let mut out = Vec::new();
    for (ord, seg) in searcher.segment_readers().iter().enumerate() {
        for doc in super::delete::docs_with_uid(seg, bucket_field, columns, uid)? {
            if !seg.is_deleted(doc) {
                out.push(DocAddress::new(ord as u32, doc));
            }
        }
    }
    Ok(out)
}

/// The filters of `q` other than its text (kind and context are checked by
/// the caller through the uid prefix).
fn passes_filters(d: &IndexDoc, q: &IndexQuery<'_>) -> bool {
    q.tags_all.iter().all(|t| d.tags.contains(t))
        && (q.participants_any.is_empty()
            || q.participants_any
                .iter()
                .any(|p| d.participants.contains(p)))
        && q.since_ms.is_none_or(|s| d.ts_ms >= s)
        && q.until_ms.is_none_or(|u| d.ts_ms <= u)
        && q.min_importance.is_none_or(|m| d.importance >= m)
}

/// Tokenize a document's text fields as tantivy indexes them (`super::to_doc`
/// puts `summary`, `body`, every participant and every tag in these fields).
fn tokenize(analyzers: &mut [TextAnalyzer], d: &IndexDoc) -> Entry {
    let mut terms: [HashMap<String, u32>; 4] = Default::default();
    let mut lens = [0u32; 4];
    let values: [Vec<&str>; 4] = [
        vec![d.summary.as_str()],
        vec![d.body.as_str()],
        d.participants.iter().map(String::as_str).collect(),
        d.tags.iter().map(String::as_str).collect(),
    ];
    for (slot, texts) in values.iter().enumerate() {
        for text in texts {
            let mut stream = analyzers[slot].token_stream(text);
            while stream.advance() {
                let tok = &stream.token().text;
                // tantivy drops longer tokens without counting them.
                if tok.len() > tantivy::tokenizer::MAX_TOKEN_LEN {
                    continue;
                }
                lens[slot] += 1;
                *terms[slot].entry(tok.clone()).or_insert(0) += 1;
            }
        }
    }
    Entry {
        doc: d.clone(),
        terms,
        lens,
    }
}
