//! Opening an engine: the process-wide registry (one engine per store and process), the store (sled directory with its lock and key check, or PostgreSQL), the search index, and the registry entry removed on close.

#[allow(unused_imports)]
use super::*;
use crate::error::FromDep;
use crate::search::index::WriterBudget;
use crate::util::fork::ReleasedInChild;

/// The error for a key that does not fit the store (`stored`: the store is
/// encrypted; `given`: a key was passed).
pub(super) fn key_mismatch_error(path: &Path, stored: bool, given: bool) -> Error {
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
pub(super) const KEY_CHECK_FILE: &str = "KEYCHECK";

pub(super) fn verify_key_check(codec: &codec::Codec, sealed: &[u8], path: &Path) -> Result<()> {
    if !codec.is_sealed() {
        return Err(key_mismatch_error(path, true, false));
    }
    match codec.decode::<String>(sealed) {
        Ok(v) if v == KEY_CHECK_VALUE => Ok(()),
        _ => Err(key_mismatch_error(path, true, true)),
    }
}

/// Write `KEYCHECK` atomically (temporary file, fsync, rename, fsync of the directory).
pub(super) fn write_key_check_file(file: &Path, codec: &codec::Codec) -> Result<()> {
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
pub(super) fn check_key(t: &Trees, codec: &codec::Codec, path: &Path, is_new: bool) -> Result<()> {
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
pub(super) type Registry = HashMap<PathBuf, (Weak<EngineUse>, crate::util::fork::Origin)>;

pub(super) fn registry() -> &'static Mutex<Registry> {
    static REG: OnceLock<Mutex<Registry>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Engine {
    /// Open (or share) the engine for `opts.path`.
    pub(crate) fn open(opts: Options, layers: &'static Registrations) -> Result<Arc<EngineUse>> {
        opts.validate()?;
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
        opts.validate()?;
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

    pub(super) fn open_new(
        opts: Options,
        layers: &'static Registrations,
        path: PathBuf,
        tempdir: Option<tempfile::TempDir>,
    ) -> Result<Engine> {
        let origin = crate::util::fork::Origin::here();
        if !opts.release_memory_interval.is_zero() {
            crate::util::heap::fix_malloc_thresholds();
        }
        if opts.malloc_arena_max > 0 {
            crate::util::heap::cap_malloc_arenas(opts.malloc_arena_max);
        }
        let codec = codec::Codec::new(opts.encryption_key.as_ref());
        let opened = if storage::url::is_postgres_path(&path) {
            open_postgres(&opts, &path)?
        } else {
            open_sled_store(&opts, &path, &codec)?
        };
        let OpenedStore {
            store,
            lock,
            sled_file,
            checkpoint,
            key_check_file,
            index_dir,
        } = opened;
        let t = Trees::open(&store, None)?;
        // An encrypted store seals its record keys (`storage::keys`), on
        // either backend.
        let key_seal = opts
            .encryption_key
            .as_ref()
            .map(|k| Arc::new(storage::keys::KeySeal::new(k)));
        let target = if key_seal.is_some() {
            FORMAT_VERSION_SEALED_KEYS
        } else {
            FORMAT_VERSION
        };

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
                if found > FORMAT_VERSION_SEALED_KEYS {
                    return Err(Error::corrupted(format!(
                        "store at {} has format version {found}, newer than this build supports ({FORMAT_VERSION_SEALED_KEYS}); upgrade memstrata",
                        storage::url::mask_path(&path)
                    )));
                }
                if found > target {
                    return Err(Error::corrupted(format!(
                        "store at {} has format version {found} (an encrypted store with sealed keys) but is opened without a key",
                        storage::url::mask_path(&path),
                    )));
                }
                if found < FORMAT_VERSION {
                    upgrade_format(&store, &t, found)?;
                }
                if let Some(seal) = &key_seal
                    && found < FORMAT_VERSION_SEALED_KEYS
                {
                    seal_keys(&store, &t, seal)?;
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
                        m[0].insert(META_FORMAT, target.to_be_bytes())?;
                    }
                    Ok(())
                })?;
                if store.is_shared() {
                    // Another process may have stamped it first, with another key.
                    check_key(&t, &codec, &path, false)?;
                }
            }
        }
        let t = match &key_seal {
            Some(seal) => Trees::open(&store, Some(seal))?,
            None => t,
        };
        let (search, opened) = match &index_dir {
            Some(dir) => {
                let schema_ok = t
                    .meta
                    .get(META_INDEX_SCHEMA)?
                    .is_some_and(|v| v.as_ref() == index::INDEX_SCHEMA_VERSION.to_be_bytes());
                let sealer = opts
                    .encryption_key
                    .as_ref()
                    .map(|k| Arc::new(index::Sealer::new(k, opts.index_cache_bytes)));
                let (s, o) = SearchIndex::open(
                    dir,
                    WriterBudget {
                        bytes: opts.index_writer_bytes,
                        merge_max_docs: opts.index_merge_max_docs,
                    },
                    schema_ok,
                    sealer,
                )?;
                if !opts.release_memory_interval.is_zero() {
                    // Merges read their sources faster than the maintenance tick.
                    s.release_mapped_pages_while_writing();
                }
                (Some(s), Some(o))
            }
            None => (None, None),
        };

        let registered = Arc::new(AtomicBool::new(false));
        let reg_path = path.clone();
        // A process-local cache cannot see other instances' writes: none on a shared store.
        let cache_bytes = |bytes: usize| if store.is_shared() { 0 } else { bytes };
        let short_term_cache_bytes = cache_bytes(opts.short_term_cache_bytes);
        let states = layers
            .states
            .iter()
            .map(|make| make(&opts, store.is_shared()))
            .collect();
        let fusion_evidence = vectors::load_evidence(&t)?;
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
            fusion_evidence,
            layers,
            states,
            short_term_cache: ShortTermCache::new(short_term_cache_bytes),
            started: Instant::now(),
            rmw: Mutex::new(()),
            actions: parking_lot::RwLock::new(HashMap::new()),
            vectors: crate::search::vector::VectorIndex::default(),
            embedder: parking_lot::RwLock::new(None),
            known_contexts: Mutex::new(HashSet::new()),
            writes: AtomicU64::new(0),
            index_error: Mutex::new(None),
            registered: registered.clone(),
            shutdown: AtomicBool::new(false),
            bg: Mutex::new(None),
            _sled_file: sled_file,
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
    pub(super) fn use_pgvector(&self) -> Result<()> {
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
}

/// What opening a backend gives the engine.
pub(super) struct OpenedStore {
    store: Store,
    /// `<store>/LOCK`, held while the engine lives (sled).
    lock: Option<ReleasedInChild<Box<File>>>,
    /// sled's data file (sled's own lock).
    sled_file: Option<ReleasedInChild<sled::DataFile>>,
    checkpoint: Option<LogCheckpoint>,
    /// `KEYCHECK` to write after opening (a sled store that has none yet).
    key_check_file: Option<PathBuf>,
    /// Where the tantivy index lives (sled; a PostgreSQL store searches in SQL).
    index_dir: Option<PathBuf>,
}

/// Open the sled store in the directory `path`: take `<store>/LOCK`, check the
/// key against `KEYCHECK`, open sled.
pub(super) fn open_sled_store(
    opts: &Options,
    path: &Path,
    codec: &codec::Codec,
) -> Result<OpenedStore> {
    let lock = storage::lock_store_dir(path)?;
    // A store whose key rotation was interrupted holds records under two keys.
    if path.join(super::rekey::REKEY_FILE).exists() {
        return Err(super::rekey::interrupted_rekey_error(path));
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
        Err(other) => return Err(Error::from_dep(other)),
    };
    crate::util::fork::sled_started();
    let checkpoint = LogCheckpoint {
        // Recovery builds the page table whatever the cache; a small cache
        // keeps the reopen from holding pages it will never read.
        cfg: sled_cfg
            .clone()
            .flush_every_ms(None)
            .cache_capacity(CHECKPOINT_CACHE_BYTES),
        data_file: sled_data_file(path),
        size_at_open: db.size_on_disk().unwrap_or(0),
        armed: AtomicBool::new(false),
    };
    let sled_file = ReleasedInChild::new(db.data_file());
    Ok(OpenedStore {
        store: Store::Sled(db),
        lock: Some(ReleasedInChild::new(Box::new(lock))),
        sled_file: Some(sled_file),
        checkpoint: Some(checkpoint),
        key_check_file: (!check_file_ok).then_some(check_file),
        index_dir: Some(path.join("index")),
    })
}

/// Open the PostgreSQL store at the URL `path` (it searches in SQL: no local index).
#[cfg(feature = "postgres")]
pub(super) fn open_postgres(opts: &Options, path: &Path) -> Result<OpenedStore> {
    let url = storage::url::PgUrl::parse(path.to_str().unwrap_or_default())?;
    // With a key, the search rows hold hashed terms that the engine's
    // analyzer finds (docs/security.md, *PostgreSQL*).
    let sealed = opts.encryption_key.as_ref().map(|k| {
        storage::pg::SealedSearch::new(k, Arc::new(crate::search::lexer::SqlLexer::default()))
    });
    let pg = storage::pg::PgStore::open(&url, sealed)?;
    Ok(OpenedStore {
        store: Store::Postgres(Arc::new(pg)),
        lock: None,
        sled_file: None,
        checkpoint: None,
        key_check_file: None,
        index_dir: None,
    })
}

#[cfg(not(feature = "postgres"))]
pub(super) fn open_postgres(_opts: &Options, _path: &Path) -> Result<OpenedStore> {
    Err(Error::invalid(
        "path",
        "a postgres:// store needs memstrata built with the `postgres` feature",
    ))
}

/// Bring a store of an older format version to [`FORMAT_VERSION`].
///
/// 1 -> 2 rewrites nothing: version 2 writes episode records as MessagePack
/// arrays and reads the named maps of version 1 as before. Only the stamp
/// changes, so that a build that reads version 1 alone refuses the store
/// instead of misreading its new records. Idempotent, in one transaction (a
/// shared store opened by several instances at once stamps once).
fn upgrade_format(store: &Store, t: &Trees, found: u32) -> Result<()> {
    if found == 0 {
        return Err(Error::corrupted(
            "format_version 0 is not a version memstrata ever wrote",
        ));
    }
    store.transaction(&[&t.meta], |m| {
        let current = m[0]
            .get(META_FORMAT)?
            .and_then(|v| <[u8; 4]>::try_from(v.as_ref()).ok())
            .map(u32::from_be_bytes);
        if current.is_some_and(|v| v < FORMAT_VERSION) {
            m[0].insert(META_FORMAT, FORMAT_VERSION.to_be_bytes())?;
        }
        Ok(())
    })
}

/// Seal the record keys of an encrypted store of format version 2 (written
/// before keys were sealed: a sled store, or a PostgreSQL store of a build
/// that sealed values only), then stamp it [`FORMAT_VERSION_SEALED_KEYS`].
/// The rewrite goes in atomic batches and skips entries already sealed, so a
/// crash in the middle leaves a store that the next open finishes; only the
/// stamp, written after every entry is sealed and flushed, lets the layers
/// in. A shared store is sealed by one instance at a time (a store-wide
/// lock), and an instance that waited finds the stamp and does nothing.
fn seal_keys(store: &Store, t: &Trees, seal: &Arc<storage::keys::KeySeal>) -> Result<()> {
    let _lock = store.shared_lock("seal-keys")?;
    let stamped = t
        .meta
        .get(META_FORMAT)?
        .is_some_and(|v| v.as_ref() == FORMAT_VERSION_SEALED_KEYS.to_be_bytes());
    if stamped {
        return Ok(());
    }
    storage::keys::seal_plaintext_keys(store, seal)?;
    store.flush()?;
    t.meta
        .insert(META_FORMAT, FORMAT_VERSION_SEALED_KEYS.to_be_bytes())?;
    store.flush()?;
    Ok(())
}

/// sled cache of the checkpoint's reopen (see [`LogCheckpoint`]).
const CHECKPOINT_CACHE_BYTES: u64 = 1024 * 1024;

/// Log growth during one open after which a clean close checkpoints sled
/// and compacts its file (32 MiB before the compaction: a 50k short-episode
/// ingest was left at ~2.5 times its live bytes).
pub(crate) const CHECKPOINT_AFTER_BYTES: u64 = 4 * 1024 * 1024;

/// sled 0.34.7 writes its page-table snapshot only while *opening* a store
/// (`snapshot_after_ops` is a no-op), so the first open after a long write
/// session replays every log segment written since the previous open: ~2.5 s
/// after a 1M-episode ingest, against ~75 ms for the open after that. When an
/// engine grew sled's file by [`CHECKPOINT_AFTER_BYTES`] or more, a clean
/// close pays that replay instead, once, by opening sled again (after every
/// handle of this engine is closed, still holding `<store>/LOCK`) and closing
/// it, which leaves the snapshot for the next open. The cost is proportional to
/// what the session wrote (about 1% of a bulk ingest's time), plus the
/// compaction (see `drop`). Failures are ignored: the next open replays the
/// log as it would have anyway.
///
/// Dropped after every sled handle of the engine, it is also where closing
/// waits for sled to let go of its file: see [`wait_until_sled_unlocked`].
pub(super) struct LogCheckpoint {
    pub(super) cfg: sled::Config,
    /// sled's data file, `<store>/db/db`, which carries sled's lock.
    pub(super) data_file: PathBuf,
    pub(super) size_at_open: u64,
    pub(super) armed: AtomicBool,
}

/// The close-time compaction moves the pages of every segment of sled's
/// file that is less than this % live...
const COMPACT_LIVE_PCT: usize = 90;

/// ...when the file is more than this many times the bytes of its live pages.
const COMPACT_MAX_AMPLIFICATION: f64 = 1.2;

impl Drop for LogCheckpoint {
    /// Opening writes the snapshot; closing at once is the whole checkpoint.
    ///
    /// In between, the file is compacted. sled's segment cleaner runs on its
    /// flusher thread, for at most half of each flush interval, and only on
    /// segments at most half live; after a short-record ingest the file held
    /// 2.5-3 times its live pages (~380-470 bytes per 100-character episode for
    /// ~150 live), by an amount that depended on scheduling. `compact`
    /// relocates the pages of every segment less than 90 % live into the
    /// lowest free segments and moves the end of the file down; the second
    /// open frees the emptied segments and truncates the file (and writes
    /// the snapshot of the compacted file). That is the same relocation the
    /// cleaner does (crash-safe the same way: a page's old copy is only
    /// reused once its new one is on disk); see `vendor/sled/PATCHES.md`.
    fn drop(&mut self) {
        if self.armed.load(Ordering::Acquire)
            && let Ok(db) = open_sled(&self.cfg)
        {
            let moved = db
                .compact(COMPACT_LIVE_PCT, COMPACT_MAX_AMPLIFICATION)
                .unwrap_or(0);
            drop(db);
            if moved > 0 {
                drop(open_sled(&self.cfg));
            }
        }
        wait_until_sled_unlocked(&self.data_file, Duration::from_secs(10));
    }
}

/// Wait (up to `limit`) until no open file description holds the lock on
/// sled's data file. When the last handle of a `sled::Db` is dropped, sled's
/// background I/O threads may still hold the file, and with it its lock, for
/// a moment; closing an engine waits for that, so that once `close()` (or the
/// drop of the last handle) returns the store can be opened at once, by this
/// process or another, by Memstrata or by a tool that opens sled directly.
/// Runs in the process that opened the store only (a `fork()` child never
/// drops an inherited engine). Returns at the deadline anyway.
pub(crate) fn wait_until_sled_unlocked(data_file: &Path, limit: Duration) {
    let Ok(file) = File::open(data_file) else {
        return;
    };
    let deadline = Instant::now() + limit;
    loop {
        match file.try_lock() {
            Ok(()) => {
                let _ = file.unlock();
                return;
            }
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => return,
        }
    }
}

/// Open sled, waiting (up to 10 s) while its file lock is busy. The caller
/// holds `<store>/LOCK`, so no other engine owns the store; sled's own lock
/// can still be held for a moment by the background I/O threads of an
/// engine of this process that was just closed (sled reports that as
/// `ErrorKind::Other`, "could not acquire lock"). After the deadline the
/// lock error is returned.
pub(super) fn open_sled(cfg: &sled::Config) -> std::result::Result<sled::Db, sled::Error> {
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

/// The sled database of the store at `path`, opened directly with sled's
/// default settings (rekeying, test support), waiting while its lock is
/// busy as [`open_sled`] does.
pub(crate) fn open_sled_dir(path: &Path) -> std::result::Result<sled::Db, sled::Error> {
    open_sled(&sled::Config::new().path(path.join("db")))
}

/// sled's data file in the store at `path`: the file its lock is on.
pub(crate) fn sled_data_file(path: &Path) -> PathBuf {
    path.join("db").join("db")
}

/// sled's "store file is locked" error (`WouldBlock`, or `Other` with sled's message).
pub(super) fn is_sled_lock_error(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
        || (e.kind() == std::io::ErrorKind::Other
            && e.to_string().contains("could not acquire lock"))
}

/// Removes the engine's registry entry when dropped (declared last in `Engine`).
pub(super) struct Registration {
    path: PathBuf,
    registered: Arc<AtomicBool>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Only a registered engine has an entry; an engine dropped inside
        // `open` (whose caller holds the registry lock) must not take it.
        let mut last = false;
        if self.registered.load(Ordering::Acquire) {
            let mut reg = registry().lock();
            if reg
                .get(&self.path)
                .is_some_and(|(w, _)| w.strong_count() == 0)
            {
                reg.remove(&self.path);
            }
            last = reg.values().all(|(w, _)| w.strong_count() == 0);
        }
        // Every other field of the engine (sled, the index writer, the
        // caches, the checkpoint's reopened sled) is gone by now.
        crate::util::heap::release_free_memory(last);
    }
}
