//! `mem.shortTerm`: key/value items with an optional TTL.

use std::sync::Arc;

use memstrata_bindings_common::{Handle, JsonValue, ShortTermEntry, options};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::task::with;

/// Short-term layer of the active context (`mem.shortTerm`).
#[napi]
#[derive(Debug)]
pub struct ShortTerm {
    pub(crate) h: Arc<Handle>,
}

/// Options of `shortTerm.store` and `contextStore`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct TtlOptions {
    /// Seconds until the item expires (> 0); none: it never expires.
    pub ttl: Option<f64>,
}

/// Options of `keys`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct PrefixOptions {
    /// Only keys starting with this (default "": every key).
    pub prefix: Option<String>,
}

#[napi]
impl ShortTerm {
    /// Store `value` under `key` (replacing what was there).
    #[napi]
    pub fn store<'env>(
        &self,
        env: &'env Env,
        key: String,
        value: JsonValue,
        options: Option<TtlOptions>,
    ) -> Result<PromiseRaw<'env, ShortTermEntry>> {
        let ttl = options.and_then(|o| o.ttl);
        with(env, &self.h, move |m| {
            let ttl = options::ttl(ttl)?;
            Ok(m.short_term().store(&key, value.0, ttl)?.into())
        })
    }

    /// The value under `key`, or null when absent or expired.
    #[napi(ts_return_type = "Promise<JsonValue>")]
    pub fn retrieve<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> Result<PromiseRaw<'env, JsonValue>> {
        with(env, &self.h, move |m| {
            Ok(JsonValue(
                m.short_term().retrieve(&key)?.unwrap_or_default(),
            ))
        })
    }

    /// The item under `key` with its timestamps, or null.
    #[napi]
    pub fn entry<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> Result<PromiseRaw<'env, Option<ShortTermEntry>>> {
        with(env, &self.h, move |m| {
            Ok(m.short_term().entry(&key)?.map(Into::into))
        })
    }

    /// Delete `key`; true when it existed.
    #[napi]
    pub fn forget<'env>(&self, env: &'env Env, key: String) -> Result<PromiseRaw<'env, bool>> {
        with(env, &self.h, move |m| Ok(m.short_term().forget(&key)?))
    }

    /// Live keys, sorted.
    #[napi]
    pub fn keys<'env>(
        &self,
        env: &'env Env,
        options: Option<PrefixOptions>,
    ) -> Result<PromiseRaw<'env, Vec<String>>> {
        let prefix = options.and_then(|o| o.prefix).unwrap_or_default();
        with(env, &self.h, move |m| Ok(m.short_term().keys(&prefix)?))
    }
}
