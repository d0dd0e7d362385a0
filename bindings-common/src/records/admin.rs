//! Result records of administration: status, metrics, optimize, export and import, declared with the [`records!`]
//! macro of the parent, with their conversions from the core's types.

#[allow(unused_imports)]
use super::*;

records! {
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
