//! Continuity tools: sessions, context store/retrieve, the timesheet, status, optimize.
//!
//! Argument and result field names are those of the original continuity specification
//! (docs/mcp.md lists them).

use memstrata_bindings_common as common;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Cx, Done, Op, ctx_target};
use crate::error::{ToolError, ToolResult};
use crate::protocol::uri;
use crate::security::auth::{Access, Target};
use memstrata_bindings_common::ErrorCode::NotFound;
use memstrata_bindings_common::defaults::{
    DEFAULT_DETECT_FILES, DEFAULT_INCLUDE_METRICS, DEFAULT_INCLUDE_SESSIONS,
};
use memstrata_bindings_common::options::{compression_level, optimize_level, ttl};

/// Files listed by `llm_punch_out` (the count is always exact).
pub const MAX_LISTED_FILES: usize = 100;

fn global(access: Access) -> ToolResult<Vec<Target>> {
    Ok(vec![Target::Global(access)])
}

// ---------------------------------------------------------------- sessions

/// Arguments of `session_create`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCreate {
    /// Human-readable name (e.g. the task), 1..=1024 bytes.
    pub name: String,
    /// Any JSON returned by every restore (e.g. repository, branch, goal).
    #[serde(default)]
    pub metadata: Option<Value>,
}

impl Op for SessionCreate {
    fn targets(&self, _cx: &Cx) -> ToolResult<Vec<Target>> {
        global(Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let r = cx.mem.sessions().create(
            &self.name,
            self.metadata.unwrap_or(Value::Object(Default::default())),
        )?;
        let u = uri::session(&r.session_id);
        Ok(Done::of(&common::SessionCreated::from(r))?.changed(u, None, true))
    }
}

/// Arguments of `session_save`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSave {
    /// Session id from session_create.
    pub session_id: String,
    /// The state to save (any JSON, at most 16 MiB). Each save is a new version 1, 2, 3…
    pub content: Value,
    /// 0 = uncompressed, 1 = lz4 (default), 2 = structure-split + lz4, 3 = delta against the previous version.
    #[serde(default)]
    #[schemars(range(min = 0, max = 3))]
    pub compression_level: Option<u8>,
}

impl Op for SessionSave {
    fn targets(&self, _cx: &Cx) -> ToolResult<Vec<Target>> {
        global(Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let r = cx.mem.sessions().save(
            &self.session_id,
            self.content,
            compression_level(self.compression_level.map(u32::from))?,
        )?;
        Ok(Done::of(&common::SessionSaved::from(r))?.changed(
            uri::session(&self.session_id),
            None,
            false,
        ))
    }
}

/// Arguments of `session_restore`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRestore {
    /// Session id from session_create.
    pub session_id: String,
    /// Version to restore (default: the latest).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub version: Option<u64>,
}

impl Op for SessionRestore {
    fn targets(&self, _cx: &Cx) -> ToolResult<Vec<Target>> {
        global(Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let r = cx
            .mem
            .sessions()
            .restore(&self.session_id, self.version)
            .map_err(|e| {
                ToolError::from(e).hint_on(
                    NotFound,
                    if self.version.is_none() {
                        "Save a version with session_save first, or check the session_id"
                    } else {
                        "Omit `version` to restore the latest"
                    },
                )
            })?;
        Done::of(&common::SessionRestored::from(r))
    }
}

// ---------------------------------------------------------------- contexts

/// Arguments of `context_store`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextStore {
    /// Key (1..=1024 bytes). Replaces any previous value.
    pub key: String,
    /// Any JSON value (at most 16 MiB).
    pub value: Value,
    /// Time to live in seconds (> 0); without it the value never expires.
    #[serde(default)]
    pub ttl: Option<f64>,
    /// Context to store in (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

impl Op for ContextStore {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let r = cx.mem.contexts().store(
            &self.key,
            self.value,
            ttl(self.ttl)?,
            self.namespace.as_deref(),
        )?;
        Done::of(&common::ContextStored::from(r))
    }
}

/// Arguments of `context_set_on_duplicate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextSetOnDuplicate {
    /// The policy of writes that give no `on_duplicate` of their own.
    pub on_duplicate: super::long_term::OnDuplicateName,
    /// Context to set it for (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `context_set_on_duplicate`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OnDuplicateSet {
    /// Always true when returned.
    pub success: bool,
    /// The policy now set: `keep`, `skip`, `merge` or `link`.
    pub on_duplicate: String,
}

impl Op for ContextSetOnDuplicate {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let p: memstrata::episodic::OnDuplicate = self.on_duplicate.into();
        cx.mem
            .contexts()
            .set_on_duplicate(p, self.namespace.as_deref())?;
        Done::of(&OnDuplicateSet {
            success: true,
            on_duplicate: p.as_str().to_owned(),
        })
    }
}

/// Arguments of `context_retrieve`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextRetrieve {
    /// Key to read.
    pub key: String,
    /// Context to read from (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `context_retrieve`: `success: false` with null fields when the key is absent.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ContextRetrieved {
    /// True when a value is stored under the key; false when it was never stored, was forgotten, or its TTL has passed.
    pub success: bool,
    /// The stored value (null when absent).
    pub value: Option<Value>,
    /// When it was stored (RFC 3339; null when absent).
    pub stored_at: Option<common::Timestamp>,
    /// When it expires (RFC 3339; null without a TTL or when absent).
    pub expires_at: Option<common::Timestamp>,
}

impl Op for ContextRetrieve {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let got = cx
            .mem
            .contexts()
            .retrieve(&self.key, self.namespace.as_deref())?
            .map(common::ContextValue::from);
        Done::of(&match got {
            Some(v) => ContextRetrieved {
                success: v.success,
                value: Some(v.value.0),
                stored_at: Some(v.stored_at),
                expires_at: v.expires_at,
            },
            // Absent is an answer, not an error (the specification's `success` field).
            None => ContextRetrieved {
                success: false,
                value: None,
                stored_at: None,
                expires_at: None,
            },
        })
    }
}

// ---------------------------------------------------------------- timesheet

/// Arguments of `llm_punch_in`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmPunchIn {
    /// Name of the model doing the work (e.g. "claude-sonnet").
    pub llm_name: String,
    /// What the task is.
    pub task_description: String,
    /// Additional context: free text about the task, up to the value size limit (kept on the task and in the episode recorded at punch-out).
    #[serde(default)]
    pub context: Option<String>,
    /// Memstrata context (namespace) the task belongs to (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

impl Op for LlmPunchIn {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        let ctx = self.namespace.clone().unwrap_or_else(|| cx.active());
        Ok(vec![
            Target::Context(ctx, Access::Write),
            Target::Global(Access::Write),
        ])
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let r = cx.mem.timesheet().punch_in(
            &self.llm_name,
            &self.task_description,
            self.context.as_deref(),
            self.namespace.as_deref(),
        )?;
        Done::of(&common::PunchIn::from(r))
    }
}

/// Arguments of `llm_punch_out`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmPunchOut {
    /// Task id from llm_punch_in.
    pub task_id: String,
    /// What was done (recorded in the task and in an episode tagged `task`).
    pub summary: String,
    /// Count the files modified during the task under the server's workspace roots (its --workspace-root directories, else the directory it was started in; .gitignore honoured). Default false.
    #[serde(default)]
    pub detect_files: Option<bool>,
}

/// Result of `llm_punch_out`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PunchedOut {
    /// Always true when returned.
    pub success: bool,
    /// Seconds between punch-in and punch-out.
    pub duration_seconds: f64,
    /// Number of files modified during the task under the scanned roots (0 unless `detect_files`).
    pub files_modified: i64,
    /// Their paths, relative to their root (at most 100 listed; the count is exact).
    pub files: Vec<String>,
    /// The directories scanned (absolute paths; empty unless `detect_files`).
    pub scanned_roots: Vec<String>,
}

impl Op for LlmPunchOut {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        let mut t = vec![Target::Global(Access::Write)];
        if let Some(task) = cx.mem.timesheet().task(&self.task_id)? {
            t.push(Target::Context(task.namespace, Access::Write));
        }
        Ok(t)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let mut r = cx
            .mem
            .timesheet()
            .punch_out(
                &self.task_id,
                &self.summary,
                self.detect_files.unwrap_or(DEFAULT_DETECT_FILES),
            )
            .map_err(|e| {
                ToolError::from(e).hint_on(NotFound, "Use the task_id returned by llm_punch_in")
            })?;
        r.files.truncate(MAX_LISTED_FILES);
        let detected = self.detect_files.unwrap_or(DEFAULT_DETECT_FILES);
        let scanned_roots = if detected {
            cx.mem
                .options()
                .workspace_roots
                .iter()
                .map(|r| {
                    std::fs::canonicalize(r)
                        .unwrap_or_else(|_| r.clone())
                        .display()
                        .to_string()
                })
                .collect()
        } else {
            Vec::new()
        };
        let p = common::PunchOut::from(r);
        let mut done = Done::of(&PunchedOut {
            success: p.success,
            duration_seconds: p.duration_seconds,
            files_modified: p.files_modified,
            files: p.files,
            scanned_roots,
        })?;
        // The finished task is recorded as an episode: the context's episode list changed.
        if let Some(task) = cx.mem.timesheet().task(&self.task_id)?
            && let Some(eid) = task.episode_id
        {
            done = done.changed(
                uri::episode(&task.namespace, &eid),
                Some(&task.namespace),
                true,
            );
        }
        Ok(done)
    }
}

// ---------------------------------------------------------------- status / optimize

/// Arguments of `system_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SystemStatus {
    /// Include active_sessions (the most recently active sessions, newest first, at most 20) and session_count (default true).
    #[serde(default)]
    pub include_sessions: Option<bool>,
    /// Include per-operation latency, items per layer, bytes on disk and index lag (default false).
    #[serde(default)]
    pub include_metrics: Option<bool>,
}

impl Op for SystemStatus {
    fn targets(&self, _cx: &Cx) -> ToolResult<Vec<Target>> {
        global(Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        Done::of(&common::Status::from(cx.mem.admin().status(
            self.include_sessions.unwrap_or(DEFAULT_INCLUDE_SESSIONS),
            self.include_metrics.unwrap_or(DEFAULT_INCLUDE_METRICS),
        )?))
    }
}

/// Optimization level (the tool argument and the admin `optimize --level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Purge expired items.
    Light,
    /// Also prune old session versions past the retention setting and recompress.
    Medium,
    /// Also merge index segments and garbage-collect index files.
    Aggressive,
}

impl Level {
    /// The level's name, as the bindings' `optimize_level` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Light => "light",
            Level::Medium => "medium",
            Level::Aggressive => "aggressive",
        }
    }
}

/// Arguments of `memory_optimize`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryOptimize {
    /// Limit session pruning to this session.
    #[serde(default)]
    pub target_session: Option<String>,
    /// light (default), medium or aggressive.
    #[serde(default)]
    pub level: Option<Level>,
}

impl Op for MemoryOptimize {
    fn targets(&self, _cx: &Cx) -> ToolResult<Vec<Target>> {
        global(Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let level = optimize_level(self.level.map(Level::as_str))?;
        Done::of(&common::OptimizeReport::from(
            cx.mem
                .admin()
                .optimize_with_progress(level, self.target_session.as_deref(), &|p| cx.report(p))?,
        ))
    }
}
