//! Short-term memory: JSON values with an optional TTL, per context.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::millis_to_dt;
use crate::engine::Engine;
use crate::{Error, Memory, Result, codec, validate};

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct StRecord {
    pub value: Value,
    pub stored_at: i64,
    pub expires_at: Option<i64>,
}

/// A short-term entry with its timestamps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShortTermEntry {
    /// The key.
    pub key: String,
    /// The stored JSON value.
    pub value: Value,
    /// When it was stored.
    pub stored_at: DateTime<Utc>,
    /// When it expires, if it has a TTL.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Handle on the short-term layer of one context. Get it from [`Memory::short_term`].
#[derive(Debug, Clone)]
pub struct ShortTerm {
    pub(crate) mem: Memory,
}

impl ShortTerm {
    /// Store `value` under `key`, replacing any previous value; `ttl` makes it expire.
    pub fn store(&self, key: &str, value: Value, ttl: Option<Duration>) -> Result<ShortTermEntry> {
        let e = &self.mem.engine;
        e.timed("short_term.store", || {
            store_in(e, &self.mem.active_ctx(), key, value, ttl)
        })
    }

    /// The value under `key`, or `None` when absent or expired.
    pub fn retrieve(&self, key: &str) -> Result<Option<Value>> {
        let e = &self.mem.engine;
        e.timed("short_term.retrieve", || {
            retrieve_in(e, &self.mem.active_ctx(), key)
        })
    }

    /// The entry under `key` with its timestamps, or `None` when absent or expired.
    pub fn entry(&self, key: &str) -> Result<Option<ShortTermEntry>> {
        let e = &self.mem.engine;
        e.timed("short_term.retrieve", || {
            entry_in(e, &self.mem.active_ctx(), key)
        })
    }

    /// Remove `key`; `true` when something (unexpired) was removed.
    pub fn forget(&self, key: &str) -> Result<bool> {
        let e = &self.mem.engine;
        e.timed("short_term.forget", || {
            validate::key(&e.opts.limits, "key", key)?;
            let sk = codec::ctx_key(&self.mem.active_ctx(), key);
            let old = e.t.short_term.remove(&sk);
            // After the store write (see `decoded_cache`), whatever its outcome.
            e.short_term_cache.invalidate(&sk);
            let old = old?;
            e.after_write()?;
            let now = e.opts.clock.now().timestamp_millis();
            Ok(match old {
                Some(v) => e
                    .codec
                    .decode::<StRecord>(&v)
                    .map(|r| !expired(&r, now))
                    .unwrap_or(true),
                None => false,
            })
        })
    }

    /// Estimated use of the engine's decoded short-term cache, for tests and
    /// diagnostics: `(entries, bytes, budget)`; budget 0 means disabled
    /// (a shared PostgreSQL store).
    #[doc(hidden)]
    pub fn cache_usage(&self) -> (usize, usize, usize) {
        let c = &self.mem.engine.short_term_cache;
        let (n, bytes) = c.usage();
        (n, bytes, c.budget())
    }

    /// Unexpired keys starting with `prefix` (empty: all), sorted.
    pub fn keys(&self, prefix: &str) -> Result<Vec<String>> {
        let e = &self.mem.engine;
        e.timed("short_term.keys", || {
            let ctx = self.mem.active_ctx();
            let now = e.opts.clock.now().timestamp_millis();
            let mut out = Vec::new();
            for item in e.t.short_term.scan_prefix(codec::ctx_key(&ctx, prefix)) {
                let (k, v) = item?;
                let rec: StRecord = e.codec.decode(&v)?;
                if !expired(&rec, now) {
                    out.push(codec::split_ctx_key(&k)?.1);
                }
            }
            Ok(out)
        })
    }
}

fn expired(r: &StRecord, now_ms: i64) -> bool {
    r.expires_at.is_some_and(|t| t <= now_ms)
}

pub(crate) fn store_in(
    e: &Engine,
    ctx: &str,
    key: &str,
    value: Value,
    ttl: Option<Duration>,
) -> Result<ShortTermEntry> {
    validate::key(&e.opts.limits, "key", key)?;
    validate::value(&e.opts.limits, "value", &value)?;
    if ttl.is_some_and(|t| t.is_zero()) {
        return Err(Error::invalid("ttl", "TTL must be > 0 seconds"));
    }
    let now = e.opts.clock.now();
    let stored_at = now.timestamp_millis();
    let expires_at = match ttl {
        Some(t) => Some(
            stored_at
                .checked_add(
                    i64::try_from(t.as_millis())
                        .map_err(|_| Error::invalid("ttl", "TTL too large"))?,
                )
                .ok_or_else(|| Error::invalid("ttl", "TTL too large"))?,
        ),
        None => None,
    };
    let rec = StRecord {
        value,
        stored_at,
        expires_at,
    };
    let enc = e.codec.encode(&rec)?;
    e.touch_context(ctx)?;
    let sk = codec::ctx_key(ctx, key);
    let written = e.t.short_term.insert(sk.as_slice(), enc);
    // No write-through: a concurrent `store` of the same key may have committed
    // after this one; the next read fills from the store (see `decoded_cache`).
    e.short_term_cache.invalidate(&sk);
    written?;
    e.after_write()?;
    Ok(ShortTermEntry {
        key: key.to_owned(),
        value: rec.value,
        stored_at: millis_to_dt(stored_at),
        expires_at: expires_at.map(millis_to_dt),
    })
}

/// The record under storage key `sk`, through the short-term cache.
/// May be expired: callers check.
fn get_record(e: &Engine, sk: &[u8]) -> Result<Option<Arc<StRecord>>> {
    e.short_term_cache.get_or_load(sk, || {
        e.t.short_term
            .get(sk)?
            .map(|v| e.codec.decode::<StRecord>(&v))
            .transpose()
    })
}

/// Hot path of `retrieve`: no entry struct, the clock only read for items with a TTL.
/// The TTL is checked on every call, cached or not: an expired item is never returned.
pub(crate) fn retrieve_in(e: &Engine, ctx: &str, key: &str) -> Result<Option<Value>> {
    validate::key(&e.opts.limits, "key", key)?;
    let Some(rec) = get_record(e, &codec::ctx_key(ctx, key))? else {
        return Ok(None);
    };
    if rec.expires_at.is_some() && expired(&rec, e.opts.clock.now().timestamp_millis()) {
        return Ok(None);
    }
    Ok(Some(take_value(rec)))
}

/// The record's value: moved out when this was the last reference (cache off
/// or the entry refused), else cloned from the cached record.
fn take_value(rec: Arc<StRecord>) -> Value {
    match Arc::try_unwrap(rec) {
        Ok(r) => r.value,
        Err(shared) => shared.value.clone(),
    }
}

pub(crate) fn entry_in(e: &Engine, ctx: &str, key: &str) -> Result<Option<ShortTermEntry>> {
    validate::key(&e.opts.limits, "key", key)?;
    let Some(rec) = get_record(e, &codec::ctx_key(ctx, key))? else {
        return Ok(None);
    };
    if expired(&rec, e.opts.clock.now().timestamp_millis()) {
        return Ok(None);
    }
    let (stored_at, expires_at) = (rec.stored_at, rec.expires_at);
    Ok(Some(ShortTermEntry {
        key: key.to_owned(),
        value: take_value(rec),
        stored_at: millis_to_dt(stored_at),
        expires_at: expires_at.map(millis_to_dt),
    }))
}

/// Remove every expired item (all contexts). Returns how many were removed.
pub(crate) fn sweep_expired(e: &Engine) -> Result<usize> {
    let now = e.opts.clock.now().timestamp_millis();
    let mut n = 0;
    for item in e.t.short_term.iter() {
        let (k, v) = item?;
        let expired_now = match e.codec.decode::<StRecord>(&v) {
            Ok(r) => expired(&r, now),
            Err(_) => false,
        };
        if expired_now {
            // Only remove if unchanged since we read it.
            let swapped =
                e.t.short_term
                    .compare_and_swap(&k, Some(&v), None as Option<&[u8]>);
            // After the store write (see `decoded_cache`), whatever its outcome.
            e.short_term_cache.invalidate(&k);
            if swapped?.is_ok() {
                n += 1;
            }
        }
    }
    if n > 0 {
        e.after_write()?;
    }
    Ok(n)
}
