//! `context_store` / `context_retrieve`: the short-term layer of a named (else the active) context.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::engine::Scope;
use crate::layers::dedup::{self, OnDuplicate};
use crate::layers::episodic::retention::{self, Eviction, Retention};
use crate::{Result, layers::short_term, util::input};

/// Result of [`Memory::switch_context`](crate::Memory::switch_context).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SwitchResult {
    /// The context that was active before.
    pub previous_context: String,
    /// True when the target context already held data.
    pub context_loaded: bool,
}

/// Result of [`Contexts::store`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ContextStored {
    /// When the value expires (`None`: no TTL).
    pub expires_at: Option<DateTime<Utc>>,
}

/// Result of [`Contexts::retrieve`](crate::Contexts::retrieve).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ContextValue {
    /// The stored value.
    pub value: Value,
    /// When it was stored.
    pub stored_at: DateTime<Utc>,
    /// When it expires (`None`: no TTL).
    pub expires_at: Option<DateTime<Utc>>,
}

/// Handle on the store's contexts: list them, and read or write the short-term layer of a named (else the active) context. Get it from [`Memory::contexts`](crate::Memory::contexts).
#[derive(Debug, Clone)]
pub struct Contexts {
    pub(crate) scope: Scope,
}

impl Contexts {
    /// Contexts that hold (or held) data, sorted; always includes `"default"`.
    pub fn list(&self) -> Result<Vec<String>> {
        self.scope.engine.check_process()?;
        self.scope.engine.context_names()
    }

    fn context_or_active(&self, namespace: Option<&str>) -> Result<String> {
        match namespace {
            Some(ns) => {
                input::context_name("namespace", ns)?;
                Ok(ns.to_owned())
            }
            None => Ok(self.scope.active_context()),
        }
    }

    /// Set the duplicate policy of writes to `namespace` (else the active
    /// context) that give none: `episodic.record` and `semantic.store` use it
    /// when their `on_duplicate` is absent. Every context starts with `keep`.
    pub fn set_on_duplicate(&self, policy: OnDuplicate, namespace: Option<&str>) -> Result<()> {
        let e = &self.scope.engine;
        e.timed("context.set_on_duplicate", || {
            let ctx = self.context_or_active(namespace)?;
            dedup::set_context_policy(e, &ctx, policy)
        })
    }

    /// The duplicate policy of `namespace` (else the active context).
    pub fn on_duplicate(&self, namespace: Option<&str>) -> Result<OnDuplicate> {
        let e = &self.scope.engine;
        e.timed("context.on_duplicate", || {
            let ctx = self.context_or_active(namespace)?;
            dedup::context_policy(e, &ctx)
        })
    }

    /// Set the retention policy of `namespace` (else the active context): the
    /// limits on its episodes (`max_episodes`, `max_bytes`, `max_age`) past
    /// which the lowest-utility episodes are evicted, each eviction audited.
    /// It is enforced at once, then after writes to the context that may pass
    /// a limit, by the maintenance sweep and by `optimize`. A policy without
    /// any limit ([`Retention::new`]) clears the context's policy.
    pub fn set_retention(&self, policy: Retention, namespace: Option<&str>) -> Result<()> {
        let e = &self.scope.engine;
        e.timed("context.set_retention", || {
            let ctx = self.context_or_active(namespace)?;
            retention::set_policy(e, &ctx, policy)
        })
    }

    /// The retention policy of `namespace` (else the active context); unlimited unless set.
    pub fn retention(&self, namespace: Option<&str>) -> Result<Retention> {
        let e = &self.scope.engine;
        e.timed("context.retention", || {
            let ctx = self.context_or_active(namespace)?;
            retention::policy(e, &ctx)
        })
    }

    /// The audit of the episodes evicted from `namespace` (else the active
    /// context) by its retention policy, newest first, at most `limit`.
    pub fn evictions(&self, namespace: Option<&str>, limit: usize) -> Result<Vec<Eviction>> {
        let e = &self.scope.engine;
        e.timed("context.evictions", || {
            let ctx = self.context_or_active(namespace)?;
            let limit = limit.min(e.opts.limits.max_results);
            retention::evictions(e, &ctx, limit)
        })
    }

    /// Store `value` under `key` in the short-term layer of `namespace` (else the
    /// active context), replacing any previous value; `ttl` makes it expire.
    pub fn store(
        &self,
        key: &str,
        value: Value,
        ttl: Option<Duration>,
        namespace: Option<&str>,
    ) -> Result<ContextStored> {
        let e = &self.scope.engine;
        e.timed("context.store", || {
            let ctx = self.context_or_active(namespace)?;
            let entry = short_term::store_in(e, &ctx, key, value, ttl)?;
            Ok(ContextStored {
                expires_at: entry.expires_at,
            })
        })
    }

    /// The value under `key` in the short-term layer of `namespace` (else the active
    /// context), or `None` when absent or expired.
    pub fn retrieve(&self, key: &str, namespace: Option<&str>) -> Result<Option<ContextValue>> {
        let e = &self.scope.engine;
        e.timed("context.retrieve", || {
            let ctx = self.context_or_active(namespace)?;
            Ok(
                short_term::entry_in(e, &ctx, key)?.map(|entry| ContextValue {
                    value: entry.value,
                    stored_at: entry.stored_at,
                    expires_at: entry.expires_at,
                }),
            )
        })
    }
}
