//! Values stored in a named context's short-term layer (methods of `Memory`).

use memstrata_bindings_common::{ContextStored, ContextValue, JsonValue, options};
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

#[napi]
impl Memory {
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
