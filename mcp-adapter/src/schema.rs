//! JSON Schemas of the core's result types, for tool `outputSchema`s.
//!
//! The core's records derive `Serialize` only; these schema-only mirrors
//! describe exactly what they serialize to (field names of DESIGN.md §2,
//! timestamps as RFC 3339 strings, `Option` fields present as `null`).
//! Tools serialize the core values themselves; the integration tests check
//! every `structuredContent` against its tool's `outputSchema`.

#![allow(dead_code, missing_docs)]

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// A workspace item of working memory.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkspaceItem {
    /// Id returned by `workspace_add`.
    pub id: String,
    /// The stored value.
    pub value: Value,
    /// When it was added.
    pub added_at: DateTime<Utc>,
}

/// An episode.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Episode {
    /// UUIDv7 id.
    pub id: String,
    /// When it happened.
    pub timestamp: DateTime<Utc>,
    /// One-line summary.
    pub summary: String,
    /// Arbitrary JSON content.
    pub content: Value,
    /// Who took part.
    pub participants: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Importance 1..=10.
    pub importance: u8,
}

/// One episode search hit.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EpisodeHit {
    /// The episode.
    pub episode: Episode,
    /// BM25 relevance score (0 when the query had no searchable words and hits are by recency).
    pub score: f32,
}

/// A knowledge entry of semantic memory.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Knowledge {
    /// Key.
    pub key: String,
    /// The knowledge (any JSON).
    pub knowledge: Value,
    /// Version number, 1 on first store, +1 on every store/update.
    pub version: u64,
    /// First stored.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

/// One knowledge query hit.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KnowledgeHit {
    /// Key.
    pub key: String,
    /// The knowledge.
    pub knowledge: Value,
    /// BM25 relevance score.
    pub score: f32,
}

/// Result of `context_switch`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SwitchResult {
    /// Always true when returned.
    pub success: bool,
    /// The context that was active before.
    pub previous_context: String,
    /// True when the target context already held data.
    pub context_loaded: bool,
}

/// Result of `session_create`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionCreated {
    /// UUIDv7 id of the new session.
    pub session_id: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// Result of `session_save`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionSaved {
    /// Always true when returned.
    pub success: bool,
    /// The new version number (1, 2, 3… per session).
    pub version: u64,
    /// When it was saved.
    pub saved_at: DateTime<Utc>,
}

/// Result of `session_restore`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionRestored {
    /// Always true when returned.
    pub success: bool,
    /// The saved content, exactly as saved.
    pub content: Value,
    /// The session's metadata (from `session_create`).
    pub metadata: Value,
    /// The version restored.
    pub version: u64,
}

/// A session as listed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionInfo {
    /// Session id.
    pub session_id: String,
    /// Name given at creation.
    pub name: String,
    /// Metadata given at creation.
    pub metadata: Value,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last save (or creation).
    pub updated_at: DateTime<Utc>,
    /// Newest stored version, null before the first save.
    pub latest_version: Option<u64>,
    /// Versions currently stored.
    pub version_count: u64,
}

/// One stored session version.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionVersionInfo {
    /// Version number.
    pub version: u64,
    /// When it was saved.
    pub saved_at: DateTime<Utc>,
    /// Level it was saved at (0..=3).
    pub compression_level: u8,
    /// Size of the content as canonical MessagePack.
    pub raw_bytes: u64,
    /// Size of the stored record.
    pub stored_bytes: u64,
}

/// Result of `context_store`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ContextStored {
    /// Always true when returned.
    pub success: bool,
    /// When the value expires (null: no TTL).
    pub expires_at: Option<DateTime<Utc>>,
}

/// Result of `context_retrieve`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ContextValue {
    /// Always true when returned.
    pub success: bool,
    /// The stored value.
    pub value: Value,
    /// When it was stored.
    pub stored_at: DateTime<Utc>,
    /// When it expires (null: no TTL).
    pub expires_at: Option<DateTime<Utc>>,
}

/// Result of `llm_punch_in`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PunchIn {
    /// Always true when returned.
    pub success: bool,
    /// Id of the new task (pass it to llm_punch_out).
    pub task_id: String,
    /// When the task started.
    pub start_time: DateTime<Utc>,
}

/// Result of `llm_punch_out`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PunchOut {
    /// Always true when returned.
    pub success: bool,
    /// Seconds between punch-in and punch-out.
    pub duration_seconds: f64,
    /// Files under the workspace roots modified during the task (0 without detection).
    pub files_modified: u64,
    /// Those files, relative to their root, sorted (at most 100 listed here).
    pub files: Vec<String>,
}

/// Overall health.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Everything answers and the index keeps up.
    Healthy,
    /// Works, but the index lags far behind or its writer failed.
    Degraded,
    /// The store could not be read.
    Error,
}

/// Latency summary of one operation, in microseconds.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OpMetrics {
    /// Calls recorded.
    pub count: u64,
    /// Failed calls.
    pub errors: u64,
    /// Median latency (µs).
    pub p50_us: u64,
    /// 95th percentile (µs).
    pub p95_us: u64,
    /// 99th percentile (µs).
    pub p99_us: u64,
    /// Slowest call (µs).
    pub max_us: u64,
}

/// Items per layer (all contexts).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ItemCounts {
    /// Unexpired short-term items.
    pub short_term: u64,
    /// Focus plus workspace items.
    pub working: u64,
    /// Episodes.
    pub episodes: u64,
    /// Knowledge entries.
    pub semantic: u64,
    /// Procedures.
    pub procedures: u64,
    /// Procedure runs.
    pub runs: u64,
    /// Sessions.
    pub sessions: u64,
    /// Stored session versions.
    pub session_versions: u64,
    /// Timesheet tasks.
    pub tasks: u64,
}

/// Index state and lag.
#[derive(Debug, Serialize, JsonSchema)]
pub struct IndexStats {
    /// Documents in the index.
    pub documents: u64,
    /// Index segments.
    pub segments: u64,
    /// Last sequence applied to the writer.
    pub applied_seq: u64,
    /// Last sequence committed.
    pub committed_seq: u64,
    /// Uncommitted index changes.
    pub pending: u64,
    /// Index-log records not yet covered by a commit.
    pub log_entries: u64,
}

/// Metrics part of the status.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatusMetrics {
    /// Per-operation counts and latency percentiles since open.
    pub operations: std::collections::BTreeMap<String, OpMetrics>,
    /// Items per layer.
    pub items: ItemCounts,
    /// Size of the store directory in bytes.
    pub bytes_on_disk: u64,
    /// Index state and lag.
    pub index: IndexStats,
}

/// Result of `system_status`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Status {
    /// healthy, degraded or error.
    pub status: Health,
    /// Engine version.
    pub version: String,
    /// Seconds since the engine was opened.
    pub uptime_seconds: f64,
    /// Sessions in the store (null unless include_sessions).
    pub active_sessions: Option<u64>,
    /// Metrics (null unless include_metrics).
    pub metrics: Option<StatusMetrics>,
    /// Why the status is not healthy (empty when it is).
    pub issues: Vec<String>,
}

/// Result of `memory_optimize`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OptimizeReport {
    /// Always true when returned.
    pub success: bool,
    /// Store directory size before minus after (may be 0 or negative).
    pub bytes_saved: i64,
    /// What each step did.
    pub optimization_details: Value,
}

/// A conditional branch of a step.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Branch {
    /// CEL expression over `params`, `steps.<id>.output` and `last`; must be a bool.
    pub condition: String,
    /// Step id to go to when the condition is true.
    pub next: String,
}

/// Where a step goes next.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Next {
    /// Always go to this step id.
    Step(String),
    /// The first branch whose condition is true (none: the run ends).
    Branches(Vec<Branch>),
}

/// One step of a procedure.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Step {
    /// Unique id within the procedure.
    pub id: String,
    /// Free text, shown when the step pauses for an action.
    #[serde(default)]
    pub description: String,
    /// A built-in action (set, fail, short_term.store, short_term.retrieve, episodic.record, episodic.search, semantic.store, semantic.retrieve, working.focus, workspace.add) or any other name: the run pauses there and you perform it.
    pub action: String,
    /// Parameters (any JSON, default {}); strings may hold `{{ expr }}` CEL templates over params, steps and last.
    #[serde(default)]
    pub parameters: Value,
    /// Next step id, or a list of {condition, next} branches; absent: the run ends after this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Next>,
}

/// A stored procedure.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Procedure {
    /// Name (unique per context).
    pub name: String,
    /// The steps; execution starts at the first.
    pub steps: Vec<Step>,
    /// 1 on learn, +1 on every update.
    pub version: u64,
    /// When it was learned.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// State of a run.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Being executed.
    Running,
    /// Paused on a step whose action you must perform; then call procedure_resume.
    AwaitingAction,
    /// Ended normally.
    Completed,
    /// Ended by a failing step, a bad condition or the step limit (see error).
    Failed,
}

/// The step a paused run waits on.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PendingAction {
    /// Step id.
    pub step: String,
    /// The step's description: what to do.
    pub description: String,
    /// Action name.
    pub action: String,
    /// Resolved parameters.
    pub parameters: Value,
}

/// One executed step.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TraceEntry {
    /// Step id.
    pub step: String,
    /// Action name.
    pub action: String,
    /// Resolved parameters.
    pub parameters: Value,
    /// Output (null when the step failed).
    pub output: Value,
    /// Why the step failed, if it did.
    pub error: Option<String>,
    /// When the step finished.
    pub at: DateTime<Utc>,
}

/// A procedure run.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Run {
    /// Run id (pass it to procedure_resume).
    pub run_id: String,
    /// Procedure name.
    pub procedure: String,
    /// Version of the procedure the run executes.
    pub procedure_version: u64,
    /// Context the run's built-in actions operate in.
    pub context: String,
    /// running, awaiting_action, completed or failed.
    pub status: RunStatus,
    /// The params given to procedure_execute.
    pub params: Value,
    /// Output of each executed step, by step id.
    pub outputs: serde_json::Map<String, Value>,
    /// Executed steps, in order (the most recent 100 when longer; see trace_omitted).
    pub trace: Vec<TraceEntry>,
    /// Older trace entries left out of this result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_omitted: Option<u64>,
    /// The step awaited when status is awaiting_action.
    pub pending: Option<PendingAction>,
    /// Why the run failed.
    pub error: Option<String>,
    /// Steps started so far.
    pub steps_executed: u64,
    /// Episode recorded when the run finished.
    pub episode_id: Option<String>,
    /// When procedure_execute was called.
    pub started_at: DateTime<Utc>,
    /// When it completed or failed.
    pub finished_at: Option<DateTime<Utc>>,
}
