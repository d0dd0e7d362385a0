//! Values stored in a named context's short-term layer (methods of `Memory`).

use memstrata_bindings_common::{
    ContextStored, ContextValue, Eviction, JsonValue, Retention, defaults, options,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::memory::Memory;
use crate::task::with;

/// Options of `contextStore`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct ContextStoreOptions {
    /// Seconds until the value expires (> 0).
    pub ttl: Option<f64>,
    /// The context to store in (default: the active one).
    pub namespace: Option<String>,
}

/// Options of `contextRetrieve`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct ContextRetrieveOptions {
    /// The context to read (default: the active one).
    pub namespace: Option<String>,
}

/// Options of `setOnDuplicate` and `onDuplicate`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct OnDuplicateOptions {
    /// The context (default: the active one).
    pub namespace: Option<String>,
}

/// Options of `setRetention`: the limits (each optional; none clears the policy) and the context.
#[napi(object)]
#[derive(Debug, Default)]
pub struct SetRetentionOptions {
    /// Most episodes the context keeps (≥ 1).
    pub max_episodes: Option<i64>,
    /// Most bytes its episodes may occupy as stored (≥ 1).
    pub max_bytes: Option<i64>,
    /// Oldest an episode may be, in seconds (> 0).
    pub max_age: Option<f64>,
    /// The context (default: the active one).
    pub namespace: Option<String>,
}

/// Options of `retention`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct RetentionOptions {
    /// The context (default: the active one).
    pub namespace: Option<String>,
}

/// Options of `evictions`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct EvictionsOptions {
    /// The context (default: the active one).
    pub namespace: Option<String>,
    /// Most entries, newest first (default 10, at most 100).
    pub limit: Option<u32>,
}

#[napi]
impl Memory {
    /// Set the retention policy of `namespace` (else the active context): at most
    /// `maxEpisodes` episodes, `maxBytes` stored bytes, episodes at most `maxAge`
    /// seconds old. Past a limit the lowest-utility episodes (importance, recency,
    /// how often searches returned them) are evicted, each one audited
    /// (`evictions`). Enforced at once, on writes past a limit, and by `optimize`.
    /// With no limit, the context's policy is cleared.
    #[napi]
    pub fn set_retention<'env>(
        &self,
        env: &'env Env,
        options: Option<SetRetentionOptions>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let o = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            let p = options::retention(o.max_episodes, o.max_bytes, o.max_age)?;
            Ok(m.contexts().set_retention(p, o.namespace.as_deref())?)
        })
    }

    /// The retention policy of `namespace` (else the active context); every limit null when none is set.
    #[napi]
    pub fn retention<'env>(
        &self,
        env: &'env Env,
        options: Option<RetentionOptions>,
    ) -> Result<PromiseRaw<'env, Retention>> {
        let ns = options.and_then(|o| o.namespace);
        with(env, &self.h, move |m| {
            Ok(m.contexts().retention(ns.as_deref())?.into())
        })
    }

    /// The audit of episodes evicted from `namespace` (else the active context)
    /// by its retention policy, newest first, at most `limit` (default 10, at most 100).
    #[napi]
    pub fn evictions<'env>(
        &self,
        env: &'env Env,
        options: Option<EvictionsOptions>,
    ) -> Result<PromiseRaw<'env, Vec<Eviction>>> {
        let o = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            let limit = defaults::page_limit(o.limit);
            Ok(m.contexts()
                .evictions(o.namespace.as_deref(), limit)?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    /// Store `value` under `key` in the short-term layer of `namespace` (else the active context).
    #[napi]
    pub fn context_store<'env>(
        &self,
        env: &'env Env,
        key: String,
        value: JsonValue,
        options: Option<ContextStoreOptions>,
    ) -> Result<PromiseRaw<'env, ContextStored>> {
        let o = options.unwrap_or_default();
        with(env, &self.h, move |m| {
            let ttl = options::ttl(o.ttl)?;
            Ok(m.contexts()
                .store(&key, value.0, ttl, o.namespace.as_deref())?
                .into())
        })
    }

    /// The value under `key` in `namespace` (else the active context) with its
    /// timestamps, or null when absent or expired.
    #[napi]
    pub fn context_retrieve<'env>(
        &self,
        env: &'env Env,
        key: String,
        options: Option<ContextRetrieveOptions>,
    ) -> Result<PromiseRaw<'env, Option<ContextValue>>> {
        let ns = options.and_then(|o| o.namespace);
        with(env, &self.h, move |m| {
            Ok(m.contexts().retrieve(&key, ns.as_deref())?.map(Into::into))
        })
    }

    /// Set the duplicate policy (`'keep'`, `'skip'`, `'merge'` or `'link'`) of
    /// `namespace` (else the active context): what `episodic.record` and
    /// `semantic.store` do without an `onDuplicate` of their own.
    #[napi]
    pub fn set_on_duplicate<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "'keep' | 'skip' | 'merge' | 'link'")] on_duplicate: String,
        options: Option<OnDuplicateOptions>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let ns = options.and_then(|o| o.namespace);
        with(env, &self.h, move |m| {
            let p = options::on_duplicate(Some(&on_duplicate))?.unwrap_or_default();
            Ok(m.contexts().set_on_duplicate(p, ns.as_deref())?)
        })
    }

    /// The duplicate policy of `namespace` (else the active context).
    #[napi(ts_return_type = "Promise<'keep' | 'skip' | 'merge' | 'link'>")]
    pub fn on_duplicate<'env>(
        &self,
        env: &'env Env,
        options: Option<OnDuplicateOptions>,
    ) -> Result<PromiseRaw<'env, String>> {
        let ns = options.and_then(|o| o.namespace);
        with(env, &self.h, move |m| {
            Ok(m.contexts()
                .on_duplicate(ns.as_deref())?
                .as_str()
                .to_owned())
        })
    }
}
