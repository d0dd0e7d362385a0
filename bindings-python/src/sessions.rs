//! Sessions: versioned, compressed snapshots of an agent's state (`Memory.session_*`).

use chrono::{DateTime, Utc};
use memstrata_bindings_common::{self as common, options};
use pyo3::prelude::*;

use crate::convert;
use crate::error::{run, to_py};
use crate::memory::max_depth;
use crate::records::{class, classes, py_records};

pub(crate) fn create(
    py: Python<'_>,
    mem: &memstrata::Memory,
    name: String,
    metadata: Option<&Bound<'_, PyAny>>,
) -> PyResult<SessionCreated> {
    let metadata = match metadata {
        Some(m) if !m.is_none() => convert::to_json(m, "metadata", max_depth(mem))?,
        _ => serde_json::Value::Object(Default::default()),
    };
    let c = run(py, || mem.sessions().create(&name, metadata))?;
    class(py, c)
}

pub(crate) fn save(
    py: Python<'_>,
    mem: &memstrata::Memory,
    session_id: String,
    content: &Bound<'_, PyAny>,
    compression_level: Option<&Bound<'_, PyAny>>,
) -> PyResult<SessionSaved> {
    let content = convert::to_json(content, "content", max_depth(mem))?;
    let level =
        options::compression_level(convert::opt_int(compression_level, "compression_level")?)
            .map_err(to_py)?;
    let s = run(py, || mem.sessions().save(&session_id, content, level))?;
    class(py, s)
}

pub(crate) fn restore(
    py: Python<'_>,
    mem: &memstrata::Memory,
    session_id: String,
    version: Option<&Bound<'_, PyAny>>,
) -> PyResult<SessionRestored> {
    let version =
        options::version("version", convert::opt_int(version, "version")?).map_err(to_py)?;
    let r = run(py, || mem.sessions().restore(&session_id, version))?;
    class(py, r)
}

pub(crate) fn list(py: Python<'_>, mem: &memstrata::Memory) -> PyResult<Vec<SessionInfo>> {
    classes(py, run(py, || mem.sessions().list())?)
}

pub(crate) fn versions(
    py: Python<'_>,
    mem: &memstrata::Memory,
    session_id: String,
) -> PyResult<Vec<SessionVersionInfo>> {
    classes(py, run(py, || mem.sessions().versions(&session_id))?)
}

pub(crate) fn delete(
    py: Python<'_>,
    mem: &memstrata::Memory,
    session_id: String,
) -> PyResult<bool> {
    run(py, || mem.sessions().delete(&session_id))
}

py_records! {
    /// Result of `session_create`.
    SessionCreated from common::SessionCreated, repr [session_id, created_at] {
        /// The new session's id.
        session_id: String,
        /// When it was created (aware UTC).
        created_at: DateTime<Utc>,
    }

    /// Result of `session_save`.
    SessionSaved from common::SessionSaved, repr [success, version, saved_at] {
        /// Always True when returned.
        success: bool,
        /// The version written (1, 2, 3... per session).
        version: i64,
        /// When it was saved (aware UTC).
        saved_at: DateTime<Utc>,
    }

    /// Result of `session_restore`.
    SessionRestored from common::SessionRestored, repr [success, version, content, metadata] {
        /// Always True when returned.
        success: bool,
        /// The saved content.
        content: Py<PyAny>,
        /// The session's metadata.
        metadata: Py<PyAny>,
        /// The version restored.
        version: i64,
    }

    /// One session in `session_list`.
    SessionInfo from common::SessionInfo,
    repr [session_id, name, latest_version, version_count] {
        /// Session id.
        session_id: String,
        /// Name given at creation.
        name: String,
        /// Metadata given at creation.
        metadata: Py<PyAny>,
        /// Created (aware UTC).
        created_at: DateTime<Utc>,
        /// Last saved (aware UTC).
        updated_at: DateTime<Utc>,
        /// Newest version, None before the first save.
        latest_version: Option<i64>,
        /// Versions kept.
        version_count: i64,
    }

    /// One saved version in `session_versions`.
    SessionVersionInfo from common::SessionVersionInfo,
    repr [version, saved_at, compression_level, raw_bytes, stored_bytes] {
        /// Version number.
        version: i64,
        /// When it was saved (aware UTC).
        saved_at: DateTime<Utc>,
        /// Compression level it was saved with (0..=3).
        compression_level: u32,
        /// Size of the content as canonical JSON.
        raw_bytes: i64,
        /// Bytes stored.
        stored_bytes: i64,
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SessionCreated>()?;
    m.add_class::<SessionSaved>()?;
    m.add_class::<SessionRestored>()?;
    m.add_class::<SessionInfo>()?;
    m.add_class::<SessionVersionInfo>()?;
    Ok(())
}
