//! Long-term layer tools: episodic (record, get, search, summarize) and semantic
//! (knowledge store, retrieve, search, history, patch).

use memstrata_bindings_common as common;
use memstrata_bindings_common::Timestamp;
use memstrata_bindings_common::defaults::{MAX_SUMMARIZE_IDS, page, page_limit, parse_cursor};
use memstrata_bindings_common::records::list;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Cx, Done, Op, ctx_target};
use crate::error::{ToolError, ToolResult};
use crate::protocol::uri;
use crate::security::auth::{Access, Target};
use memstrata_bindings_common::ErrorCode::NotFound;

// ---------------------------------------------------------------- episodic

/// Arguments of `episode_record`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodeRecord {
    /// One-line summary of what happened (required, searched with a boost).
    pub summary: String,
    /// Any JSON details (its text is searched).
    #[serde(default)]
    pub content: Option<Value>,
    /// Who took part (searched; filter with `participants`).
    #[serde(default)]
    pub participants: Vec<String>,
    /// Tags (at most 64; filter with `tags`).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Importance 1..=10 (default 5).
    #[serde(default)]
    #[schemars(range(min = 1, max = 10))]
    pub importance: Option<u8>,
    /// When it happened, RFC 3339 (default: now).
    #[serde(default)]
    pub timestamp: Option<chrono::DateTime<chrono::Utc>>,
    /// The host's embedding of this item (1..=4096 finite numbers; the dimension is
    /// fixed per context on first use). Omit it to use the server's embeddings endpoint, if configured.
    #[serde(default)]
    pub embedding: Option<Vec<f64>>,
    /// What to do when an earlier episode of the context duplicates this one (same
    /// text, near-identical text, or a near-identical embedding): `keep` stores it
    /// anyway, `skip` stores nothing and returns the existing id, `merge` folds it
    /// into the existing episode, `link` stores it linked to the existing one.
    /// Default: the context's policy (`keep` unless set with context_set_on_duplicate).
    #[serde(default)]
    pub on_duplicate: Option<OnDuplicateName>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// A duplicate policy.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDuplicateName {
    /// Store anyway (the result names the duplicate).
    Keep,
    /// Store nothing; the result is the existing item.
    Skip,
    /// Fold into the existing item.
    Merge,
    /// Store, linked to the existing item.
    Link,
}

impl OnDuplicateName {
    /// The policy's name.
    pub fn as_str(self) -> &'static str {
        memstrata::episodic::OnDuplicate::from(self).as_str()
    }
}

impl From<OnDuplicateName> for memstrata::episodic::OnDuplicate {
    fn from(p: OnDuplicateName) -> Self {
        match p {
            OnDuplicateName::Keep => Self::Keep,
            OnDuplicateName::Skip => Self::Skip,
            OnDuplicateName::Merge => Self::Merge,
            OnDuplicateName::Link => Self::Link,
        }
    }
}

impl Op for EpisodeRecord {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, ctx) = cx.scoped(&self.namespace)?;
        let ep = memstrata::NewEpisode {
            summary: self.summary,
            content: self.content.unwrap_or(Value::Null),
            participants: self.participants,
            tags: self.tags,
            importance: self.importance,
            timestamp: self.timestamp,
            embedding: self
                .embedding
                .as_deref()
                .map(common::embedding)
                .transpose()?,
            on_duplicate: self.on_duplicate.map(Into::into),
        };
        let r = common::Recorded::from(mem.episodic().record_detailed(ep)?);
        let u = uri::episode(&ctx, &r.id);
        let created = r.created;
        Ok(Done::of(&r)?.changed(u, Some(&ctx), created))
    }
}

/// Arguments of `episode_get`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodeGet {
    /// Episode id (from `episode_record` or a search hit).
    pub id: String,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `episode_get`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EpisodeFound {
    /// False when no episode has this id in the context.
    pub found: bool,
    /// The episode (null when not found).
    pub episode: Option<common::Episode>,
}

impl Op for EpisodeGet {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let episode = mem.episodic().get(&self.id)?.map(common::Episode::from);
        Done::of(&EpisodeFound {
            found: episode.is_some(),
            episode,
        })
    }
}

/// Arguments of `episode_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodeSearch {
    /// Natural-language text (no query syntax; punctuation is fine). Empty: most recent first.
    pub query: String,
    /// Hits per page, 1..=100 (default 10; larger values are capped).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Only episodes carrying all of these tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Only episodes with at least one of these participants.
    #[serde(default)]
    pub participants: Vec<String>,
    /// Not before this time (RFC 3339, inclusive).
    #[serde(default)]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Not after this time (RFC 3339, inclusive).
    #[serde(default)]
    pub until: Option<chrono::DateTime<chrono::Utc>>,
    /// Only episodes at least this important (1..=10).
    #[serde(default)]
    #[schemars(range(min = 1, max = 10))]
    pub min_importance: Option<u8>,
    /// Query embedding: results fuse the text (BM25) list and the vector list; with an
    /// empty query, pure vector search. Omit it to use the server's embeddings endpoint, if configured.
    #[serde(default)]
    pub embedding: Option<Vec<f64>>,
    /// How the two lists are fused: `adaptive` (default: each list calibrated against its own near misses, so a list that looks like noise for the query defers to the other), `linear` (weighted max-normalised BM25 plus cosine) or `rrf`.
    #[serde(default)]
    #[schemars(extend("enum" = ["adaptive", "linear", "rrf", null]))]
    pub fusion: Option<String>,
    /// Weight of the BM25 list (default 0.5).
    #[serde(default)]
    pub bm25_weight: Option<f64>,
    /// Weight of the vector list (default 0.5).
    #[serde(default)]
    pub vector_weight: Option<f64>,
    /// Reciprocal-rank-fusion constant k (default 60).
    #[serde(default)]
    pub rrf_k: Option<f64>,
    /// Only episodes recorded by this time (RFC 3339): what the context held then.
    #[serde(default)]
    pub as_of: Option<chrono::DateTime<chrono::Utc>>,
    /// Add importance and recency to the scores: score × (1 + 0.5 · (importance − 1)/9 + 0.5 · 0.5^(age_days / 30)) (default false).
    #[serde(default)]
    pub rank_by_utility: bool,
    /// `next_cursor` from the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `episode_search`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EpisodeHits {
    /// Best first.
    pub hits: Vec<common::EpisodeHit>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

impl Op for EpisodeSearch {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let limit = page_limit(self.limit);
        let offset = parse_cursor(self.cursor.as_deref())?;
        let max = mem.options().limits.max_results;
        if offset >= max {
            return Err(ToolError::invalid(
                "cursor",
                format!(
                    "searches return at most {max} hits; narrow the query or the filters instead"
                ),
            ));
        }
        let filters = memstrata::SearchFilters {
            tags: self.tags,
            participants: self.participants,
            since: self.since,
            until: self.until,
            min_importance: self.min_importance,
            as_of: self.as_of,
            rank_by_utility: self.rank_by_utility,
        };
        let vq = common::vector_query(
            self.embedding,
            self.fusion.as_deref(),
            self.bm25_weight,
            self.vector_weight,
            self.rrf_k,
        )?;
        let want = (offset + limit + 1).min(max);
        let hits = mem
            .episodic()
            .search_hybrid(&self.query, &filters, want, &vq)?;
        let (hits, next_cursor) = page(hits, offset, limit);
        Done::of(&EpisodeHits {
            hits: list(hits),
            next_cursor,
        })
    }
}

/// Arguments of `episodes_summarize`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodesSummarize {
    /// Episode ids (1..=100). The summary is chronological, extractive and bounded.
    pub ids: Vec<String>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `episodes_summarize`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Summary {
    /// Deterministic extractive summary (at most 4000 characters).
    pub summary: String,
}

impl Op for EpisodesSummarize {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        if self.ids.is_empty() || self.ids.len() > MAX_SUMMARIZE_IDS {
            return Err(ToolError::invalid(
                "ids",
                format!(
                    "give 1..={MAX_SUMMARIZE_IDS} episode ids, got {}",
                    self.ids.len()
                ),
            ));
        }
        let (mem, _) = cx.scoped(&self.namespace)?;
        Done::of(&Summary {
            summary: mem.episodic().summarize(&self.ids)?,
        })
    }
}

// ---------------------------------------------------------------- semantic

/// Arguments of `knowledge_store`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeStore {
    /// Key, e.g. `user:alice` (1..=1024 bytes).
    pub key: String,
    /// The knowledge, any JSON. Replaces the current entry (the old version stays in history).
    pub knowledge: Value,
    /// The host's embedding of this item (1..=4096 finite numbers; the dimension is
    /// fixed per context on first use). Omit it to use the server's embeddings endpoint, if configured.
    #[serde(default)]
    pub embedding: Option<Vec<f64>>,
    /// What to do when another entry (or this key's current value) holds the same
    /// or a near-identical value: `keep` stores anyway, `skip` stores nothing and
    /// returns that entry, `merge` applies the value as a merge patch to that entry,
    /// `link` stores with a link to it. Default: the context's policy (`keep` unless set).
    #[serde(default)]
    pub on_duplicate: Option<OnDuplicateName>,
    /// When the new version starts to hold, RFC 3339 (default: now). The version it
    /// supersedes stays in history, its validity closed at this time.
    #[serde(default)]
    pub valid_from: Option<chrono::DateTime<chrono::Utc>>,
    /// When the new version stops holding, RFC 3339, exclusive (default: open). After
    /// it, knowledge_query leaves the entry out unless `include_expired`.
    #[serde(default)]
    pub valid_until: Option<chrono::DateTime<chrono::Utc>>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `knowledge_store`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KnowledgeStored {
    /// Always true when returned.
    pub success: bool,
    /// The key.
    pub key: String,
    /// New version number (1 for a new entry).
    pub version: i64,
    /// First stored.
    pub created_at: Timestamp,
    /// This store.
    pub updated_at: Timestamp,
    /// The entry found to hold the same or a near-identical value (this key's own
    /// when unchanged), whatever the policy; with `skip` and `merge` `key` names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<String>,
    /// When this version starts to hold.
    pub valid_from: Timestamp,
    /// When it stops holding (exclusive); absent: open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<Timestamp>,
}

impl KnowledgeStored {
    /// The result for a stored entry.
    pub(crate) fn of(k: common::Knowledge) -> Self {
        KnowledgeStored {
            success: true,
            key: k.key,
            version: k.version,
            created_at: k.created_at,
            updated_at: k.updated_at,
            duplicate_of: k.duplicate_of,
            valid_from: k.valid_from,
            valid_until: k.valid_until,
        }
    }
}

impl Op for KnowledgeStore {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, ctx) = cx.scoped(&self.namespace)?;
        let embedding = self
            .embedding
            .as_deref()
            .map(common::embedding)
            .transpose()?;
        let mut opts = memstrata::semantic::StoreOptions::default();
        if let Some(v) = embedding {
            opts = opts.embedding(v);
        }
        if let Some(p) = self.on_duplicate {
            opts = opts.on_duplicate(p.into());
        }
        opts.valid_from = self.valid_from;
        opts.valid_until = self.valid_until;
        let k =
            common::Knowledge::from(mem.semantic().store_with(&self.key, self.knowledge, opts)?);
        let u = uri::knowledge(&ctx, &k.key);
        let created = k.version == 1 && k.key == self.key;
        Ok(Done::of(&KnowledgeStored::of(k))?.changed(u, Some(&ctx), created))
    }
}

/// Arguments of `knowledge_retrieve`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeRetrieve {
    /// Key to read.
    pub key: String,
    /// Read the version that held at this time (RFC 3339), from the kept history
    /// (default: the current version).
    #[serde(default)]
    pub as_of: Option<chrono::DateTime<chrono::Utc>>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `knowledge_retrieve`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KnowledgeFound {
    /// False when there is no entry under the key.
    pub found: bool,
    /// The entry with version and timestamps (null when not found).
    pub entry: Option<common::Knowledge>,
}

impl Op for KnowledgeRetrieve {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let read = common::as_of(self.as_of.map(Timestamp));
        let entry = mem
            .semantic()
            .get_with(&self.key, &read)?
            .map(common::Knowledge::from);
        Done::of(&KnowledgeFound {
            found: entry.is_some(),
            entry,
        })
    }
}

/// Arguments of `knowledge_query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeQuery {
    /// Natural-language text matched against keys and knowledge text.
    pub text: String,
    /// Hits per page, 1..=100 (default 10; larger values are capped).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Query embedding: results fuse the text (BM25) list and the vector list; with an
    /// empty query, pure vector search. Omit it to use the server's embeddings endpoint, if configured.
    #[serde(default)]
    pub embedding: Option<Vec<f64>>,
    /// How the two lists are fused, as in `episode_search`: `adaptive` (default), `linear` or `rrf`.
    #[serde(default)]
    #[schemars(extend("enum" = ["adaptive", "linear", "rrf", null]))]
    pub fusion: Option<String>,
    /// Weight of the BM25 list (default 0.5).
    #[serde(default)]
    pub bm25_weight: Option<f64>,
    /// Weight of the vector list (default 0.5).
    #[serde(default)]
    pub vector_weight: Option<f64>,
    /// Reciprocal-rank-fusion constant k (default 60).
    #[serde(default)]
    pub rrf_k: Option<f64>,
    /// Each entry as it held at this time (RFC 3339): its version valid then
    /// (entries with none are left out).
    #[serde(default)]
    pub as_of: Option<chrono::DateTime<chrono::Utc>>,
    /// Without `as_of`: also entries whose current version expired (`valid_until`
    /// in the past). Default false.
    #[serde(default)]
    pub include_expired: Option<bool>,
    /// `next_cursor` from the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `knowledge_query`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KnowledgeHits {
    /// Best first.
    pub hits: Vec<common::KnowledgeHit>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

impl Op for KnowledgeQuery {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let limit = page_limit(self.limit);
        let offset = parse_cursor(self.cursor.as_deref())?;
        let max = mem.options().limits.max_results;
        if offset >= max {
            return Err(ToolError::invalid(
                "cursor",
                format!("queries return at most {max} hits; refine the text instead"),
            ));
        }
        let vq = common::vector_query(
            self.embedding,
            self.fusion.as_deref(),
            self.bm25_weight,
            self.vector_weight,
            self.rrf_k,
        )?;
        let mut read = common::as_of(self.as_of.map(Timestamp));
        read.include_expired = self.include_expired.unwrap_or(false);
        let hits =
            mem.semantic()
                .query_with(&self.text, (offset + limit + 1).min(max), &vq, &read)?;
        let (hits, next_cursor) = page(hits, offset, limit);
        Done::of(&KnowledgeHits {
            hits: list(hits),
            next_cursor,
        })
    }
}

/// Arguments of `knowledge_update`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeUpdate {
    /// Key of an existing entry (use `knowledge_store` to create one).
    pub key: String,
    /// RFC 7386 JSON Merge Patch: objects merge, `null` removes a member, anything else replaces.
    pub patch: Value,
    /// When the new version starts to hold, RFC 3339 (default: now); the version it
    /// supersedes stays in history, closed at this time.
    #[serde(default)]
    pub valid_from: Option<chrono::DateTime<chrono::Utc>>,
    /// When the new version stops holding, RFC 3339, exclusive (default: open).
    #[serde(default)]
    pub valid_until: Option<chrono::DateTime<chrono::Utc>>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

impl Op for KnowledgeUpdate {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, ctx) = cx.scoped(&self.namespace)?;
        let mut opts = memstrata::semantic::UpdateOptions::default();
        opts.valid_from = self.valid_from;
        opts.valid_until = self.valid_until;
        let k = mem
            .semantic()
            .update_with(&self.key, self.patch, opts)
            .map_err(|e| {
                ToolError::from(e).hint_on(NotFound, "Create it with knowledge_store first")
            })?;
        let u = uri::knowledge(&ctx, &k.key);
        Ok(Done::of(&common::Knowledge::from(k))?.changed(u, Some(&ctx), false))
    }
}
