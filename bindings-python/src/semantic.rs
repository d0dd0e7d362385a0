//! `Memory.semantic`: keyed knowledge with merge-patch updates, history and full-text query.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use pyo3::prelude::*;

use crate::convert;
use crate::episodic::DEFAULT_LIMIT;
use crate::error::run;
use crate::memory::{Handle, max_depth};
use crate::repr::{dt, pystr};

/// The semantic layer of the active context (`mem.semantic`).
#[pyclass(frozen, module = "memstrata")]
#[derive(Debug)]
pub struct Semantic {
    h: Arc<Handle>,
}

impl Semantic {
    pub(crate) fn new(h: Arc<Handle>) -> Self {
        Semantic { h }
    }
}

#[pymethods]
impl Semantic {
    /// Store (replace) the knowledge under `key`; returns the new entry.
    fn store(
        &self,
        py: Python<'_>,
        key: String,
        knowledge: &Bound<'_, PyAny>,
    ) -> PyResult<Knowledge> {
        let mem = self.h.get()?;
        let knowledge = convert::to_json(knowledge, "knowledge", max_depth(&mem))?;
        let k = run(py, || mem.semantic().store(&key, knowledge))?;
        Knowledge::from_core(py, k)
    }

    /// The knowledge under `key`, or None.
    fn retrieve(&self, py: Python<'_>, key: String) -> PyResult<Py<PyAny>> {
        let mem = self.h.get()?;
        let v = run(py, || mem.semantic().retrieve(&key))?;
        convert::opt_to_py(py, v.as_ref())
    }

    /// The entry under `key` with version and timestamps, or None.
    fn get(&self, py: Python<'_>, key: String) -> PyResult<Option<Knowledge>> {
        let mem = self.h.get()?;
        let k = run(py, || mem.semantic().get(&key))?;
        k.map(|k| Knowledge::from_core(py, k)).transpose()
    }

    /// Full-text query over keys and knowledge text (plain text, no syntax).
    #[pyo3(signature = (text, limit=None))]
    fn query(
        &self,
        py: Python<'_>,
        text: String,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<KnowledgeHit>> {
        let mem = self.h.get()?;
        let limit = convert::opt_int::<usize>(limit, "limit")?.unwrap_or(DEFAULT_LIMIT);
        let hits = run(py, || mem.semantic().query(&text, limit))?;
        hits.into_iter()
            .map(|h| KnowledgeHit::from_core(py, h))
            .collect()
    }

    /// Apply an RFC 7386 JSON Merge Patch to an existing entry (NotFoundError otherwise).
    fn update(&self, py: Python<'_>, key: String, patch: &Bound<'_, PyAny>) -> PyResult<Knowledge> {
        let mem = self.h.get()?;
        let patch = convert::to_json(patch, "patch", max_depth(&mem))?;
        let k = run(py, || mem.semantic().update(&key, patch))?;
        Knowledge::from_core(py, k)
    }

    /// Delete the entry and its history; True when it existed.
    fn forget(&self, py: Python<'_>, key: String) -> PyResult<bool> {
        let mem = self.h.get()?;
        run(py, || mem.semantic().forget(&key))
    }

    /// Kept versions, oldest first (the last one is the current value).
    fn history(&self, py: Python<'_>, key: String) -> PyResult<Vec<KnowledgeVersion>> {
        let mem = self.h.get()?;
        let versions = run(py, || mem.semantic().history(&key))?;
        versions
            .into_iter()
            .map(|v| KnowledgeVersion::from_core(py, v))
            .collect()
    }

    /// Keys starting with `prefix` (empty: all), sorted.
    #[pyo3(signature = (prefix=String::new()), text_signature = "($self, prefix='')")]
    fn keys(&self, py: Python<'_>, prefix: String) -> PyResult<Vec<String>> {
        let mem = self.h.get()?;
        run(py, || mem.semantic().keys(&prefix))
    }

    fn __repr__(&self) -> String {
        "<memstrata.Semantic>".to_owned()
    }
}

/// A semantic entry.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct Knowledge {
    /// The key.
    pub key: String,
    /// The knowledge (JSON-like).
    pub knowledge: Py<PyAny>,
    /// 1 on first store, +1 on every store / update.
    pub version: u64,
    /// First stored (aware UTC).
    pub created_at: DateTime<Utc>,
    /// Last changed (aware UTC).
    pub updated_at: DateTime<Utc>,
}

impl Knowledge {
    fn from_core(py: Python<'_>, k: memstrata::Knowledge) -> PyResult<Self> {
        Ok(Knowledge {
            knowledge: convert::to_py(py, &k.knowledge)?,
            key: k.key,
            version: k.version,
            created_at: k.created_at,
            updated_at: k.updated_at,
        })
    }
}

#[pymethods]
impl Knowledge {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Knowledge(key={}, knowledge={}, version={}, created_at={}, updated_at={})",
            pystr(&self.key),
            crate::repr::obj(py, &self.knowledge),
            self.version,
            dt(&self.created_at),
            dt(&self.updated_at)
        )
    }
}

/// One kept version of a semantic entry.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct KnowledgeVersion {
    /// Version number.
    pub version: u64,
    /// The knowledge at that version.
    pub knowledge: Py<PyAny>,
    /// When that version was written (aware UTC).
    pub recorded_at: DateTime<Utc>,
}

impl KnowledgeVersion {
    fn from_core(py: Python<'_>, v: memstrata::KnowledgeVersion) -> PyResult<Self> {
        Ok(KnowledgeVersion {
            knowledge: convert::to_py(py, &v.knowledge)?,
            version: v.version,
            recorded_at: v.recorded_at,
        })
    }
}

#[pymethods]
impl KnowledgeVersion {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "KnowledgeVersion(version={}, knowledge={}, recorded_at={})",
            self.version,
            crate::repr::obj(py, &self.knowledge),
            dt(&self.recorded_at)
        )
    }
}

/// One `query` result.
#[pyclass(frozen, get_all, module = "memstrata")]
#[derive(Debug)]
pub struct KnowledgeHit {
    /// The key.
    pub key: String,
    /// The knowledge.
    pub knowledge: Py<PyAny>,
    /// BM25 score.
    pub score: f64,
}

impl KnowledgeHit {
    fn from_core(py: Python<'_>, h: memstrata::KnowledgeHit) -> PyResult<Self> {
        Ok(KnowledgeHit {
            knowledge: convert::to_py(py, &h.knowledge)?,
            key: h.key,
            score: f64::from(h.score),
        })
    }
}

#[pymethods]
impl KnowledgeHit {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "KnowledgeHit(key={}, score={:.4}, knowledge={})",
            pystr(&self.key),
            self.score,
            crate::repr::obj(py, &self.knowledge)
        )
    }
}
