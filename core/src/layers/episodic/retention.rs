//! Forgetting by utility: a per-context retention policy (`max_episodes`,
//! `max_bytes`, `max_age`) that evicts the context's lowest-utility episodes
//! once a limit is exceeded, every eviction audited; how often searches
//! returned each episode (`access`); and the search option that ranks by
//! importance and recency (`rank`). See docs/memory-hygiene.md.
//!
//! Where things live (all in the `meta` tree, so sled and PostgreSQL alike,
//! with no migration):
//! - `retention\0<ctx>`: the policy (JSON);
//! - `evicted\0<ctx>\0<ms, 8 bytes big-endian><id>`: one audit entry per
//!   eviction (JSON, no user text), written in the eviction's transaction;
//! - `evicted_total\0<ctx>`: evictions so far (u64 little-endian), same transaction;
//! - `access\0<ctx>\0<id>`: searches that returned the episode (u32 LE), see `access`.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::config::clock::millis_to_dt;
use crate::engine::Engine;
use crate::layers::episodic::EpisodeCache;
use crate::search::index::{self, IndexOp, Kind};
use crate::storage::codec;
use crate::{Error, Result};

mod access;
mod rank;
pub(crate) use access::{after_search, flush_access};
pub(crate) use rank::search_depth;
pub use rank::{RANK_HALF_LIFE_DAYS, RANK_IMPORTANCE_WEIGHT, RANK_RECENCY_WEIGHT};

/// Half-life of the recency term of an episode's utility, in days.
pub const UTILITY_HALF_LIFE_DAYS: f64 = 7.0;
/// Weight of importance in an episode's utility.
pub const UTILITY_IMPORTANCE_WEIGHT: f64 = 0.4;
/// Weight of recency in an episode's utility.
pub const UTILITY_RECENCY_WEIGHT: f64 = 0.4;
/// Weight of the access count in an episode's utility.
pub const UTILITY_ACCESS_WEIGHT: f64 = 0.2;
/// Access count at which the access term of the utility reaches 1.
pub const UTILITY_ACCESS_SATURATION: u32 = 100;

/// A context's retention policy: limits on its episodes. Every field is
/// optional; a policy without any limit is no policy (setting it clears the
/// context's policy).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Retention {
    /// Most episodes the context keeps (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_episodes: Option<u64>,
    /// Most bytes its episodes occupy, as stored (encoded records; ≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Oldest an episode may be (its time, or the last time a duplicate was
    /// merged into it; at least 1 ms, kept to the millisecond; seconds on the wire).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_secs")]
    pub max_age: Option<Duration>,
}

/// `max_age` as seconds (a float, millisecond precision), as every binding gives it.
mod opt_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    #[allow(clippy::ref_option)]
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_f64(d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<f64>::deserialize(d)?
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .map(|d| Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))))
    }
}

impl Retention {
    /// No limit (set it to clear a context's policy).
    pub fn new() -> Self {
        Retention::default()
    }
    /// Limit the number of episodes.
    #[must_use]
    pub fn max_episodes(mut self, n: u64) -> Self {
        self.max_episodes = Some(n);
        self
    }
    /// Limit the stored bytes of the episodes.
    #[must_use]
    pub fn max_bytes(mut self, n: u64) -> Self {
        self.max_bytes = Some(n);
        self
    }
    /// Limit the age of the episodes.
    #[must_use]
    pub fn max_age(mut self, d: Duration) -> Self {
        self.max_age = Some(d);
        self
    }
    /// True when no limit is set.
    pub fn is_unlimited(&self) -> bool {
        self.max_episodes.is_none() && self.max_bytes.is_none() && self.max_age.is_none()
    }
    /// Check the limits: `InvalidInput` naming the field otherwise.
    pub fn validate(&self) -> Result<()> {
        if self.max_episodes == Some(0) {
            return Err(Error::invalid("max_episodes", "must be at least 1, got 0"));
        }
        if self.max_bytes == Some(0) {
            return Err(Error::invalid("max_bytes", "must be at least 1, got 0"));
        }
        if let Some(d) = self.max_age {
            if d.as_millis() == 0 {
                return Err(Error::invalid("max_age", "must be at least 1 ms"));
            }
            if d.as_millis() > i64::MAX as u128 / 2 {
                return Err(Error::invalid("max_age", "is too large"));
            }
        }
        Ok(())
    }
}

/// Which limit an eviction enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictionReason {
    /// The episode was older than `max_age`.
    MaxAge,
    /// The context held more than `max_episodes`.
    MaxEpisodes,
    /// The context's episodes took more than `max_bytes`.
    MaxBytes,
}

impl EvictionReason {
    /// `"max_age"`, `"max_episodes"` or `"max_bytes"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionReason::MaxAge => "max_age",
            EvictionReason::MaxEpisodes => "max_episodes",
            EvictionReason::MaxBytes => "max_bytes",
        }
    }
}

/// One audited eviction (no user text: the id, when, why, and the utility).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Eviction {
    /// The evicted episode's id.
    pub id: String,
    /// The context it was evicted from.
    pub context: String,
    /// When it was evicted.
    pub evicted_at: DateTime<Utc>,
    /// Which limit evicted it.
    pub reason: EvictionReason,
    /// Its utility when evicted (see [`utility`]).
    pub utility: f64,
}

/// A context's policy and evictions, as `status` reports them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RetentionStatus {
    /// The context.
    pub context: String,
    /// Its policy (unlimited once cleared).
    pub policy: Retention,
    /// Episodes evicted from it so far.
    pub evicted: u64,
}

const POLICY: &[u8] = b"retention\0";
const AUDIT: &[u8] = b"evicted\0";
const TOTAL: &[u8] = b"evicted_total\0";

fn key(prefix: &[u8], ctx: &str) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(ctx.as_bytes());
    k
}

fn audit_prefix(ctx: &str) -> Vec<u8> {
    let mut k = key(AUDIT, ctx);
    k.push(0);
    k
}

/// The policy of `ctx` (unlimited unless set).
pub(crate) fn policy(e: &Engine, ctx: &str) -> Result<Retention> {
    match e.t.meta.get(key(POLICY, ctx))? {
        Some(v) => serde_json::from_slice(&v)
            .map_err(|err| Error::corrupted_by("bad retention policy record", err)),
        None => Ok(Retention::default()),
    }
}

/// Store (or, with an unlimited policy, remove) the policy of `ctx`, without enforcing it.
pub(crate) fn store_policy(e: &Engine, ctx: &str, p: Retention) -> Result<()> {
    p.validate()?;
    e.touch_context(ctx)?;
    if p.is_unlimited() {
        e.t.meta.remove(key(POLICY, ctx))?;
    } else {
        let v = serde_json::to_vec(&p).map_err(|err| Error::corrupted_by("retention", err))?;
        e.t.meta.insert(key(POLICY, ctx), v)?;
    }
    e.state::<RetentionState>().est.lock().remove(ctx);
    Ok(())
}

/// Set (or, with an unlimited policy, clear) the policy of `ctx`, and enforce it at once.
pub(crate) fn set_policy(e: &Engine, ctx: &str, p: Retention) -> Result<()> {
    store_policy(e, ctx, p)?;
    if !p.is_unlimited() {
        enforce(e, ctx, &p)?;
    }
    e.after_write()
}

/// The utility of an episode, in 0..=1: `UTILITY_IMPORTANCE_WEIGHT ·
/// (importance − 1)/9 + UTILITY_RECENCY_WEIGHT · 0.5^(age / half-life) +
/// UTILITY_ACCESS_WEIGHT · min(1, ln(1 + accesses) / ln(1 + saturation))`,
/// with `age` the time since the episode's last activity (its time, or the
/// last merge of a duplicate), never negative.
pub fn utility(importance: u8, age: Duration, accesses: u32) -> f64 {
    let imp = f64::from(importance.clamp(1, 10) - 1) / 9.0;
    let days = age.as_secs_f64() / 86_400.0;
    let rec = 0.5f64.powf(days / UTILITY_HALF_LIFE_DAYS);
    let acc = (f64::from(accesses).ln_1p() / f64::from(UTILITY_ACCESS_SATURATION).ln_1p()).min(1.0);
    UTILITY_IMPORTANCE_WEIGHT * imp + UTILITY_RECENCY_WEIGHT * rec + UTILITY_ACCESS_WEIGHT * acc
}

/// Per-engine state: what this process knows of each context with a policy
/// (an upper bound of its episodes and bytes, the oldest activity), the
/// access counts not yet flushed, and the last enforcement failure.
#[derive(Debug, Default)]
pub(crate) struct RetentionState {
    est: Mutex<HashMap<String, Estimate>>,
    pub(super) pending: Mutex<HashMap<(String, String), u32>>,
    enforcing: Mutex<()>,
    pub(super) flushing: Mutex<()>,
    last_error: Mutex<Option<String>>,
}

#[derive(Debug, Clone, Copy)]
struct Estimate {
    count: u64,
    bytes: u64,
    oldest_ms: i64,
    age_checked_ms: i64,
}

pub(crate) fn new_state(_: &crate::config::Options, _: bool) -> crate::engine::LayerState {
    Box::new(RetentionState::default())
}

/// After episodes were written to `ctx` (`count` new ones, `bytes` encoded,
/// the oldest at `oldest_ms`): enforce the policy when the context may be past
/// a limit. Cheap otherwise: one read of the policy, and counters in memory.
/// An enforcement failure does not fail the write (it is reported by `status`
/// and retried by the next write).
pub(crate) fn after_write(e: &Engine, ctx: &str, count: u64, bytes: u64, oldest_ms: i64) {
    if let Err(err) = after_write_inner(e, ctx, count, bytes, oldest_ms) {
        *e.state::<RetentionState>().last_error.lock() =
            Some(format!("retention of context {ctx:?}: {err}"));
    }
}

fn after_write_inner(e: &Engine, ctx: &str, count: u64, bytes: u64, oldest_ms: i64) -> Result<()> {
    let p = policy(e, ctx)?;
    if p.is_unlimited() {
        return Ok(());
    }
    let now = e.opts.clock.now().timestamp_millis();
    let due = {
        let mut est = e.state::<RetentionState>().est.lock();
        match est.get_mut(ctx) {
            None => true,
            Some(s) => {
                s.count += count;
                s.bytes += bytes;
                s.oldest_ms = s.oldest_ms.min(oldest_ms);
                over_limit(&p, s, now)
            }
        }
    };
    if due {
        enforce(e, ctx, &p)?;
    }
    Ok(())
}

fn age_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

/// Whether `s` may be past a limit of `p`. Age is checked at most every tenth
/// of `max_age` (so a steady stream of writes does not scan at every write).
fn over_limit(p: &Retention, s: &Estimate, now: i64) -> bool {
    p.max_episodes.is_some_and(|m| s.count > m)
        || p.max_bytes.is_some_and(|m| s.bytes > m)
        || p.max_age.is_some_and(|a| {
            let a = age_ms(a);
            s.oldest_ms < now - a && now - s.age_checked_ms >= (a / 10).max(1)
        })
}

/// The low-water mark of a limit: enforcement brings a context over `limit`
/// down to 90 % of it (at least 1), so that the next writes do not each scan.
fn low_water(limit: u64) -> u64 {
    (limit - limit / 10).max(1)
}

/// What a utility needs of a stored episode: the fields of format version 2's
/// array in their order, the text ones skipped by the decoder (`IgnoredAny`),
/// so that both the arrays of version 2 and the named maps of version 1 decode
/// (as `registered::VectorView` does).
#[derive(Deserialize)]
struct UtilityView {
    timestamp: i64,
    #[serde(default, rename = "summary")]
    _summary: serde::de::IgnoredAny,
    #[serde(default, rename = "content")]
    _content: serde::de::IgnoredAny,
    #[serde(default, rename = "participants")]
    _participants: serde::de::IgnoredAny,
    #[serde(default, rename = "tags")]
    _tags: serde::de::IgnoredAny,
    importance: u8,
    #[serde(default, rename = "embedding")]
    _embedding: serde::de::IgnoredAny,
    #[serde(default, rename = "seen_count")]
    _seen_count: serde::de::IgnoredAny,
    #[serde(default)]
    last_seen: Option<i64>,
    // Skipped too, so that the array's length matches.
    #[serde(default, rename = "duplicate_of")]
    _duplicate_of: serde::de::IgnoredAny,
    // Appended for as-of reads (an episode recorded at another time than its
    // own `timestamp`); skipped, as above.
    #[serde(default, rename = "recorded_at")]
    _recorded_at: serde::de::IgnoredAny,
}

struct Candidate {
    id: String,
    bytes: u64,
    activity_ms: i64,
    utility: f64,
}

/// Enforce `p` on `ctx` now: evict every episode past `max_age`, then the
/// lowest-utility episodes while the context is over `max_episodes` or
/// `max_bytes` (down to the low-water mark). Returns how many were evicted.
pub(crate) fn enforce(e: &Engine, ctx: &str, p: &Retention) -> Result<u64> {
    let st = e.state::<RetentionState>();
    let _one = st.enforcing.lock();
    flush_access(e)?;
    let now = e.opts.clock.now().timestamp_millis();
    let accesses = access::counts(e, ctx)?;
    let mut all = Vec::new();
    for item in e.t.episodes.scan_prefix(codec::ctx_prefix(ctx)) {
        let (k, v) = item?;
        let (_, id) = codec::split_ctx_key(&k)?;
        let r: UtilityView = e.codec.decode(&v)?;
        let activity_ms = r.last_seen.unwrap_or(r.timestamp).max(r.timestamp);
        let age = Duration::from_millis(u64::try_from(now - activity_ms).unwrap_or(0));
        let n = accesses.get(&id).copied().unwrap_or(0);
        all.push(Candidate {
            utility: utility(r.importance, age, n),
            id,
            bytes: v.len() as u64,
            activity_ms,
        });
    }
    let mut evict: Vec<(Candidate, EvictionReason)> = Vec::new();
    if let Some(a) = p.max_age {
        let cutoff = now - age_ms(a);
        let (old, keep): (Vec<_>, Vec<_>) = all.into_iter().partition(|c| c.activity_ms < cutoff);
        evict.extend(old.into_iter().map(|c| (c, EvictionReason::MaxAge)));
        all = keep;
    }
    let mut count = all.len() as u64;
    let mut bytes: u64 = all.iter().map(|c| c.bytes).sum();
    let over_n = p.max_episodes.is_some_and(|m| count > m);
    let over_b = p.max_bytes.is_some_and(|m| bytes > m);
    if over_n || over_b {
        // Lowest utility first; ties: the oldest, then the smallest id.
        all.sort_by(|a, b| {
            a.utility
                .total_cmp(&b.utility)
                .then(a.activity_ms.cmp(&b.activity_ms))
                .then_with(|| a.id.cmp(&b.id))
        });
        let n_target = p
            .max_episodes
            .map(|m| if over_n { low_water(m) } else { m });
        let b_target = p.max_bytes.map(|m| if over_b { low_water(m) } else { m });
        let mut rest = all.into_iter();
        while n_target.is_some_and(|t| count > t) || b_target.is_some_and(|t| bytes > t) {
            let Some(c) = rest.next() else { break };
            let reason = if n_target.is_some_and(|t| count > t) {
                EvictionReason::MaxEpisodes
            } else {
                EvictionReason::MaxBytes
            };
            count -= 1;
            bytes -= c.bytes;
            evict.push((c, reason));
        }
        all = rest.collect();
    }
    let evicted = evict_all(e, ctx, &evict, now)?;
    let oldest_ms = all.iter().map(|c| c.activity_ms).min().unwrap_or(i64::MAX);
    st.est.lock().insert(
        ctx.to_owned(),
        Estimate {
            count: all.len() as u64,
            bytes: all.iter().map(|c| c.bytes).sum(),
            oldest_ms,
            age_checked_ms: now,
        },
    );
    access::prune(e, ctx, &all)?;
    *st.last_error.lock() = None;
    Ok(evicted)
}

/// Remove the episodes of `evict` from `ctx` with their audit entries, 256
/// per transaction (each one: records, dedup keys, access counts, audit
/// entries, total, index deletes).
fn evict_all(
    e: &Engine,
    ctx: &str,
    evict: &[(Candidate, EvictionReason)],
    now: i64,
) -> Result<u64> {
    use crate::layers::dedup as dd;
    use crate::search::dedup::DupKind;
    let rows = dd::writes_rows(e, ctx, DupKind::Episode)?;
    let mut n = 0;
    for chunk in evict.chunks(256) {
        let done = e.indexed_write(&[&e.t.episodes, &e.t.dedup, &e.t.meta], |t| {
            let mut ops = Vec::new();
            let mut gone = 0u64;
            for (c, reason) in chunk {
                let Some(old) = t[0].remove(codec::ctx_key(ctx, &c.id))? else {
                    continue;
                };
                if rows {
                    crate::layers::episodic::remove_dedup_keys(e, &t[1], ctx, &c.id, &old)?;
                }
                t[2].remove(access::key(ctx, &c.id))?;
                let entry = Eviction {
                    id: c.id.clone(),
                    context: ctx.to_owned(),
                    evicted_at: millis_to_dt(now),
                    reason: *reason,
                    utility: c.utility,
                };
                let mut k = audit_prefix(ctx);
                k.extend_from_slice(&now.to_be_bytes());
                k.extend_from_slice(c.id.as_bytes());
                t[2].insert(k, serde_json::to_vec(&entry).unwrap_or_default())?;
                ops.push(IndexOp::Delete(index::uid(Kind::Episode, ctx, &c.id)));
                gone += 1;
            }
            if gone > 0 {
                let total = t[2].get(key(TOTAL, ctx))?.map_or(0, |v| le_u64(&v));
                t[2].insert(key(TOTAL, ctx), (total + gone).to_le_bytes())?;
            }
            Ok((gone, ops))
        });
        for (c, _) in chunk {
            e.state::<EpisodeCache>()
                .invalidate(&codec::ctx_key(ctx, &c.id));
        }
        let gone = done?;
        for (c, _) in chunk {
            dd::mem_remove(e, ctx, DupKind::Episode, &c.id);
        }
        n += gone;
    }
    if n > 0 {
        e.after_write()?;
    }
    Ok(n)
}

fn le_u64(v: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = v.len().min(8);
    b[..n].copy_from_slice(&v[..n]);
    u64::from_le_bytes(b)
}

/// The newest `limit` audit entries of `ctx`, newest first.
pub(crate) fn evictions(e: &Engine, ctx: &str, limit: usize) -> Result<Vec<Eviction>> {
    let mut out = Vec::new();
    for item in e.t.meta.scan_prefix(audit_prefix(ctx)).rev() {
        if out.len() >= limit {
            break;
        }
        let (_, v) = item?;
        out.push(
            serde_json::from_slice(&v)
                .map_err(|err| Error::corrupted_by("bad eviction audit record", err))?,
        );
    }
    Ok(out)
}

/// Every context with a policy or with evictions, sorted by name.
pub(crate) fn statuses(e: &Engine) -> Result<Vec<RetentionStatus>> {
    let mut by: std::collections::BTreeMap<String, RetentionStatus> = Default::default();
    let name = |k: &[u8], p: &[u8]| String::from_utf8_lossy(&k[p.len()..]).into_owned();
    for item in e.t.meta.scan_prefix(POLICY) {
        let (k, v) = item?;
        let ctx = name(&k, POLICY);
        let policy = serde_json::from_slice(&v)
            .map_err(|err| Error::corrupted_by("bad retention policy record", err))?;
        by.insert(
            ctx.clone(),
            RetentionStatus {
                context: ctx,
                policy,
                evicted: 0,
            },
        );
    }
    for item in e.t.meta.scan_prefix(TOTAL) {
        let (k, v) = item?;
        let ctx = name(&k, TOTAL);
        by.entry(ctx.clone())
            .or_insert(RetentionStatus {
                context: ctx,
                policy: Retention::default(),
                evicted: 0,
            })
            .evicted = le_u64(&v);
    }
    Ok(by.into_values().collect())
}

/// Enforce every context's policy (optimize, and the maintenance sweep for
/// contexts that may be past `max_age`). Returns `(context, evicted)` pairs.
pub(crate) fn enforce_all(e: &Engine, only_due: bool) -> Result<Vec<(String, u64)>> {
    let now = e.opts.clock.now().timestamp_millis();
    let mut out = Vec::new();
    for s in statuses(e)? {
        if s.policy.is_unlimited() {
            continue;
        }
        if only_due {
            let est = e
                .state::<RetentionState>()
                .est
                .lock()
                .get(&s.context)
                .copied();
            if est.is_some_and(|est| !over_limit(&s.policy, &est, now)) {
                continue;
            }
        }
        let n = enforce(e, &s.context, &s.policy)?;
        out.push((s.context, n));
    }
    Ok(out)
}

/// The maintenance sweep: flush access counts, enforce where due.
pub(crate) fn sweep(e: &Engine) -> Result<usize> {
    flush_access(e)?;
    let n: u64 = enforce_all(e, true)?.iter().map(|(_, n)| n).sum();
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Forget what this process knows of every context's size (after episodes
/// were written outside the write path, e.g. by an import): the next write
/// to a context with a policy enforces it.
pub(crate) fn reset_estimates(e: &Engine) {
    e.state::<RetentionState>().est.lock().clear();
}

/// The last enforcement failure after a write, if any (reported by `status`).
pub(crate) fn last_error(e: &Engine) -> Option<String> {
    e.state::<RetentionState>().last_error.lock().clone()
}
