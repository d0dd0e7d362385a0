//! The engine's side of vector search: the embedding dimension fixed per
//! context, building a context's vector set from the store, and the hit list
//! of a hybrid (BM25 + vector) search.

use std::sync::Arc;

use parking_lot::RwLock;

use super::Engine;
use crate::search::embedder::{Embedder, check, embed_one};
use crate::search::evidence::{Evidence, content_terms, covers_most, holds_any};
use crate::search::fusion::{Fused, FusionMethod, depth, fuse_matched, validate_fusion};
use crate::search::index::Kind;
use crate::search::vector::{RowFilter, ScanShare, VectorQuery, VectorSet, merge_shared};
use crate::storage::Store;
use crate::{Error, Result};

fn dim_key(ctx: &str) -> Vec<u8> {
    let mut k = b"vector_dim\0".to_vec();
    k.extend_from_slice(ctx.as_bytes());
    k
}

/// The embedding dimension fixed for `ctx`, if any vector was ever stored there.
pub(crate) fn dim_of(e: &Engine, ctx: &str) -> Result<Option<usize>> {
    Ok(match e.t.meta.get(dim_key(ctx))? {
        Some(v) => {
            let b: [u8; 4] = v
                .as_ref()
                .try_into()
                .map_err(|_| Error::corrupted("vector_dim record is not 4 bytes"))?;
            Some(u32::from_be_bytes(b) as usize)
        }
        None => None,
    })
}

pub(crate) fn mismatch(field: &str, ctx: &str, got: usize, fixed: usize) -> Error {
    Error::invalid(
        field,
        format!("embedding has {got} dimensions, context '{ctx}' uses {fixed}"),
    )
}

/// Check `dim` against the context's fixed dimension. Call under the index
/// writer lock (every dimension write holds it). `Ok(Some(meta_key))` means the
/// context has none yet: the caller's transaction stores it under that key.
pub(crate) fn claim_dim(e: &Engine, field: &str, ctx: &str, dim: usize) -> Result<Option<Vec<u8>>> {
    match dim_of(e, ctx)? {
        Some(fixed) if fixed == dim => Ok(None),
        Some(fixed) => Err(mismatch(field, ctx, dim, fixed)),
        None => Ok(Some(dim_key(ctx))),
    }
}

/// The value stored under a dimension key.
pub(crate) fn dim_value(dim: usize) -> [u8; 4] {
    (dim as u32).to_be_bytes()
}

/// Validate a query embedding and fusion; `Ok(None)` when the context holds no vectors yet.
pub(crate) fn prepare_query(
    e: &Engine,
    ctx: &str,
    vq: &VectorQuery,
    q: &[f32],
) -> Result<Option<usize>> {
    validate_fusion(&vq.fusion)?;
    check("embedding", q)?;
    match dim_of(e, ctx)? {
        Some(d) if d == q.len() => Ok(Some(d)),
        Some(d) => Err(mismatch("embedding", ctx, q.len(), d)),
        None => Ok(None),
    }
}

/// The hit list of one search of `kind` in `ctx`, shared by episodes and knowledge.
///
/// Without a query embedding (given in `vq` or made by `embedder` from a
/// non-empty `query`): the BM25 list of `text_list(limit)`. With one and an
/// empty query: the vector list alone. With both: the BM25 list (hits that
/// matched a word) and the vector list, each `depth(limit)` deep and each
/// filtered (`text_list` by the index query, the vectors by `filter`), fused.
///
/// `learn`: whether this search counts in the store's fusion evidence
/// ([`crate::search::evidence::Evidence`]); a caller that reads the same
/// search again deeper (the `as_of` loops) passes `false` on the re-reads, so
/// that one search counts once.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fused_hits(
    e: &Engine,
    kind: Kind,
    ctx: &str,
    query: &str,
    vq: &VectorQuery,
    embedder: Option<&dyn Embedder>,
    limit: usize,
    filter: &RowFilter<'_>,
    learn: bool,
    text_list: impl Fn(usize) -> Result<Vec<(String, f32)>>,
) -> Result<Vec<Fused>> {
    validate_fusion(&vq.fusion)?;
    let has_text = !query.trim().is_empty();
    let embedded;
    let embedding = match (&vq.embedding, embedder) {
        (Some(v), _) => Some(v.as_slice()),
        (None, Some(f)) if has_text => {
            embedded = embed_one(f, query)?;
            Some(embedded.as_slice())
        }
        (None, _) => None,
    };
    let ranked = |list: Vec<(String, f32)>, text: bool| -> Vec<Fused> {
        list.into_iter()
            .take(limit)
            .enumerate()
            .map(|(i, (key, score))| Fused {
                key,
                score,
                bm25_rank: (text && has_text).then_some(i as u32 + 1),
                vector_rank: (!text).then_some(i as u32 + 1),
            })
            .collect()
    };
    let Some(qv) = embedding else {
        return Ok(ranked(text_list(limit)?, true));
    };
    let depth = depth(limit);
    // The in-process sets follow other instances' writes through the index log;
    // pgvector's table holds every committed write already.
    if !e.vectors_in_sql() {
        e.sync_shared()?;
    }
    let has_vectors = prepare_query(e, ctx, vq, qv)?.is_some();
    if !has_text {
        let vector_list = match has_vectors {
            true => e.vector_search(kind, ctx, qv, filter, depth)?,
            false => Vec::new(),
        };
        return Ok(ranked(vector_list, false));
    }
    let (vector_list, mut bm25) = match has_vectors {
        true => e.vector_search_beside(kind, ctx, qv, filter, depth, || text_list(depth))?,
        false => (Vec::new(), text_list(depth)?),
    };
    // Hits with no matching word (score 0, by recency) are not a text match.
    bm25.retain(|(_, s)| *s > 0.0);
    let evidence = e.fusion_evidence(kind);
    // The adaptive fusion adds BM25's z only for hits that matched a content
    // word of the question (not only "what did I ..."). Finding out reads the
    // hit's text, so only the hits that reach the results are read: a hit not
    // read yet counts as a content match, which can only raise its score, so
    // once every BM25 hit among the results has been read, none left out
    // would have made it (the result is that of reading every hit).
    // On PostgreSQL the text query leaves stop words out: every hit matched a
    // content word, nothing to read.
    let stop_words_searched = matches!(e.store(), Store::Sled(_));
    let query_terms = content_terms(query);
    let asked: &[String] = match vq.fusion.method {
        FusionMethod::Adaptive if stop_words_searched => &query_terms,
        _ => &[],
    };
    let mut read: Vec<Option<bool>> = vec![None; if asked.is_empty() { 0 } else { bm25.len() }];
    let mut top_doc = None;
    let fused = loop {
        let flags: Vec<bool> = read.iter().map(|r| r.unwrap_or(true)).collect();
        let fused = fuse_matched(
            &bm25,
            (!flags.is_empty()).then_some(flags.as_slice()),
            &vector_list,
            evidence.vector_share(),
            &vq.fusion,
            limit,
        );
        let unread: Vec<usize> = fused
            .iter()
            .filter_map(|f| f.bm25_rank.map(|r| r as usize - 1))
            .filter(|&i| read.get(i).is_some_and(Option::is_none))
            .collect();
        if unread.is_empty() {
            break fused;
        }
        for i in unread {
            let doc = e.index_doc(kind, ctx, &bm25[i].0)?;
            read[i] = Some(doc.as_ref().is_some_and(|d| holds_any(asked, d)));
            if i == 0 {
                top_doc = Some(doc);
            }
        }
    };
    // Learn from this search for the next ones: when the BM25 best hit holds
    // most of the question's content words, did the vector list agree?
    if learn
        && let (Some((bm25_top, _)), Some((vector_top, _))) = (bm25.first(), vector_list.first())
    {
        let top = match top_doc {
            Some(doc) => doc,
            None => e.index_doc(kind, ctx, bm25_top)?,
        };
        if let Some(doc) = top
            && covers_most(&query_terms, &doc) == Some(true)
        {
            evidence.record(bm25_top == vector_top);
        }
    }
    Ok(fused)
}

/// Bytes of int8 codes from which [`Engine::vector_search_beside`] scans on a
/// thread of its own (about 2,700 rows of 384 dimensions: a millisecond-scale
/// scan, against tens of microseconds to start the thread).
const BESIDE_MIN_BYTES: usize = 1 << 20;

/// The `meta` record of the fusion evidence of a kind (`e` episodes, `k` knowledge).
fn evidence_key(kind: Kind) -> &'static [u8] {
    match kind {
        Kind::Episode => b"fusion_evidence\0e",
        Kind::Knowledge => b"fusion_evidence\0k",
    }
}

/// The fusion evidence saved in the store (episodes, knowledge), or the prior.
pub(crate) fn load_evidence(t: &super::Trees) -> Result<[Evidence; 2]> {
    let load = |kind| -> Result<Evidence> {
        Ok(t.meta
            .get(evidence_key(kind))?
            .map_or_else(Evidence::default, |v| Evidence::from_bytes(&v)))
    };
    Ok([load(Kind::Episode)?, load(Kind::Knowledge)?])
}

impl Engine {
    /// Save the fusion evidence counted since the last save (a no-op otherwise).
    pub(crate) fn save_fusion_evidence(&self) -> Result<()> {
        for kind in [Kind::Episode, Kind::Knowledge] {
            let ev = self.fusion_evidence(kind);
            if let Some(bytes) = ev.to_save() {
                self.t.meta.insert(evidence_key(kind), bytes)?;
                ev.mark_saved(&bytes);
            }
        }
        Ok(())
    }

    /// The vector set of (kind, ctx), built on first use from the records of
    /// the indexed source of `kind`.
    fn vector_set(&self, kind: Kind, ctx: &str) -> Result<Arc<RwLock<VectorSet>>> {
        self.vectors.loaded(
            kind,
            ctx,
            || self.index_lock(),
            |set| {
                let source = self.source(kind)?;
                (source.vectors)(self, ctx, &mut |key, emb, meta| set.upsert(key, emb, meta))
            },
        )
    }

    /// The `depth` nearest keys of (kind, ctx) to `q` (already checked against the
    /// context's dimension) among rows `filter` accepts, with their cosine, best first.
    pub(crate) fn vector_search(
        &self,
        kind: Kind,
        ctx: &str,
        q: &[f32],
        filter: &RowFilter<'_>,
        depth: usize,
    ) -> Result<Vec<(String, f32)>> {
        // PostgreSQL with pgvector: the same exact search, in SQL over `<schema>.vectors`.
        #[cfg(feature = "postgres")]
        if let crate::storage::Store::Postgres(p) = &self.store
            && let Some(hits) = p.vector_search(kind, ctx, q, filter, depth)?
        {
            return Ok(hits);
        }
        let set = self.vector_set(kind, ctx)?;
        let set = set.read();
        Ok(set.search(q, filter, depth))
    }

    /// [`Engine::vector_search`] and `other` (the BM25 list of the same
    /// search), both results; the error of the vector search first if both fail.
    ///
    /// When the context's in-process matrix is large, the scan starts on a
    /// thread of its own (scoped, started for this search; with more than 2
    /// CPUs it shares the scan with more) while this thread runs `other`, and
    /// once `other` is done this thread takes the blocks the scan has not
    /// reached yet: on 2 cores the scan and the BM25 list each have a core,
    /// then the scan has both. The set is built first, on this thread, and
    /// no lock of the vector index is held while `other` runs (it may take
    /// the index writer lock, which the writers hold while they wait for the
    /// set); this thread joins the scan only under a read guard of the very
    /// rows the scan started on ([`VectorSet::join_search`]). Small sets,
    /// PostgreSQL's pgvector, and a thread that cannot be started: one after
    /// the other, as [`Engine::vector_search`].
    pub(crate) fn vector_search_beside<T>(
        &self,
        kind: Kind,
        ctx: &str,
        q: &[f32],
        filter: &RowFilter<'_>,
        depth: usize,
        other: impl FnOnce() -> Result<T>,
    ) -> Result<(Vec<(String, f32)>, T)> {
        let set = match self.vectors_in_sql() {
            false => Some(self.vector_set(kind, ctx)?),
            true => None,
        };
        let other = match set {
            Some(set) if set.read().code_bytes() >= BESIDE_MIN_BYTES => {
                let share = ScanShare::default();
                let run = std::thread::scope(|s| {
                    match std::thread::Builder::new()
                        .name("memstrata-vectors".into())
                        .spawn_scoped(s, || set.read().lead_search(q, filter, depth, &share))
                    {
                        Ok(lead) => {
                            let theirs = other();
                            // Done with the BM25 list: take the scan's remaining
                            // blocks here, if it still runs on the rows it
                            // started on (a read guard while the lead holds one:
                            // `recursive` does not queue behind a waiting writer).
                            let joined = set
                                .try_read_recursive()
                                .and_then(|g| g.join_search(q, filter, depth, &share));
                            match lead.join() {
                                Ok(lead) => Ok((merge_shared(lead, joined, depth), theirs)),
                                Err(payload) => std::panic::resume_unwind(payload),
                            }
                        }
                        Err(_) => Err(other),
                    }
                });
                match run {
                    Ok((ours, theirs)) => return Ok((ours, theirs?)),
                    Err(other) => other,
                }
            }
            _ => other,
        };
        let ours = self.vector_search(kind, ctx, q, filter, depth)?;
        Ok((ours, other()?))
    }
}
