//! `status()` and `optimize()`: health, metrics and maintenance.

use pyo3::prelude::*;

use crate::convert;
use crate::error::{run, to_py};
use crate::repr::pystr;

pub(crate) fn status(
    py: Python<'_>,
    mem: &memstrata::Memory,
    include_sessions: bool,
    include_metrics: bool,
) -> PyResult<Status> {
    let s = run(py, || mem.status(include_sessions, include_metrics))?;
    let metrics = match &s.metrics {
        Some(m) => convert::to_py(py, &serde_json::to_value(m).map_err(convert::ser_err)?)?,
        None => py.None(),
    };
    Ok(Status {
        status: s.status.as_str().to_owned(),
        version: s.version,
        uptime_seconds: s.uptime_seconds,
        active_sessions: s.active_sessions,
        metrics,
        issues: s.issues,
    })
}

pub(crate) fn optimize(
    py: Python<'_>,
    mem: &memstrata::Memory,
    level: String,
    target_session: Option<String>,
) -> PyResult<OptimizeReport> {
    let level: memstrata::OptimizeLevel = level.parse().map_err(to_py)?;
    let r = run(py, || mem.optimize(level, target_session.as_deref()))?;
    Ok(OptimizeReport {
        success: r.success,
        bytes_saved: r.bytes_saved,
        optimization_details: convert::to_py(py, &r.optimization_details)?,
    })
}

/// Result of `status()`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct Status {
    /// "healthy", "degraded" or "error".
    pub status: String,
    /// Engine version.
    pub version: String,
    /// Seconds since the engine was opened in this process.
    pub uptime_seconds: f64,
    /// Sessions in the store (when include_sessions).
    pub active_sessions: Option<u64>,
    /// Metrics as a dict (when include_metrics): `operations` (per-operation count,
    /// errors, p50_us/p95_us/p99_us/max_us), `items` per layer, `bytes_on_disk`, `index`.
    pub metrics: Py<PyAny>,
    /// Why the status is not healthy (empty when it is).
    pub issues: Vec<String>,
}

#[pymethods]
impl Status {
    fn __repr__(&self) -> String {
        format!(
            "Status(status={}, version={}, uptime_seconds={:.3}, active_sessions={}, issues={})",
            pystr(&self.status),
            pystr(&self.version),
            self.uptime_seconds,
            self.active_sessions
                .map_or_else(|| "None".to_owned(), |n| n.to_string()),
            crate::repr::pystrs(&self.issues)
        )
    }
}

/// Result of `optimize()`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct OptimizeReport {
    /// Always True when returned.
    pub success: bool,
    /// Store size before minus after, in bytes (may be <= 0).
    pub bytes_saved: i64,
    /// What each step did (a dict).
    pub optimization_details: Py<PyAny>,
}

#[pymethods]
impl OptimizeReport {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "OptimizeReport(success={}, bytes_saved={}, optimization_details={})",
            crate::repr::bool(self.success),
            self.bytes_saved,
            crate::repr::obj(py, &self.optimization_details)
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Status>()?;
    m.add_class::<OptimizeReport>()?;
    Ok(())
}
