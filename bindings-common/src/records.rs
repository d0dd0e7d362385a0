//! Result records: what every binding returns, flattened for every language.
//!
//! One struct per core result, with the field names of the core (snake_case;
//! napi presents them in camelCase, uniffi in each language's case). Compared
//! with the core's own types they are *flattened* for foreign languages:
//!
//! - timestamps are [`Timestamp`], values are [`JsonValue`];
//! - counts, sizes and versions are `i64` (a JS `number`, never a `BigInt`);
//!   importance and compression levels are `u32`; scores and durations `f64`;
//! - enums that are words on the wire (`status: "healthy"`, `"awaiting_action"`,
//!   `"open"`) are strings, documented with their values;
//! - maps are `HashMap<String, _>`.
//!
//! They derive `Serialize` (exactly the JSON the MCP tools return), and, behind
//! features, `schemars::JsonSchema` (`schema`), `uniffi::Record` (`uniffi`) and
//! `#[napi(object)]` (`napi`).

use std::collections::HashMap;

use serde::Serialize;

use crate::types::{JsonValue, Timestamp, int, score};

/// Declares records with every derive a binding needs, and nothing else.
macro_rules! records {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty ),* $(,)?
        }
    )*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
        #[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }
    )*};
}

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

    /// Result of `session_create`.
    pub struct SessionCreated {
        /// UUIDv7 id of the new session.
        pub session_id: String,
        /// When it was created.
        pub created_at: Timestamp,
    }

    /// Result of `session_save`.
    pub struct SessionSaved {
        /// Always true when returned.
        pub success: bool,
        /// The new version number (1, 2, 3… per session).
        pub version: i64,
        /// When it was saved.
        pub saved_at: Timestamp,
    }

    /// Result of `session_restore`.
    pub struct SessionRestored {
        /// Always true when returned.
        pub success: bool,
        /// The saved content, exactly as saved.
        pub content: JsonValue,
        /// The session's metadata (from `session_create`).
        pub metadata: JsonValue,
        /// The version restored.
        pub version: i64,
    }

    /// One session in `session_list`.
    pub struct SessionInfo {
        /// Session id.
        pub session_id: String,
        /// Name given at creation.
        pub name: String,
        /// Metadata given at creation.
        pub metadata: JsonValue,
        /// Created.
        pub created_at: Timestamp,
        /// Last saved.
        pub updated_at: Timestamp,
        /// Newest version, null before the first save.
        pub latest_version: Option<i64>,
        /// Versions kept.
        pub version_count: i64,
    }

    /// One saved version in `session_versions`.
    pub struct SessionVersionInfo {
        /// Version number.
        pub version: i64,
        /// When it was saved.
        pub saved_at: Timestamp,
        /// Compression level it was saved with (0..=3).
        pub compression_level: u32,
        /// Size of the content as canonical JSON.
        pub raw_bytes: i64,
        /// Bytes stored.
        pub stored_bytes: i64,
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

    /// Result of `punch_in`.
    pub struct PunchIn {
        /// Always true when returned.
        pub success: bool,
        /// Id of the new task.
        pub task_id: String,
        /// When the task started.
        pub start_time: Timestamp,
    }

    /// Result of `punch_out`.
    pub struct PunchOut {
        /// Always true when returned.
        pub success: bool,
        /// Seconds between punch-in and punch-out.
        pub duration_seconds: f64,
        /// Number of files modified under the workspace roots (0 unless `detect_files`).
        pub files_modified: i64,
        /// Their paths (bounded).
        pub files: Vec<String>,
    }

    /// A timesheet task.
    pub struct Task {
        /// Task id.
        pub task_id: String,
        /// Who worked on it.
        pub llm_name: String,
        /// What it was about.
        pub task_description: String,
        /// Free text given at punch-in as `context` (none given: null).
        pub context: Option<String>,
        /// The Memstrata context (namespace) the task and its episode belong to.
        pub namespace: String,
        /// `"open"` or `"closed"`.
        pub status: String,
        /// Punch-in time.
        pub start_time: Timestamp,
        /// Punch-out time (open: null).
        pub end_time: Option<Timestamp>,
        /// Duration in seconds (open: null).
        pub duration_seconds: Option<f64>,
        /// The punch-out summary (open: null).
        pub summary: Option<String>,
        /// Files modified (punch-out with `detect_files`).
        pub files_modified: i64,
        /// Their paths.
        pub files: Vec<String>,
        /// The episode recorded at punch-out (open: null).
        pub episode_id: Option<String>,
    }

    /// One model's line in a timesheet report.
    pub struct LlmTimesheet {
        /// The model.
        pub llm_name: String,
        /// Tasks in the period.
        pub tasks: i64,
        /// Of which still open.
        pub open_tasks: i64,
        /// Seconds on closed tasks.
        pub total_seconds: f64,
        /// Files modified.
        pub files_modified: i64,
        /// Their paths (bounded).
        pub files: Vec<String>,
    }

    /// Result of `timesheet_report`.
    pub struct TimesheetReport {
        /// Start of the period (null: from the first task).
        pub since: Option<Timestamp>,
        /// End of the period (null: now).
        pub until: Option<Timestamp>,
        /// When the report was made.
        pub generated_at: Timestamp,
        /// Tasks in the period.
        pub tasks: i64,
        /// Seconds on closed tasks.
        pub total_seconds: f64,
        /// One line per model.
        pub llms: Vec<LlmTimesheet>,
    }

    /// Latency and counts of one operation.
    pub struct OpMetrics {
        /// Calls.
        pub count: i64,
        /// Calls that failed.
        pub errors: i64,
        /// Median latency, µs.
        pub p50_us: i64,
        /// 95th percentile, µs.
        pub p95_us: i64,
        /// 99th percentile, µs.
        pub p99_us: i64,
        /// Slowest call, µs.
        pub max_us: i64,
    }

    /// Items per layer (all contexts).
    pub struct ItemCounts {
        /// Short-term items (expired but not yet swept included).
        pub short_term: i64,
        /// Focus and workspace items.
        pub working: i64,
        /// Episodes.
        pub episodes: i64,
        /// Knowledge entries.
        pub semantic: i64,
        /// Procedures.
        pub procedures: i64,
        /// Procedure runs.
        pub runs: i64,
        /// Sessions.
        pub sessions: i64,
        /// Session versions kept.
        pub session_versions: i64,
        /// Timesheet tasks.
        pub tasks: i64,
    }

    /// State of the full-text index.
    pub struct IndexStats {
        /// Documents in the index.
        pub documents: i64,
        /// Index segments.
        pub segments: i64,
        /// Last change applied to the index writer.
        pub applied_seq: i64,
        /// Last change committed (searchable after reload).
        pub committed_seq: i64,
        /// Changes written to the store but not yet committed to the index.
        pub pending: i64,
        /// Entries in the index change log.
        pub log_entries: i64,
    }

    /// The metrics part of `status`.
    pub struct StatusMetrics {
        /// Per-operation counts and latency percentiles.
        pub operations: HashMap<String, OpMetrics>,
        /// Items per layer.
        pub items: ItemCounts,
        /// Bytes the store occupies on disk.
        pub bytes_on_disk: i64,
        /// Index state.
        pub index: IndexStats,
    }

    /// One of the most recently active sessions listed by `status`.
    pub struct ActiveSession {
        /// Session id.
        pub session_id: String,
        /// Name given at creation.
        pub name: String,
        /// Created.
        pub created_at: Timestamp,
    }

    /// Result of `status`.
    pub struct Status {
        /// `"healthy"`, `"degraded"` or `"error"`.
        pub status: String,
        /// Engine version.
        pub version: String,
        /// Seconds since the engine was opened.
        pub uptime_seconds: f64,
        /// The most recently active sessions (last save, else creation), newest
        /// first, at most `ACTIVE_SESSIONS_LIMIT` (20) (with `include_sessions`).
        pub active_sessions: Option<Vec<ActiveSession>>,
        /// Sessions in the store, listed or not (with `include_sessions`).
        pub session_count: Option<i64>,
        /// Metrics (with `include_metrics`).
        pub metrics: Option<StatusMetrics>,
        /// What makes the status other than healthy.
        pub issues: Vec<String>,
        /// Every context with a retention policy or evictions.
        pub retention: Vec<RetentionStatus>,
    }

    /// Result of `optimize`.
    pub struct OptimizeReport {
        /// Always true when returned.
        pub success: bool,
        /// Bytes on disk before minus after (may be negative).
        pub bytes_saved: i64,
        /// What each stage did.
        pub optimization_details: JsonValue,
    }

    /// Result of `export`.
    pub struct ExportStats {
        /// Records written.
        pub records: i64,
        /// Records per kind.
        pub counts: HashMap<String, i64>,
    }

    /// Result of `import`.
    pub struct ImportStats {
        /// Records read.
        pub records: i64,
        /// Records per kind.
        pub counts: HashMap<String, i64>,
    }

    /// A learned procedure.
    pub struct Procedure {
        /// Name.
        pub name: String,
        /// Its steps, each as the JSON object it was learned from
        /// (`{id, description, action, parameters, next?}`).
        pub steps: Vec<JsonValue>,
        /// 1 on learn, +1 on every update.
        pub version: i64,
        /// First learned.
        pub created_at: Timestamp,
        /// Last updated.
        pub updated_at: Timestamp,
    }

    /// The host action a paused run waits for.
    pub struct PendingAction {
        /// Step id.
        pub step: String,
        /// The step's description.
        pub description: String,
        /// The action with no handler.
        pub action: String,
        /// Its resolved parameters.
        pub parameters: JsonValue,
    }

    /// One executed step.
    pub struct TraceEntry {
        /// Step id.
        pub step: String,
        /// Action run.
        pub action: String,
        /// Resolved parameters.
        pub parameters: JsonValue,
        /// Output (null on error).
        pub output: JsonValue,
        /// Why the step failed (null: it did not).
        pub error: Option<String>,
        /// When it ran.
        pub at: Timestamp,
    }

    /// A procedure run.
    pub struct Run {
        /// Run id (for `resume` and `run`).
        pub run_id: String,
        /// Procedure name.
        pub procedure: String,
        /// Procedure version the run uses.
        pub procedure_version: i64,
        /// Context it runs in.
        pub context: String,
        /// `"running"`, `"awaiting_action"`, `"completed"` or `"failed"`.
        pub status: String,
        /// The parameters it was started with.
        pub params: JsonValue,
        /// Output of every step so far, by step id (an object).
        pub outputs: JsonValue,
        /// Steps executed, in order.
        pub trace: Vec<TraceEntry>,
        /// The action it waits for (`awaiting_action` only).
        pub pending: Option<PendingAction>,
        /// Why it failed (`failed` only).
        pub error: Option<String>,
        /// Steps executed.
        pub steps_executed: i64,
        /// Episode recorded when it finished.
        pub episode_id: Option<String>,
        /// Started.
        pub started_at: Timestamp,
        /// Finished (null while running or paused).
        pub finished_at: Option<Timestamp>,
    }
}

fn ts(t: chrono::DateTime<chrono::Utc>) -> Timestamp {
    Timestamp(t)
}

fn opt_ts(t: Option<chrono::DateTime<chrono::Utc>>) -> Option<Timestamp> {
    t.map(Timestamp)
}

fn counts(m: std::collections::BTreeMap<String, u64>) -> HashMap<String, i64> {
    m.into_iter().map(|(k, v)| (k, int(v))).collect()
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

impl From<memstrata::sessions::SessionCreated> for SessionCreated {
    fn from(c: memstrata::sessions::SessionCreated) -> Self {
        SessionCreated {
            session_id: c.session_id,
            created_at: ts(c.created_at),
        }
    }
}

impl From<memstrata::sessions::SessionSaved> for SessionSaved {
    fn from(s: memstrata::sessions::SessionSaved) -> Self {
        SessionSaved {
            success: true,
            version: int(s.version),
            saved_at: ts(s.saved_at),
        }
    }
}

impl From<memstrata::sessions::SessionRestored> for SessionRestored {
    fn from(r: memstrata::sessions::SessionRestored) -> Self {
        SessionRestored {
            success: true,
            content: JsonValue(r.content),
            metadata: JsonValue(r.metadata),
            version: int(r.version),
        }
    }
}

impl From<memstrata::sessions::SessionInfo> for SessionInfo {
    fn from(s: memstrata::sessions::SessionInfo) -> Self {
        SessionInfo {
            session_id: s.session_id,
            name: s.name,
            metadata: JsonValue(s.metadata),
            created_at: ts(s.created_at),
            updated_at: ts(s.updated_at),
            latest_version: s.latest_version.map(int),
            version_count: int(s.version_count),
        }
    }
}

impl From<memstrata::sessions::SessionVersionInfo> for SessionVersionInfo {
    fn from(v: memstrata::sessions::SessionVersionInfo) -> Self {
        SessionVersionInfo {
            version: int(v.version),
            saved_at: ts(v.saved_at),
            compression_level: u32::from(v.compression_level),
            raw_bytes: int(v.raw_bytes),
            stored_bytes: int(v.stored_bytes),
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

impl From<memstrata::timesheet::PunchIn> for PunchIn {
    fn from(p: memstrata::timesheet::PunchIn) -> Self {
        PunchIn {
            success: true,
            task_id: p.task_id,
            start_time: ts(p.start_time),
        }
    }
}

impl From<memstrata::timesheet::PunchOut> for PunchOut {
    fn from(p: memstrata::timesheet::PunchOut) -> Self {
        PunchOut {
            success: true,
            duration_seconds: p.duration_seconds,
            files_modified: int(p.files_modified),
            files: p.files,
        }
    }
}

impl From<memstrata::timesheet::Task> for Task {
    fn from(t: memstrata::timesheet::Task) -> Self {
        Task {
            task_id: t.task_id,
            llm_name: t.llm_name,
            task_description: t.task_description,
            context: t.context,
            namespace: t.namespace,
            status: match t.status {
                memstrata::timesheet::TaskStatus::Open => "open",
                memstrata::timesheet::TaskStatus::Closed => "closed",
            }
            .to_owned(),
            start_time: ts(t.start_time),
            end_time: opt_ts(t.end_time),
            duration_seconds: t.duration_seconds,
            summary: t.summary,
            files_modified: int(t.files_modified),
            files: t.files,
            episode_id: t.episode_id,
        }
    }
}

impl From<memstrata::timesheet::LlmTimesheet> for LlmTimesheet {
    fn from(l: memstrata::timesheet::LlmTimesheet) -> Self {
        LlmTimesheet {
            llm_name: l.llm_name,
            tasks: int(l.tasks),
            open_tasks: int(l.open_tasks),
            total_seconds: l.total_seconds,
            files_modified: int(l.files_modified),
            files: l.files,
        }
    }
}

impl From<memstrata::timesheet::TimesheetReport> for TimesheetReport {
    fn from(r: memstrata::timesheet::TimesheetReport) -> Self {
        TimesheetReport {
            since: opt_ts(r.since),
            until: opt_ts(r.until),
            generated_at: ts(r.generated_at),
            tasks: int(r.tasks),
            total_seconds: r.total_seconds,
            llms: r.llms.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<memstrata::admin::OpMetrics> for OpMetrics {
    fn from(m: memstrata::admin::OpMetrics) -> Self {
        OpMetrics {
            count: int(m.count),
            errors: int(m.errors),
            p50_us: int(m.p50_us),
            p95_us: int(m.p95_us),
            p99_us: int(m.p99_us),
            max_us: int(m.max_us),
        }
    }
}

impl From<memstrata::admin::ItemCounts> for ItemCounts {
    fn from(c: memstrata::admin::ItemCounts) -> Self {
        ItemCounts {
            short_term: int(c.short_term),
            working: int(c.working),
            episodes: int(c.episodes),
            semantic: int(c.semantic),
            procedures: int(c.procedures),
            runs: int(c.runs),
            sessions: int(c.sessions),
            session_versions: int(c.session_versions),
            tasks: int(c.tasks),
        }
    }
}

impl From<memstrata::admin::IndexStats> for IndexStats {
    fn from(i: memstrata::admin::IndexStats) -> Self {
        IndexStats {
            documents: int(i.documents),
            segments: int(i.segments),
            applied_seq: int(i.applied_seq),
            committed_seq: int(i.committed_seq),
            pending: int(i.pending),
            log_entries: int(i.log_entries),
        }
    }
}

impl From<memstrata::admin::StatusMetrics> for StatusMetrics {
    fn from(m: memstrata::admin::StatusMetrics) -> Self {
        StatusMetrics {
            operations: m
                .operations
                .into_iter()
                .map(|(k, v)| (k, v.into()))
                .collect(),
            items: m.items.into(),
            bytes_on_disk: int(m.bytes_on_disk),
            index: m.index.into(),
        }
    }
}

impl From<memstrata::admin::ActiveSession> for ActiveSession {
    fn from(a: memstrata::admin::ActiveSession) -> Self {
        ActiveSession {
            session_id: a.session_id,
            name: a.name,
            created_at: ts(a.created_at),
        }
    }
}

impl From<memstrata::admin::Status> for Status {
    fn from(s: memstrata::admin::Status) -> Self {
        Status {
            status: s.status.as_str().to_owned(),
            version: s.version,
            uptime_seconds: s.uptime_seconds,
            active_sessions: s
                .active_sessions
                .map(|l| l.into_iter().map(Into::into).collect()),
            session_count: s.session_count.map(int),
            metrics: s.metrics.map(Into::into),
            issues: s.issues,
            retention: s.retention.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<memstrata::admin::OptimizeReport> for OptimizeReport {
    fn from(r: memstrata::admin::OptimizeReport) -> Self {
        OptimizeReport {
            success: true,
            bytes_saved: r.bytes_saved,
            optimization_details: JsonValue(r.optimization_details),
        }
    }
}

impl From<memstrata::admin::ExportStats> for ExportStats {
    fn from(s: memstrata::admin::ExportStats) -> Self {
        ExportStats {
            records: int(s.records),
            counts: counts(s.counts),
        }
    }
}

impl From<memstrata::admin::ImportStats> for ImportStats {
    fn from(s: memstrata::admin::ImportStats) -> Self {
        ImportStats {
            records: int(s.records),
            counts: counts(s.counts),
        }
    }
}

impl From<memstrata::procedural::Procedure> for Procedure {
    fn from(p: memstrata::procedural::Procedure) -> Self {
        Procedure {
            name: p.name,
            steps: p
                .steps
                .iter()
                .map(|s| JsonValue(serde_json::to_value(s).unwrap_or_default()))
                .collect(),
            version: int(p.version),
            created_at: ts(p.created_at),
            updated_at: ts(p.updated_at),
        }
    }
}

impl From<memstrata::procedural::PendingAction> for PendingAction {
    fn from(p: memstrata::procedural::PendingAction) -> Self {
        PendingAction {
            step: p.step,
            description: p.description,
            action: p.action,
            parameters: JsonValue(p.parameters),
        }
    }
}

impl From<memstrata::procedural::TraceEntry> for TraceEntry {
    fn from(t: memstrata::procedural::TraceEntry) -> Self {
        TraceEntry {
            step: t.step,
            action: t.action,
            parameters: JsonValue(t.parameters),
            output: JsonValue(t.output),
            error: t.error,
            at: ts(t.at),
        }
    }
}

impl From<memstrata::procedural::Run> for Run {
    fn from(r: memstrata::procedural::Run) -> Self {
        Run {
            run_id: r.run_id,
            procedure: r.procedure,
            procedure_version: int(r.procedure_version),
            context: r.context,
            status: r.status.as_str().to_owned(),
            params: JsonValue(r.params),
            outputs: JsonValue(serde_json::Value::Object(r.outputs)),
            trace: r.trace.into_iter().map(Into::into).collect(),
            pending: r.pending.map(Into::into),
            error: r.error,
            steps_executed: int(r.steps_executed),
            episode_id: r.episode_id,
            started_at: ts(r.started_at),
            finished_at: opt_ts(r.finished_at),
        }
    }
}

mod retention;
pub use retention::{Eviction, Retention, RetentionStatus};

/// Convert a list of core results.
pub fn list<T, R: From<T>>(items: Vec<T>) -> Vec<R> {
    items.into_iter().map(R::from).collect()
}
