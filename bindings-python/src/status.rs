//! `status()` and `optimize()`: health, metrics and maintenance.

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
    let s = run(py, || mem.status(include_sessions, include_metrics))?;
    class(py, s)
}

pub(crate) fn optimize(
    py: Python<'_>,
    mem: &memstrata::Memory,
    level: String,
    target_session: Option<String>,
) -> PyResult<OptimizeReport> {
    let level = options::optimize_level(Some(&level)).map_err(to_py)?;
    let r = run(py, || mem.optimize(level, target_session.as_deref()))?;
    class(py, r)
}

py_records! {
    /// Result of `status()`.
    Status from common::Status, repr custom {
        /// "healthy", "degraded" or "error".
        status: String,
        /// Engine version.
        version: String,
        /// Seconds since the engine was opened in this process.
        uptime_seconds: f64,
        /// Sessions in the store (when include_sessions).
        active_sessions: Option<i64>,
        /// Metrics as a dict (when include_metrics): `operations` (per-operation count,
        /// errors, p50_us/p95_us/p99_us/max_us), `items` per layer, `bytes_on_disk`, `index`.
        metrics: Py<PyAny>,
        /// Why the status is not healthy (empty when it is).
        issues: Vec<String>,
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
            "Status(status={}, version={}, uptime_seconds={:.3}, active_sessions={}, issues={})",
            self.status.py_repr(py),
            self.version.py_repr(py),
            self.uptime_seconds,
            self.active_sessions.py_repr(py),
            self.issues.py_repr(py)
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Status>()?;
    m.add_class::<OptimizeReport>()?;
    Ok(())
}
