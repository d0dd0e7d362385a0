//! `memstrata.Memory`: the engine handle, its options, contexts and lifecycle.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::clock::ManualClock;
use crate::convert;
use crate::episodic::Episodic;
use crate::error::{closed, run};
use crate::procedural::Procedural;
use crate::semantic::Semantic;
use crate::short_term::ShortTerm;
use crate::working::Working;

/// The shared slot behind a Python `Memory` and its layer objects; emptied by `close()`.
#[derive(Debug)]
pub(crate) struct Handle {
    inner: RwLock<Option<memstrata::Memory>>,
}

impl Handle {
    pub(crate) fn new(mem: memstrata::Memory) -> Arc<Handle> {
        Arc::new(Handle {
            inner: RwLock::new(Some(mem)),
        })
    }

    /// A clone of the core handle (an `Arc` inside), or the "closed" error.
    pub(crate) fn get(&self) -> PyResult<memstrata::Memory> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner).clone().ok_or_else(closed)
    }

    fn take(&self) -> Option<memstrata::Memory> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn is_closed(&self) -> bool {
        self.inner.read().unwrap_or_else(PoisonError::into_inner).is_none()
    }
}

/// Maximum JSON nesting the store accepts (used to bound conversion of Python values).
pub(crate) fn max_depth(mem: &memstrata::Memory) -> usize {
    mem.options().limits.max_json_depth
}

/// A Memstrata store (or a namespace handle on one). Thread-safe; every call releases the GIL.
#[pyclass(frozen, module = "memstrata")]
#[derive(Debug)]
pub struct Memory {
    h: Arc<Handle>,
    /// Short-term key/value layer of the active context.
    #[pyo3(get)]
    short_term: Py<ShortTerm>,
    /// Working memory (focus and workspace) of the active context.
    #[pyo3(get)]
    working: Py<Working>,
    /// Episodic layer of the active context.
    #[pyo3(get)]
    episodic: Py<Episodic>,
    /// Semantic layer of the active context.
    #[pyo3(get)]
    semantic: Py<Semantic>,
    /// Procedures of the active context.
    #[pyo3(get)]
    procedural: Py<Procedural>,
}

impl Memory {
    pub(crate) fn wrap(py: Python<'_>, mem: memstrata::Memory) -> PyResult<Memory> {
        let h = Handle::new(mem);
        Ok(Memory {
            short_term: Py::new(py, ShortTerm::new(Arc::clone(&h)))?,
            working: Py::new(py, Working::new(Arc::clone(&h)))?,
            episodic: Py::new(py, Episodic::new(Arc::clone(&h)))?,
            semantic: Py::new(py, Semantic::new(Arc::clone(&h)))?,
            procedural: Py::new(py, Procedural::new(Arc::clone(&h)))?,
            h,
        })
    }

    pub(crate) fn core(&self) -> PyResult<memstrata::Memory> {
        self.h.get()
    }
}

#[pymethods]
impl Memory {
    /// Open (or create) the store at `path`; `path=None` makes a temporary store
    /// deleted when the last handle on it is closed.
    #[new]
    #[pyo3(text_signature = "(path=None, *, durability='periodic', cache_bytes=None, focus_capacity=None, workspace_capacity=None, session_retention=None, workspace_roots=None, index_writer_bytes=None, semantic_history=None, max_steps=None, clock=None)")]
    #[pyo3(signature = (
        path=None,
        *,
        durability=String::from("periodic"),
        cache_bytes=None,
        focus_capacity=None,
        workspace_capacity=None,
        session_retention=None,
        workspace_roots=None,
        index_writer_bytes=None,
        semantic_history=None,
        max_steps=None,
        clock=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        py: Python<'_>,
        path: Option<PathBuf>,
        durability: String,
        cache_bytes: Option<&Bound<'_, PyAny>>,
        focus_capacity: Option<&Bound<'_, PyAny>>,
        workspace_capacity: Option<&Bound<'_, PyAny>>,
        session_retention: Option<&Bound<'_, PyAny>>,
        workspace_roots: Option<Vec<PathBuf>>,
        index_writer_bytes: Option<&Bound<'_, PyAny>>,
        semantic_history: Option<&Bound<'_, PyAny>>,
        max_steps: Option<&Bound<'_, PyAny>>,
        clock: Option<PyRef<'_, ManualClock>>,
    ) -> PyResult<Memory> {
        let durability: memstrata::Durability = durability.as_str().parse().map_err(crate::error::to_py)?;
        let mut limits = memstrata::Limits::default();
        if let Some(n) = convert::opt_int::<usize>(focus_capacity, "focus_capacity")? {
            limits.focus_capacity = n;
        }
        if let Some(n) = convert::opt_int::<usize>(workspace_capacity, "workspace_capacity")? {
            limits.workspace_capacity = n;
        }
        if let Some(n) = convert::opt_int::<usize>(semantic_history, "semantic_history")? {
            limits.semantic_history = n;
        }
        if let Some(n) = convert::opt_int::<usize>(max_steps, "max_steps")? {
            limits.max_steps = n;
        }
        let mut b = memstrata::Memory::builder().durability(durability).limits(limits);
        b = match path {
            Some(p) => b.path(p),
            None => b.temporary(),
        };
        if let Some(n) = convert::opt_int::<u64>(cache_bytes, "cache_bytes")? {
            b = b.cache_bytes(n);
        }
        if let Some(n) = convert::opt_int::<usize>(index_writer_bytes, "index_writer_bytes")? {
            b = b.index_writer_bytes(n);
        }
        if let Some(n) = convert::opt_int::<usize>(session_retention, "session_retention")? {
            b = b.session_retention(n);
        }
        for root in workspace_roots.unwrap_or_default() {
            b = b.workspace_root(root);
        }
        if let Some(c) = clock {
            b = b.clock(c.core());
        }
        let mem = run(py, move || b.open())?;
        Memory::wrap(py, mem)
    }

    /// A new handle on the same store whose active context is `name`.
    fn namespace(&self, py: Python<'_>, name: String) -> PyResult<Memory> {
        let mem = self.core()?;
        let ns = run(py, || mem.namespace(&name))?;
        Memory::wrap(py, ns)
    }

    /// The active context of this handle.
    #[getter]
    fn active_context(&self) -> PyResult<String> {
        Ok(self.core()?.active_context())
    }

    /// Make `target` the active context of this handle. With `preserve_current=False`
    /// the working memory of the context being left is cleared.
    #[pyo3(signature = (target, preserve_current=true))]
    fn switch_context(&self, py: Python<'_>, target: String, preserve_current: bool) -> PyResult<SwitchResult> {
        let mem = self.core()?;
        let r = run(py, || mem.switch_context(&target, preserve_current))?;
        Ok(SwitchResult {
            success: r.success,
            previous_context: r.previous_context,
            context_loaded: r.context_loaded,
        })
    }

    /// Contexts that hold (or held) data, sorted; always includes "default".
    fn contexts(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mem = self.core()?;
        run(py, || mem.contexts())
    }

    /// Commit the index and fsync everything now.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let mem = self.core()?;
        run(py, || mem.flush())
    }

    /// Flush and release this handle. Every later call on it (and on its layer
    /// objects) raises `MemstrataError`. The store itself closes when its last
    /// handle (namespaces included) is closed or garbage-collected. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(mem) = self.h.take() else { return Ok(()) };
        run(py, move || {
            let r = mem.flush();
            drop(mem);
            r
        })
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.h.is_closed()
    }

    /// The store directory.
    #[getter]
    fn path(&self) -> PyResult<PathBuf> {
        Ok(self.core()?.path())
    }

    /// True for a temporary store (`Memory()` / `Memory(None)`).
    #[getter]
    fn is_temporary(&self) -> PyResult<bool> {
        Ok(self.core()?.is_temporary())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type=None, exc_value=None, traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        exc_value: Option<&Bound<'_, PyAny>>,
        traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = (exc_type, exc_value, traceback);
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.h.get() {
            Ok(m) => format!(
                "Memory(path={}, active_context={}{})",
                crate::repr::pystr(&m.path().display().to_string()),
                crate::repr::pystr(&m.active_context()),
                if m.is_temporary() { ", temporary=True" } else { "" }
            ),
            Err(_) => "Memory(<closed>)".to_owned(),
        }
    }
}

/// Result of `Memory.switch_context`.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct SwitchResult {
    /// Always True when returned.
    pub success: bool,
    /// The context that was active before.
    pub previous_context: String,
    /// True when the target context already held data.
    pub context_loaded: bool,
}

#[pymethods]
impl SwitchResult {
    fn __repr__(&self) -> String {
        format!(
            "SwitchResult(success={}, previous_context={}, context_loaded={})",
            crate::repr::bool(self.success),
            crate::repr::pystr(&self.previous_context),
            crate::repr::bool(self.context_loaded)
        )
    }
}
