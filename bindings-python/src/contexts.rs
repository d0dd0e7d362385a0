//! `context_store` / `context_retrieve`: the short-term layer of a named (else the active) context.

use chrono::{DateTime, Utc};
use memstrata_bindings_common as common;
use pyo3::prelude::*;

use crate::convert;
use crate::error::run;
use crate::error::to_py;
use crate::memory::max_depth;
use crate::records::{class, classes, py_records};

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

pub(crate) fn set_retention(
    py: Python<'_>,
    mem: &memstrata::Memory,
    max_episodes: Option<&Bound<'_, PyAny>>,
    max_bytes: Option<&Bound<'_, PyAny>>,
    max_age: Option<&Bound<'_, PyAny>>,
    namespace: Option<String>,
) -> PyResult<()> {
    let p = common::retention(
        convert::opt_int(max_episodes, "max_episodes")?,
        convert::opt_int(max_bytes, "max_bytes")?,
        convert::seconds(max_age, "max_age")?,
    )
    .map_err(to_py)?;
    run(py, || mem.contexts().set_retention(p, namespace.as_deref()))
}

pub(crate) fn retention(
    py: Python<'_>,
    mem: &memstrata::Memory,
    namespace: Option<String>,
) -> PyResult<Retention> {
    let p = run(py, || mem.contexts().retention(namespace.as_deref()))?;
    class(py, p)
}

pub(crate) fn evictions(
    py: Python<'_>,
    mem: &memstrata::Memory,
    namespace: Option<String>,
    limit: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<Eviction>> {
    let limit = common::defaults::page_limit(convert::opt_limit(limit, "limit")?);
    let list = run(py, || mem.contexts().evictions(namespace.as_deref(), limit))?;
    classes(py, list)
}

py_records! {
    /// A context's retention policy (`Memory.retention`): the limits on its episodes, each None when not set.
    Retention from common::Retention, repr [max_episodes, max_bytes, max_age] {
        /// Most episodes kept.
        max_episodes: Option<i64>,
        /// Most bytes the episodes occupy as stored.
        max_bytes: Option<i64>,
        /// Oldest an episode may be, in seconds.
        max_age: Option<f64>,
    }

    /// One audited eviction (`Memory.evictions`): an episode removed by a retention policy. It holds no user text.
    Eviction from common::Eviction, repr [id, context, evicted_at, reason, utility] {
        /// The evicted episode's id.
        id: String,
        /// The context it was evicted from.
        context: String,
        /// When (aware UTC).
        evicted_at: DateTime<Utc>,
        /// Which limit evicted it.
        reason: String,
        /// Its utility when evicted (0..=1).
        utility: f64,
    }

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
    m.add_class::<Retention>()?;
    m.add_class::<Eviction>()?;
    Ok(())
}
