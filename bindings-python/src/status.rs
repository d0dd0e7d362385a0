//! `status()` and `optimize()`: health, metrics and maintenance.

use chrono::{DateTime, Utc};
use memstrata_bindings_common::{self as common, options};
use pyo3::prelude::*;

use crate::error::{run, to_py};
use crate::records::{PyRepr as _, class, py_records};

pub(crate) fn status(
    py: Python<'_>,
    mem: &memstrata::Memory,
    include_sessions: bool,
    include_metrics: bool,
) -> PyResult<Status> {
    let s = run(py, || mem.admin().status(include_sessions, include_metrics))?;
    class(py, s)
}

pub(crate) fn optimize(
    py: Python<'_>,
    mem: &memstrata::Memory,
    level: String,
    target_session: Option<String>,
) -> PyResult<OptimizeReport> {
    let level = options::optimize_level(Some(&level)).map_err(to_py)?;
    let r = run(py, || {
        mem.admin().optimize(level, target_session.as_deref())
    })?;
    class(py, r)
}

py_records! {
    /// One of the most recently active sessions of `status()`.
    ActiveSession from common::ActiveSession, repr [session_id, name, created_at] {
        /// Session id.
        session_id: String,
        /// Name given at creation.
        name: String,
        /// Creation time.
        created_at: DateTime<Utc>,
    }

    /// Result of `status()`.
    Status from common::Status, repr custom {
        /// "healthy", "degraded" or "error".
        status: String,
        /// Engine version.
        version: String,
        /// Seconds since the engine was opened in this process.
        uptime_seconds: f64,
        /// The most recently active sessions (last save, else creation), newest first,
        /// at most ACTIVE_SESSIONS_LIMIT (when include_sessions).
        active_sessions: Option<Vec<Py<ActiveSession>>>,
        /// Sessions in the store, listed or not (when include_sessions).
        session_count: Option<i64>,
        /// Metrics as a dict (when include_metrics): `operations` (per-operation count,
        /// errors, p50_us/p95_us/p99_us/max_us), `items` per layer, `bytes_on_disk`, `index`.
        metrics: Py<PyAny>,
        /// Why the status is not healthy (empty when it is).
        issues: Vec<String>,
        /// Every context with a retention policy or evictions.
        retention: Vec<Py<RetentionStatus>>,
    }

    /// A context's retention in `status()`: its policy and the episodes evicted so far.
    RetentionStatus from common::RetentionStatus, repr [context, max_episodes, max_bytes, max_age, evicted] {
        /// The context.
        context: String,
        /// Most episodes kept.
        max_episodes: Option<i64>,
        /// Most bytes the episodes occupy as stored.
        max_bytes: Option<i64>,
        /// Oldest an episode may be, in seconds.
        max_age: Option<f64>,
        /// Episodes evicted so far.
        evicted: i64,
    }

    /// Result of `optimize()`.
    OptimizeReport from common::OptimizeReport,
    repr [success, bytes_saved, optimization_details] {
        /// Always True when returned.
        success: bool,
        /// Store size before minus after, in bytes (may be <= 0).
        bytes_saved: i64,
        /// What each step did (a dict).
        optimization_details: Py<PyAny>,
    }
}

impl Status {
    fn repr(&self, py: Python<'_>) -> String {
        format!(
            "Status(status={}, version={}, uptime_seconds={:.3}, session_count={}, issues={})",
            self.status.py_repr(py),
            self.version.py_repr(py),
            self.uptime_seconds,
            self.session_count.py_repr(py),
            self.issues.py_repr(py)
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ActiveSession>()?;
    m.add_class::<Status>()?;
    m.add_class::<RetentionStatus>()?;
    m.add_class::<OptimizeReport>()?;
    Ok(())
}
