//! `context_store` / `context_retrieve`: the short-term layer of a named (else the active) context.

use chrono::{DateTime, Utc};
use pyo3::prelude::*;

use crate::convert;
use crate::error::run;
use crate::memory::max_depth;
use crate::repr::{dt, opt_dt};

pub(crate) fn store(
    py: Python<'_>,
    mem: &memstrata::Memory,
    key: String,
    value: &Bound<'_, PyAny>,
    ttl: Option<&Bound<'_, PyAny>>,
    namespace: Option<String>,
) -> PyResult<ContextStored> {
    let value = convert::to_json(value, "value", max_depth(mem))?;
    let ttl = convert::ttl(ttl)?;
    let s = run(py, || {
        mem.context_store(&key, value, ttl, namespace.as_deref())
    })?;
    Ok(ContextStored {
        success: s.success,
        expires_at: s.expires_at,
    })
}

pub(crate) fn retrieve(
    py: Python<'_>,
    mem: &memstrata::Memory,
    key: String,
    namespace: Option<String>,
) -> PyResult<Option<ContextValue>> {
    let v = run(py, || mem.context_retrieve(&key, namespace.as_deref()))?;
    v.map(|v| {
        Ok(ContextValue {
            success: v.success,
            value: convert::to_py(py, &v.value)?,
            stored_at: v.stored_at,
            expires_at: v.expires_at,
        })
    })
    .transpose()
}

/// Result of `context_store`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct ContextStored {
    /// Always True when returned.
    pub success: bool,
    /// When the value expires (None: no TTL).
    pub expires_at: Option<DateTime<Utc>>,
}

#[pymethods]
impl ContextStored {
    fn __repr__(&self) -> String {
        format!(
            "ContextStored(success={}, expires_at={})",
            crate::repr::bool(self.success),
            opt_dt(self.expires_at.as_ref())
        )
    }
}

/// Result of `context_retrieve` (None is returned when the key is absent or expired).
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct ContextValue {
    /// Always True when returned.
    pub success: bool,
    /// The stored value.
    pub value: Py<PyAny>,
    /// When it was stored (aware UTC).
    pub stored_at: DateTime<Utc>,
    /// When it expires (None: no TTL).
    pub expires_at: Option<DateTime<Utc>>,
}

#[pymethods]
impl ContextValue {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "ContextValue(success={}, value={}, stored_at={}, expires_at={})",
            crate::repr::bool(self.success),
            crate::repr::obj(py, &self.value),
            dt(&self.stored_at),
            opt_dt(self.expires_at.as_ref())
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ContextStored>()?;
    m.add_class::<ContextValue>()?;
    Ok(())
}
