//! How often searches returned each episode: counted in memory by every
//! search of a context with a retention policy (a map increment per hit, no
//! write), flushed to `meta` in batches (every 4,096 distinct episodes, at
//! each maintenance sweep, `flush`, `optimize`, close, and before an
//! enforcement reads them).

use std::collections::{HashMap, HashSet};

use super::{Candidate, RetentionState, policy};
use crate::Result;
use crate::engine::Engine;
use crate::layers::episodic::{EpisodeHit, SearchFilters};
use crate::storage::codec;

/// Distinct episodes counted in memory before a search flushes them.
pub(crate) const PENDING_MAX: usize = 4096;

const PREFIX: &[u8] = b"access\0";

pub(super) fn key(ctx: &str, id: &str) -> Vec<u8> {
    let mut k = PREFIX.to_vec();
    k.extend_from_slice(&codec::ctx_key(ctx, id));
    k
}

fn ctx_prefix(ctx: &str) -> Vec<u8> {
    let mut k = PREFIX.to_vec();
    k.extend_from_slice(&codec::ctx_prefix(ctx));
    k
}

fn le_u32(v: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    let n = v.len().min(4);
    b[..n].copy_from_slice(&v[..n]);
    u32::from_le_bytes(b)
}

/// After a search of `ctx` found `hits` (`limit` asked for): rank them by
/// importance and recency when asked, cut them to `limit`, and count them.
pub(crate) fn after_search(
    e: &Engine,
    ctx: &str,
    filters: &SearchFilters,
    hits: &mut Vec<EpisodeHit>,
    limit: usize,
) -> Result<()> {
    if filters.rank_by_utility {
        super::rank::rerank(e.opts.clock.now().timestamp_millis(), hits);
    }
    hits.truncate(limit);
    if hits.is_empty() || policy(e, ctx)?.is_unlimited() {
        return Ok(());
    }
    let full = {
        let mut p = e.state::<RetentionState>().pending.lock();
        for h in hits.iter() {
            let n = p.entry((ctx.to_owned(), h.episode.id.clone())).or_insert(0);
            *n = n.saturating_add(1);
        }
        p.len() >= PENDING_MAX
    };
    if full {
        flush_access(e)?;
    }
    Ok(())
}

/// Write the counts kept in memory to `meta` (added to what is stored), for
/// episodes that still exist.
pub(crate) fn flush_access(e: &Engine) -> Result<()> {
    let st = e.state::<RetentionState>();
    let _one = st.flushing.lock();
    let pending = std::mem::take(&mut *st.pending.lock());
    for ((ctx, id), n) in pending {
        if !e.t.episodes.contains_key(codec::ctx_key(&ctx, &id))? {
            continue;
        }
        let k = key(&ctx, &id);
        let old = e.t.meta.get(&k)?.map_or(0, |v| le_u32(&v));
        e.t.meta.insert(&k, old.saturating_add(n).to_le_bytes())?;
    }
    Ok(())
}

/// The stored access counts of `ctx` (flushed first by the caller).
pub(super) fn counts(e: &Engine, ctx: &str) -> Result<HashMap<String, u32>> {
    let prefix = ctx_prefix(ctx);
    let mut out = HashMap::new();
    for item in e.t.meta.scan_prefix(&prefix) {
        let (k, v) = item?;
        out.insert(
            String::from_utf8_lossy(&k[prefix.len()..]).into_owned(),
            le_u32(&v),
        );
    }
    Ok(out)
}

/// Remove the counts of `ctx`'s episodes that are gone (forgotten).
pub(super) fn prune(e: &Engine, ctx: &str, kept: &[Candidate]) -> Result<()> {
    let ids: HashSet<&str> = kept.iter().map(|c| c.id.as_str()).collect();
    let prefix = ctx_prefix(ctx);
    let mut stale = Vec::new();
    for item in e.t.meta.scan_prefix(&prefix) {
        let (k, _) = item?;
        if !ids.contains(String::from_utf8_lossy(&k[prefix.len()..]).as_ref()) {
            stale.push(k);
        }
    }
    for k in stale {
        e.t.meta.remove(k)?;
    }
    Ok(())
}
