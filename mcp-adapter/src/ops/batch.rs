//! The batch write tools: `episode_record_many` and `knowledge_store_many`, one
//! core batch call each (one transaction, one index batch, all or nothing).

use memstrata_bindings_common::{self as common, Embedding, JsonValue, Timestamp, items};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::long_term::{KnowledgeStored, OnDuplicateName};
use super::{Cx, Done, Op, ctx_target};
use crate::error::ToolResult;
use crate::protocol::uri;
use crate::security::auth::{Access, Target};

/// One episode of `episode_record_many`: the arguments of `episode_record` without `namespace`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodeItemArgs {
    /// One-line summary of what happened (required, searched with a boost).
    pub summary: String,
    /// Any JSON details (its text is searched).
    #[serde(default)]
    pub content: Option<Value>,
    /// Who took part.
    #[serde(default)]
    pub participants: Vec<String>,
    /// Tags (at most 64).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Importance 1..=10 (default 5).
    #[serde(default)]
    #[schemars(range(min = 1, max = 10))]
    pub importance: Option<u32>,
    /// When it happened, RFC 3339 (default: now).
    #[serde(default)]
    pub timestamp: Option<chrono::DateTime<chrono::Utc>>,
    /// The host's embedding of this episode (1..=4096 finite numbers; one dimension per context).
    #[serde(default)]
    pub embedding: Option<Vec<f64>>,
    /// What to do when an earlier episode (stored, or an earlier item of this call)
    /// duplicates this one: keep, skip, merge or link, as in episode_record.
    /// Default: the context's policy.
    #[serde(default)]
    pub on_duplicate: Option<OnDuplicateName>,
}

/// Arguments of `episode_record_many`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodeRecordMany {
    /// The episodes, in order (at most 10,000 and 64 MiB encoded per call). All or nothing:
    /// a bad item fails the call with its field named `items[i].field` and nothing is stored.
    pub items: Vec<EpisodeItemArgs>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `episode_record_many`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RecordedMany {
    /// The ids of the episodes, in the order of `items` (the existing episode's
    /// for an item skipped or merged as a duplicate).
    pub ids: Vec<String>,
    /// What each item's duplicate policy did, in the order of `items` (as episode_record returns).
    pub results: Vec<common::Recorded>,
}

impl Op for EpisodeRecordMany {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, ctx) = cx.scoped(&self.namespace)?;
        let list = self
            .items
            .into_iter()
            .map(|it| common::EpisodeItem {
                summary: it.summary,
                content: it.content.map(JsonValue),
                participants: Some(it.participants),
                tags: Some(it.tags),
                importance: it.importance,
                timestamp: it.timestamp.map(Timestamp),
                embedding: it.embedding.map(Embedding),
                on_duplicate: it.on_duplicate.map(|p| p.as_str().to_owned()),
            })
            .collect();
        let results: Vec<common::Recorded> = mem
            .episodic()
            .record_many_detailed(items::episodes(list)?)?
            .into_iter()
            .map(common::Recorded::from)
            .collect();
        let ids: Vec<String> = results.iter().map(|r| r.id.clone()).collect();
        let mut done = Done::of(&RecordedMany {
            ids: ids.clone(),
            results,
        })?;
        for (i, id) in ids.iter().enumerate() {
            done = done.changed(uri::episode(&ctx, id), Some(&ctx), i == 0);
        }
        Ok(done)
    }
}

/// One entry of `knowledge_store_many`: the arguments of `knowledge_store` without `namespace`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeItemArgs {
    /// Key of the entry (at most 1 KiB).
    pub key: String,
    /// The knowledge, any JSON. Replaces the current entry (the old version stays in history).
    pub knowledge: Value,
    /// The host's embedding of the entry (1..=4096 finite numbers; one dimension per context).
    #[serde(default)]
    pub embedding: Option<Vec<f64>>,
    /// What to do when another entry (stored, or an earlier item of this call) or
    /// this key's current value duplicates the value: keep, skip, merge or link,
    /// as in knowledge_store. Default: the context's policy.
    #[serde(default)]
    pub on_duplicate: Option<OnDuplicateName>,
    /// When this version starts to hold, RFC 3339 (default: now), as in knowledge_store.
    #[serde(default)]
    pub valid_from: Option<chrono::DateTime<chrono::Utc>>,
    /// When it stops holding, RFC 3339, exclusive (default: open).
    #[serde(default)]
    pub valid_until: Option<chrono::DateTime<chrono::Utc>>,
}

/// Arguments of `knowledge_store_many`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeStoreMany {
    /// The entries, applied in order (a key given twice ends with its last value; at most
    /// 10,000 per call). All or nothing: a bad item fails the call with its field named
    /// `items[i].field` and nothing is stored.
    pub items: Vec<KnowledgeItemArgs>,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `knowledge_store_many`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KnowledgeStoredMany {
    /// The new entries (key, version, timestamps), in the order of `items`.
    pub entries: Vec<KnowledgeStored>,
}

impl Op for KnowledgeStoreMany {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, ctx) = cx.scoped(&self.namespace)?;
        let list = self
            .items
            .into_iter()
            .map(|it| common::KnowledgeItem {
                key: it.key,
                knowledge: JsonValue(it.knowledge),
                embedding: it.embedding.map(Embedding),
                on_duplicate: it.on_duplicate.map(|p| p.as_str().to_owned()),
                valid_from: it.valid_from.map(Timestamp),
                valid_until: it.valid_until.map(Timestamp),
            })
            .collect();
        let stored = mem.semantic().store_many(items::knowledge(list)?)?;
        let entries: Vec<KnowledgeStored> = stored
            .into_iter()
            .map(common::Knowledge::from)
            .map(KnowledgeStored::of)
            .collect();
        let changes: Vec<(String, bool)> = entries
            .iter()
            .map(|k| (uri::knowledge(&ctx, &k.key), k.version == 1))
            .collect();
        let mut done = Done::of(&KnowledgeStoredMany { entries })?;
        for (u, created) in changes {
            done = done.changed(u, Some(&ctx), created);
        }
        Ok(done)
    }
}
