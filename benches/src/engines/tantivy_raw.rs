//! Raw tantivy: the floor under episodic search. Same tantivy version, same
//! `en_stem` tokenizer, the same searchable fields and boosts, the same query
//! construction (one boosted term query per field and query word, OR-ed,
//! question words weighted as Memstrata weighs them),
//! the same writer budget; the whole episode is kept in tantivy's doc store,
//! as a single-purpose search index would keep it.
//!
//! The index also carries Memstrata's scope fields (`kind`, `ctx`, and a
//! `scope` u64 fast field) so that one index serves the diagnostic variants
//! ([`Scoping`]) that explain the search overhead; the plain floor never
//! queries them.

use std::path::Path;
use std::time::Instant;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TantivyDocument,
    TextFieldIndexing, TextOptions, Value as _,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    TokenStream,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Term};

use super::{Result, SearchEngine, TANTIVY_WRITER_BYTES, idx_from_id};
use crate::corpus::EpisodeDoc;
use crate::stats::Latency;

#[derive(Debug, Clone, Copy)]
struct Fields {
    id: Field,
    summary: Field,
    body: Field,
    participants: Field,
    participant_raw: Field,
    tags: Field,
    tag_raw: Field,
    ts: Field,
    importance: Field,
    doc: Field,
    kind: Field,
    ctx: Field,
    scope: Field,
}

/// How a search is restricted to one (kind, context) scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoping {
    /// Not at all: the floor (a single-purpose index).
    None,
    /// `kind` and `ctx` as `Must` term clauses around the text disjunction:
    /// the query shape Memstrata builds. Any `Must` clause makes tantivy
    /// score every matching document (no block-WAND pruning).
    MustClauses,
    /// Pure disjunction (block-WAND): the top `limit` fetched and filtered on
    /// the `scope` fast field, the fetch widened ×4 until `limit` in-scope
    /// hits are found (exact: any better in-scope hit would be in the wider
    /// top). The fix proposed for Memstrata's `index.rs`.
    OverFetch,
}

/// The `scope` fast-field value of Memstrata's episodes in the default context.
pub fn scope_hash(kind: &str, ctx: &str) -> u64 {
    // FNV-1a: stable across runs and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in kind.bytes().chain([0u8]).chain(ctx.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("en_stem")
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let f = Fields {
        id: b.add_text_field("id", STRING | STORED),
        summary: b.add_text_field("summary", text.clone()),
        body: b.add_text_field("body", text.clone()),
        participants: b.add_text_field("participants", text.clone()),
        participant_raw: b.add_text_field("participant_raw", STRING),
        tags: b.add_text_field("tags", text),
        tag_raw: b.add_text_field("tag_raw", STRING),
        ts: b.add_i64_field("ts", INDEXED | FAST),
        importance: b.add_u64_field("importance", INDEXED | FAST),
        doc: b.add_text_field("doc", STORED),
        kind: b.add_text_field("kind", STRING),
        ctx: b.add_text_field("ctx", STRING),
        scope: b.add_u64_field("scope", FAST),
    };
    (b.build(), f)
}

/// A tantivy index holding the episodes.
pub struct RawTantivy {
    scoping: Scoping,
    index: Index,
    reader: IndexReader,
    writer: Option<IndexWriter>,
    f: Fields,
}

impl std::fmt::Debug for RawTantivy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawTantivy").finish_non_exhaustive()
    }
}

impl RawTantivy {
    /// Create an empty index in `dir`.
    pub fn create(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let (schema, f) = schema();
        let index = Index::create_in_dir(dir, schema)?;
        let writer = index.writer_with_num_threads(1, TANTIVY_WRITER_BYTES)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(RawTantivy {
            scoping: Scoping::None,
            index,
            reader,
            writer: Some(writer),
            f,
        })
    }

    /// Open an existing index read-only.
    pub fn open(dir: &Path) -> Result<Self> {
        let index = Index::open_in_dir(dir)?;
        let (_, f) = schema();
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(RawTantivy {
            scoping: Scoping::None,
            index,
            reader,
            writer: None,
            f,
        })
    }

    /// The same index searched with another [`Scoping`].
    pub fn with_scoping(&self, scoping: Scoping) -> RawTantivy {
        RawTantivy {
            scoping,
            index: self.index.clone(),
            reader: self.reader.clone(),
            writer: None,
            f: self.f,
        }
    }

    fn to_doc(&self, d: &EpisodeDoc) -> TantivyDocument {
        let f = &self.f;
        let mut doc = TantivyDocument::default();
        doc.add_text(f.id, &d.id);
        doc.add_text(f.summary, &d.summary);
        doc.add_text(f.body, d.body());
        doc.add_i64(f.ts, d.ts_ms);
        doc.add_u64(f.importance, u64::from(d.importance));
        for p in &d.participants {
            doc.add_text(f.participants, p);
            doc.add_text(f.participant_raw, p);
        }
        for t in &d.tags {
            doc.add_text(f.tags, t);
            doc.add_text(f.tag_raw, t);
        }
        doc.add_text(f.doc, d.to_json().to_string());
        doc.add_text(f.kind, "e");
        doc.add_text(f.ctx, "default");
        doc.add_u64(f.scope, scope_hash("e", "default"));
        doc
    }

    /// The query's distinct terms with Memstrata's weights: words of
    /// `memstrata::search_terms::QUERY_STOP_WORDS` weigh `STOP_WORD_WEIGHT`.
    fn terms(&self, field: Field, text: &str) -> Result<Vec<(String, f32)>> {
        use memstrata::search_terms::{QUERY_STOP_WORDS, STOP_WORD_WEIGHT};
        fn collect(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
            let mut stream = analyzer.token_stream(text);
            let mut out: Vec<String> = Vec::new();
            while stream.advance() {
                let t = &stream.token().text;
                if !out.contains(t) {
                    out.push(t.clone());
                }
            }
            out
        }
        let mut content_analyzer = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(40))
            .filter(LowerCaser)
            .filter(StopWordFilter::remove(
                QUERY_STOP_WORDS.iter().map(|w| (*w).to_owned()),
            ))
            .filter(Stemmer::new(Language::English))
            .build();
        let content = collect(&mut content_analyzer, text);
        let mut analyzer = self.index.tokenizer_for_field(field)?;
        Ok(collect(&mut analyzer, text)
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
}

impl SearchEngine for RawTantivy {
    fn name(&self) -> &'static str {
        match self.scoping {
            Scoping::None => "raw tantivy",
            Scoping::MustClauses => "diag: raw tantivy + Must scope clauses",
            Scoping::OverFetch => "diag: raw tantivy + over-fetch scope filter",
        }
    }
    fn ingest(&mut self, batch: &[EpisodeDoc], lat: &mut Latency) -> Result<()> {
        let docs: Vec<TantivyDocument> = batch.iter().map(|d| self.to_doc(d)).collect();
        let w = self.writer.as_mut().ok_or("index opened read-only")?;
        for doc in docs {
            let t = Instant::now();
            w.add_document(doc)?;
            lat.record(t.elapsed());
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        if let Some(mut w) = self.writer.take() {
            w.commit()?;
            w.wait_merging_threads()?;
        }
        self.reader.reload()?;
        Ok(())
    }
    fn search(&self, query: &str, limit: usize) -> Result<Vec<usize>> {
        let f = &self.f;
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (field, boost) in [
            (f.summary, 1.5f32),
            (f.body, 1.0),
            (f.participants, 1.0),
            (f.tags, 1.2),
        ] {
            for (tok, weight) in self.terms(field, query)? {
                let tq: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(field, &tok),
                    IndexRecordOption::WithFreqs,
                ));
                should.push((Occur::Should, Box::new(BoostQuery::new(tq, boost * weight))));
            }
        }
        if should.is_empty() {
            return Ok(Vec::new());
        }
        let union = BooleanQuery::new(should);
        let searcher = self.reader.searcher();
        let top: Vec<(f32, tantivy::DocAddress)> = match self.scoping {
            Scoping::None => {
                searcher.search(&union, &TopDocs::with_limit(limit).order_by_score())?
            }
            Scoping::MustClauses => {
                let term = |field, text: &str| -> Box<dyn Query> {
                    Box::new(TermQuery::new(
                        Term::from_field_text(field, text),
                        IndexRecordOption::Basic,
                    ))
                };
                let q = BooleanQuery::new(vec![
                    (Occur::Must, term(f.kind, "e")),
                    (Occur::Must, term(f.ctx, "default")),
                    (Occur::Must, Box::new(union)),
                ]);
                searcher.search(&q, &TopDocs::with_limit(limit).order_by_score())?
            }
            Scoping::OverFetch => {
                let want = scope_hash("e", "default");
                let columns = searcher
                    .segment_readers()
                    .iter()
                    .map(|r| r.fast_fields().u64("scope"))
                    .collect::<tantivy::Result<Vec<_>>>()?;
                let mut fetch = limit;
                loop {
                    let cand =
                        searcher.search(&union, &TopDocs::with_limit(fetch).order_by_score())?;
                    let exhausted = cand.len() < fetch;
                    let kept: Vec<_> = cand
                        .into_iter()
                        .filter(|(_, a)| {
                            columns[a.segment_ord as usize].first(a.doc_id) == Some(want)
                        })
                        .take(limit)
                        .collect();
                    if kept.len() == limit || exhausted {
                        break kept;
                    }
                    fetch *= 4;
                }
            }
        };
        let mut out = Vec::with_capacity(top.len());
        for (_score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
            let json = doc
                .get_first(f.doc)
                .and_then(|v| v.as_str())
                .ok_or("doc not stored")?;
            let ep: serde_json::Value = serde_json::from_str(json)?;
            let id = doc
                .get_first(f.id)
                .and_then(|v| v.as_str())
                .ok_or("id not stored")?;
            std::hint::black_box(&ep);
            out.extend(idx_from_id(id));
        }
        Ok(out)
    }
    fn segments(&self) -> Option<usize> {
        Some(self.reader.searcher().segment_readers().len())
    }
}
