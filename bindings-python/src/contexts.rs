//! `context_store` / `context_retrieve`: the short-term layer of a named (else the active) context.

use chrono::{DateTime, Utc};
use memstrata_bindings_common as common;
use pyo3::prelude::*;

use crate::convert;
use crate::error::run;
use crate::memory::max_depth;
use crate::records::{class, py_records};

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
        mem.contexts().store(&key, value, ttl, namespace.as_deref())
    })?;
    class(py, s)
}

pub(crate) fn retrieve(
    py: Python<'_>,
    mem: &memstrata::Memory,
    key: String,
    namespace: Option<String>,
) -> PyResult<Option<ContextValue>> {
    let v = run(py, || mem.contexts().retrieve(&key, namespace.as_deref()))?;
    v.map(|v| class(py, v)).transpose()
}

py_records! {
    /// Result of `context_store`.
    ContextStored from common::ContextStored, repr [success, expires_at] {
        /// Always True when returned.
        success: bool,
        /// When the value expires (None: no TTL).
        expires_at: Option<DateTime<Utc>>,
    }

    /// Result of `context_retrieve` (None is returned when the key is absent or expired).
    ContextValue from common::ContextValue, repr [success, value, stored_at, expires_at] {
        /// Always True when returned.
        success: bool,
        /// The stored value.
        value: Py<PyAny>,
        /// When it was stored (aware UTC).
        stored_at: DateTime<Utc>,
        /// When it expires (None: no TTL).
        expires_at: Option<DateTime<Utc>>,
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ContextStored>()?;
    m.add_class::<ContextValue>()?;
    Ok(())
}
