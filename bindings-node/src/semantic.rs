//! `mem.semantic`: versioned knowledge entries with merge-patch updates.

use std::sync::Arc;

use memstrata_bindings_common::{
    Handle, JsonValue, Knowledge, KnowledgeHit, KnowledgeItem, KnowledgeVersion, QueryOptions,
    StoreOptions, Timestamp, UpdateOptions, as_of, items, records,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::short_term::PrefixOptions;
use crate::task::with;

/// Options of `semantic.get` and `semantic.retrieve`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct AsOfOptions {
    /// Read the version that held at this instant (from the kept history).
    pub as_of: Option<Timestamp>,
}

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
    /// `duplicateOf` names it. `validFrom` / `validUntil`: when the new version starts
    /// (default now) and stops (exclusive; default open) holding; the version it
    /// supersedes stays in history, closed at the new `validFrom`.
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

    /// The knowledge under `key`, or null. With `asOf`: the value that held then
    /// (null when no kept version held).
    #[napi(ts_return_type = "Promise<JsonValue>")]
    pub fn retrieve<'env>(
        &self,
        env: &'env Env,
        key: String,
        options: Option<AsOfOptions>,
    ) -> Result<PromiseRaw<'env, JsonValue>> {
        let read = as_of(options.and_then(|o| o.as_of));
        with(env, &self.h, move |m| {
            let v = m.semantic().get_with(&key, &read)?.map(|k| k.knowledge);
            Ok(JsonValue(v.unwrap_or_default()))
        })
    }

    /// The entry under `key` with its version, timestamps and validity, or null.
    /// With `asOf`: its version that held then, from the kept history.
    #[napi]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        key: String,
        options: Option<AsOfOptions>,
    ) -> Result<PromiseRaw<'env, Option<Knowledge>>> {
        let read = as_of(options.and_then(|o| o.as_of));
        with(env, &self.h, move |m| {
            Ok(m.semantic().get_with(&key, &read)?.map(Into::into))
        })
    }

    /// Full-text query over keys and knowledge; `limit` default 10. `embedding` and
    /// the fusion options work as in `episodic.search`; with an empty `text` and an
    /// embedding, pure vector search. Entries whose current version expired
    /// (`validUntil` in the past) are left out unless `includeExpired`; with `asOf`,
    /// each entry's version that held then (entries with none are left out).
    #[napi]
    pub fn query<'env>(
        &self,
        env: &'env Env,
        text: String,
        options: Option<QueryOptions>,
    ) -> Result<PromiseRaw<'env, Vec<KnowledgeHit>>> {
        let opts = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            let read = opts.read();
            let (limit, vq) = opts.query()?;
            Ok(records::list(
                m.semantic().query_with(&text, limit, &vq, &read)?,
            ))
        })
    }

    /// Apply an RFC 7386 merge patch to the entry under `key` (`NOT_FOUND` if absent).
    /// `validFrom` / `validUntil` as in `store`: the new version holds from
    /// `validFrom` (default now); the one it supersedes stays in history, closed then.
    #[napi]
    pub fn update<'env>(
        &self,
        env: &'env Env,
        key: String,
        patch: JsonValue,
        options: Option<UpdateOptions>,
    ) -> Result<PromiseRaw<'env, Knowledge>> {
        let opts = options.unwrap_or_default().core();
        with(env, &self.h, move |m| {
            Ok(m.semantic().update_with(&key, patch.0, opts)?.into())
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
