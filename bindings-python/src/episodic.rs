//! `Memory.episodic`: timestamped episodes with full-text search.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use memstrata_bindings_common::{self as common, Handle, JsonValue, RecordOptions, SearchOptions};
use pyo3::prelude::*;

use crate::convert;
use crate::error::{run, to_py};
use crate::memory::{HandleExt, max_depth};
use crate::records::{class, classes, py_records, pystr};

/// The keys an item of `record_many` may have.
const ITEM_KEYS: &[&str] = &[
    "summary",
    "content",
    "participants",
    "tags",
    "importance",
    "timestamp",
    "embedding",
    "on_duplicate",
];

/// The episodic layer of the active context (`mem.episodic`).
#[pyclass(frozen, module = "memstrata")]
#[derive(Debug)]
pub struct Episodic {
    h: Arc<Handle>,
}

impl Episodic {
    pub(crate) fn new(h: Arc<Handle>) -> Self {
        Episodic { h }
    }
}

/// The core's episode from `record`'s arguments (content, participants, tags,
/// importance, timestamp, embedding) and policy.
fn episode(
    mem: &memstrata::Memory,
    summary: String,
    [
        content,
        participants,
        tags,
        importance,
        timestamp,
        embedding,
    ]: [Option<&Bound<'_, PyAny>>; 6],
    on_duplicate: Option<String>,
) -> PyResult<memstrata::NewEpisode> {
    RecordOptions {
        content: Some(JsonValue(convert::opt_json(
            content,
            "content",
            max_depth(mem),
        )?)),
        participants: Some(convert::str_list(participants, "participants")?),
        tags: Some(convert::str_list(tags, "tags")?),
        importance: convert::opt_int(importance, "importance")?,
        timestamp: convert::opt_timestamp(timestamp, "timestamp")?,
        embedding: convert::opt_floats(embedding, "embedding")?.map(Into::into),
        on_duplicate,
    }
    .episode(summary)
    .map_err(to_py)
}

#[pymethods]
impl Episodic {
    /// Record an episode; returns its id. It is found by the next search.
    ///
    /// `embedding` (a sequence of floats) is the host's vector for this episode; the
    /// dimension is fixed per context on first use. Without it, the embedder set with
    /// `Memory.set_embedder` (if any) is called on the summary plus the content's text.
    ///
    /// `on_duplicate` (`"keep"`, `"skip"`, `"merge"` or `"link"`; default the
    /// context's policy) says what to do when an earlier episode duplicates this one;
    /// with `"skip"` or `"merge"` the existing episode's id is returned.
    #[pyo3(signature = (summary, content=None, *, participants=None, tags=None, importance=None, timestamp=None, embedding=None, on_duplicate=None))]
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        py: Python<'_>,
        summary: String,
        content: Option<&Bound<'_, PyAny>>,
        participants: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        importance: Option<&Bound<'_, PyAny>>,
        timestamp: Option<&Bound<'_, PyAny>>,
        embedding: Option<&Bound<'_, PyAny>>,
        on_duplicate: Option<String>,
    ) -> PyResult<String> {
        let mem = self.h.core()?;
        let ep = episode(
            &mem,
            summary,
            [
                content,
                participants,
                tags,
                importance,
                timestamp,
                embedding,
            ],
            on_duplicate,
        )?;
        run(py, || mem.episodic().record(ep))
    }

    /// Record an episode like `record`, and say what its duplicate policy did: the
    /// id (the existing episode's when skipped or merged), `duplicate_of` and its
    /// `similarity` when a duplicate was found, `created`, and the policy applied.
    #[pyo3(signature = (summary, content=None, *, participants=None, tags=None, importance=None, timestamp=None, embedding=None, on_duplicate=None))]
    #[allow(clippy::too_many_arguments)]
    fn record_detailed(
        &self,
        py: Python<'_>,
        summary: String,
        content: Option<&Bound<'_, PyAny>>,
        participants: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        importance: Option<&Bound<'_, PyAny>>,
        timestamp: Option<&Bound<'_, PyAny>>,
        embedding: Option<&Bound<'_, PyAny>>,
        on_duplicate: Option<String>,
    ) -> PyResult<Recorded> {
        let mem = self.h.core()?;
        let ep = episode(
            &mem,
            summary,
            [
                content,
                participants,
                tags,
                importance,
                timestamp,
                embedding,
            ],
            on_duplicate,
        )?;
        let r = run(py, || mem.episodic().record_detailed(ep))?;
        class(py, r)
    }

    /// Record many episodes in one call; returns their ids, in order.
    ///
    /// Each item is a dict with the arguments of `record` (`summary` required; `content`,
    /// `participants`, `tags`, `importance`, `timestamp`, `embedding`, `on_duplicate`).
    /// Each item goes through its duplicate policy as in `record` (against the stored
    /// episodes and the batch's earlier items; a skipped or merged item's id is the
    /// existing episode's). All or nothing:
    /// every item is checked first, with the checks and limits of `record`; a bad item
    /// raises with its field named `items[i].field` (e.g. `items[3].content`) and nothing
    /// is stored. One storage transaction and one index batch per call; at most 10,000
    /// items and 64 MiB encoded per call (`LimitExceededError` on `items`).
    fn record_many(&self, py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let mem = self.h.core()?;
        let depth = max_depth(&mem);
        let iter = items.try_iter().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err("items: expected an iterable of dicts")
        })?;
        let mut list = Vec::new();
        for (i, item) in iter.enumerate() {
            let item = item?;
            let at = format!("items[{i}]");
            let mut summary = None;
            let mut o = RecordOptions::default();
            for (k, v) in convert::item_fields(&item, &at, ITEM_KEYS)? {
                let f = format!("{at}.{k}");
                let v = Some(&v);
                match k.as_str() {
                    "summary" => {
                        summary =
                            Some(v.and_then(|v| v.extract::<String>().ok()).ok_or_else(|| {
                                pyo3::exceptions::PyTypeError::new_err(format!("{f}: expected str"))
                            })?)
                    }
                    "content" => o.content = Some(JsonValue(convert::opt_json(v, &f, depth)?)),
                    "participants" => o.participants = Some(convert::str_list(v, &f)?),
                    "tags" => o.tags = Some(convert::str_list(v, &f)?),
                    "importance" => o.importance = convert::opt_int(v, &f)?,
                    "timestamp" => o.timestamp = convert::opt_timestamp(v, &f)?,
                    "on_duplicate" => o.on_duplicate = convert::opt_str(v, &f)?,
                    _ => o.embedding = convert::opt_floats(v, &f)?.map(Into::into),
                }
            }
            let Some(summary) = summary else {
                return Err(crate::error::invalid(
                    &format!("{at}.summary"),
                    "is required",
                ));
            };
            list.push(common::EpisodeItem {
                summary,
                content: o.content,
                participants: o.participants,
                tags: o.tags,
                importance: o.importance,
                timestamp: o.timestamp,
                embedding: o.embedding,
                on_duplicate: o.on_duplicate,
            });
        }
        let eps = common::items::episodes(list).map_err(to_py)?;
        run(py, || mem.episodic().record_many(eps))
    }

    /// The episode with `id`, or None.
    fn get(&self, py: Python<'_>, id: String) -> PyResult<Option<Episode>> {
        let mem = self.h.core()?;
        let ep = run(py, || mem.episodic().get(&id))?;
        ep.map(|e| class(py, e)).transpose()
    }

    /// BM25 search over summary, content, participants and tags. `query` is plain text
    /// (no syntax; punctuation is ignored); an empty query returns the newest matches.
    /// Filters: `tags` (all), `participants` (any), `since` / `until` (aware datetimes,
    /// inclusive), `min_importance`.
    ///
    /// With `embedding`, the BM25 list and the vector list are fused by `fusion`
    /// (`"adaptive"`, the default, `"linear"` or `"rrf"`, with `bm25_weight`,
    /// `vector_weight` and `rrf_k`: docs/api.md, "Embeddings and hybrid search");
    /// with an empty query, pure vector search. Hits carry `bm25_rank` / `vector_rank`.
    ///
    /// `as_of` (an aware datetime): only episodes recorded by then (what the
    /// context held at that time). With `rank_by_utility`, importance and recency
    /// are added to the scores (off by default; docs/memory-hygiene.md).
    #[pyo3(
        signature = (query=String::new(), *, limit=None, tags=None, participants=None, since=None, until=None, min_importance=None, embedding=None, fusion=None, bm25_weight=None, vector_weight=None, rrf_k=None, as_of=None, rank_by_utility=None),
        text_signature = "($self, query='', *, limit=None, tags=None, participants=None, since=None, until=None, min_importance=None, embedding=None, fusion=None, bm25_weight=None, vector_weight=None, rrf_k=None, as_of=None, rank_by_utility=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        py: Python<'_>,
        query: String,
        limit: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        participants: Option<&Bound<'_, PyAny>>,
        since: Option<&Bound<'_, PyAny>>,
        until: Option<&Bound<'_, PyAny>>,
        min_importance: Option<&Bound<'_, PyAny>>,
        embedding: Option<&Bound<'_, PyAny>>,
        fusion: Option<String>,
        bm25_weight: Option<&Bound<'_, PyAny>>,
        vector_weight: Option<&Bound<'_, PyAny>>,
        rrf_k: Option<&Bound<'_, PyAny>>,
        as_of: Option<&Bound<'_, PyAny>>,
        rank_by_utility: Option<bool>,
    ) -> PyResult<Vec<EpisodeHit>> {
        let mem = self.h.core()?;
        let (filters, limit, vq) = SearchOptions {
            limit: convert::opt_limit(limit, "limit")?,
            tags: Some(convert::str_list(tags, "tags")?),
            participants: Some(convert::str_list(participants, "participants")?),
            since: convert::opt_timestamp(since, "since")?,
            until: convert::opt_timestamp(until, "until")?,
            min_importance: convert::opt_int(min_importance, "min_importance")?,
            embedding: convert::opt_floats(embedding, "embedding")?.map(Into::into),
            fusion,
            bm25_weight: convert::opt_float(bm25_weight, "bm25_weight")?,
            vector_weight: convert::opt_float(vector_weight, "vector_weight")?,
            rrf_k: convert::opt_float(rrf_k, "rrf_k")?,
            as_of: convert::opt_timestamp(as_of, "as_of")?,
            rank_by_utility,
        }
        .hybrid()
        .map_err(to_py)?;
        let hits = run(py, || {
            mem.episodic().search_hybrid(&query, &filters, limit, &vq)
        })?;
        classes(py, hits)
    }

    /// The newest `limit` episodes, newest first; with `as_of` (an aware
    /// datetime), of those recorded by then.
    #[pyo3(signature = (limit=None, *, as_of=None))]
    fn recent(
        &self,
        py: Python<'_>,
        limit: Option<&Bound<'_, PyAny>>,
        as_of: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Episode>> {
        let mem = self.h.core()?;
        let limit = common::defaults::search_limit(convert::opt_limit(limit, "limit")?);
        let as_of = convert::opt_timestamp(as_of, "as_of")?.map(|t| t.0);
        let eps = run(py, || mem.episodic().recent_as_of(limit, as_of))?;
        classes(py, eps)
    }

    /// Deterministic extractive summary of the given episodes (chronological, bounded length).
    fn summarize(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<String> {
        let mem = self.h.core()?;
        let ids = convert::str_list(Some(ids), "ids")?;
        run(py, || mem.episodic().summarize(&ids))
    }

    /// Delete an episode; True when it existed. It disappears from search at once.
    fn forget(&self, py: Python<'_>, id: String) -> PyResult<bool> {
        let mem = self.h.core()?;
        run(py, || mem.episodic().forget(&id))
    }

    fn __repr__(&self) -> String {
        "<memstrata.Episodic>".to_owned()
    }
}

py_records! {
    /// A stored episode.
    Episode from common::Episode,
    repr [id, timestamp, summary, content, participants, tags, importance, seen_count] {
        /// UUIDv7 id.
        id: String,
        /// When it happened (aware UTC).
        timestamp: DateTime<Utc>,
        /// One-line summary.
        summary: String,
        /// Arbitrary JSON-like content.
        content: Py<PyAny>,
        /// Who took part.
        participants: Vec<String>,
        /// Tags.
        tags: Vec<String>,
        /// 1..=10.
        importance: u32,
        /// How many times it was recorded (1, plus one per duplicate merged into it).
        seen_count: i64,
        /// When a duplicate was last merged into it (None: never).
        last_seen: Option<DateTime<Utc>>,
        /// The earlier episode it duplicates, when recorded with `on_duplicate="link"`.
        duplicate_of: Option<String>,
        /// When it was recorded (aware UTC; its timestamp unless the caller gave
        /// another): `as_of` reads see the episodes recorded by then.
        recorded_at: DateTime<Utc>,
    }

    /// Result of `record_detailed`: what the duplicate policy did.
    Recorded from common::Recorded, repr [id, duplicate_of, similarity, created, on_duplicate] {
        /// The episode's id: the new one, or the existing one when skipped or merged.
        id: String,
        /// The earlier episode this one duplicates, when one was found (whatever the policy).
        duplicate_of: Option<String>,
        /// 1.0 for an exact duplicate, else the Jaccard similarity of the texts' shingles
        /// or the cosine of the embeddings; None without a duplicate.
        similarity: Option<f64>,
        /// Whether a new episode was stored (False for skip and merge of a duplicate).
        created: bool,
        /// The policy applied: "keep", "skip", "merge" or "link".
        on_duplicate: String,
    }

    /// One search result: the episode, its score and its rank in each list.
    EpisodeHit from common::EpisodeHit, repr custom {
        /// The episode.
        episode: Py<Episode>,
        /// BM25 score (0.0 when the query had no searchable words and results are by
        /// recency); with an embedding, the fused score (pure vector search: the cosine).
        score: f64,
        /// 1-based rank in the text (BM25) list; None when that list did not find the hit.
        bm25_rank: Option<i64>,
        /// 1-based rank in the vector list; None when that list did not find the hit.
        vector_rank: Option<i64>,
    }
}

impl EpisodeHit {
    fn repr(&self, _py: Python<'_>) -> String {
        let ep = self.episode.get();
        format!(
            "EpisodeHit(score={:.4}, episode=Episode(id={}, summary={}, ...))",
            self.score,
            pystr(&ep.id),
            pystr(&ep.summary)
        )
    }
}
