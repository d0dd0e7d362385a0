//! Duplicates of an episode caught on write: its fingerprint and candidates,
//! and what each `on_duplicate` policy writes (see `layers::dedup`).

#[allow(unused_imports)]
use super::*;

use crate::layers::dedup::{self as policy, Candidate, OnDuplicate, Want};
use crate::search::dedup::{self, DupKind, Fingerprint};

/// The result of [`Episodic::record_detailed`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Recorded {
    /// The episode's id: the new one, or the existing one when the write was
    /// skipped or merged into it.
    pub id: String,
    /// The earlier episode this one duplicates, when one was found (whatever the policy).
    pub duplicate_of: Option<String>,
    /// 1.0 for an exact duplicate, else the Jaccard similarity of the texts'
    /// shingles or the cosine of the embeddings; `None` without a duplicate.
    pub similarity: Option<f32>,
    /// Whether a new episode was stored (`false` for `skip` and `merge` of a duplicate).
    pub created: bool,
    /// The policy applied.
    pub on_duplicate: OnDuplicate,
}

/// The exact text of an episode: the trimmed summary and the content's JSON.
pub(crate) fn exact_text(summary: &str, content: &Value) -> String {
    use std::fmt::Write;
    let mut s = summary.trim().to_owned();
    s.push('\0');
    // `content.to_string()`, written in place.
    let _ = write!(s, "{content}");
    s
}

/// The dedup fingerprint of an episode (its text: the summary and the content's text).
pub(crate) fn fingerprint(seed: u64, summary: &str, content: &Value) -> Fingerprint {
    Fingerprint::of(
        seed,
        &exact_text(summary, content),
        &embed_text(summary, content),
        true,
    )
}

/// Whether a write of `ctx` under policy `p` runs detection (building the
/// context's dedup index from every stored episode the first time a policy
/// other than `keep` is used; see `layers::dedup::detects`). Under the writer lock.
pub(crate) fn detects(e: &Engine, ctx: &str, p: OnDuplicate) -> Result<bool> {
    policy::detects(e, ctx, DupKind::Episode, p, |f| {
        let seed = e.codec.hash_seed();
        for item in e.t.episodes.scan_prefix(codec::ctx_prefix(ctx)) {
            let (k, v) = item?;
            let r = EpisodeRecord::decode_keyed(&e.codec, &k, &v)?;
            f(&r.id, &fingerprint(seed, &r.summary, &r.content))?;
        }
        Ok(())
    })
}

/// The stored episode `id` as a candidate (the texts `want` asks for).
fn candidate(e: &Engine, ctx: &str, id: &str, want: Want) -> Result<Option<Candidate>> {
    Ok(get_shared(e, ctx, id)?.map(|ep| Candidate {
        exact: want.exact.then(|| exact_text(&ep.summary, &ep.content)),
        text: want.text.then(|| embed_text(&ep.summary, &ep.content)),
    }))
}

/// The nearest stored embedding of `ctx` to a new episode's, when the write
/// may run detection (found before the writer lock, as a search is).
pub(crate) fn cosine_hint(e: &Engine, ctx: &str, ep: &NewEpisode) -> Result<Option<(String, f32)>> {
    match &ep.embedding {
        Some(v) if policy::may_detect(e, ctx, DupKind::Episode, ep.on_duplicate)? => {
            policy::nearest_vector(e, Kind::Episode, ctx, v, None)
        }
        _ => Ok(None),
    }
}

/// A new episode, ready for the planner: its record, stored bytes and policy.
pub(crate) struct Item {
    pub rec: EpisodeRecord,
    pub enc: Vec<u8>,
    pub explicit: Option<OnDuplicate>,
    pub cosine: Option<(String, f32)>,
}

/// What one write of episodes (one or a batch) stores, decided under the index
/// writer lock by [`Planner`]: every item goes through the same duplicate
/// policy, against the stored episodes and the batch's earlier items.
#[derive(Default)]
pub(crate) struct Writes {
    /// Episodes to write (new ones and merged ones): key and bytes (their
    /// index documents are the ops [`Planner::finish`] returns beside).
    pub rows: Vec<(Vec<u8>, Vec<u8>)>,
    /// Dedup keys to add.
    pub dkeys: Vec<Vec<u8>>,
    /// New episodes (for the write-through cache; kept only when asked).
    pub created: Vec<(Vec<u8>, EpisodeRecord)>,
    /// Existing episodes rewritten by `merge` (cache keys to invalidate).
    pub merged: Vec<Vec<u8>>,
    /// What happened to each item, in order.
    pub recorded: Vec<Recorded>,
}

/// An episode of the batch that will be inserted.
struct Pending {
    rec: EpisodeRecord,
    enc: Option<Vec<u8>>,
    /// Exact text and fingerprint: computed only once the context detects.
    exact: String,
    fp: Option<Fingerprint>,
}

/// Plans a write of episodes of one context (see [`Writes`]).
pub(crate) struct Planner<'a> {
    e: &'a Engine,
    ctx: &'a str,
    seed: u64,
    pending: Vec<Pending>,
    /// Exact hash and band keys of the pending episodes, to their index.
    batch_keys: std::collections::HashMap<Vec<u8>, Vec<usize>>,
    /// Pending episodes whose keys are in `batch_keys` (the first ones:
    /// registered when a later item looks, so a single write builds none).
    registered: usize,
    /// Stored episodes merged into, by id, in order of first merge.
    merged: Vec<EpisodeRecord>,
    recorded: Vec<Recorded>,
    /// The context's default policy, read once per write: under the writer
    /// lock, and a batch is one write (it was read per item, a sled lookup each).
    ctx_policy: Option<OnDuplicate>,
    /// The context is known to have no dedup index (a `keep` item found none,
    /// and no item with another policy ran detection since, which may build
    /// it): `keep` items need not look again (a sled lookup each).
    unindexed: bool,
}

impl<'a> Planner<'a> {
    /// A planner for `n` episodes (the capacity of its lists: a pending
    /// episode is large, and growing a list of them from empty asks the
    /// allocator for a chunk of four, past its small sizes).
    pub(crate) fn new(e: &'a Engine, ctx: &'a str, n: usize) -> Self {
        Planner {
            e,
            ctx,
            seed: e.codec.hash_seed(),
            pending: Vec::with_capacity(n),
            batch_keys: std::collections::HashMap::new(),
            registered: 0,
            merged: Vec::new(),
            recorded: Vec::with_capacity(n),
            ctx_policy: None,
            unindexed: false,
        }
    }

    /// `policy::effective` of an item, the context's default read once.
    fn effective(&mut self, explicit: Option<OnDuplicate>) -> Result<OnDuplicate> {
        Ok(match (explicit, self.ctx_policy) {
            (Some(p), _) | (None, Some(p)) => p,
            (None, None) => {
                let p = policy::context_policy(self.e, self.ctx)?;
                self.ctx_policy = Some(p);
                p
            }
        })
    }

    /// [`detects`] of an item under policy `p` (see `unindexed`).
    fn detects(&mut self, p: OnDuplicate) -> Result<bool> {
        if p == OnDuplicate::Keep && self.unindexed {
            return Ok(false);
        }
        let on = detects(self.e, self.ctx, p)?;
        self.unindexed = p == OnDuplicate::Keep && !on;
        Ok(on)
    }

    /// A duplicate of `fp` among the batch's pending episodes (exact, then the
    /// most similar by shingles).
    fn find_pending(&mut self, fp: &Fingerprint, exact: &str) -> Option<(usize, f32)> {
        // The keys of the episodes planned since the last look, in order.
        for (i, p) in self.pending.iter().enumerate().skip(self.registered) {
            if let Some(pf) = &p.fp {
                for k in dedup::keys(self.ctx, DupKind::Episode, "", pf) {
                    self.batch_keys.entry(k).or_default().push(i);
                }
            }
        }
        self.registered = self.pending.len();
        if self.batch_keys.is_empty() {
            return None;
        }
        // At most `MAX_CANDIDATES` per key, as in the store.
        let mut cands: Vec<usize> = dedup::keys(self.ctx, DupKind::Episode, "", fp)
            .iter()
            .flat_map(|k| {
                self.batch_keys
                    .get(k)
                    .into_iter()
                    .flatten()
                    .take(dedup::MAX_CANDIDATES)
                    .copied()
            })
            .collect();
        cands.sort_unstable();
        cands.dedup();
        if let Some(&i) = cands.iter().find(|&&i| self.pending[i].exact == exact) {
            return Some((i, 1.0));
        }
        let mut best: Option<(usize, f32)> = None;
        for i in cands {
            let Some(pf) = &self.pending[i].fp else {
                continue;
            };
            let sim = dedup::jaccard(&fp.shingles, pf.shingles.as_slice());
            if sim >= dedup::NEAR_JACCARD && best.is_none_or(|(_, b)| sim > b) {
                best = Some((i, sim));
            }
        }
        best
    }

    /// Plan one new episode (in batch order).
    pub(crate) fn add(&mut self, item: Item) -> Result<()> {
        let (e, ctx) = (self.e, self.ctx);
        let Item {
            mut rec,
            enc,
            explicit,
            cosine,
        } = item;
        let on_duplicate = self.effective(explicit)?;
        let mut recorded = Recorded {
            id: rec.id.clone(),
            duplicate_of: None,
            similarity: None,
            created: true,
            on_duplicate,
        };
        if !self.detects(on_duplicate)? {
            self.pending.push(Pending {
                rec,
                enc: Some(enc),
                exact: String::new(),
                fp: None,
            });
            self.recorded.push(recorded);
            return Ok(());
        }
        let exact = exact_text(&rec.summary, &rec.content);
        // The context has (now) a dedup index: the batch's earlier items get
        // their keys too (an item before the index was built in this batch has none).
        self.index_pending();
        // `fingerprint`, with the exact text computed once.
        let fp = Fingerprint::of(
            self.seed,
            &exact,
            &embed_text(&rec.summary, &rec.content),
            true,
        );
        let stored = policy::find(
            e,
            ctx,
            DupKind::Episode,
            &fp,
            &exact,
            None,
            cosine,
            true,
            &mut |id, want| candidate(e, ctx, id, want),
        )?;
        let in_batch = self.find_pending(&fp, &exact);
        // The stored duplicate wins unless the batch's is more similar.
        let found: Option<(Option<usize>, String, f32)> = match (stored, in_batch) {
            (Some(s), Some((i, sim))) if sim > s.similarity => {
                Some((Some(i), self.pending[i].rec.id.clone(), sim))
            }
            (Some(s), _) => Some((None, s.id, s.similarity)),
            (None, Some((i, sim))) => Some((Some(i), self.pending[i].rec.id.clone(), sim)),
            (None, None) => None,
        };
        recorded.duplicate_of = found.as_ref().map(|f| f.1.clone());
        recorded.similarity = found.as_ref().map(|f| f.2);
        match (found, on_duplicate) {
            (Some((pending, id, _)), OnDuplicate::Skip | OnDuplicate::Merge) => {
                recorded.id = id.clone();
                recorded.created = false;
                if on_duplicate == OnDuplicate::Merge {
                    self.merge_into(pending, &id, &rec)?;
                }
            }
            (found, _) => {
                let mut enc = Some(enc);
                if on_duplicate == OnDuplicate::Link
                    && let Some((_, id, _)) = found
                {
                    rec.duplicate_of = Some(id);
                    enc = None;
                }
                self.pending.push(Pending {
                    rec,
                    enc,
                    exact,
                    fp: Some(fp),
                });
            }
        }
        self.recorded.push(recorded);
        Ok(())
    }

    /// Fingerprint the pending episodes that have none (planned before the
    /// context's dedup index existed; their keys are registered by the next
    /// look, [`Planner::find_pending`]).
    fn index_pending(&mut self) {
        for p in &mut self.pending {
            if p.fp.is_some() {
                continue;
            }
            let fp = fingerprint(self.seed, &p.rec.summary, &p.rec.content);
            p.exact = exact_text(&p.rec.summary, &p.rec.content);
            p.fp = Some(fp);
        }
    }

    /// Fold `new` into the duplicate `id`: a pending episode of the batch
    /// (`pending`), else a stored one.
    fn merge_into(&mut self, pending: Option<usize>, id: &str, new: &EpisodeRecord) -> Result<()> {
        let cap = self.e.opts.limits.max_tags;
        if let Some(i) = pending {
            let p = &mut self.pending[i];
            fold(&mut p.rec, new, cap);
            p.enc = None;
            return Ok(());
        }
        if let Some(cur) = self.merged.iter_mut().find(|r| r.id == id) {
            fold(cur, new, cap);
            return Ok(());
        }
        let key = codec::ctx_key(self.ctx, id);
        let Some(v) = self.e.t.episodes.get(&key)? else {
            return Err(Error::not_found(format!(
                "episode {id:?} in context {:?}",
                self.ctx
            )));
        };
        let mut cur = EpisodeRecord::decode(&self.e.codec, id, &v)?;
        fold(&mut cur, new, cap);
        self.merged.push(cur);
        Ok(())
    }

    /// What to write, and its index ops. The new episodes' records are kept
    /// in [`Writes::created`] only when `keep_created` (the write-through
    /// cache of a single write); else their texts move into the index
    /// documents instead of being copied.
    pub(crate) fn finish(self, keep_created: bool) -> Result<(Writes, Vec<IndexOp>)> {
        let (e, ctx) = (self.e, self.ctx);
        let n = self.pending.len() + self.merged.len();
        let mut w = Writes {
            recorded: self.recorded,
            rows: Vec::with_capacity(n),
            created: Vec::with_capacity(if keep_created { self.pending.len() } else { 0 }),
            ..Writes::default()
        };
        let mut ops = Vec::with_capacity(n);
        let rows = !policy::in_memory(e);
        for p in self.pending {
            let key = codec::ctx_key(ctx, &p.rec.id);
            let enc = match p.enc {
                Some(b) => b,
                None => p.rec.encode(&e.codec)?,
            };
            // The new episode's dedup keys: rows written with it, or (in
            // memory) added now, under the writer lock, so the next write sees
            // them (should the transaction fail, the key leads to no record,
            // and a candidate is always read back before it is reported).
            match &p.fp {
                Some(fp) if rows => {
                    w.dkeys
                        .extend(dedup::keys(ctx, DupKind::Episode, &p.rec.id, fp));
                }
                Some(fp) => policy::mem_insert(e, ctx, DupKind::Episode, &p.rec.id, fp),
                None => {}
            }
            if keep_created {
                // A new episode under a new id: nothing to delete from the index first.
                ops.push(IndexOp::Upsert(index_doc(ctx, &p.rec).fresh()));
                w.rows.push((key.clone(), enc));
                w.created.push((key, p.rec));
            } else {
                ops.push(IndexOp::Upsert(index_doc_of(ctx, p.rec).fresh()));
                w.rows.push((key, enc));
            }
        }
        for cur in self.merged {
            let key = codec::ctx_key(ctx, &cur.id);
            ops.push(IndexOp::Upsert(index_doc(ctx, &cur)));
            w.rows.push((key.clone(), cur.encode(&e.codec)?));
            w.merged.push(key);
        }
        Ok((w, ops))
    }
}

/// Record an episode in `ctx`, applying its duplicate policy.
pub(crate) fn record_detailed_in(e: &Engine, ctx: &str, ep: NewEpisode) -> Result<Recorded> {
    let importance = validate_new(e, &ep)?;
    let cosine = cosine_hint(e, ctx, &ep)?;
    let dim = ep.embedding.as_ref().map(Vec::len);
    let explicit = ep.on_duplicate;
    let rec = new_record(e, ep, importance, e.opts.clock.now());
    let enc = rec.encode(&e.codec)?;
    let (written, ts) = (enc.len() as u64, rec.timestamp);
    e.touch_context(ctx)?;
    // Taken before the write: a fill racing an invalidation of this key is refused.
    let generation = e.state::<EpisodeCache>().generation();
    let ((), (w, _)) = e.indexed_write_planned(
        &[&e.t.episodes, &e.t.meta, &e.t.dedup],
        || {
            let mut planner = Planner::new(e, ctx, 1);
            planner.add(Item {
                rec,
                enc,
                explicit,
                cosine,
            })?;
            let (w, ops) = planner.finish(true)?;
            let claim = match (w.created.is_empty(), dim) {
                (false, Some(d)) => vectors::claim_dim(e, "embedding", ctx, d)?,
                _ => None,
            };
            Ok(((w, claim.map(|k| (k, dim.unwrap_or(0)))), ops))
        },
        |t, (w, claim)| write(t, w, claim.as_ref()),
    )?;
    let Writes {
        recorded,
        created,
        merged,
        ..
    } = w;
    cache_after(e, created, &merged, generation);
    let r = recorded
        .into_iter()
        .next()
        .ok_or_else(|| Error::corrupted("record planned nothing"))?;
    super::retention::after_write(e, ctx, u64::from(r.created), written, ts);
    Ok(r)
}

/// The record of a new, validated episode.
pub(crate) fn new_record(
    e: &Engine,
    ep: NewEpisode,
    importance: u8,
    now: DateTime<Utc>,
) -> EpisodeRecord {
    let _ = e;
    let timestamp = ep.timestamp.unwrap_or(now).timestamp_millis();
    let recorded = now.timestamp_millis();
    EpisodeRecord {
        id: uuid::Uuid::now_v7().to_string(),
        timestamp,
        recorded_at: (recorded != timestamp).then_some(recorded),
        summary: ep.summary,
        content: ep.content,
        participants: ep.participants,
        tags: ep.tags,
        importance,
        embedding: ep.embedding.as_deref().map(VecBytes::from_f32),
        seen_count: 1,
        last_seen: None,
        duplicate_of: None,
    }
}

/// The transaction of a planned write (trees: episodes, meta, dedup; its
/// index ops are the plan's, see [`Planner::finish`]).
pub(crate) fn write(
    t: &[crate::storage::TxTree<'_>],
    w: &Writes,
    claim: Option<&(Vec<u8>, usize)>,
) -> crate::storage::TxResult<()> {
    for (key, enc) in &w.rows {
        t[0].insert(key.as_slice(), enc.as_slice())?;
    }
    if let Some((k, d)) = claim {
        t[1].insert(k.as_slice(), vectors::dim_value(*d))?;
    }
    for k in &w.dkeys {
        t[2].insert(k.as_slice(), &[][..])?;
    }
    Ok(())
}

/// After a single write: the new episode into the cache (write-through: the
/// likeliest to be searched next), merged ones out.
fn cache_after(
    e: &Engine,
    created: Vec<(Vec<u8>, EpisodeRecord)>,
    merged: &[Vec<u8>],
    generation: u64,
) {
    let cache = e.state::<EpisodeCache>();
    for (key, rec) in created {
        // `Episode::from` of the record is exactly what decoding the stored bytes gives.
        cache.insert(&key, Arc::new(Episode::from(rec)), generation);
    }
    for key in merged {
        cache.invalidate(key);
    }
}

/// `found` with `new` folded in: tags and participants united (the existing
/// ones first; at most `cap` each, surplus new ones dropped), the higher
/// importance, `seen_count` + 1, `last_seen` the new episode's time.
fn fold(cur: &mut EpisodeRecord, new: &EpisodeRecord, cap: usize) {
    for (into, from) in [
        (&mut cur.tags, &new.tags),
        (&mut cur.participants, &new.participants),
    ] {
        for t in from {
            if into.len() < cap && !into.contains(t) {
                into.push(t.clone());
            }
        }
    }
    cur.importance = cur.importance.max(new.importance);
    cur.seen_count = cur.seen_count.saturating_add(new.seen_count.max(1));
    cur.last_seen = Some(cur.last_seen.unwrap_or(cur.timestamp).max(new.timestamp));
}

/// Remove the dedup keys of the deleted episode `id` (its stored bytes `old`).
pub(crate) fn remove_keys(
    e: &Engine,
    t: &crate::storage::TxTree<'_>,
    ctx: &str,
    id: &str,
    old: &[u8],
) -> crate::storage::TxResult<()> {
    let r = EpisodeRecord::decode(&e.codec, id, old)?;
    let fp = fingerprint(e.codec.hash_seed(), &r.summary, &r.content);
    for k in dedup::keys(ctx, DupKind::Episode, &r.id, &fp) {
        t.remove(k)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An episode record as versions before duplicate detection wrote it.
    #[derive(Serialize)]
    struct OldRecord {
        id: String,
        timestamp: i64,
        summary: String,
        content: Value,
        participants: Vec<String>,
        tags: Vec<String>,
        importance: u8,
    }

    #[test]
    fn an_old_record_decodes_with_defaults() {
        let old = OldRecord {
            id: "x".into(),
            timestamp: 5,
            summary: "s".into(),
            content: Value::Null,
            participants: vec![],
            tags: vec!["t".into()],
            importance: 3,
        };
        let bytes = codec::encode(&old).unwrap();
        let r: EpisodeRecord = codec::decode(&bytes).unwrap();
        assert_eq!(r.seen_count, 1);
        assert_eq!(r.last_seen, None);
        assert_eq!(r.duplicate_of, None);
        assert_eq!(r.tags, vec!["t"]);
        // A record with the defaults is written as before (no new fields).
        let again = codec::encode(&r).unwrap();
        assert_eq!(again, bytes);
    }
}

#[cfg(test)]
mod find_tests;
