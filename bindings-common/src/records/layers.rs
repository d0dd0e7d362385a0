//! Result records of the layers: contexts, short-term, working, episodic and semantic memory, declared with the [`records!`]
//! macro of the parent, with their conversions from the core's types.

#[allow(unused_imports)]
use super::*;

records! {
    /// Result of `switch_context`.
    pub struct SwitchResult {
        /// Always true when returned.
        pub success: bool,
        /// The context that was active before.
        pub previous_context: String,
        /// True when the target context already held data.
        pub context_loaded: bool,
    }

    /// A short-term item with its timestamps.
    pub struct ShortTermEntry {
        /// Key.
        pub key: String,
        /// The stored value.
        pub value: JsonValue,
        /// When it was stored.
        pub stored_at: Timestamp,
        /// When it expires (no TTL: null).
        pub expires_at: Option<Timestamp>,
    }

    /// An item of the working-memory workspace.
    pub struct WorkspaceItem {
        /// Id returned by `add_to_workspace`.
        pub id: String,
        /// The stored value.
        pub value: JsonValue,
        /// When it was added.
        pub added_at: Timestamp,
    }

    /// An episode.
    pub struct Episode {
        /// UUIDv7 id.
        pub id: String,
        /// When it happened.
        pub timestamp: Timestamp,
        /// One-line summary.
        pub summary: String,
        /// Arbitrary JSON content.
        pub content: JsonValue,
        /// Who took part.
        pub participants: Vec<String>,
        /// Tags.
        pub tags: Vec<String>,
        /// Importance 1..=10.
        pub importance: u32,
        /// How many times it was recorded (1, plus one per duplicate merged into it).
        pub seen_count: i64,
        /// When a duplicate was last merged into it (null: never).
        pub last_seen: Option<Timestamp>,
        /// The earlier episode it duplicates, when recorded with `on_duplicate = "link"`.
        pub duplicate_of: Option<String>,
        /// When it was recorded (its timestamp unless the caller gave another); `as_of`
        /// reads see the episodes recorded by then.
        pub recorded_at: Timestamp,
    }

    /// Result of `record_detailed`: what the duplicate policy did.
    pub struct Recorded {
        /// The episode's id: the new one, or the existing one when the write was skipped or merged.
        pub id: String,
        /// The earlier episode this one duplicates, when one was found (whatever the policy).
        pub duplicate_of: Option<String>,
        /// 1.0 for an exact duplicate, else the Jaccard similarity of the texts' shingles
        /// or the cosine of the embeddings; null without a duplicate.
        pub similarity: Option<f64>,
        /// Whether a new episode was stored (false for `skip` and `merge` of a duplicate).
        pub created: bool,
        /// The policy applied: `"keep"`, `"skip"`, `"merge"` or `"link"`.
        pub on_duplicate: String,
    }

    /// One episode search hit.
    pub struct EpisodeHit {
        /// The episode.
        pub episode: Episode,
        /// BM25 relevance score (0 when the query had no searchable words and hits are by
        /// recency); with an embedding, the fused score (pure vector search: the cosine).
        pub score: f64,
        /// 1-based rank in the text (BM25) list; null when that list did not find the hit.
        pub bm25_rank: Option<i64>,
        /// 1-based rank in the vector list; null when that list did not find the hit.
        pub vector_rank: Option<i64>,
    }

    /// A knowledge entry of semantic memory.
    pub struct Knowledge {
        /// Key.
        pub key: String,
        /// The knowledge (any JSON).
        pub knowledge: JsonValue,
        /// Version number, 1 on first store, +1 on every store/update.
        pub version: i64,
        /// First stored.
        pub created_at: Timestamp,
        /// Last changed.
        pub updated_at: Timestamp,
        /// From `store`: the entry found to duplicate the stored value (this key's own
        /// when its value was already the same), whatever the policy. From `get`: the
        /// entry it was linked to (`on_duplicate = "link"`).
        pub duplicate_of: Option<String>,
        /// When this version starts to hold (default: when it was written).
        pub valid_from: Timestamp,
        /// When it stops holding (exclusive): set by the caller, or by the version that
        /// superseded it; null: open.
        pub valid_until: Option<Timestamp>,
    }

    /// One kept version of a knowledge entry (`history`).
    pub struct KnowledgeVersion {
        /// Version number.
        pub version: i64,
        /// The knowledge at that version.
        pub knowledge: JsonValue,
        /// When that version was written.
        pub recorded_at: Timestamp,
        /// When it starts to hold.
        pub valid_from: Timestamp,
        /// When it stops holding (exclusive; closed by the version that superseded it);
        /// null: open.
        pub valid_until: Option<Timestamp>,
    }

    /// One knowledge query hit.
    pub struct KnowledgeHit {
        /// Key.
        pub key: String,
        /// The knowledge.
        pub knowledge: JsonValue,
        /// BM25 relevance score; with an embedding, the fused score (pure vector search: the cosine).
        pub score: f64,
        /// 1-based rank in the text (BM25) list; null when that list did not find the hit.
        pub bm25_rank: Option<i64>,
        /// 1-based rank in the vector list; null when that list did not find the hit.
        pub vector_rank: Option<i64>,
        /// When the version returned starts to hold (with `as_of`: the version that held then).
        pub valid_from: Timestamp,
        /// When it stops holding (exclusive); null: open.
        pub valid_until: Option<Timestamp>,
    }

    /// Result of `context_store`.
    pub struct ContextStored {
        /// Always true when returned.
        pub success: bool,
        /// When the value expires (no TTL: null).
        pub expires_at: Option<Timestamp>,
    }

    /// Result of `context_retrieve`.
    pub struct ContextValue {
        /// Always true when returned.
        pub success: bool,
        /// The stored value.
        pub value: JsonValue,
        /// When it was stored.
        pub stored_at: Timestamp,
        /// When it expires (no TTL: null).
        pub expires_at: Option<Timestamp>,
    }
}

impl From<memstrata::contexts::SwitchResult> for SwitchResult {
    fn from(r: memstrata::contexts::SwitchResult) -> Self {
        SwitchResult {
            success: true,
            previous_context: r.previous_context,
            context_loaded: r.context_loaded,
        }
    }
}

impl From<memstrata::short_term::ShortTermEntry> for ShortTermEntry {
    fn from(e: memstrata::short_term::ShortTermEntry) -> Self {
        ShortTermEntry {
            key: e.key,
            value: JsonValue(e.value),
            stored_at: ts(e.stored_at),
            expires_at: opt_ts(e.expires_at),
        }
    }
}

impl From<memstrata::working::WorkspaceItem> for WorkspaceItem {
    fn from(w: memstrata::working::WorkspaceItem) -> Self {
        WorkspaceItem {
            id: w.id,
            value: JsonValue(w.value),
            added_at: ts(w.added_at),
        }
    }
}

impl From<memstrata::episodic::Episode> for Episode {
    fn from(e: memstrata::episodic::Episode) -> Self {
        Episode {
            id: e.id,
            timestamp: ts(e.timestamp),
            summary: e.summary,
            content: JsonValue(e.content),
            participants: e.participants,
            tags: e.tags,
            importance: u32::from(e.importance),
            seen_count: i64::from(e.seen_count),
            last_seen: e.last_seen.map(ts),
            duplicate_of: e.duplicate_of,
            recorded_at: ts(e.recorded_at),
        }
    }
}

impl From<memstrata::episodic::Recorded> for Recorded {
    fn from(r: memstrata::episodic::Recorded) -> Self {
        Recorded {
            id: r.id,
            duplicate_of: r.duplicate_of,
            similarity: r.similarity.map(score),
            created: r.created,
            on_duplicate: r.on_duplicate.as_str().to_owned(),
        }
    }
}

impl From<memstrata::episodic::EpisodeHit> for EpisodeHit {
    fn from(h: memstrata::episodic::EpisodeHit) -> Self {
        EpisodeHit {
            episode: h.episode.into(),
            score: score(h.score),
            bm25_rank: h.bm25_rank.map(i64::from),
            vector_rank: h.vector_rank.map(i64::from),
        }
    }
}

impl From<memstrata::semantic::Knowledge> for Knowledge {
    fn from(k: memstrata::semantic::Knowledge) -> Self {
        Knowledge {
            key: k.key,
            knowledge: JsonValue(k.knowledge),
            version: int(k.version),
            created_at: ts(k.created_at),
            updated_at: ts(k.updated_at),
            duplicate_of: k.duplicate_of,
            valid_from: ts(k.valid_from),
            valid_until: k.valid_until.map(ts),
        }
    }
}

impl From<memstrata::semantic::KnowledgeVersion> for KnowledgeVersion {
    fn from(k: memstrata::semantic::KnowledgeVersion) -> Self {
        KnowledgeVersion {
            version: int(k.version),
            knowledge: JsonValue(k.knowledge),
            recorded_at: ts(k.recorded_at),
            valid_from: ts(k.valid_from),
            valid_until: k.valid_until.map(ts),
        }
    }
}

impl From<memstrata::semantic::KnowledgeHit> for KnowledgeHit {
    fn from(h: memstrata::semantic::KnowledgeHit) -> Self {
        KnowledgeHit {
            key: h.key,
            knowledge: JsonValue(h.knowledge),
            score: score(h.score),
            bm25_rank: h.bm25_rank.map(i64::from),
            vector_rank: h.vector_rank.map(i64::from),
            valid_from: ts(h.valid_from),
            valid_until: h.valid_until.map(ts),
        }
    }
}

impl From<memstrata::contexts::ContextStored> for ContextStored {
    fn from(c: memstrata::contexts::ContextStored) -> Self {
        ContextStored {
            success: true,
            expires_at: opt_ts(c.expires_at),
        }
    }
}

impl From<memstrata::contexts::ContextValue> for ContextValue {
    fn from(c: memstrata::contexts::ContextValue) -> Self {
        ContextValue {
            success: true,
            value: JsonValue(c.value),
            stored_at: ts(c.stored_at),
            expires_at: opt_ts(c.expires_at),
        }
    }
}
