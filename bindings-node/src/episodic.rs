//! `mem.episodic`: episodes with full-text search.

use std::sync::Arc;

use memstrata_bindings_common::{
    Episode, EpisodeHit, Handle, RecordOptions, SearchOptions, defaults, records,
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

/// Options of `recent` and `semantic.query`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct LimitOptions {
    /// Most results (default 10).
    pub limit: Option<u32>,
}

#[napi]
impl Episodic {
    /// Record an episode; returns its id.
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
            let (filters, limit) = opts.filters()?;
            Ok(records::list(m.episodic().search(&query, &filters, limit)?))
        })
    }

    /// The newest episodes, newest first; `limit` default 10.
    #[napi]
    pub fn recent<'env>(
        &self,
        env: &'env Env,
        options: Option<LimitOptions>,
    ) -> Result<PromiseRaw<'env, Vec<Episode>>> {
        let limit = defaults::search_limit(options.and_then(|o| o.limit));
        with(env, &self.h, move |m| {
            Ok(records::list(m.episodic().recent(limit)?))
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
