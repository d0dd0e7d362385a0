//! The shared engine behind every [`crate::Memory`] handle: the store's trees,
//! the text index (tantivy on sled, SQL inside a PostgreSQL store), the
//! background maintenance thread and the per-process registry that makes one
//! engine per store path.

pub(crate) mod cache;
pub(crate) mod metrics;
mod scope;
pub(crate) mod vectors;

pub(crate) use open::{open_sled_dir, sled_data_file, wait_until_sled_unlocked};
pub use scope::DEFAULT_CONTEXT;
pub(crate) use scope::Scope;

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use crate::config::{Durability, Options};
use crate::engine::cache::ShortTermCache;
use crate::engine::metrics::Metrics;
use crate::search::index::{self, IndexDoc, IndexOp, Kind, Opened, SearchIndex, WriterState};
use crate::search::vector::RowMeta;
use crate::storage::codec;
use crate::storage::{self, KvTree, Store, Tree, TxResult, TxTree};
use crate::util::fork::ReleasedInChild;
use crate::{Error, Result};

mod open;
#[allow(unused_imports)]
use open::*;

mod indexing;
pub(crate) mod rekey;
#[allow(unused_imports)]
use indexing::*;

/// On-disk format version written to the `meta` tree. See `docs/format.md`.
///
/// 2: episode records are MessagePack arrays (fields by position). A store of
/// version 1 opens unchanged (its map records stay readable) and is stamped 2
/// at open, so that builds reading only version 1 refuse it.
pub const FORMAT_VERSION: u32 = 2;

/// Format version of an encrypted sled store whose record keys are sealed
/// (`storage::keys`): version 2 plus sealed keys. Stores without a key, and
/// PostgreSQL stores, stay at [`FORMAT_VERSION`]; an encrypted sled store of
/// version 2 has its keys sealed when it is opened (see `open::seal_keys`).
pub const FORMAT_VERSION_SEALED_KEYS: u32 = 3;

const META_FORMAT: &[u8] = b"format_version";
const META_INDEX_SCHEMA: &[u8] = b"index_schema_version";
/// Present only in encrypted stores: a sealed known value that tells a right key from a wrong one.
const META_KEY_CHECK: &[u8] = b"encryption_key_check";
const KEY_CHECK_VALUE: &str = "memstrata encryption key check v1";

/// All trees of a store (names are part of the on-disk format, see [`Tree`]).
#[derive(Debug, Clone)]
pub(crate) struct Trees {
    pub meta: KvTree,
    pub contexts: KvTree,
    pub short_term: KvTree,
    pub working: KvTree,
    pub episodes: KvTree,
    pub semantic: KvTree,
    pub semantic_history: KvTree,
    pub procedures: KvTree,
    pub runs: KvTree,
    pub sessions: KvTree,
    pub session_versions: KvTree,
    pub tasks: KvTree,
    pub index_log: KvTree,
    /// Duplicate detection keys (`search::dedup`): context, kind, hash, record id.
    pub dedup: KvTree,
}

impl Trees {
    /// The trees of `store`, with their keys sealed by `seal` (an encrypted sled store).
    fn open(store: &Store, seal: Option<&Arc<storage::keys::KeySeal>>) -> Result<Self> {
        let tree = |t: Tree| match seal {
            Some(s) => store.tree_sealed(t, s),
            None => store.tree(t),
        };
        Ok(Trees {
            meta: tree(Tree::Meta)?,
            contexts: tree(Tree::Contexts)?,
            short_term: tree(Tree::ShortTerm)?,
            working: tree(Tree::Working)?,
            episodes: tree(Tree::Episodes)?,
            semantic: tree(Tree::Semantic)?,
            semantic_history: tree(Tree::SemanticHistory)?,
            procedures: tree(Tree::Procedures)?,
            runs: tree(Tree::Runs)?,
            sessions: tree(Tree::Sessions)?,
            session_versions: tree(Tree::SessionVersions)?,
            tasks: tree(Tree::Tasks)?,
            index_log: tree(Tree::IndexLog)?,
            dedup: tree(Tree::Dedup)?,
        })
    }
}

/// A host action for procedures: receives the step's resolved parameters,
/// returns its output or an error message that fails the step.
pub trait ActionHandler: Send + Sync {
    /// Run the action.
    fn call(
        &self,
        parameters: &serde_json::Value,
    ) -> std::result::Result<serde_json::Value, String>;
}

impl<F> ActionHandler for F
where
    F: Fn(&serde_json::Value) -> std::result::Result<serde_json::Value, String> + Send + Sync,
{
    fn call(
        &self,
        parameters: &serde_json::Value,
    ) -> std::result::Result<serde_json::Value, String> {
        self(parameters)
    }
}

/// The engine. One per store path per process.
pub(crate) struct Engine {
    /// The process that opened it: every handle call checks it first (see `fork`).
    origin: crate::util::fork::Origin,
    pub opts: Options,
    path: PathBuf,
    /// Encodes every record value (sealed when the store is encrypted).
    pub codec: codec::Codec,
    /// The backend (sled or PostgreSQL) holding the trees.
    store: Store,
    pub t: Trees,
    /// The tantivy index (sled). `None` on PostgreSQL, which searches in SQL
    /// (`search_docs`, written with the records; see `storage::pg`).
    index: Option<SearchIndex>,
    /// PostgreSQL: the last index-log sequence the vector index followed,
    /// locked across every indexed write (on sled, the tantivy writer lock
    /// plays this role). See [`Engine::index_lock`].
    log_cursor: Mutex<u64>,
    metrics: Metrics,
    /// What the hybrid searches taught about the vector list, per record kind
    /// (episodes, knowledge): see [`crate::search::evidence`].
    fusion_evidence: [crate::search::evidence::Evidence; 2],
    /// What the layers registered: indexed sources and maintenance hooks.
    layers: &'static Registrations,
    /// The layers' per-engine state (see [`Registrations::states`] and [`Engine::state`]).
    states: Vec<LayerState>,
    /// Decoded short-term records recently read (see `decoded_cache`).
    short_term_cache: ShortTermCache,
    started: Instant,
    /// Serialises read-modify-write updates of non-indexed records (working memory, runs, tasks...).
    rmw: Mutex<()>,
    /// Host actions registered engine-wide.
    actions: parking_lot::RwLock<HashMap<String, Arc<dyn ActionHandler>>>,
    /// The derived in-memory vector index (see `vectors`).
    vectors: crate::search::vector::VectorIndex,
    /// The host's embedder, if one is registered.
    embedder: parking_lot::RwLock<Option<Arc<dyn crate::search::embedder::Embedder>>>,
    known_contexts: Mutex<HashSet<String>>,
    /// Indexed writes since open (what the maintenance thread's heap release
    /// watches, see [`Options::release_memory_interval`]).
    writes: AtomicU64,
    index_error: Mutex<Option<String>>,
    registered: Arc<AtomicBool>,
    shutdown: AtomicBool,
    bg: Mutex<Option<JoinHandle<()>>>,
    /// sled's data file (it carries sled's lock), given up by a `fork()`
    /// child (see `util::fork::ReleasedInChild`). Declared before
    /// `checkpoint`, whose reopen needs the file closed. sled only.
    _sled_file: Option<ReleasedInChild<sled::DataFile>>,
    /// Declared after every sled handle: reopens sled once they are closed
    /// (see [`LogCheckpoint`]), while `_lock` still keeps other engines out.
    /// sled only.
    checkpoint: Option<LogCheckpoint>,
    /// `<store>/LOCK` (sled only: a PostgreSQL store is shared by many processes).
    _lock: Option<ReleasedInChild<Box<File>>>,
    // Dropped after everything above: removes a temporary store.
    _tempdir: Option<tempfile::TempDir>,
    // Dropped last of all.
    _registration: Registration,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("path", &storage::url::mask_path(&self.path))
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Whether vector searches run in SQL (pgvector) rather than in process.
    pub(crate) fn vectors_in_sql(&self) -> bool {
        self.vector_search_backend() == "pgvector"
    }

    /// Which vector search runs: `"pgvector"` (SQL on a PostgreSQL store with the
    /// extension) or `"in-process"` (the exact int8 scan of `vectors`).
    pub(crate) fn vector_search_backend(&self) -> &'static str {
        match &self.store {
            #[cfg(feature = "postgres")]
            Store::Postgres(p) if p.vectors_in_sql() => "pgvector",
            _ => "in-process",
        }
    }

    fn start_background(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let commit_every = self.opts.index_commit_interval;
        let sweep_every = self.opts.sweep_interval;
        let tick = (commit_every / 2).clamp(Duration::from_millis(10), Duration::from_millis(200));
        let handle = std::thread::Builder::new()
            .name("memstrata-maintenance".into())
            .spawn(move || {
                let mut last_sweep = Instant::now();
                let release_every = weak
                    .upgrade()
                    .map_or(Duration::ZERO, |e| e.opts.release_memory_interval);
                let mut last_release = (Instant::now(), 0u64);
                let mut last_unmap = 0u64;
                loop {
                    std::thread::park_timeout(tick);
                    let Some(engine) = weak.upgrade() else { break };
                    if engine.shutdown.load(Ordering::Acquire) {
                        break;
                    }
                    if let Some(index) = &engine.index {
                        let due = index.commit_if_due(commit_every);
                        if due.is_err() {
                            let _ = engine.commit_index();
                        }
                        if let Ok(true) = due {
                            let _ = engine.prune_index_log();
                        }
                    }
                    // The index pages mapped for reading, every tick while the
                    // store is written (a merge reads its sources whole within a
                    // second or two; dropping them costs a few microseconds).
                    let writes = engine.writes.load(Ordering::Relaxed);
                    if !release_every.is_zero() && writes != last_unmap {
                        last_unmap = writes;
                        if let Some(index) = &engine.index {
                            index.release_mapped_pages();
                        }
                    }
                    if !release_every.is_zero() && last_release.0.elapsed() >= release_every {
                        // Only while the store is written: an idle engine has
                        // nothing new to give back.
                        if writes != last_release.1 {
                            crate::util::heap::release_free_heap();
                        }
                        last_release = (Instant::now(), writes);
                    }
                    if last_sweep.elapsed() >= sweep_every {
                        last_sweep = Instant::now();
                        for sweep in engine.layers.sweeps {
                            let _ = sweep(&engine);
                        }
                        let _ = engine.save_fusion_evidence();
                    }
                }
            });
        if let Ok(h) = handle {
            *self.bg.lock() = Some(h);
        }
    }
}

impl Engine {
    /// Honour the durability mode after a mutating call.
    pub(crate) fn after_write(&self) -> Result<()> {
        if self.opts.durability == Durability::Immediate {
            self.store.flush()?;
        }
        Ok(())
    }

    /// Serialise a read-modify-write of non-indexed records (working memory,
    /// procedures, sessions, runs, tasks): the engine's mutex, and on a shared
    /// store also a store-wide lock, so instances in other processes wait too.
    pub(crate) fn rmw_lock(&self) -> Result<RmwGuard<'_>> {
        let local = self.rmw.lock();
        let shared = self.store.shared_lock("rmw")?;
        Ok(RmwGuard {
            _shared: shared,
            _local: local,
        })
    }

    /// Record that a context holds data.
    pub(crate) fn touch_context(&self, ctx: &str) -> Result<()> {
        if self.known_contexts.lock().contains(ctx) {
            return Ok(());
        }
        self.t.contexts.insert(ctx.as_bytes(), [])?;
        self.known_contexts.lock().insert(ctx.to_owned());
        Ok(())
    }

    /// Does `ctx` hold any data in any layer?
    pub(crate) fn context_has_data(&self, ctx: &str) -> Result<bool> {
        let p = codec::ctx_prefix(ctx);
        for t in [
            &self.t.short_term,
            &self.t.working,
            &self.t.episodes,
            &self.t.semantic,
            &self.t.procedures,
        ] {
            if t.has_prefix(&p)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `Error::Forked` when called in another process than the one that
    /// opened the engine (a `fork()` child), before any lock or file access.
    #[inline]
    pub(crate) fn check_process(&self) -> Result<()> {
        self.origin.check()
    }

    /// Whether this engine was inherited through `fork()` (see [`Engine::check_process`]).
    pub(crate) fn is_forked(&self) -> bool {
        !self.origin.is_here()
    }

    /// Time a call and record it under `op` (after the process check: every
    /// layer operation goes through here).
    pub(crate) fn timed<T>(&self, op: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.check_process()?;
        let started = Instant::now();
        let r = f();
        self.metrics.record(op, started, r.is_ok());
        r
    }

    /// Make everything durable: commit the index and fsync sled.
    pub(crate) fn flush(&self) -> Result<()> {
        for f in self.layers.flushes {
            f(self)?;
        }
        self.save_fusion_evidence()?;
        self.store.flush()?;
        if self.commit_index()? {
            self.prune_index_log()?;
        }
        self.store.flush()?;
        Ok(())
    }

    /// Index-log entries not yet covered by this engine's durable index commit
    /// (sled prunes the rest; a shared store keeps the log for other instances).
    /// Without a tantivy index (PostgreSQL): the entries this engine's vector
    /// index has not followed yet (none while it holds no vector set).
    pub(crate) fn index_log_backlog(&self) -> Result<usize> {
        let (_, committed, _) = self.index_lag();
        if self.index.is_none() && self.vectors.is_empty() {
            Ok(0)
        } else if self.store.is_shared() {
            self.t
                .index_log
                .count_from((committed.saturating_add(1)).to_be_bytes())
        } else {
            self.t.index_log.len()
        }
    }

    /// (applied, committed, pending) sequences of the text index; without a
    /// tantivy index, the vector index's log cursor (nothing to commit).
    pub(crate) fn index_lag(&self) -> (u64, u64, usize) {
        match &self.index {
            Some(index) => index.lag(),
            None => {
                let c = *self.log_cursor.lock();
                (c, c, 0)
            }
        }
    }

    /// Searchable documents and index segments (PostgreSQL: `search_docs`
    /// rows, no segments).
    pub(crate) fn index_doc_stats(&self) -> (u64, usize) {
        match &self.index {
            Some(index) => index.doc_stats(),
            None => (self.store.search_docs_count().unwrap_or(0), 0),
        }
    }

    /// Bytes the store takes (sled: its directory; PostgreSQL: its schema's tables and indexes).
    pub(crate) fn bytes_on_disk(&self) -> u64 {
        match &self.store {
            Store::Sled(_) => storage::dir_size(&self.path),
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => p.bytes_on_disk().unwrap_or(0),
        }
    }

    /// The registered source of documents of `kind`.
    /// What the hybrid searches of `kind` taught about the vector list.
    pub(crate) fn fusion_evidence(&self, kind: Kind) -> &crate::search::evidence::Evidence {
        match kind {
            Kind::Episode => &self.fusion_evidence[0],
            Kind::Knowledge => &self.fusion_evidence[1],
        }
    }

    /// The current index document of `(ctx, key)` of `kind`, `None` when it is gone.
    pub(crate) fn index_doc(&self, kind: Kind, ctx: &str, key: &str) -> Result<Option<IndexDoc>> {
        (self.source(kind)?.load)(self, ctx, key)
    }

    fn source(&self, kind: Kind) -> Result<&'static IndexedSource> {
        self.layers
            .sources
            .iter()
            .find(|s| s.kind == kind)
            .ok_or_else(|| Error::corrupted(format!("no indexed source of kind {kind:?}")))
    }

    /// The decoded short-term records cache (the short-term layer's).
    pub(crate) fn short_term_cache(&self) -> &ShortTermCache {
        &self.short_term_cache
    }

    /// The backend holding the trees.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The tantivy index; `None` on a store that searches in SQL (PostgreSQL).
    pub(crate) fn text_index(&self) -> Option<&SearchIndex> {
        self.index.as_ref()
    }

    /// Per-operation metrics since open.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Time since the engine was opened.
    pub(crate) fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Register (or replace) the host action `name`, engine-wide.
    pub(crate) fn register_action(&self, name: &str, handler: Arc<dyn ActionHandler>) {
        self.actions.write().insert(name.to_owned(), handler);
    }

    /// Remove the host action `name`; whether it was registered.
    pub(crate) fn unregister_action(&self, name: &str) -> bool {
        self.actions.write().remove(name).is_some()
    }

    /// The host action registered as `name`.
    pub(crate) fn action(&self, name: &str) -> Option<Arc<dyn ActionHandler>> {
        self.actions.read().get(name).cloned()
    }

    /// The names of the registered host actions (unsorted).
    pub(crate) fn action_names(&self) -> Vec<String> {
        self.actions.read().keys().cloned().collect()
    }

    /// Register (or with `None` remove) the host's embedder.
    pub(crate) fn set_embedder(
        &self,
        embedder: Option<Arc<dyn crate::search::embedder::Embedder>>,
    ) {
        *self.embedder.write() = embedder;
    }

    /// The per-engine state of type `T` a layer registered (see [`Registrations::states`]).
    ///
    /// # Panics
    /// When no registered state has type `T` (a programming error: the layer
    /// did not register it).
    pub(crate) fn state<T: Any>(&self) -> &T {
        self.states
            .iter()
            .find_map(|s| s.downcast_ref::<T>())
            .expect("layer state registered at open")
    }

    /// Contexts that hold (or held) data, sorted; always includes the default context.
    pub(crate) fn context_names(&self) -> Result<Vec<String>> {
        let mut out = vec![DEFAULT_CONTEXT.to_owned()];
        for k in self.t.contexts.iter().keys() {
            let k = k?;
            let name = String::from_utf8(k.to_vec())
                .map_err(|_| Error::corrupted("non-utf8 context name"))?;
            if name != DEFAULT_CONTEXT {
                out.push(name);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Store directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this engine lives in a temporary directory.
    pub(crate) fn is_temporary(&self) -> bool {
        self._tempdir.is_some()
    }
}

impl Engine {
    /// Stop the maintenance thread and wait for it (unless called on it).
    fn stop_background(&self) {
        self.shutdown.store(true, Ordering::Release);
        if let Some(h) = self.bg.lock().take()
            && h.thread().id() != std::thread::current().id()
        {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

/// Where a full scan of an indexed source sends each record's document.
pub(crate) type DocSink<'a> = &'a mut dyn FnMut(IndexDoc) -> Result<()>;

/// Where a scan of a context's vector rows sends each (key, embedding, row metadata).
pub(crate) type VectorRowSink<'a> = &'a mut dyn FnMut(&str, &[f32], RowMeta);

/// A layer's per-engine state, kept by the engine without knowing its type.
pub(crate) type LayerState = Box<dyn Any + Send + Sync>;

/// What a layer registers so the engine can index its records without naming
/// the layer: a full scan (rebuilds, backfills) and the load of one record's
/// current document (replay of the index log).
#[derive(Debug)]
pub(crate) struct IndexedSource {
    /// The kind of document the source makes (the first part of its uids).
    pub kind: Kind,
    /// Call `f` with the index document of every record, in store order.
    pub scan: fn(&Engine, DocSink<'_>) -> Result<()>,
    /// The current document of the record `(ctx, key)`, `None` when it is gone.
    pub load: fn(&Engine, &str, &str) -> Result<Option<IndexDoc>>,
    /// Call `f` with the key, embedding and row metadata of every record of
    /// `ctx` that has an embedding (what the context's vector set is built from).
    pub vectors: fn(&Engine, &str, VectorRowSink<'_>) -> Result<()>,
}

/// Everything the layers register with the engine at open (one static list,
/// built by the layers' module): what it indexes and what it maintains.
#[derive(Debug)]
pub(crate) struct Registrations {
    /// The indexed sources, scanned in this order.
    pub sources: &'static [IndexedSource],
    /// Run by the maintenance thread every `Options::sweep_interval` (e.g. the
    /// short-term expiry sweep); returns how many records it removed.
    pub sweeps: &'static [fn(&Engine) -> Result<usize>],
    /// Run by [`Engine::flush`] (and so by close) before the store is flushed:
    /// state a layer keeps in memory and writes in batches (e.g. access counts).
    pub flushes: &'static [fn(&Engine) -> Result<()>],
    /// Makers of the layers' per-engine state (e.g. a decoded-record cache),
    /// called once at open with the options and whether the store is shared
    /// by several instances; read back with [`Engine::state`].
    pub states: &'static [fn(&crate::config::Options, bool) -> LayerState],
}

/// The handles' share of an engine: every [`crate::Memory`] on it holds this
/// one value, and the registry points at it. When the last handle goes, its
/// drop stops the maintenance thread and waits for it *before* releasing the
/// engine. The maintenance thread holds the engine only during a pass, so
/// without this the last reference could be the one it holds at that moment,
/// and the engine (sled, the store's `LOCK`) would close later on that thread:
/// a binding's `close()` would return before the store is released, and
/// another process opening it right after would get `StoreLocked`.
pub(crate) struct EngineUse(Arc<Engine>);

impl std::ops::Deref for EngineUse {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.0
    }
}

impl std::fmt::Debug for EngineUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Drop for EngineUse {
    fn drop(&mut self) {
        if self.0.is_forked() {
            // A copy inherited through fork(): its maintenance thread does not
            // exist here (joining it could hang), locks held by the parent's
            // threads stay held, and its files, lock and connections are the
            // parent's. Flushing, committing the index, removing a temporary
            // store or closing sled would act on the parent's store. So it is
            // leaked: one more strong reference that is never released keeps
            // `Engine::drop` and every field's drop from running in this process.
            std::mem::forget(Arc::clone(&self.0));
            return;
        }
        // After this the maintenance thread holds no reference: the `Arc`
        // dropped next is the last one, and the engine closes on this thread.
        self.0.stop_background();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop_background();
        let _ = self.flush();
        if let (Some(cp), Store::Sled(db)) = (&self.checkpoint, &self.store)
            && self.opts.path.is_some()
            && db
                .size_on_disk()
                .is_ok_and(|now| now.saturating_sub(cp.size_at_open) >= CHECKPOINT_AFTER_BYTES)
        {
            cp.armed.store(true, Ordering::Release);
        }
        // The registry entry is removed by `_registration`, the last field to
        // drop, so a concurrent open waits until sled, the index writer and the
        // store lock are all released.
    }
}

/// Held while a read-modify-write runs (see [`Engine::rmw_lock`]); the
/// store-wide lock is released first.
#[derive(Debug)]
pub(crate) struct RmwGuard<'a> {
    _shared: Option<storage::SharedLock>,
    _local: parking_lot::MutexGuard<'a, ()>,
}
