//! `Memory.semantic`: keyed knowledge with merge-patch updates, history and full-text query.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use memstrata_bindings_common::{self as common, Handle};
use pyo3::prelude::*;

use crate::convert;
use crate::error::{run, to_py};
use crate::memory::{HandleExt, max_depth};
use crate::records::{class, classes, py_records, pystr};

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
    ///
    /// `embedding`: the host's vector for the entry; without it, the embedder set with
    /// `Memory.set_embedder` (if any) is called on the key plus the knowledge's text.
    ///
    /// `on_duplicate` (`"keep"`, `"skip"`, `"merge"` or `"link"`; default the
    /// context's policy) says what to do when another entry holds the same or a
    /// near-identical value; the result's `duplicate_of` names it.
    ///
    /// `valid_from` / `valid_until` (aware datetimes): when the new version starts
    /// (default now) and stops (exclusive; default open) holding. The version it
    /// supersedes stays in history, its validity closed at the new `valid_from`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (key, knowledge, *, embedding=None, on_duplicate=None, valid_from=None, valid_until=None))]
    fn store(
        &self,
        py: Python<'_>,
        key: String,
        knowledge: &Bound<'_, PyAny>,
        embedding: Option<&Bound<'_, PyAny>>,
        on_duplicate: Option<String>,
        valid_from: Option<&Bound<'_, PyAny>>,
        valid_until: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Knowledge> {
        let mem = self.h.core()?;
        let knowledge = convert::to_json(knowledge, "knowledge", max_depth(&mem))?;
        let opts = common::StoreOptions {
            embedding: convert::opt_floats(embedding, "embedding")?.map(Into::into),
            on_duplicate,
            valid_from: convert::opt_timestamp(valid_from, "valid_from")?,
            valid_until: convert::opt_timestamp(valid_until, "valid_until")?,
        }
        .core()
        .map_err(to_py)?;
        let k = run(py, || mem.semantic().store_with(&key, knowledge, opts))?;
        class(py, k)
    }

    /// Store (replace) many entries in one call; returns the new entries, in order.
    ///
    /// Each item is a dict `{"key": ..., "knowledge": ..., "embedding": ..., "on_duplicate": ...}`
    /// (embedding, on_duplicate, valid_from and valid_until optional, as in `store`), applied in order (a key given twice ends with
    /// its last value). Each item goes through its duplicate policy as in `store` (against
    /// the stored entries and the batch's earlier items; `duplicate_of` on each result). All or
    /// nothing: every item is checked first, with the checks and limits of `store`; a bad
    /// item raises with its field named `items[i].field` and nothing is stored. One
    /// storage transaction and one index batch per call; at most 10,000 items and
    /// 64 MiB per call (`LimitExceededError` on `items`).
    fn store_many(&self, py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<Vec<Knowledge>> {
        let mem = self.h.core()?;
        let depth = max_depth(&mem);
        let iter = items.try_iter().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err("items: expected an iterable of dicts")
        })?;
        let mut list = Vec::new();
        for (i, item) in iter.enumerate() {
            let item = item?;
            let at = format!("items[{i}]");
            let (mut key, mut knowledge, mut embedding, mut on_duplicate) =
                (None, None, None, None);
            let (mut valid_from, mut valid_until) = (None, None);
            for (k, v) in convert::item_fields(
                &item,
                &at,
                &[
                    "key",
                    "knowledge",
                    "embedding",
                    "on_duplicate",
                    "valid_from",
                    "valid_until",
                ],
            )? {
                let f = format!("{at}.{k}");
                match k.as_str() {
                    "key" => {
                        key = Some(v.extract::<String>().map_err(|_| {
                            pyo3::exceptions::PyTypeError::new_err(format!("{f}: expected str"))
                        })?)
                    }
                    "knowledge" => knowledge = Some(convert::to_json(&v, &f, depth)?),
                    "on_duplicate" => on_duplicate = convert::opt_str(Some(&v), &f)?,
                    "valid_from" => valid_from = convert::opt_timestamp(Some(&v), &f)?,
                    "valid_until" => valid_until = convert::opt_timestamp(Some(&v), &f)?,
                    _ => embedding = convert::opt_floats(Some(&v), &f)?,
                }
            }
            let Some(key) = key else {
                return Err(crate::error::invalid(&format!("{at}.key"), "is required"));
            };
            let Some(knowledge) = knowledge else {
                return Err(crate::error::invalid(
                    &format!("{at}.knowledge"),
                    "is required",
                ));
            };
            list.push(common::KnowledgeItem {
                key,
                knowledge: knowledge.into(),
                embedding: embedding.map(Into::into),
                on_duplicate,
                valid_from,
                valid_until,
            });
        }
        let items = common::items::knowledge(list).map_err(to_py)?;
        let ks = run(py, || mem.semantic().store_many(items))?;
        classes(py, ks)
    }

    /// The knowledge under `key`, or None. With `as_of` (an aware datetime): the
    /// value that held then (None when no kept version held).
    #[pyo3(signature = (key, *, as_of=None))]
    fn retrieve(
        &self,
        py: Python<'_>,
        key: String,
        as_of: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let mem = self.h.core()?;
        let opts = common::as_of(convert::opt_timestamp(as_of, "as_of")?);
        let v = run(py, || mem.semantic().get_with(&key, &opts))?;
        convert::opt_to_py(py, v.map(|k| k.knowledge).as_ref())
    }

    /// The entry under `key` with version, timestamps and validity, or None. With
    /// `as_of` (an aware datetime): its version that held then, from the kept history.
    #[pyo3(signature = (key, *, as_of=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: String,
        as_of: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Knowledge>> {
        let mem = self.h.core()?;
        let opts = common::as_of(convert::opt_timestamp(as_of, "as_of")?);
        let k = run(py, || mem.semantic().get_with(&key, &opts))?;
        k.map(|k| class(py, k)).transpose()
    }

    /// Full-text query over keys and knowledge text (plain text, no syntax).
    ///
    /// `embedding` and the fusion arguments work as in `Episodic.search`; with an
    /// empty `text` and an embedding, pure vector search.
    ///
    /// Entries whose current version expired (`valid_until` in the past) are left
    /// out unless `include_expired`; with `as_of` (an aware datetime), each entry's
    /// version that held then (entries with none are left out).
    #[pyo3(signature = (text, limit=None, *, embedding=None, fusion=None, bm25_weight=None, vector_weight=None, rrf_k=None, as_of=None, include_expired=None))]
    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        py: Python<'_>,
        text: String,
        limit: Option<&Bound<'_, PyAny>>,
        embedding: Option<&Bound<'_, PyAny>>,
        fusion: Option<String>,
        bm25_weight: Option<&Bound<'_, PyAny>>,
        vector_weight: Option<&Bound<'_, PyAny>>,
        rrf_k: Option<&Bound<'_, PyAny>>,
        as_of: Option<&Bound<'_, PyAny>>,
        include_expired: Option<bool>,
    ) -> PyResult<Vec<KnowledgeHit>> {
        let mem = self.h.core()?;
        let q = common::QueryOptions {
            limit: convert::opt_limit(limit, "limit")?,
            embedding: convert::opt_floats(embedding, "embedding")?.map(Into::into),
            fusion,
            bm25_weight: convert::opt_float(bm25_weight, "bm25_weight")?,
            vector_weight: convert::opt_float(vector_weight, "vector_weight")?,
            rrf_k: convert::opt_float(rrf_k, "rrf_k")?,
            as_of: convert::opt_timestamp(as_of, "as_of")?,
            include_expired,
        };
        let read = q.read();
        let (limit, vq) = q.query().map_err(to_py)?;
        let hits = run(py, || mem.semantic().query_with(&text, limit, &vq, &read))?;
        classes(py, hits)
    }

    /// Apply an RFC 7386 JSON Merge Patch to an existing entry (NotFoundError otherwise).
    ///
    /// `valid_from` / `valid_until` as in `store`: the new version holds from
    /// `valid_from` (default now); the one it supersedes stays in history, closed then.
    #[pyo3(signature = (key, patch, *, valid_from=None, valid_until=None))]
    fn update(
        &self,
        py: Python<'_>,
        key: String,
        patch: &Bound<'_, PyAny>,
        valid_from: Option<&Bound<'_, PyAny>>,
        valid_until: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Knowledge> {
        let mem = self.h.core()?;
        let patch = convert::to_json(patch, "patch", max_depth(&mem))?;
        let opts = common::UpdateOptions {
            valid_from: convert::opt_timestamp(valid_from, "valid_from")?,
            valid_until: convert::opt_timestamp(valid_until, "valid_until")?,
        }
        .core();
        let k = run(py, || mem.semantic().update_with(&key, patch, opts))?;
        class(py, k)
    }

    /// Delete the entry and its history; True when it existed.
    fn forget(&self, py: Python<'_>, key: String) -> PyResult<bool> {
        let mem = self.h.core()?;
        run(py, || mem.semantic().forget(&key))
    }

    /// Kept versions, oldest first (the last one is the current value).
    fn history(&self, py: Python<'_>, key: String) -> PyResult<Vec<KnowledgeVersion>> {
        let mem = self.h.core()?;
        let versions = run(py, || mem.semantic().history(&key))?;
        classes(py, versions)
    }

    /// Keys starting with `prefix` (empty: all), sorted.
    #[pyo3(signature = (prefix=String::new()), text_signature = "($self, prefix='')")]
    fn keys(&self, py: Python<'_>, prefix: String) -> PyResult<Vec<String>> {
        let mem = self.h.core()?;
        run(py, || mem.semantic().keys(&prefix))
    }

    fn __repr__(&self) -> String {
        "<memstrata.Semantic>".to_owned()
    }
}

py_records! {
    /// A semantic entry.
    Knowledge from common::Knowledge, repr [key, knowledge, version, created_at, updated_at] {
        /// The key.
        key: String,
        /// The knowledge (JSON-like).
        knowledge: Py<PyAny>,
        /// 1 on first store, +1 on every store / update.
        version: i64,
        /// First stored (aware UTC).
        created_at: DateTime<Utc>,
        /// Last changed (aware UTC).
        updated_at: DateTime<Utc>,
        /// From `store`: the entry found to duplicate the value (this key's own when
        /// unchanged), whatever the policy; from `get`: the entry it was linked to.
        duplicate_of: Option<String>,
        /// When this version starts to hold (aware UTC; default: when it was written).
        valid_from: DateTime<Utc>,
        /// When it stops holding (exclusive; set by the caller or by the version that
        /// superseded it); None: open.
        valid_until: Option<DateTime<Utc>>,
    }

    /// One kept version of a semantic entry.
    KnowledgeVersion from common::KnowledgeVersion, repr [version, knowledge, recorded_at] {
        /// Version number.
        version: i64,
        /// The knowledge at that version.
        knowledge: Py<PyAny>,
        /// When that version was written (aware UTC).
        recorded_at: DateTime<Utc>,
        /// When it starts to hold (aware UTC).
        valid_from: DateTime<Utc>,
        /// When it stops holding (exclusive; closed by the version that superseded it);
        /// None: open.
        valid_until: Option<DateTime<Utc>>,
    }

    /// One `query` result.
    KnowledgeHit from common::KnowledgeHit, repr custom {
        /// The key.
        key: String,
        /// The knowledge.
        knowledge: Py<PyAny>,
        /// BM25 score.
        score: f64,
        /// 1-based rank in the text (BM25) list; None when that list did not find the hit.
        bm25_rank: Option<i64>,
        /// 1-based rank in the vector list; None when that list did not find the hit.
        vector_rank: Option<i64>,
        /// When the version returned starts to hold (aware UTC; with `as_of`: the
        /// version that held then).
        valid_from: DateTime<Utc>,
        /// When it stops holding (exclusive); None: open.
        valid_until: Option<DateTime<Utc>>,
    }
}

impl KnowledgeHit {
    fn repr(&self, py: Python<'_>) -> String {
        use crate::records::PyRepr as _;
        format!(
            "KnowledgeHit(key={}, score={:.4}, knowledge={})",
            pystr(&self.key),
            self.score,
            self.knowledge.py_repr(py)
        )
    }
}
