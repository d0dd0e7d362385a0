//! Sessions: versioned, compressed snapshots of an agent's state (`Memory.session_*`).

use chrono::{DateTime, Utc};
use pyo3::prelude::*;

use crate::convert;
use crate::error::run;
use crate::memory::max_depth;
use crate::repr::{dt, pystr};

/// `compression_level` when none is given (lz4; the MCP tool's default too).
pub(crate) const DEFAULT_COMPRESSION_LEVEL: u8 = 1;

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
    let c = run(py, || mem.session_create(&name, metadata))?;
    Ok(SessionCreated {
        session_id: c.session_id,
        created_at: c.created_at,
    })
}

pub(crate) fn save(
    py: Python<'_>,
    mem: &memstrata::Memory,
    session_id: String,
    content: &Bound<'_, PyAny>,
    compression_level: Option<&Bound<'_, PyAny>>,
) -> PyResult<SessionSaved> {
    let content = convert::to_json(content, "content", max_depth(mem))?;
    let level = convert::opt_int::<u8>(compression_level, "compression_level")?
        .unwrap_or(DEFAULT_COMPRESSION_LEVEL);
    let s = run(py, || mem.session_save(&session_id, content, level))?;
    Ok(SessionSaved {
        success: s.success,
        version: s.version,
        saved_at: s.saved_at,
    })
}

pub(crate) fn restore(
    py: Python<'_>,
    mem: &memstrata::Memory,
    session_id: String,
    version: Option<&Bound<'_, PyAny>>,
) -> PyResult<SessionRestored> {
    let version = convert::opt_int::<u64>(version, "version")?;
    let r = run(py, || mem.session_restore(&session_id, version))?;
    Ok(SessionRestored {
        success: r.success,
        content: convert::to_py(py, &r.content)?,
        metadata: convert::to_py(py, &r.metadata)?,
        version: r.version,
    })
}

pub(crate) fn list(py: Python<'_>, mem: &memstrata::Memory) -> PyResult<Vec<SessionInfo>> {
    let list = run(py, || mem.session_list())?;
    list.into_iter()
        .map(|s| {
            Ok(SessionInfo {
                metadata: convert::to_py(py, &s.metadata)?,
                session_id: s.session_id,
                name: s.name,
                created_at: s.created_at,
                updated_at: s.updated_at,
                latest_version: s.latest_version,
                version_count: s.version_count,
            })
        })
        .collect()
}

pub(crate) fn versions(
    py: Python<'_>,
    mem: &memstrata::Memory,
    session_id: String,
) -> PyResult<Vec<SessionVersionInfo>> {
    let list = run(py, || mem.session_versions(&session_id))?;
    Ok(list
        .into_iter()
        .map(|v| SessionVersionInfo {
            version: v.version,
            saved_at: v.saved_at,
            compression_level: v.compression_level,
            raw_bytes: v.raw_bytes,
            stored_bytes: v.stored_bytes,
        })
        .collect())
}

pub(crate) fn delete(
    py: Python<'_>,
    mem: &memstrata::Memory,
    session_id: String,
) -> PyResult<bool> {
    run(py, || mem.session_delete(&session_id))
}

/// Result of `session_create`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct SessionCreated {
    /// The new session's id.
    pub session_id: String,
    /// When it was created (aware UTC).
    pub created_at: DateTime<Utc>,
}

#[pymethods]
impl SessionCreated {
    fn __repr__(&self) -> String {
        format!(
            "SessionCreated(session_id={}, created_at={})",
            pystr(&self.session_id),
            dt(&self.created_at)
        )
    }
}

/// Result of `session_save`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct SessionSaved {
    /// Always True when returned.
    pub success: bool,
    /// The version written (1, 2, 3... per session).
    pub version: u64,
    /// When it was saved (aware UTC).
    pub saved_at: DateTime<Utc>,
}

#[pymethods]
impl SessionSaved {
    fn __repr__(&self) -> String {
        format!(
            "SessionSaved(success={}, version={}, saved_at={})",
            crate::repr::bool(self.success),
            self.version,
            dt(&self.saved_at)
        )
    }
}

/// Result of `session_restore`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct SessionRestored {
    /// Always True when returned.
    pub success: bool,
    /// The saved content.
    pub content: Py<PyAny>,
    /// The session's metadata.
    pub metadata: Py<PyAny>,
    /// The version restored.
    pub version: u64,
}

#[pymethods]
impl SessionRestored {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "SessionRestored(success={}, version={}, content={}, metadata={})",
            crate::repr::bool(self.success),
            self.version,
            crate::repr::obj(py, &self.content),
            crate::repr::obj(py, &self.metadata)
        )
    }
}

/// One session in `session_list`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct SessionInfo {
    /// Session id.
    pub session_id: String,
    /// Name given at creation.
    pub name: String,
    /// Metadata given at creation.
    pub metadata: Py<PyAny>,
    /// Created (aware UTC).
    pub created_at: DateTime<Utc>,
    /// Last saved (aware UTC).
    pub updated_at: DateTime<Utc>,
    /// Newest version, None before the first save.
    pub latest_version: Option<u64>,
    /// Versions kept.
    pub version_count: u64,
}

#[pymethods]
impl SessionInfo {
    fn __repr__(&self) -> String {
        format!(
            "SessionInfo(session_id={}, name={}, latest_version={}, version_count={})",
            pystr(&self.session_id),
            pystr(&self.name),
            self.latest_version
                .map_or_else(|| "None".to_owned(), |v| v.to_string()),
            self.version_count
        )
    }
}

/// One saved version in `session_versions`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct SessionVersionInfo {
    /// Version number.
    pub version: u64,
    /// When it was saved (aware UTC).
    pub saved_at: DateTime<Utc>,
    /// Compression level it was saved with (0..=3).
    pub compression_level: u8,
    /// Size of the content as canonical JSON.
    pub raw_bytes: u64,
    /// Bytes stored.
    pub stored_bytes: u64,
}

#[pymethods]
impl SessionVersionInfo {
    fn __repr__(&self) -> String {
        format!(
            "SessionVersionInfo(version={}, saved_at={}, compression_level={}, raw_bytes={}, stored_bytes={})",
            self.version,
            dt(&self.saved_at),
            self.compression_level,
            self.raw_bytes,
            self.stored_bytes
        )
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
