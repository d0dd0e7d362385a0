//! `Memory.set_embedder`: a Python callable as the engine's embedder.

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert;
use crate::procedural::describe;

/// Calls `fn(texts: list[str]) -> list[list[float]]` with the GIL held (the
/// engine calls embedders from calls that released it).
pub(crate) struct PyEmbedder {
    func: Py<PyAny>,
}

impl PyEmbedder {
    pub(crate) fn new(func: Py<PyAny>) -> Self {
        PyEmbedder { func }
    }
}

impl memstrata::Embedder for PyEmbedder {
    fn embed(&self, texts: &[&str]) -> memstrata::Result<Vec<Vec<f32>>> {
        Python::attach(|py| {
            let fail = |e: &PyErr| {
                memstrata::Error::invalid(
                    "embedder",
                    format!("embedder raised {}", describe(py, e)),
                )
            };
            let arg = PyList::new(py, texts).map_err(|e| fail(&e))?;
            let out = self.func.call1(py, (arg,)).map_err(|e| fail(&e))?;
            let out = out.bind(py);
            let iter = out.try_iter().map_err(|_| {
                memstrata::Error::invalid(
                    "embedder",
                    "must return a list of vectors (one sequence of floats per text)",
                )
            })?;
            let mut vectors = Vec::new();
            for (i, item) in iter.enumerate() {
                let item = item.map_err(|e| fail(&e))?;
                let v = convert::floats(&item, &format!("embedder result[{i}]"))
                    .map_err(|e| memstrata::Error::invalid("embedder", describe(py, &e)))?;
                vectors.push(memstrata_bindings_common::embedding_from_f64(
                    "embedder", &v,
                )?);
            }
            Ok(vectors)
        })
    }
}
