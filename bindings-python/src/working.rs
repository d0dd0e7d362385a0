//! `Memory.working`: the bounded focus list and workspace of the active context.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use pyo3::prelude::*;

use crate::convert;
use crate::error::run;
use crate::memory::{Handle, max_depth};
use crate::repr::{dt, pystr};

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
        let mem = self.h.get()?;
        run(py, || mem.working().focus(&item))
    }

    /// Items in focus, oldest first.
    fn current_focus(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mem = self.h.get()?;
        run(py, || mem.working().current_focus())
    }

    /// Add a value to the workspace; returns its id. The oldest item is evicted past capacity.
    fn add_to_workspace(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<String> {
        let mem = self.h.get()?;
        let value = convert::to_json(value, "value", max_depth(&mem))?;
        run(py, || mem.working().add_to_workspace(value))
    }

    /// Workspace values, oldest first.
    fn workspace(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let mem = self.h.get()?;
        let values = run(py, || mem.working().workspace())?;
        values.iter().map(|v| convert::to_py(py, v)).collect()
    }

    /// Workspace items with ids and timestamps, oldest first.
    fn workspace_items(&self, py: Python<'_>) -> PyResult<Vec<WorkspaceItem>> {
        let mem = self.h.get()?;
        let items = run(py, || mem.working().workspace_items())?;
        items
            .into_iter()
            .map(|i| WorkspaceItem::from_core(py, i))
            .collect()
    }

    /// Empty focus and workspace.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let mem = self.h.get()?;
        run(py, || mem.working().clear())
    }

    fn __repr__(&self) -> String {
        "<memstrata.Working>".to_owned()
    }
}

/// One workspace item.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct WorkspaceItem {
    /// Id returned by `add_to_workspace`.
    pub id: String,
    /// The value.
    pub value: Py<PyAny>,
    /// When it was added (aware UTC).
    pub added_at: DateTime<Utc>,
}

impl WorkspaceItem {
    fn from_core(py: Python<'_>, i: memstrata::WorkspaceItem) -> PyResult<Self> {
        Ok(WorkspaceItem {
            value: convert::to_py(py, &i.value)?,
            id: i.id,
            added_at: i.added_at,
        })
    }
}

#[pymethods]
impl WorkspaceItem {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "WorkspaceItem(id={}, value={}, added_at={})",
            pystr(&self.id),
            crate::repr::obj(py, &self.value),
            dt(&self.added_at)
        )
    }
}
