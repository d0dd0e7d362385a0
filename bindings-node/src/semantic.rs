//! `mem.semantic`: versioned knowledge entries with merge-patch updates.

use std::sync::Arc;

use memstrata_bindings_common::{
    Handle, JsonValue, Knowledge, KnowledgeHit, KnowledgeVersion, defaults, records,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::episodic::LimitOptions;
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
    /// Store `knowledge` under `key` (a new version when the key exists).
    #[napi]
    pub fn store<'env>(
        &self,
        env: &'env Env,
        key: String,
        knowledge: JsonValue,
    ) -> Result<PromiseRaw<'env, Knowledge>> {
        with(env, &self.h, move |m| {
            Ok(m.semantic().store(&key, knowledge.0)?.into())
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

    /// Full-text query over keys and knowledge; `limit` default 10.
    #[napi]
    pub fn query<'env>(
        &self,
        env: &'env Env,
        text: String,
        options: Option<LimitOptions>,
    ) -> Result<PromiseRaw<'env, Vec<KnowledgeHit>>> {
        let limit = defaults::search_limit(options.and_then(|o| o.limit));
        with(env, &self.h, move |m| {
            Ok(records::list(m.semantic().query(&text, limit)?))
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
