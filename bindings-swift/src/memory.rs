//! `Memory`: opening a store, contexts, continuity, status, maintenance,
//! export/import and the lifecycle; `ManualClock` for tests.

use std::path::PathBuf;
use std::sync::Arc;

use memstrata_bindings_common::{
    self as common, BindingError, ContextStored, ContextValue, ExportStats, Handle, ImportStats,
    JsonValue, OpenOptions, OptimizeReport, PunchIn, PunchOut, SessionCreated, SessionInfo,
    SessionRestored, SessionSaved, SessionVersionInfo, Status, SwitchResult, Task,
    TaskFilterOptions, TimesheetReport, Timestamp, files, guard, options,
};

use crate::embedder::Embedder;
use crate::layers::{Episodic, Semantic, ShortTerm, Working};
use crate::procedural::{Procedural, ProgressListener, progress_fn};
use crate::{MemstrataError, pool};

/// Parse JSON text passed for `field`.
pub(crate) fn json(field: &str, text: &str) -> Result<serde_json::Value, BindingError> {
    Ok(JsonValue::parse(field, text)?.into_inner())
}

/// Optional JSON text (`None`: null).
pub(crate) fn opt_json(field: &str, text: Option<&str>) -> Result<serde_json::Value, BindingError> {
    text.map_or(Ok(serde_json::Value::Null), |t| json(field, t))
}

/// A Memstrata store, or a namespace handle on one.
///
/// Opening a path already open in this process shares its engine (another
/// process gets `StoreLocked`). Every call that touches storage is `async`
/// (Swift) / `suspend` (Kotlin) and runs off the caller's thread. Values are
/// JSON text; the Swift and Kotlin packages add typed helpers over them.
#[derive(Debug, uniffi::Object)]
pub struct Memory {
    handle: Arc<Handle>,
    path: String,
    temporary: bool,
}

fn open_store(
    path: Option<String>,
    options: Option<OpenOptions>,
    clock: Option<Arc<ManualClock>>,
) -> Result<memstrata::Memory, BindingError> {
    let mut b = options
        .unwrap_or_default()
        .builder(path.map(PathBuf::from))?;
    if let Some(c) = clock {
        b = b.clock(c.inner.clone());
    }
    guard(|| b.open())
}

impl Memory {
    fn wrap(mem: memstrata::Memory) -> Arc<Memory> {
        Arc::new(Memory {
            path: mem.path().to_string_lossy().into_owned(),
            temporary: mem.is_temporary(),
            handle: Handle::new(mem),
        })
    }

    /// The core handle, or `Closed`.
    pub(crate) fn core(&self) -> Result<memstrata::Memory, MemstrataError> {
        Ok(self.handle.get()?)
    }
}

#[uniffi::export]
impl Memory {
    /// Open (or create) the store at `path` (`null`/`nil`: a temporary store,
    /// removed when its last handle closes). Opens on the calling thread; from
    /// a UI thread use `Memory.open(...)`, which does not block.
    #[uniffi::constructor(default(path = None, options = None, clock = None))]
    pub fn new(
        path: Option<String>,
        options: Option<OpenOptions>,
        clock: Option<Arc<ManualClock>>,
    ) -> Result<Arc<Memory>, MemstrataError> {
        Ok(Memory::wrap(open_store(path, options, clock)?))
    }

    /// Open like the constructor, but off the caller's thread (opening replays the index log
    /// and may take a moment on a large store).
    #[uniffi::constructor(default(options = None, clock = None))]
    pub async fn open(
        path: Option<String>,
        options: Option<OpenOptions>,
        clock: Option<Arc<ManualClock>>,
    ) -> Result<Arc<Memory>, MemstrataError> {
        let mem = pool::run(move || open_store(path, options, clock)).await?;
        Ok(Memory::wrap(mem))
    }

    // ------------------------------------------------------------ layers

    /// Short-term memory of this handle's active context (the `shortTerm`
    /// property of the Swift/Kotlin extensions).
    pub fn get_short_term(&self) -> Arc<ShortTerm> {
        Arc::new(ShortTerm::new(self.handle.clone()))
    }

    /// Working memory (`working` property).
    pub fn get_working(&self) -> Arc<Working> {
        Arc::new(Working::new(self.handle.clone()))
    }

    /// Episodic memory (`episodic` property).
    pub fn get_episodic(&self) -> Arc<Episodic> {
        Arc::new(Episodic::new(self.handle.clone()))
    }

    /// Semantic memory (`semantic` property).
    pub fn get_semantic(&self) -> Arc<Semantic> {
        Arc::new(Semantic::new(self.handle.clone()))
    }

    /// Procedures (`procedural` property).
    pub fn get_procedural(&self) -> Arc<Procedural> {
        Arc::new(Procedural::new(self.handle.clone()))
    }

    // ------------------------------------------------------------ contexts

    /// A new handle on the same store whose active context is `name`
    /// (closing it does not close this one).
    pub fn namespace(&self, name: String) -> Result<Arc<Memory>, MemstrataError> {
        let mem = self.core()?;
        Ok(Memory::wrap(guard(|| mem.namespace(&name))?))
    }

    /// Register `embedder` as the store's embedder, or remove it with null.
    /// The engine calls it (on a worker thread, with no engine lock held) on
    /// `episodic.record` / `semantic.store` without an `embedding` and on
    /// searches with a non-empty query and no `embedding`. It applies to every
    /// handle on the store (namespaces included). If it throws or returns a
    /// bad vector, the call fails with `InvalidInput` naming `embedder`;
    /// nothing is stored.
    #[uniffi::method(default(embedder = None))]
    pub fn set_embedder(&self, embedder: Option<Arc<dyn Embedder>>) -> Result<(), MemstrataError> {
        let mem = self.core()?;
        mem.set_embedder(embedder.map(crate::embedder::adapter));
        Ok(())
    }

    /// The active context of this handle.
    pub fn active_context(&self) -> Result<String, MemstrataError> {
        Ok(self.core()?.active_context())
    }

    /// Make `target` the active context; with `preserve_current = false` the
    /// working memory of the context being left is cleared.
    #[uniffi::method(default(preserve_current = true))]
    pub async fn switch_context(
        &self,
        target: String,
        preserve_current: bool,
    ) -> Result<SwitchResult, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.switch_context(&target, preserve_current))
            .await
            .map(Into::into)
    }

    /// Contexts that hold (or held) data, sorted; always includes `"default"`.
    pub async fn contexts(&self) -> Result<Vec<String>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.contexts().list()).await
    }

    /// Store `value` (JSON text) in the short-term layer of `namespace` (else
    /// the active context); `ttl` in seconds makes it expire.
    #[uniffi::method(default(ttl = None, namespace = None))]
    pub async fn context_store(
        &self,
        key: String,
        value: String,
        ttl: Option<f64>,
        namespace: Option<String>,
    ) -> Result<ContextStored, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let value = json("value", &value)?;
            let ttl = options::ttl(ttl)?;
            Ok(mem
                .contexts()
                .store(&key, value, ttl, namespace.as_deref())?
                .into())
        })
        .await
    }

    /// The value under `key` in `namespace` (else the active context), or null.
    #[uniffi::method(default(namespace = None))]
    pub async fn context_retrieve(
        &self,
        key: String,
        namespace: Option<String>,
    ) -> Result<Option<ContextValue>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.contexts().retrieve(&key, namespace.as_deref()))
            .await
            .map(|v| v.map(Into::into))
    }

    /// Set the duplicate policy ("keep", "skip", "merge" or "link") of
    /// `namespace` (else the active context): what `episodic.record` and
    /// `semantic.store` do without an `onDuplicate` of their own.
    #[uniffi::method(default(namespace = None))]
    pub async fn set_on_duplicate(
        &self,
        on_duplicate: String,
        namespace: Option<String>,
    ) -> Result<(), MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let p = common::on_duplicate(Some(&on_duplicate))?.unwrap_or_default();
            Ok(mem.contexts().set_on_duplicate(p, namespace.as_deref())?)
        })
        .await
    }

    /// The duplicate policy of `namespace` (else the active context).
    #[uniffi::method(default(namespace = None))]
    pub async fn on_duplicate(&self, namespace: Option<String>) -> Result<String, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.contexts().on_duplicate(namespace.as_deref()))
            .await
            .map(|p| p.as_str().to_owned())
    }

    /// Set the retention policy of `namespace` (else the active context): at most
    /// `maxEpisodes` episodes, `maxBytes` stored bytes, episodes at most `maxAge`
    /// seconds old. Past a limit the lowest-utility episodes (importance, recency,
    /// how often searches returned them) are evicted, each one audited
    /// (`evictions`). Enforced at once, on writes past a limit, and by `optimize`.
    /// With no limit, the context's policy is cleared.
    #[uniffi::method(default(max_episodes = None, max_bytes = None, max_age = None, namespace = None))]
    pub async fn set_retention(
        &self,
        max_episodes: Option<i64>,
        max_bytes: Option<i64>,
        max_age: Option<f64>,
        namespace: Option<String>,
    ) -> Result<(), MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let p = options::retention(max_episodes, max_bytes, max_age)?;
            Ok(mem.contexts().set_retention(p, namespace.as_deref())?)
        })
        .await
    }

    /// The retention policy of `namespace` (else the active context); every limit null when none is set.
    #[uniffi::method(default(namespace = None))]
    pub async fn retention(
        &self,
        namespace: Option<String>,
    ) -> Result<common::Retention, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.contexts().retention(namespace.as_deref()))
            .await
            .map(Into::into)
    }

    /// The audit of episodes evicted from `namespace` (else the active context)
    /// by its retention policy, newest first, at most `limit` (default 10, at most 100).
    #[uniffi::method(default(namespace = None, limit = None))]
    pub async fn evictions(
        &self,
        namespace: Option<String>,
        limit: Option<u32>,
    ) -> Result<Vec<common::Eviction>, MemstrataError> {
        let mem = self.core()?;
        let limit = common::defaults::page_limit(limit);
        pool::core(move || mem.contexts().evictions(namespace.as_deref(), limit))
            .await
            .map(|l| l.into_iter().map(Into::into).collect())
    }

    // ------------------------------------------------------------ sessions

    /// Create a session; `metadata` is JSON text (default null).
    #[uniffi::method(default(metadata = None))]
    pub async fn session_create(
        &self,
        name: String,
        metadata: Option<String>,
    ) -> Result<SessionCreated, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let metadata = opt_json("metadata", metadata.as_deref())?;
            Ok(mem.sessions().create(&name, metadata)?.into())
        })
        .await
    }

    /// Save `content` (JSON text) as the session's next version, at
    /// `compression_level` 0..=3 (default 1).
    #[uniffi::method(default(compression_level = None))]
    pub async fn session_save(
        &self,
        session_id: String,
        content: String,
        compression_level: Option<u32>,
    ) -> Result<SessionSaved, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let content = json("content", &content)?;
            let level = options::compression_level(compression_level)?;
            Ok(mem.sessions().save(&session_id, content, level)?.into())
        })
        .await
    }

    /// Restore a version of a session (default: the latest).
    #[uniffi::method(default(version = None))]
    pub async fn session_restore(
        &self,
        session_id: String,
        version: Option<i64>,
    ) -> Result<SessionRestored, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let version = options::version("version", version)?;
            Ok(mem.sessions().restore(&session_id, version)?.into())
        })
        .await
    }

    /// Every session.
    pub async fn session_list(&self) -> Result<Vec<SessionInfo>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.sessions().list())
            .await
            .map(common::list)
    }

    /// The kept versions of a session.
    pub async fn session_versions(
        &self,
        session_id: String,
    ) -> Result<Vec<SessionVersionInfo>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.sessions().versions(&session_id))
            .await
            .map(common::list)
    }

    /// Delete a session and its versions; false if it did not exist.
    pub async fn session_delete(&self, session_id: String) -> Result<bool, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.sessions().delete(&session_id)).await
    }

    // ------------------------------------------------------------ timesheet

    /// Start a task for `llm_name`. `context` is free text about the task (kept on
    /// the task and in its episode); `namespace` is the Memstrata context the task
    /// belongs to (else the active context).
    #[uniffi::method(default(context = None, namespace = None))]
    pub async fn punch_in(
        &self,
        llm_name: String,
        task_description: String,
        context: Option<String>,
        namespace: Option<String>,
    ) -> Result<PunchIn, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || {
            mem.timesheet().punch_in(
                &llm_name,
                &task_description,
                context.as_deref(),
                namespace.as_deref(),
            )
        })
        .await
        .map(Into::into)
    }

    /// Close a task; `detect_files` scans the workspace roots for files modified since punch-in.
    #[uniffi::method(default(detect_files = false))]
    pub async fn punch_out(
        &self,
        task_id: String,
        summary: String,
        detect_files: bool,
    ) -> Result<PunchOut, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.timesheet().punch_out(&task_id, &summary, detect_files))
            .await
            .map(Into::into)
    }

    /// A task, or null.
    pub async fn task(&self, task_id: String) -> Result<Option<Task>, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.timesheet().task(&task_id))
            .await
            .map(|t| t.map(Into::into))
    }

    /// Tasks, newest first, filtered.
    #[uniffi::method(default(filter = None))]
    pub async fn tasks(
        &self,
        filter: Option<TaskFilterOptions>,
    ) -> Result<Vec<Task>, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let f = filter.unwrap_or_default().filter()?;
            Ok(common::list(mem.timesheet().tasks(&f)?))
        })
        .await
    }

    /// Per-model totals for tasks started in `[since, until]`.
    #[uniffi::method(default(since = None, until = None))]
    pub async fn timesheet_report(
        &self,
        since: Option<Timestamp>,
        until: Option<Timestamp>,
    ) -> Result<TimesheetReport, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || {
            mem.timesheet()
                .report(since.map(|t| t.0), until.map(|t| t.0))
        })
        .await
        .map(Into::into)
    }

    // ------------------------------------------------------------ status, maintenance

    /// Health, version, uptime; session count and per-operation metrics on request.
    #[uniffi::method(default(include_sessions = true, include_metrics = false))]
    pub async fn status(
        &self,
        include_sessions: bool,
        include_metrics: bool,
    ) -> Result<Status, MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.admin().status(include_sessions, include_metrics))
            .await
            .map(Into::into)
    }

    /// Reclaim space: `level` `"light"` (default), `"medium"` or `"aggressive"`;
    /// `progress` hears each stage.
    #[uniffi::method(default(level = None, target_session = None, progress = None))]
    pub async fn optimize(
        &self,
        level: Option<String>,
        target_session: Option<String>,
        progress: Option<Arc<dyn ProgressListener>>,
    ) -> Result<OptimizeReport, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            let level = options::optimize_level(level.as_deref())?;
            let report = mem.admin().optimize_with_progress(
                level,
                target_session.as_deref(),
                &progress_fn(progress),
            )?;
            Ok(report.into())
        })
        .await
    }

    /// Write every layer of the store to the file at `path` (JSON Lines),
    /// fsynced before this returns.
    pub async fn export_to(&self, path: String) -> Result<ExportStats, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || files::export_to_path(&mem, &PathBuf::from(path))).await
    }

    /// Rotate the store's encryption key in place to `new_key` (32 bytes):
    /// every record and index file is sealed again under it, and the old key
    /// is refused from then on (docs/security.md). This must be the only open
    /// handle on the store (namespaces included: `StoreLocked` otherwise,
    /// nothing changed); it stays open, with the new key. An encrypted store
    /// directory only.
    pub async fn rekey(&self, new_key: Vec<u8>) -> Result<(), MemstrataError> {
        let h = Arc::clone(&self.handle);
        pool::run(move || h.rekey(&new_key)).await
    }

    /// Import an export from the file at `path`; `progress` hears the
    /// `validate` and `apply` stages.
    #[uniffi::method(default(progress = None))]
    pub async fn import_from(
        &self,
        path: String,
        progress: Option<Arc<dyn ProgressListener>>,
    ) -> Result<ImportStats, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || {
            files::import_from_path(&mem, &PathBuf::from(path), &progress_fn(progress))
        })
        .await
    }

    /// Import the MCP reference memory server's knowledge graph (`memory.jsonl`).
    pub async fn import_knowledge_graph(
        &self,
        path: String,
    ) -> Result<ImportStats, MemstrataError> {
        let mem = self.core()?;
        pool::run(move || files::import_knowledge_graph_from_path(&mem, &PathBuf::from(path))).await
    }

    // ------------------------------------------------------------ lifecycle

    /// Commit the index and fsync everything now.
    pub async fn flush(&self) -> Result<(), MemstrataError> {
        let mem = self.core()?;
        pool::core(move || mem.flush()).await
    }

    /// Flush and release this handle. Later calls on it (and on layer objects
    /// taken from it) fail with `Closed`; closing twice does nothing. The store
    /// closes when its last handle does.
    pub async fn close(&self) -> Result<(), MemstrataError> {
        match self.handle.take() {
            Some(mem) => pool::run(move || common::handle::close_memory(mem)).await,
            None => Ok(()),
        }
    }

    /// True once `close()` ran.
    pub fn is_closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// The store directory.
    pub fn path(&self) -> String {
        self.path.clone()
    }

    /// Whether the store is temporary (deleted when its last handle closes).
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }
}

/// A clock that only moves when told to: pass it to `Memory(clock:)` so TTL
/// and duration tests never sleep.
#[derive(Debug, uniffi::Object)]
pub struct ManualClock {
    inner: Arc<memstrata::ManualClock>,
}

#[uniffi::export]
impl ManualClock {
    /// A clock frozen at `start`, or at the current time.
    #[uniffi::constructor(default(start = None))]
    pub fn new(start: Option<Timestamp>) -> Arc<ManualClock> {
        let inner = match start {
            Some(t) => memstrata::ManualClock::new(t.0),
            None => memstrata::ManualClock::starting_now(),
        };
        Arc::new(ManualClock {
            inner: Arc::new(inner),
        })
    }

    /// Move the clock forward by `seconds` (> 0).
    pub fn advance(&self, seconds: f64) -> Result<(), MemstrataError> {
        if let Some(d) = options::ttl(Some(seconds))? {
            self.inner.advance(d);
        }
        Ok(())
    }

    /// Set the clock to `to`.
    pub fn set(&self, to: Timestamp) {
        self.inner.set(to.0);
    }

    /// The clock's current time.
    pub fn now(&self) -> Timestamp {
        use memstrata::Clock as _;
        Timestamp(self.inner.now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    #[test]
    fn layer_objects_share_the_handle_and_close_with_it() {
        let mem = Memory::new(None, None, None).unwrap();
        let st = mem.get_short_term();
        block_on(st.store("k".into(), "{\"a\":1}".into(), None)).unwrap();
        assert_eq!(
            block_on(st.retrieve("k".into())).unwrap().unwrap().0,
            serde_json::json!({"a": 1})
        );
        block_on(mem.close()).unwrap();
        assert!(mem.is_closed());
        assert!(matches!(
            block_on(st.retrieve("k".into())),
            Err(MemstrataError::Closed(_))
        ));
        block_on(mem.close()).unwrap();
    }

    #[test]
    fn json_arguments_name_their_field() {
        let e = json("content", "{nope").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("content"));
        assert_eq!(opt_json("metadata", None).unwrap(), serde_json::Value::Null);
    }

    #[test]
    fn the_manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(None);
        let t0 = clock.now();
        clock.advance(1.5).unwrap();
        assert_eq!((clock.now().0 - t0.0).num_milliseconds(), 1500);
        assert!(matches!(
            clock.advance(-1.0),
            Err(MemstrataError::InvalidInput(_))
        ));
    }
}
