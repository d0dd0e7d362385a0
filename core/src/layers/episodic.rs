//! Episodic memory: timestamped episodes with BM25 full-text search (tantivy).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use std::any::Any;

use crate::config::Options;
use crate::config::clock::millis_to_dt;
use crate::engine::cache::{self, DecodedCache, Weigh};
use crate::engine::vectors;
use crate::engine::{Engine, IndexedSource, Scope};
use crate::search::embedder::{self, Embedder};
use crate::search::index::{self, IndexDoc, IndexOp, IndexQuery, Kind};
use crate::search::vector::{self, RowMeta, VecBytes, VectorQuery};
use crate::{Error, Result, storage::codec, util::input};

mod registered;
mod stored;
#[allow(unused_imports)]
pub(crate) use registered::*;

mod dedup;
pub use dedup::Recorded;
#[allow(unused_imports)]
pub(crate) use dedup::{
    exact_text, fingerprint, record_detailed_in, remove_keys as remove_dedup_keys,
};

use crate::layers::dedup::OnDuplicate;
use crate::search::dedup::DupKind;
mod batch;
pub(crate) use batch::record_many_in;
mod search;
pub(crate) use search::search_in;
pub(crate) mod retention;

/// Longest text `summarize` returns, in characters.
pub const SUMMARY_MAX_CHARS: usize = 4000;

/// Default importance when none is given.
pub const DEFAULT_IMPORTANCE: u8 = 5;

/// An episode. Stored without its id as a MessagePack array since format
/// version 2, as a map with field names (id included) before: see
/// [`EpisodeRecord::encode`] and [`EpisodeRecord::decode`] (`stored.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EpisodeRecord {
    pub id: String,
    pub timestamp: i64,
    pub summary: String,
    pub content: Value,
    pub participants: Vec<String>,
    pub tags: Vec<String>,
    pub importance: u8,
    /// The embedding (`vector::VecBytes`: half floats, raw f32 in older records;
    /// absent on records written before embeddings existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<VecBytes>,
    /// How many times this episode was recorded (`merge` of duplicates adds
    /// to it; 1 in records written before duplicate detection).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub seen_count: u32,
    /// When a duplicate was last merged into it (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<i64>,
    /// The earlier episode this one duplicates (`link` policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<String>,
    /// When it was recorded (ms), when that differs from `timestamp` (a
    /// timestamp given by the caller); absent: `timestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at: Option<i64>,
}

impl EpisodeRecord {
    /// When it was recorded (ms).
    pub(crate) fn recorded_ms(&self) -> i64 {
        self.recorded_at.unwrap_or(self.timestamp)
    }
}

fn one() -> u32 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_one(n: &u32) -> bool {
    *n == 1
}

/// A stored episode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Episode {
    /// UUIDv7 id.
    pub id: String,
    /// When it happened.
    pub timestamp: DateTime<Utc>,
    /// One-line summary (searched, boosted).
    pub summary: String,
    /// Arbitrary JSON content (its text is searched).
    pub content: Value,
    /// Who took part (searched; filter: any).
    pub participants: Vec<String>,
    /// Tags (searched; filter: all).
    pub tags: Vec<String>,
    /// 1..=10.
    pub importance: u8,
    /// How many times it was recorded (1, plus one per duplicate merged into it).
    pub seen_count: u32,
    /// When a duplicate was last merged into it (`None`: never).
    pub last_seen: Option<DateTime<Utc>>,
    /// The earlier episode it duplicates, when it was recorded with `on_duplicate = link`.
    pub duplicate_of: Option<String>,
    /// When it was recorded (its `timestamp`, unless the caller gave another);
    /// `as_of` reads see the episodes recorded by then.
    pub recorded_at: DateTime<Utc>,
}

impl From<EpisodeRecord> for Episode {
    fn from(r: EpisodeRecord) -> Self {
        Episode {
            recorded_at: millis_to_dt(r.recorded_ms()),
            id: r.id,
            timestamp: millis_to_dt(r.timestamp),
            summary: r.summary,
            content: r.content,
            participants: r.participants,
            tags: r.tags,
            importance: r.importance,
            seen_count: r.seen_count,
            last_seen: r.last_seen.map(millis_to_dt),
            duplicate_of: r.duplicate_of,
        }
    }
}

/// An episode to record. Build with [`NewEpisode::new`] and the setters.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NewEpisode {
    /// Required, non-empty.
    pub summary: String,
    /// Any JSON (default null).
    pub content: Value,
    /// Participants.
    pub participants: Vec<String>,
    /// Tags (at most `max_tags`).
    pub tags: Vec<String>,
    /// 1..=10 (default 5).
    pub importance: Option<u8>,
    /// When it happened (default now).
    pub timestamp: Option<DateTime<Utc>>,
    /// The host's embedding of the episode (see [`crate::Memory::set_embedder`] for the alternative).
    pub embedding: Option<Vec<f32>>,
    /// What to do when an earlier episode of the context duplicates this one
    /// (default: the context's policy, `keep` unless set).
    pub on_duplicate: Option<OnDuplicate>,
}

impl NewEpisode {
    /// A new episode with a summary.
    pub fn new(summary: impl Into<String>) -> Self {
        NewEpisode {
            summary: summary.into(),
            ..Default::default()
        }
    }
    /// Set the content.
    #[must_use]
    pub fn content(mut self, content: Value) -> Self {
        self.content = content;
        self
    }
    /// Set the participants.
    #[must_use]
    pub fn participants<I: IntoIterator<Item = S>, S: Into<String>>(mut self, p: I) -> Self {
        self.participants = p.into_iter().map(Into::into).collect();
        self
    }
    /// Set the tags.
    #[must_use]
    pub fn tags<I: IntoIterator<Item = S>, S: Into<String>>(mut self, t: I) -> Self {
        self.tags = t.into_iter().map(Into::into).collect();
        self
    }
    /// Set the importance (1..=10).
    #[must_use]
    pub fn importance(mut self, i: u8) -> Self {
        self.importance = Some(i);
        self
    }
    /// Set the timestamp.
    #[must_use]
    pub fn timestamp(mut self, t: DateTime<Utc>) -> Self {
        self.timestamp = Some(t);
        self
    }
    /// Set the embedding (1..=4096 finite numbers; the dimension is fixed per context on first use).
    #[must_use]
    pub fn embedding(mut self, v: Vec<f32>) -> Self {
        self.embedding = Some(v);
        self
    }
    /// Set the duplicate policy of this write.
    #[must_use]
    pub fn on_duplicate(mut self, p: OnDuplicate) -> Self {
        self.on_duplicate = Some(p);
        self
    }
}

/// Search filters; all optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SearchFilters {
    /// Episodes must carry all of these tags.
    pub tags: Vec<String>,
    /// Episodes must include at least one of these participants.
    pub participants: Vec<String>,
    /// Not before this time (inclusive).
    pub since: Option<DateTime<Utc>>,
    /// Not after this time (inclusive).
    pub until: Option<DateTime<Utc>>,
    /// Importance at least this.
    pub min_importance: Option<u8>,
    /// Only episodes recorded by this time (inclusive): what the context held
    /// then (as it is now: a merge or a forget since then shows).
    pub as_of: Option<DateTime<Utc>>,
    /// Add importance and recency to the scores (off by default; the formula: `memstrata::retention`, docs/memory-hygiene.md).
    pub rank_by_utility: bool,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodeHit {
    /// The episode.
    pub episode: Episode,
    /// BM25 score (0 when the query had no searchable words and results are by recency);
    /// with an embedding, the fused score (pure vector search: the cosine similarity).
    pub score: f32,
    /// 1-based rank in the text (BM25) list; `None` when that list did not find the hit.
    pub bm25_rank: Option<u32>,
    /// 1-based rank in the vector list; `None` when that list did not find the hit.
    pub vector_rank: Option<u32>,
}

/// Handle on the episodic layer of the active context. Get it from [`Memory::episodic`](crate::Memory::episodic).
#[derive(Debug, Clone)]
pub struct Episodic {
    pub(crate) scope: Scope,
}

fn check_list(e: &Engine, field: &str, items: &[String]) -> Result<()> {
    if items.len() > e.opts.limits.max_tags {
        return Err(Error::limit(
            field,
            "number of entries",
            e.opts.limits.max_tags as u64,
            items.len() as u64,
        ));
    }
    for (i, t) in items.iter().enumerate() {
        input::key(&e.opts.limits, &format!("{field}[{i}]"), t)?;
    }
    Ok(())
}

pub(crate) fn validate_new(e: &Engine, ep: &NewEpisode) -> Result<u8> {
    if ep.summary.trim().is_empty() {
        return Err(Error::invalid("summary", "must not be empty"));
    }
    if ep.summary.len() > e.opts.limits.max_value_bytes {
        return Err(Error::limit(
            "summary",
            "size in bytes",
            e.opts.limits.max_value_bytes as u64,
            ep.summary.len() as u64,
        ));
    }
    input::value(&e.opts.limits, "content", &ep.content)?;
    check_list(e, "tags", &ep.tags)?;
    check_list(e, "participants", &ep.participants)?;
    let importance = ep.importance.unwrap_or(DEFAULT_IMPORTANCE);
    if !(1..=10).contains(&importance) {
        return Err(Error::invalid(
            "importance",
            format!("must be in 1..=10, got {importance}"),
        ));
    }
    if let Some(v) = &ep.embedding {
        embedder::check("embedding", v)?;
    }
    Ok(importance)
}

/// Record an episode in `ctx` (used by the procedure engine and the timesheet too).
pub(crate) fn record_in(e: &Engine, ctx: &str, ep: NewEpisode) -> Result<String> {
    Ok(record_detailed_in(e, ctx, ep)?.id)
}

pub(crate) fn get_in(e: &Engine, ctx: &str, id: &str) -> Result<Option<Episode>> {
    input::key(&e.opts.limits, "id", id)?;
    Ok(get_shared(e, ctx, id)?.map(Arc::unwrap_or_clone))
}

/// The episode `id` of `ctx`, through the episode cache.
fn get_shared(e: &Engine, ctx: &str, id: &str) -> Result<Option<Arc<Episode>>> {
    let key = codec::ctx_key(ctx, id);
    e.state::<EpisodeCache>().get_or_load(&key, || {
        e.t.episodes
            .get(&key)?
            .map(|v| Ok(Episode::from(EpisodeRecord::decode(&e.codec, id, &v)?)))
            .transpose()
    })
}

/// The text an embedder is given for an episode: the summary, then the content's text.
pub(crate) fn embed_text(summary: &str, content: &Value) -> String {
    let mut text = summary.to_owned();
    let mut body = String::new();
    input::json_text(content, &mut body);
    if !body.trim().is_empty() {
        text.push('\n');
        text.push_str(body.trim());
    }
    text
}

/// Write episodes with the ids and timestamps they carry (import), through the indexed
/// write path so they are searchable at once. Existing episodes with the same id are replaced.
pub(crate) fn insert_records_in(e: &Engine, records: &[(String, EpisodeRecord)]) -> Result<()> {
    for chunk in records.chunks(256) {
        let mut rows = Vec::with_capacity(chunk.len());
        for (ctx, rec) in chunk {
            e.touch_context(ctx)?;
            rows.push((
                codec::ctx_key(ctx, &rec.id),
                rec.encode(&e.codec)?,
                index_doc(ctx, rec),
            ));
        }
        let r = e.indexed_write_prepared(
            &[&e.t.episodes, &e.t.meta, &e.t.dedup],
            || -> Result<_> {
                // Dedup keys only in contexts with a dedup index (decided under the lock).
                let mut dkeys = Vec::new();
                for (ctx, rec) in chunk {
                    let fp = || fingerprint(e.codec.hash_seed(), &rec.summary, &rec.content);
                    if crate::layers::dedup::writes_rows(e, ctx, DupKind::Episode)? {
                        dkeys.extend(crate::search::dedup::keys(
                            ctx,
                            DupKind::Episode,
                            &rec.id,
                            &fp(),
                        ));
                    } else if crate::layers::dedup::mem_loaded(e, ctx, DupKind::Episode) {
                        crate::layers::dedup::mem_insert(e, ctx, DupKind::Episode, &rec.id, &fp());
                    }
                }
                Ok((claim_dims(e, rows.iter().map(|(_, _, d)| d))?, dkeys))
            },
            |t, (claims, dkeys)| {
                let mut ops = Vec::with_capacity(rows.len());
                for (key, enc, doc) in &rows {
                    t[0].insert(key.as_slice(), enc.as_slice())?;
                    ops.push(IndexOp::Upsert(doc.clone()));
                }
                for (k, dim) in claims {
                    t[1].insert(k.as_slice(), vectors::dim_value(*dim))?;
                }
                for k in dkeys {
                    t[2].insert(k.as_slice(), &[][..])?;
                }
                Ok(((), ops))
            },
        );
        // Same-id episodes were replaced; even on error the sled write may have landed.
        for (key, _, _) in &rows {
            e.state::<EpisodeCache>().invalidate(key);
        }
        r?;
    }
    Ok(())
}

/// Dimensions to fix for the contexts of `docs` that have none yet (under the writer lock).
pub(crate) fn claim_dims<'a>(
    e: &Engine,
    docs: impl Iterator<Item = &'a IndexDoc>,
) -> Result<Vec<(Vec<u8>, usize)>> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut claims = Vec::new();
    for d in docs {
        let Some(v) = &d.embedding else { continue };
        match seen.get(d.ctx.as_str()) {
            Some(&fixed) if fixed != v.len() => {
                return Err(vectors::mismatch("embedding", &d.ctx, v.len(), fixed));
            }
            Some(_) => {}
            None => {
                if let Some(k) = vectors::claim_dim(e, "embedding", &d.ctx, v.len())? {
                    claims.push((k, v.len()));
                }
                seen.insert(&d.ctx, v.len());
            }
        }
    }
    Ok(claims)
}

pub(crate) fn forget_in(e: &Engine, ctx: &str, id: &str) -> Result<bool> {
    input::key(&e.opts.limits, "id", id)?;
    let key = codec::ctx_key(ctx, id);
    let uid = index::uid(Kind::Episode, ctx, id);
    // Read before the writer lock: a dedup index built between this read and
    // the delete keeps the episode's keys, which lead nowhere (every candidate
    // is read back before it is reported, and a forgotten one is gone).
    let indexed = crate::layers::dedup::writes_rows(e, ctx, DupKind::Episode)?;
    let r = e.indexed_write(&[&e.t.episodes, &e.t.dedup], |t| {
        let old = t[0].remove(key.as_slice())?;
        if let (Some(old), true) = (&old, indexed) {
            dedup::remove_keys(e, &t[1], ctx, id, old)?;
        }
        let ops = if old.is_some() {
            vec![IndexOp::Delete(uid.clone())]
        } else {
            vec![]
        };
        Ok((old.is_some(), ops))
    });
    // After the sled write (see `decoded_cache`), whatever its outcome.
    e.state::<EpisodeCache>().invalidate(&key);
    if let Ok(true) = r {
        crate::layers::dedup::mem_remove(e, ctx, DupKind::Episode, id);
    }
    r
}

impl Episodic {
    /// Record an episode; returns its id. It is found by the next search.
    ///
    /// Without an embedding and with an embedder registered
    /// ([`Memory::set_embedder`](crate::Memory::set_embedder)), the embedder is called on the summary plus
    /// the content's text.
    pub fn record(&self, episode: NewEpisode) -> Result<String> {
        Ok(self.record_detailed(episode)?.id)
    }

    /// Record an episode and say what its duplicate policy did: the id (the
    /// existing episode's when the write was skipped or merged), the duplicate
    /// found (`duplicate_of`, with its similarity) and whether a new episode
    /// was created. See [`NewEpisode::on_duplicate`].
    pub fn record_detailed(&self, mut episode: NewEpisode) -> Result<Recorded> {
        let e = &self.scope.engine;
        e.timed("episodic.record", || {
            if episode.embedding.is_none()
                && let Some(f) = self.scope.embedder()
            {
                validate_new(e, &episode)?;
                let text = embed_text(&episode.summary, &episode.content);
                episode.embedding = Some(embedder::embed_one(f.as_ref(), &text)?);
            }
            record_detailed_in(e, &self.scope.active_ctx(), episode)
        })
    }

    /// Record many episodes in one call; returns their ids, in order.
    ///
    /// All or nothing: every item is checked first with the checks and limits of
    /// [`Episodic::record`], and a bad item fails the call with its field named
    /// `items[i].field` (e.g. `items[3].content`) and stores nothing. Then one
    /// storage transaction writes them all and one index batch makes them
    /// searchable. At most [`Limits::max_batch_items`](crate::Limits) items
    /// (default 10,000) and [`Limits::max_batch_bytes`](crate::Limits) encoded
    /// bytes (default 64 MiB) per call: `LimitExceeded` on `items` beyond.
    /// Items without an embedding go to the registered embedder (if any) in
    /// one call.
    /// Each item goes through its duplicate policy as [`Episodic::record`]
    /// does (against the stored episodes and the batch's earlier items); the
    /// id of a skipped or merged item is the existing episode's.
    pub fn record_many(&self, episodes: Vec<NewEpisode>) -> Result<Vec<String>> {
        Ok(self
            .record_many_detailed(episodes)?
            .into_iter()
            .map(|r| r.id)
            .collect())
    }

    /// [`Episodic::record_many`], saying what each item's duplicate policy
    /// did, as [`Episodic::record_detailed`] does.
    pub fn record_many_detailed(&self, episodes: Vec<NewEpisode>) -> Result<Vec<Recorded>> {
        let e = &self.scope.engine;
        let embedder = self.scope.embedder();
        e.timed("episodic.record_many", || {
            record_many_in(e, &self.scope.active_ctx(), episodes, embedder.as_deref())
        })
    }

    /// The episode with `id`, or `None`.
    pub fn get(&self, id: &str) -> Result<Option<Episode>> {
        let e = &self.scope.engine;
        e.timed("episodic.get", || get_in(e, &self.scope.active_ctx(), id))
    }

    /// BM25 search over summary, content, participants and tags, with filters.
    ///
    /// `query` is plain text: no syntax, punctuation is ignored. An empty query
    /// returns the newest episodes matching the filters.
    ///
    /// With an embedder registered and a non-empty query, this is a hybrid
    /// search with the default fusion (see [`Episodic::search_hybrid`]).
    pub fn search(
        &self,
        query: &str,
        filters: &SearchFilters,
        limit: usize,
    ) -> Result<Vec<EpisodeHit>> {
        self.search_hybrid(query, filters, limit, &VectorQuery::default())
    }

    /// Search with a query embedding: BM25 and vector lists fused (see
    /// [`crate::Fusion`]), or pure vector search when `query` is empty. Every
    /// filter applies to both lists before fusion. Without an embedding in
    /// `vq`, the registered embedder (if any) embeds a non-empty `query`;
    /// otherwise this is the BM25 search of [`Episodic::search`].
    pub fn search_hybrid(
        &self,
        query: &str,
        filters: &SearchFilters,
        limit: usize,
        vq: &VectorQuery,
    ) -> Result<Vec<EpisodeHit>> {
        let e = &self.scope.engine;
        let embedder = self.scope.embedder();
        e.timed("episodic.search", || {
            search_in(
                e,
                &self.scope.active_ctx(),
                query,
                filters,
                limit,
                vq,
                embedder.as_deref(),
            )
        })
    }

    /// The newest `limit` episodes, newest first.
    pub fn recent(&self, limit: usize) -> Result<Vec<Episode>> {
        self.recent_as_of(limit, None)
    }

    /// The newest `limit` episodes recorded by `as_of` (inclusive; `None`:
    /// all), newest first: what the context held then.
    pub fn recent_as_of(&self, limit: usize, as_of: Option<DateTime<Utc>>) -> Result<Vec<Episode>> {
        let e = &self.scope.engine;
        let as_of_ms = as_of.map(|t| t.timestamp_millis());
        e.timed("episodic.recent", || {
            let mut out: Vec<Episode> = Vec::new();
            let ctx = self.scope.active_ctx();
            for item in e.t.episodes.scan_prefix(codec::ctx_prefix(&ctx)) {
                let (k, v) = item?;
                let r = EpisodeRecord::decode_keyed(&e.codec, &k, &v)?;
                if as_of_ms.is_some_and(|t| r.recorded_ms() > t) {
                    continue;
                }
                out.push(r.into());
            }
            out.sort_by(|a, b| b.timestamp.cmp(&a.timestamp).then_with(|| b.id.cmp(&a.id)));
            out.truncate(limit.min(e.opts.limits.max_results));
            Ok(out)
        })
    }

    /// Deterministic extractive summary of the given episodes: chronological,
    /// one line each, at most [`SUMMARY_MAX_CHARS`] characters.
    pub fn summarize(&self, ids: &[String]) -> Result<String> {
        let e = &self.scope.engine;
        e.timed("episodic.summarize", || {
            if ids.len() > e.opts.limits.max_results {
                return Err(Error::limit(
                    "ids",
                    "episodes per call",
                    e.opts.limits.max_results as u64,
                    ids.len() as u64,
                ));
            }
            let ctx = self.scope.active_ctx();
            let mut eps = Vec::with_capacity(ids.len());
            for (i, id) in ids.iter().enumerate() {
                match get_in(e, &ctx, id)? {
                    Some(ep) => eps.push(ep),
                    None => {
                        return Err(Error::not_found(format!(
                            "episode {id:?} (ids[{i}]) in context {ctx:?}"
                        )));
                    }
                }
            }
            Ok(summarize(&eps))
        })
    }

    /// Delete an episode; `true` when it existed. It disappears from search at once.
    pub fn forget(&self, id: &str) -> Result<bool> {
        let e = &self.scope.engine;
        e.timed("episodic.forget", || {
            forget_in(e, &self.scope.active_ctx(), id)
        })
    }
}

/// The extractive summary used by `summarize`.
pub(crate) fn summarize(eps: &[Episode]) -> String {
    let mut sorted: Vec<&Episode> = eps.iter().collect();
    sorted.sort_by(|a, b| a.timestamp.cmp(&b.timestamp).then_with(|| a.id.cmp(&b.id)));
    sorted.dedup_by(|a, b| a.id == b.id);
    let mut out = String::new();
    for (i, ep) in sorted.iter().enumerate() {
        let mut line = format!(
            "- [{}] {}",
            ep.timestamp.format("%Y-%m-%d %H:%M"),
            ep.summary.trim()
        );
        if !ep.participants.is_empty() {
            line.push_str(&format!(" (with {})", ep.participants.join(", ")));
        }
        if !ep.tags.is_empty() {
            line.push_str(&format!(" #{}", ep.tags.join(" #")));
        }
        line.push('\n');
        if out.chars().count() + line.chars().count() > SUMMARY_MAX_CHARS {
            out.push_str(&format!("… and {} more episode(s)\n", sorted.len() - i));
            break;
        }
        out.push_str(&line);
    }
    out
}
