//! `status`: health, version, uptime, and real metrics (per-operation latency, items per
//! layer, bytes on disk, index lag).

use std::collections::BTreeMap;

use serde::Serialize;

use chrono::{DateTime, Utc};

use crate::Result;
use crate::admin::handle::Admin;
use crate::config::clock::millis_to_dt;
use crate::continuity::sessions::all_sessions;
use crate::engine::Engine;
use crate::engine::metrics::OpMetrics;
use crate::layers::short_term::StRecord;
use crate::layers::working::WorkingState;

/// Index-log entries (or uncommitted index changes) above which status is `degraded`.
pub const DEGRADED_INDEX_LAG: u64 = 10_000;

/// At most this many sessions are listed in [`Status::active_sessions`] (the
/// most recently active ones); [`Status::session_count`] counts them all.
pub const ACTIVE_SESSIONS_LIMIT: usize = 20;

/// Overall health.
/// Ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Everything answers and the index keeps up.
    Healthy,
    /// Works, but the index lags far behind or its writer failed (searches may miss recent writes).
    Degraded,
    /// The store could not be read while gathering status.
    Error,
}

impl Health {
    /// `"healthy"`, `"degraded"` or `"error"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Degraded => "degraded",
            Health::Error => "error",
        }
    }
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Result of [`Admin::status`](crate::Admin::status).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Status {
    /// `healthy`, `degraded` or `error`.
    pub status: Health,
    /// Crate version of the engine.
    pub version: String,
    /// Seconds since this engine was opened in this process.
    pub uptime_seconds: f64,
    /// The most recently active sessions (last save, else creation), newest
    /// first, at most [`ACTIVE_SESSIONS_LIMIT`] (when asked for).
    pub active_sessions: Option<Vec<ActiveSession>>,
    /// Sessions in the store, listed or not (when asked for).
    pub session_count: Option<u64>,
    /// Metrics (when asked for).
    pub metrics: Option<StatusMetrics>,
    /// Why the status is not `healthy` (empty when it is).
    pub issues: Vec<String>,
    /// Every context with a retention policy or with evictions: its policy
    /// and how many episodes it evicted.
    pub retention: Vec<crate::layers::episodic::retention::RetentionStatus>,
}

/// One session of [`Status::active_sessions`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActiveSession {
    /// Session id.
    pub session_id: String,
    /// Name given at creation.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// The [`ACTIVE_SESSIONS_LIMIT`] most recently active sessions (newest first)
/// and the number of sessions.
fn active_sessions(e: &Engine) -> Result<(Vec<ActiveSession>, u64)> {
    let mut all = all_sessions(e)?;
    let count = all.len() as u64;
    // Last activity is the last save (`updated_at` is the creation time until
    // then); ids are UUIDv7, so the id breaks ties by creation order.
    all.sort_by(|(a_id, a), (b_id, b)| {
        b.updated_at
            .max(b.created_at)
            .cmp(&a.updated_at.max(a.created_at))
            .then_with(|| b_id.cmp(a_id))
    });
    all.truncate(ACTIVE_SESSIONS_LIMIT);
    let list = all
        .into_iter()
        .map(|(session_id, r)| ActiveSession {
            session_id,
            name: r.name,
            created_at: millis_to_dt(r.created_at),
        })
        .collect();
    Ok((list, count))
}

/// Items per layer (all contexts).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ItemCounts {
    /// Unexpired short-term items.
    pub short_term: u64,
    /// Focus items plus workspace items.
    pub working: u64,
    /// Episodes.
    pub episodes: u64,
    /// Semantic entries.
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

/// State of the full-text index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct IndexStats {
    /// Searchable documents (episodes + semantic entries, as of the last commit).
    pub documents: u64,
    /// Index segments.
    pub segments: u64,
    /// Highest write sequence applied to the index writer.
    pub applied_seq: u64,
    /// Highest write sequence in a durable index commit.
    pub committed_seq: u64,
    /// Changes applied but not yet in a durable commit (searches already see
    /// them: a search makes pending changes visible with a soft commit).
    pub pending: u64,
    /// Index-log records in sled not yet covered by a durable commit (the replay work after a crash).
    pub log_entries: u64,
    /// Which vector search runs: `"in-process"` (the exact int8 scan in memory,
    /// sled and PostgreSQL without pgvector) or `"pgvector"` (exact, in SQL, on
    /// a PostgreSQL store whose database has the `vector` extension).
    pub vector_search: String,
}

/// The `metrics` part of [`Status`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct StatusMetrics {
    /// Per-operation counts and latency percentiles since open.
    pub operations: BTreeMap<String, OpMetrics>,
    /// Items per layer.
    pub items: ItemCounts,
    /// Size of the store directory (sled + index) in bytes.
    pub bytes_on_disk: u64,
    /// Index state and lag.
    pub index: IndexStats,
}

fn count_items(e: &Engine) -> Result<ItemCounts> {
    let now = e.opts.clock.now().timestamp_millis();
    let mut short_term = 0u64;
    for item in e.t.short_term.iter() {
        let (_, v) = item?;
        let r: StRecord = e.codec.decode(&v)?;
        if r.expires_at.is_none_or(|t| t > now) {
            short_term += 1;
        }
    }
    let mut working = 0u64;
    for item in e.t.working.iter() {
        let (_, v) = item?;
        let st: WorkingState = e.codec.decode(&v)?;
        working += (st.focus.len() + st.workspace.len()) as u64;
    }
    Ok(ItemCounts {
        short_term,
        working,
        episodes: e.t.episodes.len()? as u64,
        semantic: e.t.semantic.len()? as u64,
        procedures: e.t.procedures.len()? as u64,
        runs: e.t.runs.len()? as u64,
        sessions: e.t.sessions.len()? as u64,
        session_versions: e.t.session_versions.len()? as u64,
        tasks: e.t.tasks.len()? as u64,
    })
}

pub(crate) fn index_stats(e: &Engine) -> IndexStats {
    let (applied, committed, pending) = e.index_lag();
    let (documents, segments) = e.index_doc_stats();
    IndexStats {
        documents,
        segments: segments as u64,
        applied_seq: applied,
        committed_seq: committed,
        pending: pending as u64,
        // A failing store shows in `health` (its format_version read); the count is 0 then.
        log_entries: e.index_log_backlog().unwrap_or(0) as u64,
        vector_search: e.vector_search_backend().to_owned(),
    }
}

impl Admin {
    /// Health, version and uptime; with `include_sessions` the most recently active
    /// sessions (at most [`ACTIVE_SESSIONS_LIMIT`]) and the number of sessions, with
    /// `include_metrics` per-operation latency, items per layer, bytes on disk and index lag.
    ///
    /// Never fails because the store is unhealthy: that is reported as `status: error`
    /// with the reason in `issues`.
    pub fn status(&self, include_sessions: bool, include_metrics: bool) -> Result<Status> {
        let e = &self.scope.engine;
        e.timed("status", || {
            let mut issues = Vec::new();
            let mut health = Health::Healthy;
            let index = index_stats(e);
            // A cheap read proves the store answers.
            if let Err(err) = e.t.meta.get(b"format_version") {
                health = health.max(Health::Error);
                issues.push(format!("cannot read the store: {err}"));
            }
            if let Some(err) = e.index_error() {
                health = health.max(Health::Degraded);
                issues.push(err);
            }
            if index.log_entries > DEGRADED_INDEX_LAG || index.pending > DEGRADED_INDEX_LAG {
                health = health.max(Health::Degraded);
                issues.push(format!(
                    "index lags: {} log entries, {} uncommitted changes (threshold {DEGRADED_INDEX_LAG})",
                    index.log_entries, index.pending
                ));
            }
            let (active_sessions, session_count) = if include_sessions {
                match active_sessions(e) {
                    Ok((list, count)) => (Some(list), Some(count)),
                    Err(err) => {
                        health = health.max(Health::Error);
                        issues.push(format!("cannot read the sessions: {err}"));
                        (Some(Vec::new()), Some(e.t.sessions.len()? as u64))
                    }
                }
            } else {
                (None, None)
            };
            let metrics = if include_metrics {
                let items = match count_items(e) {
                    Ok(i) => i,
                    Err(err) => {
                        health = health.max(Health::Error);
                        issues.push(format!("cannot read the store: {err}"));
                        ItemCounts::default()
                    }
                };
                Some(StatusMetrics {
                    operations: e.metrics().snapshot(),
                    items,
                    bytes_on_disk: e.bytes_on_disk(),
                    index,
                })
            } else {
                None
            };
            let retention = match crate::layers::episodic::retention::statuses(e) {
                Ok(r) => r,
                Err(err) => {
                    health = health.max(Health::Error);
                    issues.push(format!("cannot read the retention policies: {err}"));
                    Vec::new()
                }
            };
            if let Some(err) = crate::layers::episodic::retention::last_error(e) {
                issues.push(err);
            }
            Ok(Status {
                status: health,
                version: env!("CARGO_PKG_VERSION").to_owned(),
                uptime_seconds: e.uptime().as_secs_f64(),
                active_sessions,
                session_count,
                metrics,
                issues,
                retention,
            })
        })
    }
}
