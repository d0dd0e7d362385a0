//! The shared engine behind every [`crate::Memory`] handle: the store's trees,
//! the text index (tantivy on sled, SQL inside a PostgreSQL store), the
//! background maintenance thread and the per-process registry that makes one
//! engine per store path.

pub(crate) mod cache;
pub(crate) mod metrics;
mod scope;
pub(crate) mod vectors;

pub use scope::DEFAULT_CONTEXT;
pub(crate) use scope::Scope;

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
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
use crate::{Error, Result};

/// On-disk format version written to the `meta` tree. See `docs/format.md`.
pub const FORMAT_VERSION: u32 = 1;

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
}

impl Trees {
    fn open(store: &Store) -> Result<Self> {
        Ok(Trees {
            meta: store.tree(Tree::Meta)?,
            contexts: store.tree(Tree::Contexts)?,
            short_term: store.tree(Tree::ShortTerm)?,
            working: store.tree(Tree::Working)?,
            episodes: store.tree(Tree::Episodes)?,
            semantic: store.tree(Tree::Semantic)?,
            semantic_history: store.tree(Tree::SemanticHistory)?,
            procedures: store.tree(Tree::Procedures)?,
            runs: store.tree(Tree::Runs)?,
            sessions: store.tree(Tree::Sessions)?,
            session_versions: store.tree(Tree::SessionVersions)?,
            tasks: store.tree(Tree::Tasks)?,
            index_log: store.tree(Tree::IndexLog)?,
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
    pub path: PathBuf,
    /// Encodes every record value (sealed when the store is encrypted).
    pub codec: codec::Codec,
    /// The backend (sled or PostgreSQL) holding the trees.
    pub store: Store,
    pub t: Trees,
    /// The tantivy index (sled). `None` on PostgreSQL, which searches in SQL
    /// (`search_docs`, written with the records; see `storage::pg`).
    pub index: Option<SearchIndex>,
    /// PostgreSQL: the last index-log sequence the vector index followed,
    /// locked across every indexed write (on sled, the tantivy writer lock
    /// plays this role). See [`Engine::index_lock`].
    log_cursor: Mutex<u64>,
    pub metrics: Metrics,
    /// Decoded episodes recently recorded or read (see `decoded_cache`).
    /// What the layers registered: indexed sources and maintenance hooks.
    layers: &'static Registrations,
    /// The layers' per-engine state (see [`Registrations::states`] and [`Engine::state`]).
    states: Vec<Box<dyn Any + Send + Sync>>,
    /// Decoded short-term records recently read (see `decoded_cache`).
    pub short_term_cache: ShortTermCache,
    pub started: Instant,
    /// Serialises read-modify-write updates of non-indexed records (working memory, runs, tasks...).
    pub rmw: Mutex<()>,
    /// Host actions registered engine-wide.
    pub actions: parking_lot::RwLock<HashMap<String, Arc<dyn ActionHandler>>>,
    /// The derived in-memory vector index (see `vectors`).
    pub vectors: crate::search::vector::VectorIndex,
    /// The host's embedder, if one is registered.
    pub embedder: parking_lot::RwLock<Option<Arc<dyn crate::search::embedder::Embedder>>>,
    known_contexts: Mutex<HashSet<String>>,
    index_error: Mutex<Option<String>>,
    registered: Arc<AtomicBool>,
    shutdown: AtomicBool,
    bg: Mutex<Option<JoinHandle<()>>>,
    /// Declared after every sled handle: reopens sled once they are closed
    /// (see [`LogCheckpoint`]), while `_lock` still keeps other engines out.
    /// sled only.
    checkpoint: Option<LogCheckpoint>,
    /// `<store>/LOCK` (sled only: a PostgreSQL store is shared by many processes).
    _lock: Option<File>,
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

/// The error for a key that does not fit the store (`stored`: the store is
/// encrypted; `given`: a key was passed).
fn key_mismatch_error(path: &Path, stored: bool, given: bool) -> Error {
    let p = storage::url::mask_path(path);
    let reason = match (stored, given) {
        (true, false) => format!(
            "the store at {p} is encrypted: open it with its encryption key (--encryption-key-file / encryption_key)"
        ),
        (false, true) => format!(
            "the store at {p} is not encrypted: open it without an encryption key (to encrypt it, export it and import into a new store opened with the key)"
        ),
        _ => format!(
            "wrong encryption key for the store at {p}: it was encrypted with a different key (nothing was read or written)"
        ),
    };
    Error::invalid("encryption_key", reason)
}

/// Sealed key-check value beside `db/` in encrypted stores (the same value as `META_KEY_CHECK`).
const KEY_CHECK_FILE: &str = "KEYCHECK";

fn verify_key_check(codec: &codec::Codec, sealed: &[u8], path: &Path) -> Result<()> {
    if !codec.is_sealed() {
        return Err(key_mismatch_error(path, true, false));
    }
    match codec.decode::<String>(sealed) {
        Ok(v) if v == KEY_CHECK_VALUE => Ok(()),
        _ => Err(key_mismatch_error(path, true, true)),
    }
}

/// Write `KEYCHECK` atomically (temporary file, fsync, rename, fsync of the directory).
fn write_key_check_file(file: &Path, codec: &codec::Codec) -> Result<()> {
    use std::io::Write;
    let tmp = file.with_extension("tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(&codec.encode(KEY_CHECK_VALUE)?)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, file)?;
    if let Some(dir) = file.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Compare the key offered with the store's key-check record.
fn check_key(t: &Trees, codec: &codec::Codec, path: &Path, is_new: bool) -> Result<()> {
    let check = t.meta.get(META_KEY_CHECK)?;
    match (check, codec.is_sealed()) {
        (None, false) => Ok(()),
        (None, true) if is_new => Ok(()),
        (None, true) => Err(key_mismatch_error(path, false, true)),
        (Some(_), false) => Err(key_mismatch_error(path, true, false)),
        (Some(sealed), true) => verify_key_check(codec, &sealed, path),
    }
}

/// Open engines of this process by path, with the process each was opened in.
type Registry = HashMap<PathBuf, (Weak<EngineUse>, crate::util::fork::Origin)>;

fn registry() -> &'static Mutex<Registry> {
    static REG: OnceLock<Mutex<Registry>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Engine {
    /// Open (or share) the engine for `opts.path`.
    pub(crate) fn open(opts: Options, layers: &'static Registrations) -> Result<Arc<EngineUse>> {
        if !opts
            .path
            .as_ref()
            .is_some_and(|p| storage::url::is_postgres_path(p))
        {
            crate::util::fork::check_sled_usable()?;
        }
        let (path, tempdir) = match &opts.path {
            Some(p) if storage::url::is_postgres_path(p) => {
                if !cfg!(feature = "postgres") {
                    return Err(Error::invalid(
                        "path",
                        "a postgres:// store needs memstrata built with the `postgres` feature",
                    ));
                }
                // Checked before anything is shared or connected.
                storage::url::StoreLocation::parse(p)?;
                (p.clone(), None)
            }
            Some(p) => {
                std::fs::create_dir_all(p).map_err(|e| {
                    Error::invalid(
                        "path",
                        format!("cannot create store directory {}: {e}", p.display()),
                    )
                })?;
                (std::fs::canonicalize(p)?, None)
            }
            None => {
                let td = tempfile::Builder::new().prefix("memstrata-").tempdir()?;
                (td.path().to_owned(), Some(td))
            }
        };
        // An engine for this path whose last handle was just dropped on another
        // thread may still be closing there (see `EngineUse`): wait for it to
        // release the store instead of failing.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut reg = loop {
            let mut reg = registry().lock();
            match reg.get(&path) {
                // Inherited through fork(): this child must neither use nor close
                // that copy (see `EngineUse`'s drop); it opens an engine of its own.
                Some((_, origin)) if !origin.is_here() => {
                    reg.remove(&path);
                    break reg;
                }
                Some((w, _)) => {
                    if let Some(existing) = w.upgrade() {
                        // Sharing the open engine must not bypass the key check.
                        if existing.opts.encryption_key != opts.encryption_key {
                            return Err(key_mismatch_error(
                                &path,
                                existing.opts.encryption_key.is_some(),
                                opts.encryption_key.is_some(),
                            ));
                        }
                        return Ok(existing);
                    }
                    if Instant::now() >= deadline {
                        reg.remove(&path);
                        break reg;
                    }
                }
                None => break reg,
            }
            drop(reg);
            std::thread::sleep(Duration::from_millis(2));
        };
        let engine = Arc::new(Self::open_new(opts, layers, path.clone(), tempdir)?);
        engine.registered.store(true, Ordering::Release);
        engine.start_background();
        let engine = Arc::new(EngineUse(engine));
        reg.insert(path, (Arc::downgrade(&engine), engine.origin));
        drop(reg);
        Ok(engine)
    }

    /// An engine of its own for a shared store (not in the registry).
    pub(crate) fn open_separate(
        opts: Options,
        layers: &'static Registrations,
    ) -> Result<Arc<EngineUse>> {
        let path = match &opts.path {
            Some(p) if storage::url::is_postgres_path(p) => p.clone(),
            _ => {
                return Err(Error::invalid(
                    "path",
                    "separate_engine needs a postgres:// store (a sled store has one engine per process)",
                ));
            }
        };
        let engine = Arc::new(Self::open_new(opts, layers, path, None)?);
        engine.start_background();
        Ok(Arc::new(EngineUse(engine)))
    }

    fn open_new(
        opts: Options,
        layers: &'static Registrations,
        path: PathBuf,
        tempdir: Option<tempfile::TempDir>,
    ) -> Result<Engine> {
        let origin = crate::util::fork::Origin::here();
        let codec = codec::Codec::new(opts.encryption_key.as_ref());
        let opened = if storage::url::is_postgres_path(&path) {
            open_postgres(&opts, &path)?
        } else {
            open_sled_store(&opts, &path, &codec)?
        };
        let OpenedStore {
            store,
            lock,
            checkpoint,
            key_check_file,
            index_dir,
        } = opened;
        let t = Trees::open(&store)?;

        // The same check inside the store (covers a sled store whose KEYCHECK file
        // was lost), before anything is written to it.
        let is_new = t.meta.get(META_FORMAT)?.is_none();
        check_key(&t, &codec, &path, is_new)?;

        // Format version: refuse newer stores, stamp new ones.
        match t.meta.get(META_FORMAT)? {
            Some(v) => {
                let found = u32::from_be_bytes(
                    v.as_ref()
                        .try_into()
                        .map_err(|_| Error::corrupted("format_version record is not 4 bytes"))?,
                );
                if found > FORMAT_VERSION {
                    return Err(Error::corrupted(format!(
                        "store at {} has format version {found}, newer than this build supports ({FORMAT_VERSION}); upgrade memstrata",
                        storage::url::mask_path(&path)
                    )));
                }
            }
            None => {
                // One transaction: a concurrent first open of a shared store stamps once.
                let sealed_check = if codec.is_sealed() {
                    Some(codec.encode(KEY_CHECK_VALUE)?)
                } else {
                    None
                };
                store.transaction(&[&t.meta], |m| {
                    if m[0].get(META_FORMAT)?.is_none() {
                        if let Some(c) = &sealed_check {
                            m[0].insert(META_KEY_CHECK, c)?;
                        }
                        m[0].insert(META_FORMAT, FORMAT_VERSION.to_be_bytes())?;
                    }
                    Ok(())
                })?;
                if store.is_shared() {
                    // Another process may have stamped it first, with another key.
                    check_key(&t, &codec, &path, false)?;
                }
            }
        }
        let (search, opened) = match &index_dir {
            Some(dir) => {
                let schema_ok = t
                    .meta
                    .get(META_INDEX_SCHEMA)?
                    .is_some_and(|v| v.as_ref() == index::INDEX_SCHEMA_VERSION.to_be_bytes());
                let (s, o) = SearchIndex::open(dir, opts.index_writer_bytes, schema_ok)?;
                (Some(s), Some(o))
            }
            None => (None, None),
        };

        let registered = Arc::new(AtomicBool::new(false));
        let reg_path = path.clone();
        // A process-local cache cannot see other instances' writes: none on a shared store.
        let cache_bytes = |bytes: usize| if store.is_shared() { 0 } else { bytes };
        let short_term_cache_bytes = cache_bytes(cache::SHORT_TERM_CACHE_BYTES);
        let states = layers
            .states
            .iter()
            .map(|make| make(store.is_shared()))
            .collect();
        let engine = Engine {
            origin,
            opts,
            path,
            codec,
            store,
            t,
            index: search,
            log_cursor: Mutex::new(0),
            metrics: Metrics::default(),
            layers,
            states,
            short_term_cache: ShortTermCache::new(short_term_cache_bytes),
            started: Instant::now(),
            rmw: Mutex::new(()),
            actions: parking_lot::RwLock::new(HashMap::new()),
            vectors: crate::search::vector::VectorIndex::default(),
            embedder: parking_lot::RwLock::new(None),
            known_contexts: Mutex::new(HashSet::new()),
            index_error: Mutex::new(None),
            registered: registered.clone(),
            shutdown: AtomicBool::new(false),
            bg: Mutex::new(None),
            checkpoint,
            _lock: lock,
            _tempdir: tempdir,
            _registration: Registration {
                path: reg_path,
                registered,
            },
        };
        if let Some(f) = key_check_file
            && engine.codec.is_sealed()
        {
            write_key_check_file(&f, &engine.codec)?;
        }
        match opened {
            Some(Opened::Existing(seq)) => engine.replay_index(seq)?,
            Some(Opened::Fresh) => engine.rebuild_index()?,
            None => engine.open_store_search()?,
        }
        if engine.index.is_some()
            && engine.t.meta.get(META_INDEX_SCHEMA)?.as_deref()
                != Some(&index::INDEX_SCHEMA_VERSION.to_be_bytes()[..])
        {
            engine
                .t
                .meta
                .insert(META_INDEX_SCHEMA, index::INDEX_SCHEMA_VERSION.to_be_bytes())?;
        }
        #[cfg(feature = "postgres")]
        engine.use_pgvector()?;
        engine.store.flush()?;
        Ok(engine)
    }

    /// PostgreSQL with the `vector` extension: run migration 3 (create and
    /// backfill `<schema>.vectors`) if no process did, and search vectors in
    /// SQL from now on. Encrypted stores keep the in-process scan: the table
    /// would hold their embeddings in the clear.
    #[cfg(feature = "postgres")]
    fn use_pgvector(&self) -> Result<()> {
        let Store::Postgres(p) = &self.store else {
            return Ok(());
        };
        let Some(ext) = p.vector_extension().map(str::to_owned) else {
            return Ok(());
        };
        if self.codec.is_sealed() {
            return Ok(());
        }
        if p.vectors_migrated()? {
            // The common case: no need to hold the serial section.
            p.use_vectors(&ext);
            return Ok(());
        }
        let mut serial = p.serial()?;
        // Only records with an embedding have a row in the vectors table.
        serial.migrate_vectors(&ext, |sink| self.for_each_indexed_batch(256, true, sink))?;
        serial.commit()?;
        p.use_vectors(&ext);
        Ok(())
    }

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
                    if last_sweep.elapsed() >= sweep_every {
                        last_sweep = Instant::now();
                        for sweep in engine.layers.sweeps {
                            let _ = sweep(&engine);
                        }
                    }
                }
            });
        if let Ok(h) = handle {
            *self.bg.lock() = Some(h);
        }
    }

    /// The tantivy index (sled stores only).
    fn tantivy(&self) -> Result<&SearchIndex> {
        self.index
            .as_ref()
            .ok_or_else(|| Error::storage("this store searches in SQL: it has no tantivy index"))
    }

    /// Lock the indexed writes of this engine (see [`IndexLock`]).
    pub(crate) fn index_lock(&self) -> IndexLock<'_> {
        match &self.index {
            Some(index) => IndexLock::Tantivy(index.lock()),
            None => IndexLock::Store(self.log_cursor.lock()),
        }
    }

    /// Replay index-log records after `committed` (crash recovery).
    fn replay_index(&self, committed: u64) -> Result<()> {
        let index = self.tantivy()?;
        let mut st = index.lock();
        self.replay_locked(index, &mut st, committed)?;
        drop(st);
        self.prune_index_log()?;
        Ok(())
    }

    fn replay_locked(
        &self,
        index: &SearchIndex,
        st: &mut WriterState,
        committed: u64,
    ) -> Result<()> {
        let mut last = committed;
        self.for_each_logged(
            committed,
            |_| true,
            |seq, ops| {
                st.apply(seq, ops)?;
                last = seq;
                Ok(())
            },
        )?;
        if last > committed {
            index.commit_locked(st)?;
        }
        Ok(())
    }

    /// A writer operation failed: replace the writer and replay the log from
    /// the last durable commit. sled already holds the data, so the caller's
    /// write stands either way; a failure here is reported by `status`.
    fn recover_index_locked(&self, st: &mut WriterState, cause: &Error) -> Result<()> {
        let index = self.tantivy()?;
        let r = index.reset_writer(st).and_then(|()| {
            let committed = st.committed_seq;
            self.replay_locked(index, st, committed)
        });
        *self.index_error.lock() = match &r {
            Ok(()) => None,
            Err(e) => Some(format!(
                "index writer failed ({cause}) and could not be repaired: {e}"
            )),
        };
        r
    }

    /// Make every acknowledged index change visible (a soft commit if needed,
    /// repairing a failed writer), then run `q`.
    ///
    /// On PostgreSQL the query runs in SQL over `search_docs`, which every
    /// instance's writes commit into: nothing to catch up, no local index.
    pub(crate) fn search_index(
        &self,
        q: &crate::search::index::IndexQuery<'_>,
    ) -> Result<Vec<(String, f32)>> {
        let Some(index) = &self.index else {
            return self.store.search(q);
        };
        self.sync_shared()?;
        if let Err(e) = index.refresh_for_search() {
            let mut st = index.lock();
            self.recover_index_locked(&mut st, &e)?;
            index.commit_locked(&mut st)?;
        }
        // tantivy can panic (not just fail) on some damaged segment files; treat a
        // panic like any index failure instead of unwinding into the caller.
        let guarded = || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| index.search(q)))
                .unwrap_or_else(|_| {
                    Err(Error::index("index search panicked (damaged index files?)"))
                })
        };
        match guarded() {
            Ok(hits) => Ok(hits),
            Err(Error::Index { .. }) => {
                // A damaged segment: sled is the source of truth, rebuild and retry once.
                self.rebuild_index_in_place()?;
                guarded()
            }
            Err(e) => Err(e),
        }
    }

    /// Commit pending index changes, repairing a failed writer if needed.
    /// (No-op without a tantivy index: PostgreSQL's search rows commit with the records.)
    pub(crate) fn commit_index(&self) -> Result<bool> {
        let Some(index) = &self.index else {
            return Ok(false);
        };
        match index.commit_pending() {
            Ok(c) => Ok(c),
            Err(e) => {
                let mut st = index.lock();
                self.recover_index_locked(&mut st, &e)?;
                index.commit_locked(&mut st)?;
                Ok(true)
            }
        }
    }

    /// The last unrepaired index failure, if any (reported as `degraded` by status).
    pub(crate) fn index_error(&self) -> Option<String> {
        self.index_error.lock().clone()
    }

    /// Re-add every episode and knowledge entry from sled into an empty index.
    fn rebuild_index(&self) -> Result<()> {
        let index = self.tantivy()?;
        let mut st = index.lock();
        self.rebuild_locked(index, &mut st)?;
        drop(st);
        self.prune_index_log()
    }

    /// Replace a corrupt index by a fresh one built from sled (PostgreSQL:
    /// rewrite every `search_docs` row from the records).
    pub(crate) fn rebuild_index_in_place(&self) -> Result<()> {
        let Some(index) = &self.index else {
            return self.rebuild_store_search(true);
        };
        let mut st = index.lock();
        index.recreate(&mut st)?;
        self.rebuild_locked(index, &mut st)?;
        drop(st);
        *self.index_error.lock() = None;
        self.prune_index_log()
    }

    fn rebuild_locked(&self, index: &SearchIndex, st: &mut WriterState) -> Result<()> {
        // Under the serial section no indexed write commits during the scan, so
        // `seq` (above every committed log entry) marks exactly what it covers.
        let serial = self.store.serial()?;
        let seq = self.store.generate_id()?;
        self.for_each_indexed_batch(1024, false, |batch| st.apply(seq, batch))?;
        drop(serial);
        index.commit_locked(st)?;
        Ok(())
    }

    /// The index op (an upsert) of every record of every registered source
    /// (with `only_embedded`, of those with an embedding), in batches of up to `size`.
    fn for_each_indexed_batch(
        &self,
        size: usize,
        only_embedded: bool,
        mut f: impl FnMut(&[IndexOp]) -> Result<()>,
    ) -> Result<()> {
        let mut batch = Vec::with_capacity(size);
        for source in self.layers.sources {
            (source.scan)(self, &mut |doc| {
                if only_embedded && doc.embedding.is_none() {
                    return Ok(());
                }
                batch.push(IndexOp::Upsert(doc));
                if batch.len() >= size {
                    f(&batch)?;
                    batch.clear();
                }
                Ok(())
            })?;
        }
        f(&batch)
    }

    /// Open the search of a store that searches in SQL (PostgreSQL): build the
    /// search rows if the store has none of this version yet (a store created
    /// before they existed), and start following the index log at its end.
    fn open_store_search(&self) -> Result<()> {
        self.rebuild_store_search(false)
    }

    /// Rewrite every search row from the records (`force`), or only when the
    /// store's `meta` does not name the current [`storage::SEARCH_DOCS_VERSION`];
    /// in one serial section, so no indexed write of any instance interleaves
    /// and concurrent opens rebuild once. With no vector set loaded (always at
    /// open), also moves the vector index's cursor to the end of the index log:
    /// a set loaded later is read from the records, so it needs nothing before.
    fn rebuild_store_search(&self, force: bool) -> Result<()> {
        let version = storage::SEARCH_DOCS_VERSION.to_be_bytes();
        let mut cursor = self.log_cursor.lock();
        let mut serial = self.store.serial()?;
        let current = self.t.meta.get(storage::META_SEARCH_DOCS)?;
        if force || current.as_deref() != Some(&version[..]) {
            serial.clear_search_docs()?;
            self.for_each_indexed_batch(1024, false, |batch| serial.apply_search_ops(batch))?;
            serial.transaction(&[&self.t.meta], |m| {
                m[0].insert(storage::META_SEARCH_DOCS, version)?;
                Ok(())
            })?;
        }
        // Above every committed index-log entry (the section orders them).
        let seq = serial.generate_id()?;
        serial.commit()?;
        if self.vectors.is_empty() {
            // A loaded vector set must still replay what it has not followed.
            *cursor = (*cursor).max(seq);
        }
        Ok(())
    }

    /// The index op that brings `uid` in line with sled now.
    fn current_op(&self, uid: &str) -> Result<IndexOp> {
        let (kind, ctx, key) = index::parse_uid(uid)?;
        let source = self.source(kind)?;
        let doc = (source.load)(self, &ctx, &key)?;
        Ok(match doc {
            Some(d) => IndexOp::Upsert(d),
            None => IndexOp::Delete(uid.to_owned()),
        })
    }

    /// Drop index-log records already covered by a durable index commit.
    ///
    /// A shared store keeps its log: other instances replay it (see
    /// docs/architecture.md, "Storage backends").
    pub(crate) fn prune_index_log(&self) -> Result<()> {
        let Some(index) = &self.index else {
            return Ok(());
        };
        if self.store.is_shared() {
            return Ok(());
        }
        let (_, committed, _) = index.lag();
        let mut batch = storage::Batch::default();
        let mut n = 0;
        for k in self.t.index_log.range(..=committed.to_be_bytes()).keys() {
            batch.remove(k?);
            n += 1;
        }
        if n > 0 {
            self.t.index_log.apply_batch(batch)?;
        }
        Ok(())
    }

    /// Write `trees` in one transaction and apply the resulting index ops in sequence order.
    ///
    /// `f` gets one transactional view per tree in `trees` and returns the result plus the index ops.
    /// It may run more than once (the backend retries on conflict), so it must be free of side effects.
    pub(crate) fn indexed_write<R>(
        &self,
        trees: &[&KvTree],
        f: impl Fn(&[TxTree<'_>]) -> TxResult<(R, Vec<IndexOp>)>,
    ) -> Result<R> {
        self.indexed_write_prepared(trees, || Ok(()), |t, ()| f(t))
    }

    /// Like [`Engine::indexed_write`], with `prepare` run under the index writer
    /// lock but outside the transaction (reading a sled tree inside a sled
    /// transaction over that tree deadlocks). Every indexed write holds the same
    /// lock (and, on a shared store, the store's serial section), so what
    /// `prepare` reads cannot change before the transaction runs.
    pub(crate) fn indexed_write_prepared<R, P>(
        &self,
        trees: &[&KvTree],
        prepare: impl FnOnce() -> Result<P>,
        f: impl Fn(&[TxTree<'_>], &P) -> TxResult<(R, Vec<IndexOp>)>,
    ) -> Result<R> {
        let mut all: Vec<&KvTree> = trees.to_vec();
        all.push(&self.t.index_log);
        let mut st = self.index_lock();
        let mut serial = self.store.serial()?;
        if self.store.is_shared() {
            // Writes of other instances first, so that sequences stay in order.
            self.catch_up_locked(&mut st)?;
        }
        let prepared = prepare()?;
        let seq = serial.generate_id()?;
        let (r, ops) = serial.transaction(&all, |views| {
            let (data, log) = views.split_at(views.len() - 1);
            let (r, ops) = f(data, &prepared)?;
            if !ops.is_empty() {
                let uids: Vec<&str> = ops.iter().map(IndexOp::uid).collect();
                let enc = self.codec.encode(&uids)?;
                log[0].insert(seq.to_be_bytes(), enc)?;
            }
            Ok((r, ops))
        })?;
        // The store's own search rows (PostgreSQL), in the same transaction;
        // with pgvector, the vector rows too.
        serial.apply_search_ops(&ops)?;
        serial.apply_vector_ops(&ops)?;
        serial.commit()?;
        // The vector index follows the store whatever the text index does with the ops.
        self.vectors.apply(&ops);
        match &mut st {
            IndexLock::Tantivy(w) => {
                if let Err(e) = w.apply(seq, &ops) {
                    // The data and its log record are committed; rebuild the writer state from the log.
                    self.recover_index_locked(w, &e)?;
                }
            }
            IndexLock::Store(cursor) => **cursor = (**cursor).max(seq),
        }
        drop(st);
        self.after_write()?;
        Ok(r)
    }

    /// Shared store: apply the index-log entries other instances committed
    /// since the last one this engine applied (text and vector indexes on
    /// tantivy; the vector index alone when the store searches in SQL).
    fn catch_up_locked(&self, st: &mut IndexLock<'_>) -> Result<()> {
        match st {
            IndexLock::Tantivy(w) => {
                let after = w.applied_seq;
                self.for_each_logged(
                    after,
                    |_| true,
                    |seq, ops| {
                        self.vectors.apply(ops);
                        w.apply(seq, ops)
                    },
                )
            }
            IndexLock::Store(cursor) => {
                if self.vectors.is_empty() {
                    // Nothing follows the log here: skip to its end (a vector set
                    // loaded later is read from the records, under this lock).
                    if let Some(k) = self.t.index_log.iter().keys().next_back() {
                        **cursor = (**cursor).max(log_seq(&k?)?);
                    }
                    return Ok(());
                }
                let after = **cursor;
                // Only the records of loaded vector sets are read.
                self.for_each_logged(
                    after,
                    |uid| self.vectors.follows(uid),
                    |seq, ops| {
                        self.vectors.apply(ops);
                        **cursor = (**cursor).max(seq);
                        Ok(())
                    },
                )
            }
        }
    }

    /// Each index-log entry above `after`, in sequence order, as the ops that
    /// bring its uids that `wanted` accepts in line with the store now.
    fn for_each_logged(
        &self,
        after: u64,
        wanted: impl Fn(&str) -> bool,
        mut f: impl FnMut(u64, &[IndexOp]) -> Result<()>,
    ) -> Result<()> {
        for item in self.t.index_log.range((after + 1).to_be_bytes()..) {
            let (k, v) = item?;
            let seq = log_seq(&k)?;
            let uids: Vec<String> = self.codec.decode(&v)?;
            let ops = uids
                .iter()
                .filter(|uid| wanted(uid))
                .map(|uid| self.current_op(uid))
                .collect::<Result<Vec<_>>>()?;
            f(seq, &ops)?;
        }
        Ok(())
    }

    /// On a shared store, make every write acknowledged by any instance before
    /// this call searchable here (a no-op on sled: this engine made them all).
    pub(crate) fn sync_shared(&self) -> Result<()> {
        if self.store.is_shared() {
            let mut st = self.index_lock();
            if let Err(e) = self.catch_up_locked(&mut st) {
                match &mut st {
                    IndexLock::Tantivy(w) => self.recover_index_locked(w, &e)?,
                    IndexLock::Store(_) => return Err(e),
                }
            }
        }
        Ok(())
    }

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
            if t.scan_prefix(&p).next().transpose()?.is_some() {
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
    fn source(&self, kind: Kind) -> Result<&'static IndexedSource> {
        self.layers
            .sources
            .iter()
            .find(|s| s.kind == kind)
            .ok_or_else(|| Error::corrupted(format!("no indexed source of kind {kind:?}")))
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

/// What a layer registers so the engine can index its records without naming
/// the layer: a full scan (rebuilds, backfills) and the load of one record's
/// current document (replay of the index log).
#[derive(Debug)]
pub(crate) struct IndexedSource {
    /// The kind of document the source makes (the first part of its uids).
    pub kind: Kind,
    /// Call `f` with the index document of every record, in store order.
    pub scan: fn(&Engine, &mut dyn FnMut(IndexDoc) -> Result<()>) -> Result<()>,
    /// The current document of the record `(ctx, key)`, `None` when it is gone.
    pub load: fn(&Engine, &str, &str) -> Result<Option<IndexDoc>>,
    /// Call `f` with the key, embedding and row metadata of every record of
    /// `ctx` that has an embedding (what the context's vector set is built from).
    pub vectors: fn(&Engine, &str, &mut dyn FnMut(&str, &[f32], RowMeta)) -> Result<()>,
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
    /// Makers of the layers' per-engine state (e.g. a decoded-record cache),
    /// called once at open with whether the store is shared by several
    /// instances; read back with [`Engine::state`].
    pub states: &'static [fn(bool) -> Box<dyn Any + Send + Sync>],
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

/// The lock every indexed write holds from its sequence to its index update:
/// the tantivy writer state (sled), or the vector index's index-log cursor
/// (PostgreSQL, where the search rows are written in the store's transaction).
pub(crate) enum IndexLock<'a> {
    Tantivy(MutexGuard<'a, WriterState>),
    Store(MutexGuard<'a, u64>),
}

/// The sequence of an index-log key.
fn log_seq(k: &[u8]) -> Result<u64> {
    Ok(u64::from_be_bytes(
        k.try_into()
            .map_err(|_| Error::corrupted("bad index_log key"))?,
    ))
}

/// Held while a read-modify-write runs (see [`Engine::rmw_lock`]); the
/// store-wide lock is released first.
#[derive(Debug)]
pub(crate) struct RmwGuard<'a> {
    _shared: Option<storage::SharedLock>,
    _local: parking_lot::MutexGuard<'a, ()>,
}

/// What opening a backend gives the engine.
struct OpenedStore {
    store: Store,
    /// `<store>/LOCK`, held while the engine lives (sled).
    lock: Option<File>,
    checkpoint: Option<LogCheckpoint>,
    /// `KEYCHECK` to write after opening (a sled store that has none yet).
    key_check_file: Option<PathBuf>,
    /// Where the tantivy index lives (sled; a PostgreSQL store searches in SQL).
    index_dir: Option<PathBuf>,
}

/// Open the sled store in the directory `path`: take `<store>/LOCK`, check the
/// key against `KEYCHECK`, open sled.
fn open_sled_store(opts: &Options, path: &Path, codec: &codec::Codec) -> Result<OpenedStore> {
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.join("LOCK"))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(Error::StoreLocked {
                path: path.to_owned(),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::Io(e)),
    }
    // The key is checked against `KEYCHECK` before sled opens, so a wrong or
    // missing key leaves every file of the store untouched.
    let check_file = path.join(KEY_CHECK_FILE);
    let check_file_ok = match std::fs::read(&check_file) {
        Ok(sealed) => {
            verify_key_check(codec, &sealed, path)?;
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(Error::Io(e)),
    };
    let flush_every = match opts.durability {
        Durability::Periodic(ms) => Some(ms.max(1)),
        Durability::Immediate | Durability::Manual => None,
    };
    let sled_cfg = sled::Config::new()
        .path(path.join("db"))
        .cache_capacity(opts.cache_bytes)
        .flush_every_ms(flush_every);
    let db = match open_sled(&sled_cfg) {
        Ok(db) => db,
        Err(sled::Error::Io(io)) if is_sled_lock_error(&io) => {
            return Err(Error::StoreLocked {
                path: path.to_owned(),
            });
        }
        Err(other) => return Err(Error::from(other)),
    };
    crate::util::fork::sled_started();
    let checkpoint = LogCheckpoint {
        cfg: sled_cfg.clone().flush_every_ms(None),
        size_at_open: db.size_on_disk().unwrap_or(0),
        armed: AtomicBool::new(false),
    };
    Ok(OpenedStore {
        store: Store::Sled(db),
        lock: Some(lock),
        checkpoint: Some(checkpoint),
        key_check_file: (!check_file_ok).then_some(check_file),
        index_dir: Some(path.join("index")),
    })
}

/// Open the PostgreSQL store at the URL `path` (it searches in SQL: no local index).
#[cfg(feature = "postgres")]
fn open_postgres(_opts: &Options, path: &Path) -> Result<OpenedStore> {
    let url = storage::url::PgUrl::parse(path.to_str().unwrap_or_default())?;
    let pg = storage::pg::PgStore::open(&url)?;
    Ok(OpenedStore {
        store: Store::Postgres(Arc::new(pg)),
        lock: None,
        checkpoint: None,
        key_check_file: None,
        index_dir: None,
    })
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_opts: &Options, _path: &Path) -> Result<OpenedStore> {
    Err(Error::invalid(
        "path",
        "a postgres:// store needs memstrata built with the `postgres` feature",
    ))
}

/// Log growth during one open after which a clean close checkpoints sled.
pub(crate) const CHECKPOINT_AFTER_BYTES: u64 = 32 * 1024 * 1024;

/// sled 0.34.7 writes its page-table snapshot only while *opening* a store
/// (`snapshot_after_ops` is a no-op), so the first open after a long write
/// session replays every log segment written since the previous open: ~2.5 s
/// after a 1M-episode ingest, against ~75 ms for the open after that. When an
/// engine grew sled's file by [`CHECKPOINT_AFTER_BYTES`] or more, a clean
/// close pays that replay instead, once, by opening sled again (after every
/// handle of this engine is closed, still holding `<store>/LOCK`) and closing
/// it, which leaves the snapshot for the next open. The cost is proportional to
/// what the session wrote (about 1% of a bulk ingest's time). Failures are
/// ignored: the next open replays the log as it would have anyway.
struct LogCheckpoint {
    cfg: sled::Config,
    size_at_open: u64,
    armed: AtomicBool,
}

impl Drop for LogCheckpoint {
    fn drop(&mut self) {
        if !self.armed.load(Ordering::Acquire) {
            return;
        }
        // Opening writes the snapshot; closing at once is the whole checkpoint.
        drop(open_sled(&self.cfg));
    }
}

/// Open sled, waiting (up to 10 s) while its file lock is busy. The caller
/// holds `<store>/LOCK`, so no other engine owns the store; sled's own lock
/// can still be held for a moment by the background I/O threads of an
/// engine of this process that was just closed (sled reports that as
/// `ErrorKind::Other`, "could not acquire lock"). After the deadline the
/// lock error is returned.
fn open_sled(cfg: &sled::Config) -> std::result::Result<sled::Db, sled::Error> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match cfg.open() {
            Err(sled::Error::Io(io)) if is_sled_lock_error(&io) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            done => return done,
        }
    }
}

/// sled's "store file is locked" error (`WouldBlock`, or `Other` with sled's message).
fn is_sled_lock_error(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
        || (e.kind() == std::io::ErrorKind::Other
            && e.to_string().contains("could not acquire lock"))
}

/// Removes the engine's registry entry when dropped (declared last in `Engine`).
struct Registration {
    path: PathBuf,
    registered: Arc<AtomicBool>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Only a registered engine has an entry; an engine dropped inside
        // `open` (whose caller holds the registry lock) must not take it.
        if self.registered.load(Ordering::Acquire) {
            let mut reg = registry().lock();
            if reg
                .get(&self.path)
                .is_some_and(|(w, _)| w.strong_count() == 0)
            {
                reg.remove(&self.path);
            }
        }
    }
}
