//! `mem.semantic`: versioned knowledge entries with merge-patch updates.

use std::sync::Arc;

use memstrata_bindings_common::{
    Handle, JsonValue, Knowledge, KnowledgeHit, KnowledgeItem, KnowledgeVersion, QueryOptions,
    StoreOptions, items, records,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::short_term::PrefixOptions;
use crate::task::with;

/// Semantic layer of the active context (`mem.semantic`).
#[napi]
#[derive(Debug)]
pub struct Semantic {
    pub(crate) h: Arc<Handle>,
}

#[napi]
impl Semantic {
    /// Store `knowledge` under `key` (a new version when the key exists). `embedding`:
    /// the entry's vector; without it, the registered embedder's (if any), called on
    /// the key plus the knowledge's text. `onDuplicate` (`'keep'`, `'skip'`,
    /// `'merge'` or `'link'`; default the context's policy) says what to do when
    /// another entry holds the same or a near-identical value; the result's
    /// `duplicateOf` names it.
    #[napi]
    pub fn store<'env>(
        &self,
        env: &'env Env,
        key: String,
        knowledge: JsonValue,
        options: Option<StoreOptions>,
    ) -> Result<PromiseRaw<'env, Knowledge>> {
        let opts = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            let opts = opts.core()?;
            Ok(m.semantic().store_with(&key, knowledge.0, opts)?.into())
        })
    }

    /// Store (replace) many entries in one call; resolves to the new entries, in order
    /// (a key given twice ends with its last value). All or nothing: every item is
    /// checked first, with the checks and limits of `store`; a bad item rejects with
    /// its field named `items[i].field` and nothing is stored. One storage transaction
    /// and one index batch per call; at most 10,000 items and 64 MiB per call.
    #[napi]
    pub fn store_many<'env>(
        &self,
        env: &'env Env,
        items: Vec<KnowledgeItem>,
    ) -> Result<PromiseRaw<'env, Vec<Knowledge>>> {
        with(env, &self.h, move |m| {
            let list = items::knowledge(items)?;
            Ok(records::list(m.semantic().store_many(list)?))
        })
    }

    /// The knowledge under `key`, or null.
    #[napi(ts_return_type = "Promise<JsonValue>")]
    pub fn retrieve<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> Result<PromiseRaw<'env, JsonValue>> {
        with(env, &self.h, move |m| {
            Ok(JsonValue(m.semantic().retrieve(&key)?.unwrap_or_default()))
        })
    }

    /// The entry under `key` with its version and timestamps, or null.
    #[napi]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> Result<PromiseRaw<'env, Option<Knowledge>>> {
        with(env, &self.h, move |m| {
            Ok(m.semantic().get(&key)?.map(Into::into))
        })
    }

    /// Full-text query over keys and knowledge; `limit` default 10. `embedding` and
    /// the fusion options work as in `episodic.search`; with an empty `text` and an
    /// embedding, pure vector search.
    #[napi]
    pub fn query<'env>(
        &self,
        env: &'env Env,
        text: String,
        options: Option<QueryOptions>,
    ) -> Result<PromiseRaw<'env, Vec<KnowledgeHit>>> {
        let opts = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            let (limit, vq) = opts.query()?;
            Ok(records::list(m.semantic().query_hybrid(&text, limit, &vq)?))
        })
    }

    /// Apply an RFC 7386 merge patch to the entry under `key` (`NOT_FOUND` if absent).
    #[napi]
    pub fn update<'env>(
        &self,
        env: &'env Env,
        key: String,
        patch: JsonValue,
    ) -> Result<PromiseRaw<'env, Knowledge>> {
        with(env, &self.h, move |m| {
            Ok(m.semantic().update(&key, patch.0)?.into())
        })
    }

    /// Delete `key` and its history; true when it existed.
    #[napi]
    pub fn forget<'env>(&self, env: &'env Env, key: String) -> Result<PromiseRaw<'env, bool>> {
        with(env, &self.h, move |m| Ok(m.semantic().forget(&key)?))
    }

    /// Kept versions of `key`, oldest first.
    #[napi]
    pub fn history<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> Result<PromiseRaw<'env, Vec<KnowledgeVersion>>> {
        with(env, &self.h, move |m| {
            Ok(records::list(m.semantic().history(&key)?))
        })
    }

    /// Keys, sorted.
    #[napi]
    pub fn keys<'env>(
        &self,
        env: &'env Env,
        options: Option<PrefixOptions>,
    ) -> Result<PromiseRaw<'env, Vec<String>>> {
        let prefix = options.and_then(|o| o.prefix).unwrap_or_default();
        with(env, &self.h, move |m| Ok(m.semantic().keys(&prefix)?))
    }
}
