//! `Memory.working`: the bounded focus list and workspace of the active context.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use memstrata_bindings_common::{self as common, Handle};
use pyo3::prelude::*;

use crate::convert;
use crate::error::run;
use crate::memory::{HandleExt, max_depth};
use crate::records::{classes, py_records};

/// Working memory of the active context (`mem.working`).
#[pyclass(frozen, module = "memstrata")]
#[derive(Debug)]
pub struct Working {
    h: Arc<Handle>,
}

impl Working {
    pub(crate) fn new(h: Arc<Handle>) -> Self {
        Working { h }
    }
}

#[pymethods]
impl Working {
    /// Put `item` in focus; False when it already was. The oldest item is evicted past capacity.
    fn focus(&self, py: Python<'_>, item: String) -> PyResult<bool> {
        let mem = self.h.core()?;
        run(py, || mem.working().focus(&item))
    }

    /// Items in focus, oldest first.
    fn current_focus(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mem = self.h.core()?;
        run(py, || mem.working().current_focus())
    }

    /// Add a value to the workspace; returns its id. The oldest item is evicted past capacity.
    fn add_to_workspace(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<String> {
        let mem = self.h.core()?;
        let value = convert::to_json(value, "value", max_depth(&mem))?;
        run(py, || mem.working().add_to_workspace(value))
    }

    /// Workspace values, oldest first.
    fn workspace(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let mem = self.h.core()?;
        let values = run(py, || mem.working().workspace())?;
        values.iter().map(|v| convert::to_py(py, v)).collect()
    }

    /// Workspace items with ids and timestamps, oldest first.
    fn workspace_items(&self, py: Python<'_>) -> PyResult<Vec<WorkspaceItem>> {
        let mem = self.h.core()?;
        let items = run(py, || mem.working().workspace_items())?;
        classes(py, items)
    }

    /// Empty focus and workspace.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let mem = self.h.core()?;
        run(py, || mem.working().clear())
    }

    fn __repr__(&self) -> String {
        "<memstrata.Working>".to_owned()
    }
}

py_records! {
    /// One workspace item.
    WorkspaceItem from common::WorkspaceItem, repr [id, value, added_at] {
        /// Id returned by `add_to_workspace`.
        id: String,
        /// The value.
        value: Py<PyAny>,
        /// When it was added (aware UTC).
        added_at: DateTime<Utc>,
    }
}
