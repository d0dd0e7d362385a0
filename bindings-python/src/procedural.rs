//! `Memory.procedural`: procedures (wrapped once `memstrata::Procedural` lands in the core).

use std::sync::Arc;

use pyo3::prelude::*;

use crate::memory::Handle;

/// Procedures of the active context (`mem.procedural`).
#[pyclass(frozen, module = "memstrata")]
#[derive(Debug)]
pub struct Procedural {
    #[allow(dead_code)]
    h: Arc<Handle>,
}

impl Procedural {
    pub(crate) fn new(h: Arc<Handle>) -> Self {
        Procedural { h }
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Procedural>()
}
