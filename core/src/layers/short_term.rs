//! Short-term memory: JSON values with an optional TTL, per context.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::clock::millis_to_dt;
use crate::engine::{Engine, Scope};
use crate::{Error, Result, storage::codec, util::input, util::value_tape};

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

/// Handle on the short-term layer of one context. Get it from [`Memory::short_term`](crate::Memory::short_term).
#[derive(Debug, Clone)]
pub struct ShortTerm {
    pub(crate) scope: Scope,
}

impl ShortTerm {
    /// Store `value` under `key`, replacing any previous value; `ttl` makes it expire.
    pub fn store(&self, key: &str, value: Value, ttl: Option<Duration>) -> Result<ShortTermEntry> {
        let e = &self.scope.engine;
        e.timed("short_term.store", || {
            store_in(e, &self.scope.active_ctx(), key, value, ttl)
        })
    }

    /// The value under `key`, or `None` when absent or expired.
    pub fn retrieve(&self, key: &str) -> Result<Option<Value>> {
        let e = &self.scope.engine;
        e.timed("short_term.retrieve", || {
            input::key(&e.opts.limits, "key", key)?;
            retrieve_at(e, &self.storage_key(key))
        })
    }

    /// The entry under `key` with its timestamps, or `None` when absent or expired.
    pub fn entry(&self, key: &str) -> Result<Option<ShortTermEntry>> {
        let e = &self.scope.engine;
        e.timed("short_term.retrieve", || {
            input::key(&e.opts.limits, "key", key)?;
            entry_at(e, &self.storage_key(key), key)
        })
    }

    /// `key`'s storage key in the active context, built on the stack (no heap
    /// allocation for keys of up to 64 bytes with their context) under the
    /// active-context lock, without taking a reference to the context name.
    fn storage_key(&self, key: &str) -> codec::InlineKey {
        codec::ctx_key_inline(&self.scope.active_cell().read(), key)
    }

    /// Remove `key`; `true` when something (unexpired) was removed.
    pub fn forget(&self, key: &str) -> Result<bool> {
        let e = &self.scope.engine;
        e.timed("short_term.forget", || {
            input::key(&e.opts.limits, "key", key)?;
            let sk = codec::ctx_key(&self.scope.active_ctx(), key);
            let old = e.t.short_term.remove(&sk);
            // After the store write (see `decoded_cache`), whatever its outcome.
            e.short_term_cache().invalidate(&sk);
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
        let c = &self.scope.engine.short_term_cache();
        let (n, bytes) = c.usage();
        (n, bytes, c.budget())
    }

    /// Unexpired keys starting with `prefix` (empty: all), sorted.
    pub fn keys(&self, prefix: &str) -> Result<Vec<String>> {
        let e = &self.scope.engine;
        e.timed("short_term.keys", || {
            let ctx = self.scope.active_ctx();
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
    input::key(&e.opts.limits, "key", key)?;
    input::value(&e.opts.limits, "value", &value)?;
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
    e.short_term_cache().invalidate(&sk);
    written?;
    e.after_write()?;
    Ok(ShortTermEntry {
        key: key.to_owned(),
        value: rec.value,
        stored_at: millis_to_dt(stored_at),
        expires_at: expires_at.map(millis_to_dt),
    })
}

// The short-term cache (see `decoded_cache`) holds each record packed into one
// block: `stored_at` (8 bytes LE), an expiry flag byte, `expires_at` (8 bytes
// LE, 0 without a TTL), then the value as a `value_tape`. A hit reads the
// timestamps in place and builds the caller's `Value` from the tape, front to
// back, instead of cloning a cached `Value` tree spread over ~10 heap blocks.

const PACK_HEADER: usize = 17;

/// `rec` packed for the cache, `None` when its value cannot be (a string over 4 GiB).
fn pack(rec: &StRecord, tape_len: usize) -> Option<Arc<[u8]>> {
    let mut out = Vec::with_capacity(PACK_HEADER + tape_len);
    out.extend_from_slice(&rec.stored_at.to_le_bytes());
    out.push(u8::from(rec.expires_at.is_some()));
    out.extend_from_slice(&rec.expires_at.unwrap_or(0).to_le_bytes());
    value_tape::encode(&rec.value, &mut out)?;
    Some(out.into())
}

/// `(stored_at, expires_at)` of a packed record.
fn packed_times(p: &[u8]) -> Option<(i64, Option<i64>)> {
    let stored_at = i64::from_le_bytes(p.get(..8)?.try_into().ok()?);
    let expires_at = i64::from_le_bytes(p.get(9..PACK_HEADER)?.try_into().ok()?);
    Some((stored_at, (*p.get(8)? != 0).then_some(expires_at)))
}

/// A record read through the short-term cache.
enum Got {
    /// Packed, from the cache.
    Cached(Arc<[u8]>),
    /// Decoded from the store (and offered to the cache).
    Loaded(StRecord),
}

/// The record under storage key `sk`, through the short-term cache.
/// May be expired: callers check.
fn get_record(e: &Engine, sk: &[u8]) -> Result<Option<Got>> {
    let cache = &e.short_term_cache();
    if let Some(p) = cache.get(sk) {
        return Ok(Some(Got::Cached(p)));
    }
    // Taken before the store read: a fill racing an invalidation is refused.
    let generation = cache.generation();
    let Some(v) = e.t.short_term.get(sk)? else {
        return Ok(None);
    };
    let rec: StRecord = e.codec.decode(&v)?;
    if cache.budget() > 0 {
        let tape_len = value_tape::encoded_len(&rec.value);
        cache.insert_with(sk, PACK_HEADER + tape_len, generation, || {
            pack(&rec, tape_len)
        });
    }
    Ok(Some(Got::Loaded(rec)))
}

/// A record's timestamps and value; `None` for a packed record that does not
/// unpack (never for what `pack` wrote).
fn unpack(got: Got) -> Option<(i64, Option<i64>, Value)> {
    match got {
        Got::Loaded(r) => Some((r.stored_at, r.expires_at, r.value)),
        Got::Cached(p) => {
            let (stored_at, expires_at) = packed_times(&p)?;
            Some((
                stored_at,
                expires_at,
                value_tape::decode(p.get(PACK_HEADER..)?)?,
            ))
        }
    }
}

/// The record under `sk`, unexpired; a cached record that does not unpack is
/// dropped from the cache and read from the store.
fn live_record(e: &Engine, sk: &[u8]) -> Result<Option<(i64, Option<i64>, Value)>> {
    let Some(got) = get_record(e, sk)? else {
        return Ok(None);
    };
    let times = match &got {
        Got::Loaded(r) => Some((r.stored_at, r.expires_at)),
        Got::Cached(p) => packed_times(p),
    };
    // The TTL is checked on every call, cached or not (the clock only read for
    // items with a TTL): an expired item is never returned, nor unpacked.
    if let Some((_, Some(t))) = times
        && t <= e.opts.clock.now().timestamp_millis()
    {
        return Ok(None);
    }
    match unpack(got) {
        Some(r) => Ok(Some(r)),
        None => {
            e.short_term_cache().invalidate(sk);
            let Some(v) = e.t.short_term.get(sk)? else {
                return Ok(None);
            };
            let r: StRecord = e.codec.decode(&v)?;
            if expired(&r, e.opts.clock.now().timestamp_millis()) {
                return Ok(None);
            }
            Ok(Some((r.stored_at, r.expires_at, r.value)))
        }
    }
}

/// Hot path of `retrieve`, `sk` the storage key of a validated key: no entry
/// struct, no clock read for items without a TTL.
fn retrieve_at(e: &Engine, sk: &[u8]) -> Result<Option<Value>> {
    Ok(live_record(e, sk)?.map(|(_, _, v)| v))
}

fn entry_at(e: &Engine, sk: &[u8], key: &str) -> Result<Option<ShortTermEntry>> {
    Ok(
        live_record(e, sk)?.map(|(stored_at, expires_at, value)| ShortTermEntry {
            key: key.to_owned(),
            value,
            stored_at: millis_to_dt(stored_at),
            expires_at: expires_at.map(millis_to_dt),
        }),
    )
}

pub(crate) fn entry_in(e: &Engine, ctx: &str, key: &str) -> Result<Option<ShortTermEntry>> {
    input::key(&e.opts.limits, "key", key)?;
    entry_at(e, &codec::ctx_key_inline(ctx, key), key)
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
            e.short_term_cache().invalidate(&k);
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
