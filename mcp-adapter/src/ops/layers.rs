//! Layer tools: short-term, working, episodic, semantic, and `context_switch`.

use memstrata_bindings_common as common;
use memstrata_bindings_common::defaults::{
    DEFAULT_PRESERVE_CURRENT, MAX_SUMMARIZE_IDS, page, page_limit, parse_cursor,
};
use memstrata_bindings_common::options::ttl;
use memstrata_bindings_common::records::list;
use memstrata_bindings_common::{JsonValue, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Cx, Done, Op, ctx_target};
use crate::error::{ToolError, ToolResult};
use crate::protocol::uri;
use crate::security::auth::{Access, Target};
use memstrata_bindings_common::ErrorCode::NotFound;

// ---------------------------------------------------------------- short-term

/// Arguments of `memory_store`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryStore {
    /// Key (1..=1024 bytes). Storing again under the same key replaces the value.
    pub key: String,
    /// Any JSON value (at most 16 MiB, nesting depth at most 128).
    pub value: Value,
    /// Time to live in seconds (> 0). Without it the value never expires.
    #[serde(default)]
    pub ttl: Option<f64>,
    /// Context to store in (default: the connection's active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `memory_store`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryStored {
    /// Always true when returned.
    pub success: bool,
    /// The key.
    pub key: String,
    /// Context it was stored in.
    pub context: String,
    /// When it was stored.
    pub stored_at: Timestamp,
    /// When it expires (null: never).
    pub expires_at: Option<Timestamp>,
}

impl Op for MemoryStore {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, ctx) = cx.scoped(&self.namespace)?;
        let e = mem
            .short_term()
            .store(&self.key, self.value, ttl(self.ttl)?)?;
        let e = common::ShortTermEntry::from(e);
        Done::of(&MemoryStored {
            success: true,
            key: e.key,
            context: ctx,
            stored_at: e.stored_at,
            expires_at: e.expires_at,
        })
    }
}

/// Arguments of `memory_retrieve`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryRetrieve {
    /// Key to read.
    pub key: String,
    /// Context to read from (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `memory_retrieve`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryRetrieved {
    /// False when the key is absent or its TTL has passed.
    pub found: bool,
    /// The key.
    pub key: String,
    /// The value (null when not found).
    pub value: JsonValue,
    /// When it was stored (null when not found).
    pub stored_at: Option<Timestamp>,
    /// When it expires (null: never, or not found).
    pub expires_at: Option<Timestamp>,
}

impl Op for MemoryRetrieve {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let out = match mem
            .short_term()
            .entry(&self.key)?
            .map(common::ShortTermEntry::from)
        {
            Some(e) => MemoryRetrieved {
                found: true,
                key: e.key,
                value: e.value,
                stored_at: Some(e.stored_at),
                expires_at: e.expires_at,
            },
            None => MemoryRetrieved {
                found: false,
                key: self.key,
                value: JsonValue::NULL,
                stored_at: None,
                expires_at: None,
            },
        };
        Done::of(&out)
    }
}

/// Arguments of `memory_forget`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryForget {
    /// Key to remove.
    pub key: String,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `memory_forget`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Forgotten {
    /// True when something (unexpired) was removed.
    pub forgotten: bool,
}

impl Op for MemoryForget {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        Done::of(&Forgotten {
            forgotten: mem.short_term().forget(&self.key)?,
        })
    }
}

// ---------------------------------------------------------------- working

/// Arguments of `working_focus`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkingFocus {
    /// Item to put in focus (a short text or an id). The oldest item is evicted past capacity (default 7).
    pub item: String,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `working_focus`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Focused {
    /// False when the item was already in focus.
    pub added: bool,
    /// Items in focus now, oldest first.
    pub focus: Vec<String>,
}

impl Op for WorkingFocus {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let w = mem.working();
        let added = w.focus(&self.item)?;
        Done::of(&Focused {
            added,
            focus: w.current_focus()?,
        })
    }
}

/// Arguments of `working_get`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkingGet {
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `working_get`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkingState {
    /// The context read.
    pub context: String,
    /// Items in focus, oldest first (bounded, default 7).
    pub focus: Vec<String>,
    /// Workspace items, oldest first (bounded, default 64).
    pub workspace: Vec<common::WorkspaceItem>,
}

impl Op for WorkingGet {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, ctx) = cx.scoped(&self.namespace)?;
        let w = mem.working();
        Done::of(&WorkingState {
            context: ctx,
            focus: w.current_focus()?,
            workspace: list(w.workspace_items()?),
        })
    }
}

/// Arguments of `workspace_add`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceAdd {
    /// Any JSON value to keep at hand. The oldest item is evicted past capacity (default 64).
    pub value: Value,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `workspace_add` and `episode_record`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Created {
    /// Id of the new item.
    pub id: String,
}

impl Op for WorkspaceAdd {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        Done::of(&Created {
            id: mem.working().add_to_workspace(self.value)?,
        })
    }
}

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
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
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
        };
        let id = mem.episodic().record(ep)?;
        let u = uri::episode(&ctx, &id);
        Ok(Done::of(&Created { id })?.changed(u, Some(&ctx), true))
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
        let k = common::Knowledge::from(mem.semantic().store_with_embedding(
            &self.key,
            self.knowledge,
            embedding,
        )?);
        let u = uri::knowledge(&ctx, &k.key);
        let created = k.version == 1;
        Ok(Done::of(&KnowledgeStored {
            success: true,
            key: k.key,
            version: k.version,
            created_at: k.created_at,
            updated_at: k.updated_at,
        })?
        .changed(u, Some(&ctx), created))
    }
}

/// Arguments of `knowledge_retrieve`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeRetrieve {
    /// Key to read.
    pub key: String,
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
        let entry = mem.semantic().get(&self.key)?.map(common::Knowledge::from);
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
        let hits = mem
            .semantic()
            .query_hybrid(&self.text, (offset + limit + 1).min(max), &vq)?;
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
        let k = mem.semantic().update(&self.key, self.patch).map_err(|e| {
            ToolError::from(e).hint_on(NotFound, "Create it with knowledge_store first")
        })?;
        let u = uri::knowledge(&ctx, &k.key);
        Ok(Done::of(&common::Knowledge::from(k))?.changed(u, Some(&ctx), false))
    }
}

// ---------------------------------------------------------------- contexts

/// Arguments of `context_switch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextSwitch {
    /// Context to make active for this connection (`[A-Za-z0-9_.:-]{1,128}`).
    pub target_context: String,
    /// Keep the working memory of the context being left (default true). With false it is cleared.
    #[serde(default)]
    pub preserve_current: Option<bool>,
}

impl Op for ContextSwitch {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        let mut t = vec![Target::Context(self.target_context.clone(), Access::Read)];
        if self.preserve_current == Some(false) {
            t.push(Target::Context(cx.active(), Access::Write));
        }
        Ok(t)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let r = cx.conn.switch_context(
            &self.target_context,
            self.preserve_current.unwrap_or(DEFAULT_PRESERVE_CURRENT),
        )?;
        Done::of(&common::SwitchResult::from(r))
    }
}
