//! `memstrata.Memory`: the engine handle, its options, contexts and lifecycle.

use std::path::PathBuf;
use std::sync::Arc;

use memstrata_bindings_common::{self as common, Handle, OpenOptions, defaults};
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::clock::ManualClock;
use crate::convert;
use crate::episodic::Episodic;
use crate::error::{run, to_py};
use crate::procedural::Procedural;
use crate::records::{class, py_records};
use crate::semantic::Semantic;
use crate::short_term::ShortTerm;
use crate::working::Working;
use crate::{contexts, export, sessions, status, timesheet};

/// The common closable [`Handle`] as Python sees it: the core handle, or `CLOSED` raised.
pub(crate) trait HandleExt {
    fn core(&self) -> PyResult<memstrata::Memory>;
}

impl HandleExt for Handle {
    fn core(&self) -> PyResult<memstrata::Memory> {
        self.get().map_err(to_py)
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
        self.h.core()
    }
}

#[pymethods]
impl Memory {
    /// Open (or create) the store at `path`; `path=None` makes a temporary store
    /// deleted when the last handle on it is closed.
    #[new]
    #[pyo3(
        text_signature = "(path=None, *, durability='periodic', cache_bytes=None, focus_capacity=None, workspace_capacity=None, session_retention=None, workspace_roots=None, index_writer_bytes=None, semantic_history=None, max_steps=None, clock=None, encryption_key=None, low_memory=None, episode_cache_bytes=None, short_term_cache_bytes=None, index_cache_bytes=None, release_memory_interval=None)"
    )]
    #[pyo3(signature = (
        path=None,
        *,
        durability=defaults::DEFAULT_DURABILITY.to_owned(),
        cache_bytes=None,
        focus_capacity=None,
        workspace_capacity=None,
        session_retention=None,
        workspace_roots=None,
        index_writer_bytes=None,
        semantic_history=None,
        max_steps=None,
        clock=None,
        encryption_key=None,
        low_memory=None,
        episode_cache_bytes=None,
        short_term_cache_bytes=None,
        index_cache_bytes=None,
        release_memory_interval=None,
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
        encryption_key: Option<&[u8]>,
        low_memory: Option<bool>,
        episode_cache_bytes: Option<&Bound<'_, PyAny>>,
        short_term_cache_bytes: Option<&Bound<'_, PyAny>>,
        index_cache_bytes: Option<&Bound<'_, PyAny>>,
        release_memory_interval: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Memory> {
        let options = OpenOptions {
            durability: Some(durability),
            cache_bytes: convert::opt_int(cache_bytes, "cache_bytes")?,
            focus_capacity: convert::opt_int(focus_capacity, "focus_capacity")?,
            workspace_capacity: convert::opt_int(workspace_capacity, "workspace_capacity")?,
            session_retention: convert::opt_int(session_retention, "session_retention")?,
            // Added to the builder below as paths: they need not be UTF-8.
            workspace_roots: None,
            index_writer_bytes: convert::opt_int(index_writer_bytes, "index_writer_bytes")?,
            semantic_history: convert::opt_int(semantic_history, "semantic_history")?,
            max_steps: convert::opt_int(max_steps, "max_steps")?,
            encryption_key: encryption_key.map(|k| common::KeyBytes(k.to_vec())),
            low_memory,
            episode_cache_bytes: convert::opt_int(episode_cache_bytes, "episode_cache_bytes")?,
            short_term_cache_bytes: convert::opt_int(
                short_term_cache_bytes,
                "short_term_cache_bytes",
            )?,
            index_cache_bytes: convert::opt_int(index_cache_bytes, "index_cache_bytes")?,
            // Seconds or a timedelta; 0 turns it off (checked by the common layer).
            release_memory_interval: convert::seconds(
                release_memory_interval,
                "release_memory_interval",
            )?,
        };
        let mut b = options.builder(path).map_err(to_py)?;
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
    fn active_context(&self, py: Python<'_>) -> PyResult<String> {
        let mem = self.core()?;
        // Reading it may wait for a `switch_context` in progress: do it without the GIL.
        run(py, || Ok::<_, common::BindingError>(mem.active_context()))
    }

    /// Make `target` the active context of this handle. With `preserve_current=False`
    /// the working memory of the context being left is cleared.
    #[pyo3(
        signature = (target, preserve_current=defaults::DEFAULT_PRESERVE_CURRENT),
        text_signature = "($self, target, preserve_current=True)"
    )]
    fn switch_context(
        &self,
        py: Python<'_>,
        target: String,
        preserve_current: bool,
    ) -> PyResult<SwitchResult> {
        let mem = self.core()?;
        let r = run(py, || mem.switch_context(&target, preserve_current))?;
        class(py, r)
    }

    /// Contexts that hold (or held) data, sorted; always includes "default".
    fn contexts(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mem = self.core()?;
        run(py, || mem.contexts().list())
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
        // The flush runs without the GIL: other threads keep running meanwhile.
        run(py, || self.h.close())
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.h.is_closed()
    }

    /// The store directory (a `pathlib.Path`), or for a PostgreSQL store its URL as a
    /// `str` with any password replaced by `***` (a URL is not a path: `pathlib` would
    /// fold its `//`).
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let path = self.core()?.path();
        if memstrata::store_url::is_postgres_url(&path.to_string_lossy()) {
            Ok(memstrata::store_url::mask(&path.to_string_lossy())
                .into_pyobject(py)?
                .into_any())
        } else {
            Ok(path.into_pyobject(py)?.into_any())
        }
    }

    /// True for a temporary store (`Memory()` / `Memory(None)`).
    #[getter]
    fn is_temporary(&self) -> PyResult<bool> {
        Ok(self.core()?.is_temporary())
    }

    // ------------------------------------------------------------ sessions

    /// Create a session; `metadata` (JSON-like, default {}) comes back with every restore.
    #[pyo3(signature = (name, metadata=None))]
    fn session_create(
        &self,
        py: Python<'_>,
        name: String,
        metadata: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<sessions::SessionCreated> {
        sessions::create(py, &self.core()?, name, metadata)
    }

    /// Save `content` as the next version of a session. `compression_level` 0..=3
    /// (0: none, 1: lz4 (default), 2: lz4 high, 3: + delta against the previous version).
    #[pyo3(signature = (session_id, content, compression_level=None))]
    fn session_save(
        &self,
        py: Python<'_>,
        session_id: String,
        content: &Bound<'_, PyAny>,
        compression_level: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<sessions::SessionSaved> {
        sessions::save(py, &self.core()?, session_id, content, compression_level)
    }

    /// Restore a session: the latest version, or `version`. NotFoundError when absent.
    #[pyo3(signature = (session_id, version=None))]
    fn session_restore(
        &self,
        py: Python<'_>,
        session_id: String,
        version: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<sessions::SessionRestored> {
        sessions::restore(py, &self.core()?, session_id, version)
    }

    /// Every session, with its latest version and version count.
    fn session_list(&self, py: Python<'_>) -> PyResult<Vec<sessions::SessionInfo>> {
        sessions::list(py, &self.core()?)
    }

    /// The kept versions of a session, oldest first.
    fn session_versions(
        &self,
        py: Python<'_>,
        session_id: String,
    ) -> PyResult<Vec<sessions::SessionVersionInfo>> {
        sessions::versions(py, &self.core()?, session_id)
    }

    /// Delete a session and its versions; True when it existed.
    fn session_delete(&self, py: Python<'_>, session_id: String) -> PyResult<bool> {
        sessions::delete(py, &self.core()?, session_id)
    }

    // ------------------------------------------------------------ contexts

    /// Store `value` under `key` in the short-term layer of `namespace` (else the active context).
    #[pyo3(signature = (key, value, ttl=None, namespace=None))]
    fn context_store(
        &self,
        py: Python<'_>,
        key: String,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        namespace: Option<String>,
    ) -> PyResult<contexts::ContextStored> {
        contexts::store(py, &self.core()?, key, value, ttl, namespace)
    }

    /// The value under `key` in `namespace` (else the active context) with its
    /// timestamps, or None when absent or expired.
    #[pyo3(signature = (key, namespace=None))]
    fn context_retrieve(
        &self,
        py: Python<'_>,
        key: String,
        namespace: Option<String>,
    ) -> PyResult<Option<contexts::ContextValue>> {
        contexts::retrieve(py, &self.core()?, key, namespace)
    }

    /// Set the duplicate policy (`"keep"`, `"skip"`, `"merge"` or `"link"`) of
    /// `namespace` (else the active context): what `episodic.record` and
    /// `semantic.store` do without an `on_duplicate` of their own.
    #[pyo3(signature = (on_duplicate, namespace=None))]
    fn set_on_duplicate(
        &self,
        py: Python<'_>,
        on_duplicate: String,
        namespace: Option<String>,
    ) -> PyResult<()> {
        let mem = self.core()?;
        let p = common::on_duplicate(Some(&on_duplicate))
            .map_err(to_py)?
            .unwrap_or_default();
        run(py, || {
            mem.contexts().set_on_duplicate(p, namespace.as_deref())
        })
    }

    /// The duplicate policy of `namespace` (else the active context).
    #[pyo3(signature = (namespace=None))]
    fn on_duplicate(&self, py: Python<'_>, namespace: Option<String>) -> PyResult<String> {
        let mem = self.core()?;
        let p = run(py, || mem.contexts().on_duplicate(namespace.as_deref()))?;
        Ok(p.as_str().to_owned())
    }

    /// Set the retention policy of `namespace` (else the active context): at most
    /// `max_episodes` episodes, `max_bytes` stored bytes, episodes at most `max_age`
    /// old (seconds, or a timedelta). Past a limit the lowest-utility episodes
    /// (importance, recency, how often searches returned them) are evicted, each one
    /// audited (`evictions`). Enforced at once, on writes past a limit, and by
    /// `optimize`. With no limit, the context's policy is cleared.
    #[pyo3(signature = (*, max_episodes=None, max_bytes=None, max_age=None, namespace=None))]
    fn set_retention(
        &self,
        py: Python<'_>,
        max_episodes: Option<&Bound<'_, PyAny>>,
        max_bytes: Option<&Bound<'_, PyAny>>,
        max_age: Option<&Bound<'_, PyAny>>,
        namespace: Option<String>,
    ) -> PyResult<()> {
        contexts::set_retention(
            py,
            &self.core()?,
            max_episodes,
            max_bytes,
            max_age,
            namespace,
        )
    }

    /// The retention policy of `namespace` (else the active context); every limit None when none is set.
    #[pyo3(signature = (namespace=None))]
    fn retention(
        &self,
        py: Python<'_>,
        namespace: Option<String>,
    ) -> PyResult<contexts::Retention> {
        contexts::retention(py, &self.core()?, namespace)
    }

    /// The audit of episodes evicted from `namespace` (else the active context) by its retention policy, newest first, at most `limit` (default 10, at most 100).
    #[pyo3(signature = (namespace=None, limit=None))]
    fn evictions(
        &self,
        py: Python<'_>,
        namespace: Option<String>,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<contexts::Eviction>> {
        contexts::evictions(py, &self.core()?, namespace, limit)
    }

    // ------------------------------------------------------------ timesheet

    /// Start a task for `llm_name`. `context` is free text about the task (kept on
    /// the task and in its episode); `namespace` is the Memstrata context the task
    /// belongs to (else the active context).
    #[pyo3(signature = (llm_name, task_description, context=None, namespace=None))]
    fn punch_in(
        &self,
        py: Python<'_>,
        llm_name: String,
        task_description: String,
        context: Option<String>,
        namespace: Option<String>,
    ) -> PyResult<timesheet::PunchIn> {
        timesheet::punch_in(
            py,
            &self.core()?,
            llm_name,
            task_description,
            context,
            namespace,
        )
    }

    /// Close a task (NotFoundError if unknown, ConflictError if already closed). With
    /// `detect_files`, files modified under the workspace roots since punch-in are listed.
    #[pyo3(
        signature = (task_id, summary, detect_files=defaults::DEFAULT_DETECT_FILES),
        text_signature = "($self, task_id, summary, detect_files=False)"
    )]
    fn punch_out(
        &self,
        py: Python<'_>,
        task_id: String,
        summary: String,
        detect_files: bool,
    ) -> PyResult<timesheet::PunchOut> {
        timesheet::punch_out(py, &self.core()?, task_id, summary, detect_files)
    }

    /// The task `task_id`, or None.
    fn task(&self, py: Python<'_>, task_id: String) -> PyResult<Option<timesheet::Task>> {
        timesheet::task(py, &self.core()?, task_id)
    }

    /// Tasks, newest first, filtered by model, Memstrata context (namespace), status ("open" | "closed" |
    /// "all"), start time range; at most `limit`.
    #[pyo3(
        signature = (*, llm_name=None, namespace=None, status=String::from("all"), since=None, until=None, limit=None),
        text_signature = "($self, *, llm_name=None, namespace=None, status='all', since=None, until=None, limit=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn tasks(
        &self,
        py: Python<'_>,
        llm_name: Option<String>,
        namespace: Option<String>,
        status: String,
        since: Option<&Bound<'_, PyAny>>,
        until: Option<&Bound<'_, PyAny>>,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<timesheet::Task>> {
        timesheet::tasks(
            py,
            &self.core()?,
            llm_name,
            namespace,
            status,
            since,
            until,
            limit,
        )
    }

    /// Time worked per model over tasks started in [since, until].
    #[pyo3(signature = (since=None, until=None))]
    fn timesheet_report(
        &self,
        py: Python<'_>,
        since: Option<&Bound<'_, PyAny>>,
        until: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<timesheet::TimesheetReport> {
        timesheet::report(py, &self.core()?, since, until)
    }

    // ------------------------------------------------------------ status, maintenance

    /// Health, version, uptime; session count and metrics when asked for.
    #[pyo3(
        signature = (
            include_sessions=defaults::DEFAULT_INCLUDE_SESSIONS,
            include_metrics=defaults::DEFAULT_INCLUDE_METRICS,
        ),
        text_signature = "($self, include_sessions=True, include_metrics=False)"
    )]
    fn status(
        &self,
        py: Python<'_>,
        include_sessions: bool,
        include_metrics: bool,
    ) -> PyResult<status::Status> {
        status::status(py, &self.core()?, include_sessions, include_metrics)
    }

    /// Maintenance: "light" purges expired items; "medium" also prunes session versions
    /// past the retention and recompresses; "aggressive" also merges index segments.
    #[pyo3(
        signature = (level=defaults::DEFAULT_OPTIMIZE_LEVEL.to_owned(), target_session=None),
        text_signature = "($self, level='light', target_session=None)"
    )]
    fn optimize(
        &self,
        py: Python<'_>,
        level: String,
        target_session: Option<String>,
    ) -> PyResult<status::OptimizeReport> {
        status::optimize(py, &self.core()?, level, target_session)
    }

    // ------------------------------------------------------------ export / import

    /// Write every layer of every context to `path` (JSON Lines, docs/export-format.md).
    fn export(&self, py: Python<'_>, path: PathBuf) -> PyResult<export::ExportStats> {
        export::export(py, &self.core()?, path)
    }

    /// Rotate the store's encryption key in place to `new_key` (32 bytes): every record and index file is sealed again under it, and the old key is refused from then on (docs/security.md). This must be the only open handle on the store (namespaces included: StoreLockedError otherwise, nothing changed); it stays open, with the new key. An encrypted store directory only.
    fn rekey(&self, py: Python<'_>, new_key: Vec<u8>) -> PyResult<()> {
        run(py, || self.h.rekey(&new_key))
    }

    /// Load a file written by `export` into this store.
    fn import_(&self, py: Python<'_>, path: PathBuf) -> PyResult<export::ImportStats> {
        export::import(py, &self.core()?, path)
    }

    /// Load the MCP reference memory server's JSONL knowledge graph into semantic memory.
    fn import_knowledge_graph(
        &self,
        py: Python<'_>,
        path: PathBuf,
    ) -> PyResult<export::ImportStats> {
        export::import_knowledge_graph(py, &self.core()?, path)
    }

    // ------------------------------------------------------------ lifecycle

    /// Register `fn(texts: list[str]) -> list[list[float]]` as this store's embedder
    /// (every handle on the store), or remove it with None. The engine calls it on
    /// `episodic.record` / `semantic.store` without an `embedding` and on searches with
    /// a non-empty query and no `embedding`. If it raises, the call fails with
    /// InvalidInputError on field `embedder` naming the exception; nothing is stored.
    #[pyo3(signature = (embedder))]
    fn set_embedder(&self, embedder: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        let mem = self.core()?;
        let e: Option<std::sync::Arc<dyn memstrata::Embedder>> = match embedder {
            Some(f) if !f.is_none() => {
                if !f.is_callable() {
                    return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                        "embedder: expected a callable or None, got {}",
                        f.get_type().name()?
                    )));
                }
                Some(std::sync::Arc::new(crate::embedder::PyEmbedder::new(
                    f.unbind(),
                )))
            }
            _ => None,
        };
        mem.set_embedder(e);
        Ok(())
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
                crate::records::pystr(&memstrata::store_url::mask(&m.path().to_string_lossy())),
                crate::records::pystr(&m.active_context()),
                if m.is_temporary() {
                    ", temporary=True"
                } else {
                    ""
                }
            ),
            Err(_) => "Memory(<closed>)".to_owned(),
        }
    }
}

py_records! {
    /// Result of `Memory.switch_context`.
    SwitchResult from common::SwitchResult, repr [success, previous_context, context_loaded] {
        /// Always True when returned.
        success: bool,
        /// The context that was active before.
        previous_context: String,
        /// True when the target context already held data.
        context_loaded: bool,
    }
}
