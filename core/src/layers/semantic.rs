//! Semantic memory: keyed knowledge with merge-patch updates, bounded history and full-text query.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::clock::millis_to_dt;
use crate::engine::vectors;
use crate::engine::{Engine, IndexedSource, Scope};
use crate::search::embedder::{self, Embedder};
use crate::search::index::{self, IndexDoc, IndexOp, IndexQuery, Kind};
use crate::search::vector::{self, RowMeta, VecBytes, VectorQuery};
use crate::{Error, Result, storage::codec, util::input};

mod dedup;
pub use dedup::StoreOptions;
pub(crate) use dedup::store_embedded_in;
use dedup::{Decision, DupCheck, check_value};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KnowledgeRecord {
    pub value: Value,
    pub version: u64,
    pub created_at: i64,
    pub updated_at: i64,
    /// The embedding (`vector::VecBytes`: half floats, raw f32 in older records;
    /// absent on records written before embeddings existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<VecBytes>,
    /// The entry this one duplicates (`link` policy; absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<String>,
    /// Start of validity (ms); absent: `updated_at` (and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<i64>,
    /// End of validity (ms, exclusive); absent: open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HistoryRecord {
    pub value: Value,
    pub recorded_at: i64,
    /// Start of validity (ms); absent: `recorded_at` (and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<i64>,
    /// End of validity (ms, exclusive); absent: open, or in records written
    /// before validity existed, the next kept version's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<i64>,
}

/// A semantic entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knowledge {
    /// The key.
    pub key: String,
    /// The knowledge (any JSON).
    pub knowledge: Value,
    /// 1 on first store, +1 on every store/update.
    pub version: u64,
    /// First stored.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
    /// From `store`: the entry found to duplicate the stored value (this key's
    /// own when its value was already the same), whatever the policy. From
    /// `get`: the entry this one was linked to (`on_duplicate = link`).
    pub duplicate_of: Option<String>,
    /// When this version starts to hold (default: when it was written).
    pub valid_from: DateTime<Utc>,
    /// When it stops holding (exclusive): set by the caller, or by the
    /// version that superseded it; `None`: open.
    pub valid_until: Option<DateTime<Utc>>,
}

/// One past (or the current) version of an entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnowledgeVersion {
    /// Version number.
    pub version: u64,
    /// The knowledge at that version.
    pub knowledge: Value,
    /// When that version was written.
    pub recorded_at: DateTime<Utc>,
    /// When it starts to hold.
    pub valid_from: DateTime<Utc>,
    /// When it stops holding (exclusive; closed by the version that
    /// superseded it); `None`: open.
    pub valid_until: Option<DateTime<Utc>>,
}

/// One `query` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnowledgeHit {
    /// The key.
    pub key: String,
    /// The knowledge.
    pub knowledge: Value,
    /// BM25 score; with an embedding, the fused score (pure vector search: the cosine).
    pub score: f32,
    /// 1-based rank in the text (BM25) list; `None` when that list did not find the hit.
    pub bm25_rank: Option<u32>,
    /// 1-based rank in the vector list; `None` when that list did not find the hit.
    pub vector_rank: Option<u32>,
    /// When the version returned starts to hold (with `as_of`: the version that held then).
    pub valid_from: DateTime<Utc>,
    /// When it stops holding (exclusive); `None`: open.
    pub valid_until: Option<DateTime<Utc>>,
}

mod batch;
pub use batch::NewKnowledge;
mod write;
use write::{put_version, write_version};
mod validity;
pub use validity::{ReadOptions, UpdateOptions};
pub(crate) use validity::{Span, close_history, spans as validity_spans};

/// Dimension keys to write with a transaction (see `episodic::claim_dims`).
type DimClaims = Vec<(Vec<u8>, usize)>;

/// What a new version does with the entry's embedding.
#[derive(Debug, Clone)]
enum EmbeddingChange {
    /// Keep the current one (merge-patch updates without an embedder).
    Keep,
    /// Replace it (`None` removes it: a `store` without an embedding).
    Set(Option<Vec<f32>>),
}

/// Handle on the semantic layer of the active context. Get it from [`Memory::semantic`](crate::Memory::semantic).
#[derive(Debug, Clone)]
pub struct Semantic {
    pub(crate) scope: Scope,
}

pub(crate) fn index_doc(ctx: &str, key: &str, r: &KnowledgeRecord) -> IndexDoc {
    let mut body = String::new();
    input::json_text(&r.value, &mut body);
    IndexDoc {
        uid: index::uid(Kind::Knowledge, ctx, key),
        kind: Kind::Knowledge,
        ctx: ctx.to_owned(),
        summary: key.to_owned(),
        body,
        participants: vec![],
        tags: vec![],
        ts_ms: r.updated_at,
        importance: 0,
        embedding: vector::stored_to_index(r.embedding.as_ref()),
        fresh: false,
    }
}

/// The knowledge entries as an indexed source of the engine.
pub(crate) const SOURCE: IndexedSource = IndexedSource {
    kind: Kind::Knowledge,
    scan: scan_docs,
    load: load_doc,
    vectors: scan_vectors,
};

fn scan_docs(e: &Engine, f: &mut dyn FnMut(IndexDoc) -> Result<()>) -> Result<()> {
    for item in e.t.semantic.iter() {
        let (k, v) = item?;
        let (ctx, key) = codec::split_ctx_key(&k)?;
        f(index_doc(&ctx, &key, &e.codec.decode(&v)?))?;
    }
    Ok(())
}

/// What building a set needs of a knowledge record (`semantic::KnowledgeRecord`),
/// with the row metadata `semantic::index_doc` gives it.
#[derive(Deserialize)]
struct VectorView {
    updated_at: i64,
    #[serde(default)]
    embedding: Option<VecBytes>,
}

fn scan_vectors(e: &Engine, ctx: &str, f: &mut dyn FnMut(&str, &[f32], RowMeta)) -> Result<()> {
    for item in e.t.semantic.scan_prefix(codec::ctx_prefix(ctx)) {
        let (k, v) = item?;
        let (_, key) = codec::split_ctx_key(&k)?;
        // Only the fields the set needs are decoded (the value is skipped).
        let r: VectorView = e.codec.decode(&v)?;
        if let Some(emb) = vector::stored_to_index(r.embedding.as_ref()) {
            let meta = RowMeta {
                ts_ms: r.updated_at,
                importance: 0,
                tags: Box::new([]),
                participants: Box::new([]),
            };
            f(&key, &emb, meta);
        }
    }
    Ok(())
}

fn load_doc(e: &Engine, ctx: &str, key: &str) -> Result<Option<IndexDoc>> {
    Ok(match e.t.semantic.get(codec::ctx_key(ctx, key))? {
        Some(v) => Some(index_doc(ctx, key, &e.codec.decode(&v)?)),
        None => None,
    })
}

fn history_key(ctx: &str, key: &str, version: u64) -> Vec<u8> {
    let mut k = codec::ctx_key(ctx, key);
    k.push(0);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

fn history_prefix(ctx: &str, key: &str) -> Vec<u8> {
    let mut k = codec::ctx_key(ctx, key);
    k.push(0);
    k
}

fn to_public(key: &str, r: KnowledgeRecord) -> Knowledge {
    Knowledge {
        key: key.to_owned(),
        valid_from: millis_to_dt(validity::from_of(&r)),
        valid_until: r.valid_until.map(millis_to_dt),
        knowledge: r.value,
        version: r.version,
        created_at: millis_to_dt(r.created_at),
        updated_at: millis_to_dt(r.updated_at),
        duplicate_of: r.duplicate_of,
    }
}

pub(crate) fn store_in(e: &Engine, ctx: &str, key: &str, knowledge: Value) -> Result<Knowledge> {
    store_embedded_in(e, ctx, key, knowledge, None, None, Span::default())
}

/// The text an embedder is given for an entry: the key, then the knowledge's text.
fn embed_text(key: &str, v: &Value) -> String {
    crate::layers::episodic::embed_text(key, v)
}

pub(crate) fn get_in(e: &Engine, ctx: &str, key: &str) -> Result<Option<Knowledge>> {
    input::key(&e.opts.limits, "key", key)?;
    Ok(match e.t.semantic.get(codec::ctx_key(ctx, key))? {
        Some(v) => Some(to_public(key, e.codec.decode(&v)?)),
        None => None,
    })
}

/// Kept history of an entry, oldest first: (version, record).
pub(crate) fn history_in(e: &Engine, ctx: &str, key: &str) -> Result<Vec<(u64, HistoryRecord)>> {
    let mut out = Vec::new();
    for item in e.t.semantic_history.scan_prefix(history_prefix(ctx, key)) {
        let (k, v) = item?;
        let ver = k
            .len()
            .checked_sub(8)
            .map(|p| &k[p..])
            .and_then(|b| b.try_into().ok());
        let version = u64::from_be_bytes(ver.ok_or_else(|| Error::corrupted("bad history key"))?);
        out.push((version, e.codec.decode(&v)?));
    }
    Ok(out)
}

/// Write an entry and its history exactly as given (import), replacing any existing
/// entry and history under `key`, through the indexed write path.
pub(crate) fn insert_record_in(
    e: &Engine,
    ctx: &str,
    key: &str,
    rec: &KnowledgeRecord,
    history: &[(u64, HistoryRecord)],
) -> Result<()> {
    let dkey = codec::ctx_key(ctx, key);
    let enc = e.codec.encode(rec)?;
    let mut hist = Vec::with_capacity(history.len());
    for (v, h) in history {
        hist.push((history_key(ctx, key, *v), e.codec.encode(h)?));
    }
    let doc = index_doc(ctx, key, rec);
    e.touch_context(ctx)?;
    let hprefix = history_prefix(ctx, key);
    e.indexed_write_prepared(
        &[&e.t.semantic, &e.t.semantic_history, &e.t.meta, &e.t.dedup],
        || -> Result<(Vec<crate::storage::Bytes>, (DimClaims, bool))> {
            let claims = crate::layers::episodic::claim_dims(e, std::iter::once(&doc))?;
            Ok((
                e.t.semantic_history
                    .scan_prefix(&hprefix)
                    .keys()
                    .collect::<Result<_, _>>()?,
                (claims, dedup::is_indexed(e, ctx)?),
            ))
        },
        |t, (old, (claims, indexed))| {
            for k in old {
                t[1].remove(k)?;
            }
            for (k, dim) in claims {
                t[2].insert(k.as_slice(), vectors::dim_value(*dim))?;
            }
            for (k, v) in &hist {
                t[1].insert(k.as_slice(), v.as_slice())?;
            }
            if *indexed {
                dedup::rekey(e, &t[3], ctx, key, None, Some(&rec.value))?;
            }
            t[0].insert(dkey.as_slice(), enc.as_slice())?;
            Ok(((), vec![IndexOp::Upsert(doc.clone())]))
        },
    )
}

pub(crate) fn forget_in(e: &Engine, ctx: &str, key: &str) -> Result<bool> {
    input::key(&e.opts.limits, "key", key)?;
    let dkey = codec::ctx_key(ctx, key);
    let hprefix = history_prefix(ctx, key);
    let uid = index::uid(Kind::Knowledge, ctx, key);
    // History keys are listed under the index writer lock (every history write
    // holds it), so no version can slip in between the scan and the delete.
    e.indexed_write_prepared(
        &[&e.t.semantic, &e.t.semantic_history, &e.t.dedup],
        || -> Result<(Vec<crate::storage::Bytes>, bool)> {
            Ok((
                e.t.semantic_history
                    .scan_prefix(&hprefix)
                    .keys()
                    .collect::<Result<_, _>>()?,
                dedup::is_indexed(e, ctx)?,
            ))
        },
        |t, (hkeys, indexed)| {
            let old = t[0].remove(dkey.as_slice())?;
            if let (Some(old), true) = (&old, *indexed) {
                let r: KnowledgeRecord = e.codec.decode(old)?;
                dedup::rekey(e, &t[2], ctx, key, Some(&r.value), None)?;
            }
            for k in hkeys {
                t[1].remove(k)?;
            }
            let ops = if old.is_some() {
                vec![IndexOp::Delete(uid.clone())]
            } else {
                vec![]
            };
            Ok((old.is_some(), ops))
        },
    )
}

pub(crate) fn query_in(
    e: &Engine,
    ctx: &str,
    text: &str,
    limit: usize,
    vq: &VectorQuery,
    embedder: Option<&dyn Embedder>,
    opts: &ReadOptions,
) -> Result<Vec<KnowledgeHit>> {
    crate::util::input::search(&e.opts.limits, "text", text, limit)?;
    let text_list = |depth: usize| -> Result<Vec<(String, f32)>> {
        let q = IndexQuery {
            kind: Kind::Knowledge,
            ctx,
            text,
            tags_all: &[],
            participants_any: &[],
            since_ms: None,
            until_ms: None,
            min_importance: None,
            limit: depth,
        };
        let mut out = Vec::new();
        for (uid, score) in e.search_index(&q)? {
            let (kind, c, key) = index::parse_uid(&uid)?;
            if kind == Kind::Knowledge && c == ctx {
                out.push((key, score));
            }
        }
        Ok(out)
    };
    let now = e.opts.clock.now();
    // Entries left out (expired, or with no version as of the time asked)
    // make room for the next candidates: the lists are read deeper until
    // `limit` hits are found or the candidates run out.
    let mut depth = limit;
    loop {
        let fused = vectors::fused_hits(
            e,
            Kind::Knowledge,
            ctx,
            text,
            vq,
            embedder,
            depth,
            &vector::RowFilter::NONE,
            depth == limit,
            text_list,
        )?;
        let exhausted = fused.len() < depth;
        let mut out = Vec::with_capacity(fused.len().min(limit));
        for f in fused {
            let k = match opts.as_of {
                Some(t) => validity::get_as_of_in(e, ctx, &f.key, t.timestamp_millis())?,
                None => get_in(e, ctx, &f.key)?
                    .filter(|k| opts.include_expired || !validity::expired(k, now)),
            };
            if let Some(k) = k {
                out.push(KnowledgeHit {
                    key: k.key,
                    knowledge: k.knowledge,
                    score: f.score,
                    bm25_rank: f.bm25_rank,
                    vector_rank: f.vector_rank,
                    valid_from: k.valid_from,
                    valid_until: k.valid_until,
                });
                if out.len() == limit {
                    break;
                }
            }
        }
        if out.len() >= limit || exhausted || depth >= MAX_QUERY_DEPTH {
            return Ok(out);
        }
        depth = (depth * 4).min(MAX_QUERY_DEPTH);
    }
}

/// The deepest a query reads its candidate lists to fill `limit` hits when
/// entries are left out (expired, or not holding as of the time asked).
const MAX_QUERY_DEPTH: usize = 10_000;

impl Semantic {
    /// Store (replace) the knowledge under `key`.
    ///
    /// With an embedder registered ([`Memory::set_embedder`](crate::Memory::set_embedder)) the entry is
    /// embedded (text: the key, then the knowledge's text); otherwise it has no embedding.
    pub fn store(&self, key: &str, knowledge: Value) -> Result<Knowledge> {
        self.store_with_embedding(key, knowledge, None)
    }

    /// Store (replace) the knowledge under `key` with the host's embedding
    /// (`None`: the registered embedder's, if any).
    pub fn store_with_embedding(
        &self,
        key: &str,
        knowledge: Value,
        embedding: Option<Vec<f32>>,
    ) -> Result<Knowledge> {
        self.store_with(
            key,
            knowledge,
            StoreOptions {
                embedding,
                ..StoreOptions::default()
            },
        )
    }

    /// Store (replace) the knowledge under `key` with options: the host's
    /// embedding, and the duplicate policy of this write (`on_duplicate`;
    /// default the context's). The result's `duplicate_of` names the entry
    /// found to hold the same (or a near-identical) value; with `skip` the
    /// result is that entry, unchanged, and with `merge` that entry with the
    /// value applied as a JSON merge patch.
    pub fn store_with(&self, key: &str, knowledge: Value, opts: StoreOptions) -> Result<Knowledge> {
        let e = &self.scope.engine;
        e.timed("semantic.store", || {
            let now = e.opts.clock.now().timestamp_millis();
            let span = Span::new(opts.valid_from, opts.valid_until, now)?;
            let embedding = match (opts.embedding, self.scope.embedder()) {
                (Some(v), _) => Some(v),
                (None, Some(f)) => {
                    input::key(&e.opts.limits, "key", key)?;
                    input::value(&e.opts.limits, "knowledge", &knowledge)?;
                    Some(embedder::embed_one(
                        f.as_ref(),
                        &embed_text(key, &knowledge),
                    )?)
                }
                (None, None) => None,
            };
            store_embedded_in(
                e,
                &self.scope.active_ctx(),
                key,
                knowledge,
                embedding,
                opts.on_duplicate,
                span,
            )
        })
    }

    /// Store (replace) many entries in one call; returns the new entries, in order.
    ///
    /// Each item is what one [`Semantic::store_with_embedding`] call takes, and
    /// items apply in order (a key given twice ends with its last value, two
    /// versions later). All or nothing: every item is checked first with the
    /// checks and limits of `store`; a bad item fails the call with its field
    /// named `items[i].field` (e.g. `items[2].key`) and stores nothing. One
    /// storage transaction, one index batch; at most
    /// [`Limits::max_batch_items`](crate::Limits) items and
    /// [`Limits::max_batch_bytes`](crate::Limits) bytes per call.
    pub fn store_many(&self, items: Vec<NewKnowledge>) -> Result<Vec<Knowledge>> {
        let e = &self.scope.engine;
        let embedder = self.scope.embedder();
        e.timed("semantic.store_many", || {
            batch::store_many_in(e, &self.scope.active_ctx(), items, embedder.as_deref())
        })
    }

    /// The knowledge under `key`, or `None`.
    pub fn retrieve(&self, key: &str) -> Result<Option<Value>> {
        Ok(self.get(key)?.map(|k| k.knowledge))
    }

    /// The entry under `key` with version and timestamps, or `None`.
    pub fn get(&self, key: &str) -> Result<Option<Knowledge>> {
        let e = &self.scope.engine;
        e.timed("semantic.retrieve", || {
            get_in(e, &self.scope.active_ctx(), key)
        })
    }

    /// Full-text query over keys and knowledge text (hybrid when an embedder
    /// is registered and `text` is not empty).
    pub fn query(&self, text: &str, limit: usize) -> Result<Vec<KnowledgeHit>> {
        self.query_hybrid(text, limit, &VectorQuery::default())
    }

    /// Query with an embedding: fused BM25 and vector lists, or pure vector
    /// search when `text` is empty (see [`crate::Episodic::search_hybrid`]).
    /// Entries whose current version expired (`valid_until` in the past) are
    /// left out (see [`Semantic::query_with`]).
    pub fn query_hybrid(
        &self,
        text: &str,
        limit: usize,
        vq: &VectorQuery,
    ) -> Result<Vec<KnowledgeHit>> {
        self.query_with(text, limit, vq, &ReadOptions::default())
    }

    /// Apply an RFC 7386 JSON Merge Patch to an existing entry (`NotFound`
    /// otherwise); the new version holds from now (see [`Semantic::update_with`]).
    pub fn update(&self, key: &str, patch: Value) -> Result<Knowledge> {
        self.update_with(key, patch, UpdateOptions::default())
    }

    /// Delete the entry and its history; `true` when it existed.
    pub fn forget(&self, key: &str) -> Result<bool> {
        let e = &self.scope.engine;
        e.timed("semantic.forget", || {
            forget_in(e, &self.scope.active_ctx(), key)
        })
    }

    /// Kept versions, oldest first (the last one is the current value).
    pub fn history(&self, key: &str) -> Result<Vec<KnowledgeVersion>> {
        let e = &self.scope.engine;
        e.timed("semantic.history", || {
            input::key(&e.opts.limits, "key", key)?;
            let hist = history_in(e, &self.scope.active_ctx(), key)?;
            Ok(validity::spans(hist)
                .into_iter()
                .map(|(version, h, f, u)| KnowledgeVersion {
                    version,
                    knowledge: h.value,
                    recorded_at: millis_to_dt(h.recorded_at),
                    valid_from: millis_to_dt(f),
                    valid_until: u.map(millis_to_dt),
                })
                .collect())
        })
    }

    /// Keys starting with `prefix` (empty: all), sorted.
    pub fn keys(&self, prefix: &str) -> Result<Vec<String>> {
        let e = &self.scope.engine;
        e.timed("semantic.keys", || {
            let mut out = Vec::new();
            for k in
                e.t.semantic
                    .scan_prefix(codec::ctx_key(&self.scope.active_ctx(), prefix))
                    .keys()
            {
                out.push(codec::split_ctx_key(&k?)?.1);
            }
            Ok(out)
        })
    }
}
