//! `Memory.short_term`: JSON values with an optional TTL.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use pyo3::prelude::*;

use crate::convert;
use crate::error::run;
use crate::memory::{Handle, max_depth};
use crate::repr::{opt_dt, pystr};

/// The short-term layer of the active context (`mem.short_term`).
#[pyclass(frozen, module = "memstrata")]
#[derive(Debug)]
pub struct ShortTerm {
    h: Arc<Handle>,
}

impl ShortTerm {
    pub(crate) fn new(h: Arc<Handle>) -> Self {
        ShortTerm { h }
    }
}

#[pymethods]
impl ShortTerm {
    /// Store `value` under `key`, replacing any previous value. `ttl`: seconds
    /// (int / float) or a timedelta after which the item is invisible.
    #[pyo3(signature = (key, value, ttl=None))]
    fn store(
        &self,
        py: Python<'_>,
        key: String,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ShortTermEntry> {
        let mem = self.h.get()?;
        let value = convert::to_json(value, "value", max_depth(&mem))?;
        let ttl = convert::ttl(ttl)?;
        let e = run(py, || mem.short_term().store(&key, value, ttl))?;
        ShortTermEntry::from_core(py, e)
    }

    /// The value under `key`, or None when absent or expired.
    fn retrieve(&self, py: Python<'_>, key: String) -> PyResult<Py<PyAny>> {
        let mem = self.h.get()?;
        let v = run(py, || mem.short_term().retrieve(&key))?;
        convert::opt_to_py(py, v.as_ref())
    }

    /// The entry under `key` with its timestamps, or None when absent or expired.
    fn entry(&self, py: Python<'_>, key: String) -> PyResult<Option<ShortTermEntry>> {
        let mem = self.h.get()?;
        let e = run(py, || mem.short_term().entry(&key))?;
        e.map(|e| ShortTermEntry::from_core(py, e)).transpose()
    }

    /// Remove `key`; True when an unexpired item was removed.
    fn forget(&self, py: Python<'_>, key: String) -> PyResult<bool> {
        let mem = self.h.get()?;
        run(py, || mem.short_term().forget(&key))
    }

    /// Unexpired keys starting with `prefix` (empty: all), sorted.
    #[pyo3(signature = (prefix=String::new()), text_signature = "($self, prefix='')")]
    fn keys(&self, py: Python<'_>, prefix: String) -> PyResult<Vec<String>> {
        let mem = self.h.get()?;
        run(py, || mem.short_term().keys(&prefix))
    }

    fn __repr__(&self) -> String {
        "<memstrata.ShortTerm>".to_owned()
    }
}

/// A short-term entry with its timestamps.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct ShortTermEntry {
    /// The key.
    pub key: String,
    /// The stored value.
    pub value: Py<PyAny>,
    /// When it was stored (aware UTC).
    pub stored_at: DateTime<Utc>,
    /// When it expires, if it has a TTL.
    pub expires_at: Option<DateTime<Utc>>,
}

impl ShortTermEntry {
    pub(crate) fn from_core(py: Python<'_>, e: memstrata::ShortTermEntry) -> PyResult<Self> {
        Ok(ShortTermEntry {
            value: convert::to_py(py, &e.value)?,
            key: e.key,
            stored_at: e.stored_at,
            expires_at: e.expires_at,
        })
    }
}

#[pymethods]
impl ShortTermEntry {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "ShortTermEntry(key={}, value={}, stored_at={}, expires_at={})",
            pystr(&self.key),
            crate::repr::obj(py, &self.value),
            crate::repr::dt(&self.stored_at),
            opt_dt(self.expires_at.as_ref())
        )
    }
}
