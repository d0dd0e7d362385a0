//! `Memory.short_term`: JSON values with an optional TTL.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use memstrata_bindings_common::{self as common, Handle};
use pyo3::prelude::*;

use crate::convert;
use crate::error::run;
use crate::memory::{HandleExt, max_depth};
use crate::records::{class, py_records};

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
        let mem = self.h.core()?;
        let value = convert::to_json(value, "value", max_depth(&mem))?;
        let ttl = convert::ttl(ttl)?;
        let e = run(py, || mem.short_term().store(&key, value, ttl))?;
        class(py, e)
    }

    /// The value under `key`, or None when absent or expired.
    fn retrieve(&self, py: Python<'_>, key: String) -> PyResult<Py<PyAny>> {
        let mem = self.h.core()?;
        let v = run(py, || mem.short_term().retrieve(&key))?;
        convert::opt_to_py(py, v.as_ref())
    }

    /// The entry under `key` with its timestamps, or None when absent or expired.
    fn entry(&self, py: Python<'_>, key: String) -> PyResult<Option<ShortTermEntry>> {
        let mem = self.h.core()?;
        let e = run(py, || mem.short_term().entry(&key))?;
        e.map(|e| class(py, e)).transpose()
    }

    /// Remove `key`; True when an unexpired item was removed.
    fn forget(&self, py: Python<'_>, key: String) -> PyResult<bool> {
        let mem = self.h.core()?;
        run(py, || mem.short_term().forget(&key))
    }

    /// Unexpired keys starting with `prefix` (empty: all), sorted.
    #[pyo3(signature = (prefix=String::new()), text_signature = "($self, prefix='')")]
    fn keys(&self, py: Python<'_>, prefix: String) -> PyResult<Vec<String>> {
        let mem = self.h.core()?;
        run(py, || mem.short_term().keys(&prefix))
    }

    fn __repr__(&self) -> String {
        "<memstrata.ShortTerm>".to_owned()
    }
}

py_records! {
    /// A short-term entry with its timestamps.
    ShortTermEntry from common::ShortTermEntry, repr [key, value, stored_at, expires_at] {
        /// The key.
        key: String,
        /// The stored value.
        value: Py<PyAny>,
        /// When it was stored (aware UTC).
        stored_at: DateTime<Utc>,
        /// When it expires, if it has a TTL.
        expires_at: Option<DateTime<Utc>>,
    }
}
