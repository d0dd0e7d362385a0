//! `mem.episodic`: episodes with full-text search.

use std::sync::Arc;

use memstrata_bindings_common::{
    Episode, EpisodeHit, EpisodeItem, Handle, RecordOptions, Recorded, SearchOptions, Timestamp,
    defaults, items, records,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::task::with;

/// Episodic layer of the active context (`mem.episodic`).
#[napi]
#[derive(Debug)]
pub struct Episodic {
    pub(crate) h: Arc<Handle>,
}

/// Options of `episodic.recent`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct LimitOptions {
    /// Most results (default 10).
    pub limit: Option<u32>,
    /// Only episodes recorded by this instant (what the context held then).
    pub as_of: Option<Timestamp>,
}

#[napi]
impl Episodic {
    /// Record an episode; returns its id. With `embedding` (the dimension is fixed per
    /// context on first use) or a registered embedder (`Memory.setEmbedder`, called on
    /// the summary plus the content's text), the episode is found by vector search too.
    /// `onDuplicate` (`'keep'`, `'skip'`, `'merge'` or `'link'`; default the context's
    /// policy) says what to do when an earlier episode duplicates this one; with
    /// `'skip'` or `'merge'` the existing episode's id is returned.
    #[napi]
    pub fn record<'env>(
        &self,
        env: &'env Env,
        summary: String,
        options: Option<RecordOptions>,
    ) -> Result<PromiseRaw<'env, String>> {
        let opts = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            let ep = opts.episode(summary)?;
            Ok(m.episodic().record(ep)?)
        })
    }

    /// Record an episode like `record`, and say what its duplicate policy
    /// (`onDuplicate`: `'keep'`, `'skip'`, `'merge'` or `'link'`; default the
    /// context's) did: the id (the existing episode's when skipped or merged),
    /// `duplicateOf` and its `similarity` when a duplicate was found, `created`,
    /// and the policy applied.
    #[napi]
    pub fn record_detailed<'env>(
        &self,
        env: &'env Env,
        summary: String,
        options: Option<RecordOptions>,
    ) -> Result<PromiseRaw<'env, Recorded>> {
        let opts = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            let ep = opts.episode(summary)?;
            Ok(m.episodic().record_detailed(ep)?.into())
        })
    }

    /// Record many episodes in one call; resolves to their ids, in order. Each item
    /// takes the arguments of `record` (`summary` required). All or nothing: every
    /// item is checked first, with the checks and limits of `record`; a bad item
    /// rejects with its field named `items[i].field` (e.g. `items[3].content`) and
    /// nothing is stored. One storage transaction and one index batch per call; at
    /// most 10,000 items and 64 MiB encoded per call (`LIMIT_EXCEEDED` on `items`).
    #[napi]
    pub fn record_many<'env>(
        &self,
        env: &'env Env,
        items: Vec<EpisodeItem>,
    ) -> Result<PromiseRaw<'env, Vec<String>>> {
        with(env, &self.h, move |m| {
            let eps = items::episodes(items)?;
            Ok(m.episodic().record_many(eps)?)
        })
    }

    /// The episode `id`, or null.
    #[napi]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        id: String,
    ) -> Result<PromiseRaw<'env, Option<Episode>>> {
        with(env, &self.h, move |m| {
            Ok(m.episodic().get(&id)?.map(Into::into))
        })
    }

    /// Best matches for `query` (BM25 over summary, content, tags and participants;
    /// an empty query lists by recency), filtered; `limit` default 10.
    ///
    /// With `embedding` (or a registered embedder and a non-empty query) the BM25 list
    /// and the vector list are fused by `fusion` (`'adaptive'`, the default, `'linear'`
    /// or `'rrf'`, with `bm25Weight`, `vectorWeight` and `rrfK`: docs/api.md, "Embeddings
    /// and hybrid search"); an embedding with an empty query is a pure vector search.
    /// Hits carry `bm25Rank` / `vectorRank` (null: not in that list).
    #[napi]
    pub fn search<'env>(
        &self,
        env: &'env Env,
        query: Option<String>,
        options: Option<SearchOptions>,
    ) -> Result<PromiseRaw<'env, Vec<EpisodeHit>>> {
        let query = query.unwrap_or_default();
        let opts = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            let (filters, limit, vq) = opts.hybrid()?;
            Ok(records::list(
                m.episodic().search_hybrid(&query, &filters, limit, &vq)?,
            ))
        })
    }

    /// The newest episodes, newest first; `limit` default 10. With `asOf`, of those
    /// recorded by then.
    #[napi]
    pub fn recent<'env>(
        &self,
        env: &'env Env,
        options: Option<LimitOptions>,
    ) -> Result<PromiseRaw<'env, Vec<Episode>>> {
        let (limit, as_of) = options.map_or((None, None), |o| (o.limit, o.as_of));
        let limit = defaults::search_limit(limit);
        with(env, &self.h, move |m| {
            Ok(records::list(
                m.episodic().recent_as_of(limit, as_of.map(|t| t.0))?,
            ))
        })
    }

    /// A text summary of the episodes `ids` (oldest first).
    #[napi]
    pub fn summarize<'env>(
        &self,
        env: &'env Env,
        ids: Vec<String>,
    ) -> Result<PromiseRaw<'env, String>> {
        with(env, &self.h, move |m| Ok(m.episodic().summarize(&ids)?))
    }

    /// Delete the episode `id`; true when it existed.
    #[napi]
    pub fn forget<'env>(&self, env: &'env Env, id: String) -> Result<PromiseRaw<'env, bool>> {
        with(env, &self.h, move |m| Ok(m.episodic().forget(&id)?))
    }
}
