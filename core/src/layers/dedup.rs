//! Duplicates caught on write: the `on_duplicate` policy (per call, with a
//! per-context default), the keys of the `dedup` tree kept beside every
//! episode and knowledge entry, and the search for an earlier duplicate of a
//! record about to be written. The fingerprints are `search::dedup`'s; what a
//! policy does with a duplicate is the writing layer's (episodic, semantic).

use rustc_hash::FxHashMap;
use std::str::FromStr;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::search::dedup::{self, DupKind, Fingerprint};
use crate::{Error, Result};

/// What a write does when it finds a duplicate of the record it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDuplicate {
    /// Store the new record anyway (the behaviour without duplicate detection); the
    /// result still names the duplicate in `duplicate_of`.
    #[default]
    Keep,
    /// Store nothing: the result is the existing record.
    Skip,
    /// Fold the new record into the existing one (episodes: tags and
    /// participants united, importance the higher, `seen_count` + 1,
    /// `last_seen`; knowledge: the new value applied as a JSON merge patch).
    Merge,
    /// Store the new record with a link (`duplicate_of`) to the existing one.
    Link,
}

impl OnDuplicate {
    /// Every policy, in documentation order.
    pub const ALL: [OnDuplicate; 4] = [
        OnDuplicate::Keep,
        OnDuplicate::Skip,
        OnDuplicate::Merge,
        OnDuplicate::Link,
    ];

    /// The policy's name (`"keep"`, `"skip"`, `"merge"`, `"link"`).
    pub fn as_str(self) -> &'static str {
        match self {
            OnDuplicate::Keep => "keep",
            OnDuplicate::Skip => "skip",
            OnDuplicate::Merge => "merge",
            OnDuplicate::Link => "link",
        }
    }

    /// Parse a policy name; `InvalidInput` on `field` otherwise.
    pub fn parse(field: &str, s: &str) -> Result<Self> {
        OnDuplicate::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(
                    field,
                    format!("must be \"keep\", \"skip\", \"merge\" or \"link\", got {s:?}"),
                )
            })
    }

    fn byte(self) -> u8 {
        match self {
            OnDuplicate::Keep => 0,
            OnDuplicate::Skip => 1,
            OnDuplicate::Merge => 2,
            OnDuplicate::Link => 3,
        }
    }
}

impl FromStr for OnDuplicate {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        OnDuplicate::parse("on_duplicate", s)
    }
}

impl std::fmt::Display for OnDuplicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn policy_key(ctx: &str) -> Vec<u8> {
    let mut k = b"on_duplicate\0".to_vec();
    k.extend_from_slice(ctx.as_bytes());
    k
}

/// The default policy of `ctx` (`Keep` unless set).
pub(crate) fn context_policy(e: &Engine, ctx: &str) -> Result<OnDuplicate> {
    Ok(match e.t.meta.get(policy_key(ctx))? {
        Some(v) => match v.first() {
            Some(1) => OnDuplicate::Skip,
            Some(2) => OnDuplicate::Merge,
            Some(3) => OnDuplicate::Link,
            Some(0) => OnDuplicate::Keep,
            _ => return Err(Error::corrupted("bad on_duplicate record")),
        },
        None => OnDuplicate::Keep,
    })
}

/// Set the default policy of `ctx`.
pub(crate) fn set_context_policy(e: &Engine, ctx: &str, p: OnDuplicate) -> Result<()> {
    e.touch_context(ctx)?;
    e.t.meta.insert(policy_key(ctx), [p.byte()])?;
    Ok(())
}

/// The policy of one write: the call's, else the context's default.
pub(crate) fn effective(
    e: &Engine,
    ctx: &str,
    explicit: Option<OnDuplicate>,
) -> Result<OnDuplicate> {
    match explicit {
        Some(p) => Ok(p),
        None => context_policy(e, ctx),
    }
}

/// Contexts whose dedup index this engine knows to exist, and (sled) the
/// in-memory indexes loaded (registered layer state).
///
/// Both maps are keyed by context and hold one entry per kind
/// ([`kind_slot`]), so a lookup borrows the context's name.
#[derive(Debug, Default)]
pub(crate) struct DedupState {
    ready: Mutex<FxHashMap<String, [bool; 2]>>,
    sets: Mutex<FxHashMap<String, [Option<dedup::MemIndex>; 2]>>,
}

/// Run `f` on the in-memory index of (`ctx`, `kind`), if loaded.
fn with_mem<R>(
    e: &Engine,
    ctx: &str,
    kind: DupKind,
    f: impl FnOnce(&mut dedup::MemIndex) -> R,
) -> Option<R> {
    let mut sets = e.state::<DedupState>().sets.lock();
    sets.get_mut(ctx)
        .and_then(|k| k[kind_slot(kind)].as_mut())
        .map(f)
}

/// Whether the dedup index lives in memory (a store no other process writes:
/// sled) rather than as rows of the `dedup` tree (PostgreSQL, shared by
/// several instances).
pub(crate) fn in_memory(e: &Engine) -> bool {
    !e.store().is_shared()
}

/// Whether the dedup index of (`ctx`, `kind`) is kept as rows (see [`in_memory`]).
/// Under the writer lock.
pub(crate) fn writes_rows(e: &Engine, ctx: &str, kind: DupKind) -> Result<bool> {
    Ok(!in_memory(e) && is_indexed(e, ctx, kind)?)
}

/// Add (or replace) record `id` in the in-memory index of (`ctx`, `kind`), if loaded.
pub(crate) fn mem_insert(e: &Engine, ctx: &str, kind: DupKind, id: &str, fp: &Fingerprint) {
    with_mem(e, ctx, kind, |m| m.insert(id, fp));
}

/// Whether the in-memory index of (`ctx`, `kind`) is loaded in this process.
pub(crate) fn mem_loaded(e: &Engine, ctx: &str, kind: DupKind) -> bool {
    with_mem(e, ctx, kind, |_| ()).is_some()
}

/// Drop the shingle sets the in-memory index of (`ctx`, `kind`) keeps (a
/// test's way to candidates whose sets are computed).
#[cfg(test)]
pub(crate) fn mem_drop_cached(e: &Engine, ctx: &str, kind: DupKind) {
    with_mem(e, ctx, kind, |m| m.drop_cached());
}

/// Remove record `id` from the in-memory index of (`ctx`, `kind`), if loaded.
pub(crate) fn mem_remove(e: &Engine, ctx: &str, kind: DupKind, id: &str) {
    with_mem(e, ctx, kind, |m| m.remove(id));
}

/// The dedup state of a new engine.
pub(crate) fn new_state(
    _: &crate::config::Options,
    _: bool,
) -> Box<dyn std::any::Any + Send + Sync> {
    Box::<DedupState>::default()
}

/// The entry of `kind` in [`DedupState`]'s per-context arrays.
fn kind_slot(kind: DupKind) -> usize {
    match kind {
        DupKind::Episode => 0,
        DupKind::Knowledge => 1,
    }
}

fn kind_byte(kind: DupKind) -> u8 {
    match kind {
        DupKind::Episode => b'e',
        DupKind::Knowledge => b'k',
    }
}

fn ready_key(ctx: &str, kind: DupKind) -> Vec<u8> {
    let mut k = b"dedup_ready\0".to_vec();
    k.push(kind_byte(kind));
    k.extend_from_slice(ctx.as_bytes());
    k
}

/// Whether (`ctx`, `kind`) has a dedup index (its keys are complete and kept
/// up to date by every write). Contexts that never had a policy other than
/// `keep` have none: their writes add no dedup row and run no detection.
/// Call under the index writer lock (every dedup key write holds it). Only
/// "indexed" is remembered in memory: the marker in `meta` is never removed
/// while the context exists.
pub(crate) fn is_indexed(e: &Engine, ctx: &str, kind: DupKind) -> Result<bool> {
    let st = e.state::<DedupState>();
    if st.ready.lock().get(ctx).is_some_and(|r| r[kind_slot(kind)]) {
        return Ok(true);
    }
    if e.t.meta.get(ready_key(ctx, kind))?.is_some() {
        mark_ready(e, ctx, kind);
        return Ok(true);
    }
    Ok(false)
}

/// Remember that (`ctx`, `kind`) has a dedup index.
fn mark_ready(e: &Engine, ctx: &str, kind: DupKind) {
    e.state::<DedupState>()
        .ready
        .lock()
        .entry(ctx.to_owned())
        .or_default()[kind_slot(kind)] = true;
}

/// Whether a write of (`ctx`, `kind`) under policy `p` runs detection,
/// enabling it first when `p` is the context's first policy other than `keep`
/// (a marker in `meta`), and loading the context's dedup index when this
/// process has not yet: in memory (sled), from every record of the context
/// (`scan` gives each record's id and fingerprint); as rows (PostgreSQL), once
/// per store, after clearing keys an interrupted build left. Call under the
/// index writer lock.
pub(crate) fn detects(
    e: &Engine,
    ctx: &str,
    kind: DupKind,
    p: OnDuplicate,
    scan: impl FnOnce(&mut dyn FnMut(&str, &Fingerprint) -> Result<()>) -> Result<()>,
) -> Result<bool> {
    let indexed = is_indexed(e, ctx, kind)?;
    if !indexed && p == OnDuplicate::Keep {
        return Ok(false);
    }
    if in_memory(e) {
        if !mem_loaded(e, ctx, kind) {
            let mut m = dedup::MemIndex::default();
            scan(&mut |id, fp| {
                m.insert(id, fp);
                Ok(())
            })?;
            e.state::<DedupState>()
                .sets
                .lock()
                .entry(ctx.to_owned())
                .or_default()[kind_slot(kind)] = Some(m);
        }
    } else if !indexed {
        let stale: Vec<_> =
            e.t.dedup
                .scan_prefix(dedup::kind_prefix(ctx, kind))
                .keys()
                .collect::<std::result::Result<_, _>>()?;
        for k in stale {
            e.t.dedup.remove(k)?;
        }
        scan(&mut |id, fp| {
            for k in dedup::keys(ctx, kind, id, fp) {
                e.t.dedup.insert(k, [])?;
            }
            Ok(())
        })?;
    }
    if !indexed {
        e.t.meta.insert(ready_key(ctx, kind), [1])?;
        mark_ready(e, ctx, kind);
    }
    Ok(true)
}

/// Whether a write of (`ctx`, `kind`) without a policy of its own may run
/// detection: the context is indexed or its default policy is not `keep`.
/// A hint taken outside the writer lock (to skip the nearest-vector search of
/// a context that never detects); the decision is [`detects`]'.
pub(crate) fn may_detect(
    e: &Engine,
    ctx: &str,
    kind: DupKind,
    explicit: Option<OnDuplicate>,
) -> Result<bool> {
    Ok(effective(e, ctx, explicit)? != OnDuplicate::Keep || is_indexed(e, ctx, kind)?)
}

/// One stored record offered as a candidate: its exact text and searchable
/// text, each `None` when [`find`] did not ask for it ([`Want`]; a loader may
/// give it anyway).
pub(crate) struct Candidate {
    pub exact: Option<String>,
    pub text: Option<String>,
}

/// What [`find`] needs of a candidate it reads back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Want {
    /// The exact text (`false`: the record is known not to be an exact duplicate).
    pub exact: bool,
    /// The searchable text (`false`: its shingle set is known).
    pub text: bool,
}

/// A duplicate found by [`find`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    /// The existing record's id (knowledge: its key).
    pub id: String,
    /// 1.0 for an exact duplicate; else the Jaccard similarity of the shingle
    /// sets, or the cosine of the embeddings.
    pub similarity: f32,
}

/// The best earlier duplicate of a record with fingerprint `fp` and exact text
/// `exact` in (`ctx`, `kind`): an exact one first, then the most similar
/// near-duplicate by shingles (Jaccard ≥ `NEAR_JACCARD`), then `cosine` (the
/// nearest stored embedding and its similarity, if at least `NEAR_COSINE`).
/// `load` gives a candidate's texts (`None`: gone), those [`Want`] asks for;
/// `exclude` is never returned. `as_indexed`:
/// `load` gives every record as the dedup index saw it last (the stored one;
/// not a batch's pending value of a knowledge key), so what the in-memory
/// index knows of it may stand in for its texts.
#[allow(clippy::too_many_arguments)] // the probe's parts, each used once
pub(crate) fn find(
    e: &Engine,
    ctx: &str,
    kind: DupKind,
    fp: &Fingerprint,
    exact: &str,
    exclude: Option<&str>,
    cosine: Option<(String, f32)>,
    as_indexed: bool,
    load: &mut dyn FnMut(&str, Want) -> Result<Option<Candidate>>,
) -> Result<Option<Found>> {
    // Candidates by the number of keys they share (more bands, higher
    // similarity; an exact copy shares them all), at most `MAX_CANDIDATES` verified.
    let mut ids = candidates(e, ctx, kind, fp, exclude)?;
    ids.sort_by(|a, b| b.shared.cmp(&a.shared).then_with(|| a.id.cmp(&b.id)));
    ids.truncate(dedup::MAX_CANDIDATES);
    let seed = e.codec.hash_seed();
    // The best verified candidate: its id and similarity.
    let mut best: Option<(Arc<str>, f32)> = None;
    // Shingle sets computed here, for the in-memory index to keep.
    let mut computed: Vec<(Arc<str>, Arc<[u16]>)> = Vec::new();
    // Whether a candidate whose set is kept may reach the threshold.
    let may_reach = |set: &[u16]| {
        let bits = fp.shingles.low_bits();
        dedup::may_reach(fp.shingles.len(), bits, set, dedup::NEAR_JACCARD)
    };
    for c in ids {
        // What the in-memory index knows of a candidate decides, before its
        // texts are computed, whether it can be a duplicate: an exact one
        // only with the same exact hash, a near one only with a Jaccard
        // bound of the set sizes at the threshold and, when its set is
        // kept, a bound from the low bits of its shingles. One that can be
        // neither is not read (it would fail both checks).
        let known = c.known.filter(|_| as_indexed);
        let (want, cached) = match &known {
            Some(k) => {
                let exact_possible = fp.exact.is_some() && k.exact == fp.exact;
                let near_possible = dedup::jaccard_bound(fp.shingles.len(), k.shingles)
                    >= dedup::NEAR_JACCARD
                    && k.set.as_deref().is_none_or(may_reach);
                if !exact_possible && !near_possible {
                    continue;
                }
                let want = Want {
                    exact: exact_possible,
                    text: near_possible,
                };
                (want, k.set.is_some())
            }
            None => (
                Want {
                    exact: true,
                    text: true,
                },
                false,
            ),
        };
        let Some(cand) = load(&c.id, want)? else {
            continue;
        };
        // An exact duplicate wins at once.
        if cand.exact.as_deref() == Some(exact) {
            return Ok(Some(Found {
                id: c.id.to_string(),
                similarity: 1.0,
            }));
        }
        if !want.text {
            continue;
        }
        // The similarity when it reaches the threshold (the same value as
        // `jaccard`; below it, the count stops early).
        let text = cand.text.as_deref().unwrap_or_default();
        let set = dedup::shingles(seed, &dedup::normalise(text));
        let sim = dedup::jaccard_at_least(&fp.shingles, set.as_slice(), dedup::NEAR_JACCARD);
        if known.is_some() && !cached {
            computed.push((c.id.clone(), set.low16().into()));
        }
        // The most similar, the first in `ids` among equals.
        if let Some(sim) = sim
            && best.as_ref().is_none_or(|b| sim > b.1)
        {
            best = Some((c.id, sim));
        }
    }
    if !computed.is_empty() {
        with_mem(e, ctx, kind, |m| {
            for (id, set) in computed {
                m.cache_shingles(&id, set);
            }
        });
    }
    if let Some((id, similarity)) = best {
        return Ok(Some(Found {
            id: id.to_string(),
            similarity,
        }));
    }
    if let Some((id, cos)) = cosine
        && cos >= dedup::NEAR_COSINE
        && Some(id.as_str()) != exclude
        && load(
            &id,
            Want {
                exact: false,
                text: false,
            },
        )?
        .is_some()
    {
        return Ok(Some(Found {
            id,
            similarity: cos,
        }));
    }
    Ok(None)
}

/// What the in-memory index holds of a candidate.
struct Known {
    /// Its exact-text hash.
    exact: Option<u64>,
    /// The size of its shingle set.
    shingles: usize,
    /// The low 16 bits of its shingles, if cached.
    set: Option<Arc<[u16]>>,
}

/// A record sharing dedup keys with a probe.
struct Probe {
    /// Keys shared.
    shared: usize,
    id: Arc<str>,
    /// What the in-memory index holds of it (`None`: rows).
    known: Option<Known>,
}

/// The records sharing a dedup key with `fp` (other than `exclude`), with how
/// many keys each shares: from the in-memory index, or the `dedup` rows (at
/// most `MAX_CANDIDATES` per key).
fn candidates(
    e: &Engine,
    ctx: &str,
    kind: DupKind,
    fp: &Fingerprint,
    exclude: Option<&str>,
) -> Result<Vec<Probe>> {
    if in_memory(e) {
        let hits = with_mem(e, ctx, kind, |m| m.candidates(fp)).unwrap_or_default();
        return Ok(hits
            .into_iter()
            .filter(|h| Some(&*h.id) != exclude)
            .map(|h| Probe {
                shared: h.shared,
                id: h.id,
                known: Some(Known {
                    exact: h.exact,
                    shingles: h.shingles,
                    set: h.set,
                }),
            })
            .collect());
    }
    let mut prefixes = Vec::new();
    if let Some(h) = fp.exact
        && fp.bands.is_empty()
    {
        prefixes.push(dedup::exact_prefix(ctx, kind, h));
    }
    for (b, h) in fp.bands.iter().enumerate() {
        prefixes.push(dedup::band_prefix(ctx, kind, b, *h));
    }
    let mut hits: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for p in prefixes {
        for k in e.t.dedup.scan_prefix(&p).keys().take(dedup::MAX_CANDIDATES) {
            if let Some(id) = dedup::id_of(&k?, p.len())
                && Some(id.as_str()) != exclude
            {
                *hits.entry(id).or_insert(0) += 1;
            }
        }
    }
    Ok(hits
        .into_iter()
        .map(|(id, shared)| Probe {
            shared,
            id: id.into(),
            known: None,
        })
        .collect())
}

/// The nearest stored embedding of (`kind`, `ctx`) to `v` other than
/// `exclude`, and its cosine, when the context holds vectors of `v`'s
/// dimension (called before the write, outside the index writer lock, as a
/// search is).
pub(crate) fn nearest_vector(
    e: &Engine,
    kind: crate::search::index::Kind,
    ctx: &str,
    v: &[f32],
    exclude: Option<&str>,
) -> Result<Option<(String, f32)>> {
    if crate::engine::vectors::dim_of(e, ctx)? != Some(v.len()) {
        return Ok(None);
    }
    Ok(
        e.vector_search(kind, ctx, v, &crate::search::vector::RowFilter::NONE, 2)?
            .into_iter()
            .find(|(k, _)| Some(k.as_str()) != exclude),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NewEpisode;

    fn rows(e: &Engine) -> usize {
        e.t.dedup.scan_prefix([]).count()
    }

    fn held(e: &Engine, kind: DupKind) -> Option<usize> {
        with_mem(e, "default", kind, |m| m.len())
    }

    #[test]
    fn keep_costs_nothing_until_a_policy_asks() {
        let mem = crate::Memory::temporary().unwrap();
        let e = &mem.scope.engine;
        let text = "Deployed version 2.4 of the billing service to staging";
        for _ in 0..3 {
            mem.episodic().record(NewEpisode::new(text)).unwrap();
        }
        mem.episodic()
            .record_many(vec![NewEpisode::new(text), NewEpisode::new("other text")])
            .unwrap();
        mem.semantic()
            .store(
                "k",
                serde_json::json!({"fact": "a value long enough to compare"}),
            )
            .unwrap();
        // No row, no marker, nothing in memory.
        assert_eq!(rows(e), 0);
        assert!(!is_indexed(e, "default", DupKind::Episode).unwrap());
        assert_eq!(held(e, DupKind::Episode), None);
        // A first skip loads the episodes' index from the store (not the knowledge's).
        let r = mem
            .episodic()
            .record_detailed(NewEpisode::new(text).on_duplicate(OnDuplicate::Skip))
            .unwrap();
        assert!(!r.created);
        assert!(is_indexed(e, "default", DupKind::Episode).unwrap());
        assert_eq!(held(e, DupKind::Episode), Some(5));
        assert_eq!(held(e, DupKind::Knowledge), None);
        // Forgetting an episode takes it out; keep now keeps the index up to date.
        mem.episodic().forget(&r.id).unwrap();
        assert_eq!(held(e, DupKind::Episode), Some(4));
        mem.episodic().record(NewEpisode::new(text)).unwrap();
        assert_eq!(held(e, DupKind::Episode), Some(5));
        // sled keeps the index in memory: still no row.
        assert_eq!(rows(e), 0);
    }
}
