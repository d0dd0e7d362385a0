//! Open options: durability, limits, memory budgets, clock.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub mod clock;

use self::clock::{Clock, SystemClock};

/// When a mutating call's data reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Every mutating call returns only after sled has fsynced.
    Immediate,
    /// sled fsyncs in the background every `n` milliseconds: at most that
    /// window of acknowledged writes can be lost on a crash (not on a clean close).
    Periodic(u64),
    /// Nothing is fsynced until [`crate::Memory::flush`] or close.
    Manual,
}

impl Default for Durability {
    fn default() -> Self {
        Durability::Periodic(500)
    }
}

impl std::str::FromStr for Durability {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "immediate" => Ok(Durability::Immediate),
            "periodic" => Ok(Durability::default()),
            "manual" => Ok(Durability::Manual),
            other => {
                if let Some(ms) = other.strip_prefix("periodic:")
                    && let Ok(ms) = ms.parse::<u64>()
                    && ms > 0
                {
                    return Ok(Durability::Periodic(ms));
                }
                Err(crate::Error::invalid(
                    "durability",
                    format!(
                        "expected \"immediate\", \"periodic\", \"periodic:<ms>\" or \"manual\", got {other:?}"
                    ),
                ))
            }
        }
    }
}

/// Input limits. Every public entry point checks these and fails with
/// `InvalidInput` / `LimitExceeded` naming the field and the limit.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Max bytes of a key, name or id (default 1 KiB).
    pub max_key_bytes: usize,
    /// Max bytes of one JSON value once encoded (default 16 MiB).
    pub max_value_bytes: usize,
    /// Max JSON nesting depth (default 128).
    pub max_json_depth: usize,
    /// Max bytes of a search query (default 4 KiB).
    pub max_query_bytes: usize,
    /// Max tags or participants on one episode (default 64).
    pub max_tags: usize,
    /// Max results one search / list call returns (default 1000).
    pub max_results: usize,
    /// Focus capacity of working memory (default 7).
    pub focus_capacity: usize,
    /// Workspace capacity of working memory (default 64).
    pub workspace_capacity: usize,
    /// Versions of a semantic entry kept in its history (default 32).
    pub semantic_history: usize,
    /// Steps one procedure run may execute before failing (default 1000).
    pub max_steps: usize,
    /// Steps in one procedure definition (default 256).
    pub max_procedure_steps: usize,
    /// Items in one batch write, `record_many` / `store_many` (default 10,000).
    pub max_batch_items: usize,
    /// Encoded bytes of one batch write, all items together (default 64 MiB).
    pub max_batch_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_key_bytes: 1024,
            max_value_bytes: 16 * 1024 * 1024,
            max_json_depth: 128,
            max_query_bytes: 4096,
            max_tags: 64,
            max_results: 1000,
            focus_capacity: 7,
            workspace_capacity: 64,
            semantic_history: 32,
            max_steps: 1000,
            max_procedure_steps: 256,
            max_batch_items: 10_000,
            max_batch_bytes: 64 * 1024 * 1024,
        }
    }
}

/// A 32-byte key for encryption at rest (XChaCha20-Poly1305). See `docs/security.md`.
///
/// Its `Debug` output never shows the key; the bytes are overwritten when it is dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct EncryptionKey([u8; EncryptionKey::LEN]);

impl EncryptionKey {
    /// Key length in bytes.
    pub const LEN: usize = 32;

    /// A key from exactly 32 bytes.
    pub fn new(bytes: [u8; Self::LEN]) -> Self {
        EncryptionKey(bytes)
    }

    /// A key from a byte slice; `InvalidInput` on field `encryption_key` unless it is 32 bytes.
    pub fn from_slice(bytes: &[u8]) -> crate::Result<Self> {
        <[u8; Self::LEN]>::try_from(bytes)
            .map(EncryptionKey)
            .map_err(|_| {
                crate::Error::invalid(
                    "encryption_key",
                    format!(
                        "must be exactly {} bytes, got {} bytes",
                        Self::LEN,
                        bytes.len()
                    ),
                )
            })
    }

    /// A key from the contents of a key file: exactly 32 raw bytes, or 64
    /// hexadecimal characters (surrounding whitespace such as a final newline
    /// is ignored). Anything else is `InvalidInput` on field `encryption_key`
    /// (the message never repeats the file's contents).
    pub fn from_key_file_contents(contents: &[u8]) -> crate::Result<Self> {
        if contents.len() == Self::LEN {
            return Self::from_slice(contents);
        }
        let text = contents.trim_ascii();
        if text.len() == 2 * Self::LEN && text.iter().all(u8::is_ascii_hexdigit) {
            let mut out = [0u8; Self::LEN];
            for (o, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
                let hex = |c: u8| match c {
                    b'0'..=b'9' => c - b'0',
                    b'a'..=b'f' => c - b'a' + 10,
                    _ => c - b'A' + 10,
                };
                *o = (hex(pair[0]) << 4) | hex(pair[1]);
            }
            return Ok(EncryptionKey(out));
        }
        Err(crate::Error::invalid(
            "encryption_key",
            format!(
                "a key file must hold exactly {} raw bytes or {} hexadecimal characters, this one has {} bytes",
                Self::LEN,
                2 * Self::LEN,
                contents.len()
            ),
        ))
    }

    pub(crate) fn bytes(&self) -> &[u8; Self::LEN] {
        &self.0
    }
}

impl std::fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncryptionKey(<redacted>)")
    }
}

impl Drop for EncryptionKey {
    fn drop(&mut self) {
        // Best effort: volatile-free overwrite; the optimiser may keep copies elsewhere.
        self.0.fill(0);
        std::hint::black_box(&self.0);
    }
}

/// Everything [`crate::Memory`] needs to open a store. Build with [`crate::Memory::builder`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Store directory; `None` makes a temporary store deleted on close.
    pub path: Option<PathBuf>,
    /// Durability mode (default `Periodic(500)`).
    pub durability: Durability,
    /// sled page cache in bytes (default 4 MiB; 32 MiB before the footprint
    /// measurements). sled's accounting counts
    /// far less than the memory its cached pages hold: see
    /// `docs/benchmarks/footprint.md` before raising it.
    pub cache_bytes: u64,
    /// tantivy writer memory budget in bytes (default 16 MB, tantivy's floor is 15 MB).
    pub index_writer_bytes: usize,
    /// Most documents one merge of search-index segments may write (default
    /// 0: unbounded, tantivy's log merge policy; [`Options::low_memory`]
    /// sets 200,000). A merge's memory grows with the segment it writes, and
    /// unbounded the last merge of a 1M short-episode store wrote ~580k
    /// documents, +10 MiB on the `low_memory` peak while it ran. Bounded, a
    /// segment of more than half the bound is never merged again, so a store
    /// of `n` episodes keeps about `2n / bound` large segments (a search
    /// visits each: ~10 at 1M with 200,000).
    pub index_merge_max_docs: u32,
    /// Budget of the decoded-episode cache in bytes (default 8 MiB; 0 turns it
    /// off; at most [`Options::MAX_DECODED_CACHE_BYTES`]). Off on a shared store.
    pub episode_cache_bytes: usize,
    /// Budget of the short-term read cache in bytes (default 16 MiB; 0 turns it
    /// off; at most [`Options::MAX_DECODED_CACHE_BYTES`]). Off on a shared store.
    pub short_term_cache_bytes: usize,
    /// While the store is being written, how often the maintenance thread
    /// gives free heap back to the operating system (default 1 s;
    /// `Duration::ZERO` turns it off). glibc keeps what the engine's threads
    /// free in its arenas, fragmented by the short-lived copies sled makes
    /// of every node it changes: without it a steady ingest of short
    /// episodes held about twice its live heap (see
    /// `docs/benchmarks/footprint.md`). Only on Linux with glibc
    /// (`malloc_trim`); a no-op elsewhere. While it is on, the maintenance
    /// thread also releases the resident pages of the search index files
    /// mapped for reading at every tick while the store is written, and the
    /// index does so itself after every 2 MiB it writes, which bounds what a
    /// merge keeps mapped (on Unix; they are read again from the page cache
    /// when next needed).
    pub release_memory_interval: Duration,
    /// Longest time an indexed write waits before a background commit (default 250 ms).
    /// Searches never wait: they force a commit when documents are pending.
    pub index_commit_interval: Duration,
    /// How often expired short-term items are swept (default 60 s).
    pub sweep_interval: Duration,
    /// Input limits.
    pub limits: Limits,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Versions kept per session by `optimize(medium)` and later (default 10).
    pub session_retention: usize,
    /// Roots searched by `punch_out(detect_files = true)`.
    pub workspace_roots: Vec<PathBuf>,
    /// Encryption-at-rest key (default `None`: records stored in plaintext).
    /// A store created with a key can only be opened with that key.
    pub encryption_key: Option<EncryptionKey>,
    /// Budget of the decrypted search-index cache in bytes, used only with an
    /// `encryption_key` (default 16 MiB; 0 decrypts every read; at most
    /// [`Options::MAX_DECODED_CACHE_BYTES`]). Without a key the index is
    /// memory-mapped and this budget is unused.
    pub index_cache_bytes: usize,
    /// Most malloc arenas glibc may create in this process (default 0: glibc's
    /// own limit, eight per CPU; [`Options::low_memory`] sets 2; at most
    /// [`Options::MAX_MALLOC_ARENAS`]). glibc gives each thread that allocates
    /// an arena of its own up to that limit, and every arena keeps its own
    /// free and fragmented pages: capped at 2, a 100k short-episode ingest
    /// with the `low_memory` budgets peaked at +38–42 MiB instead of +47–58
    /// (see `docs/benchmarks/footprint.md`, tenth pass), and batched writes
    /// ran 6–20 % slower, the engine's threads sharing one arena.
    /// Process-wide, like glibc's own `MALLOC_ARENA_MAX`: applied when a store
    /// opens with it set (the smallest cap any store asked for stays), unless
    /// the application set `MALLOC_ARENA_MAX` (or `glibc.malloc.arena_max`)
    /// itself. Only on Linux with glibc; a no-op elsewhere.
    pub malloc_arena_max: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            path: None,
            durability: Durability::default(),
            cache_bytes: 4 * 1024 * 1024,
            index_writer_bytes: 16_000_000,
            index_merge_max_docs: 0,
            episode_cache_bytes: 8 * 1024 * 1024,
            short_term_cache_bytes: 16 * 1024 * 1024,
            release_memory_interval: Duration::from_secs(1),
            index_commit_interval: Duration::from_millis(250),
            sweep_interval: Duration::from_secs(60),
            limits: Limits::default(),
            clock: Arc::new(SystemClock),
            session_retention: 10,
            workspace_roots: Vec::new(),
            encryption_key: None,
            index_cache_bytes: 16 * 1024 * 1024,
            malloc_arena_max: 0,
        }
    }
}

impl Options {
    /// Largest budget of a decoded-record cache (`episode_cache_bytes`,
    /// `short_term_cache_bytes`): 1 GiB.
    pub const MAX_DECODED_CACHE_BYTES: usize = 1 << 30;

    /// Largest [`Options::malloc_arena_max`]: 1,024.
    pub const MAX_MALLOC_ARENAS: usize = 1024;

    /// The memory budgets of [`MemoryBuilder::low_memory`]: sled cache 1 MiB,
    /// index writer 15 MB (tantivy's floor), merges of at most 200,000
    /// documents, episode cache 1 MiB, short-term
    /// cache 2 MiB, decrypted-index cache 4 MiB, free heap given back every
    /// 250 ms while writing, at most 2 malloc arenas in the process
    /// ([`Options::malloc_arena_max`]). Everything else as in [`Options::default`].
    pub fn low_memory() -> Self {
        let mut o = Options::default();
        o.apply_low_memory();
        o
    }

    fn apply_low_memory(&mut self) {
        self.cache_bytes = 1024 * 1024;
        self.index_writer_bytes = 15_000_000;
        self.index_merge_max_docs = 200_000;
        self.episode_cache_bytes = 1024 * 1024;
        self.short_term_cache_bytes = 2 * 1024 * 1024;
        self.release_memory_interval = Duration::from_millis(250);
        self.index_cache_bytes = 4 * 1024 * 1024;
        self.malloc_arena_max = 2;
    }

    /// Check the memory budgets: `InvalidInput` naming the field and the limit.
    pub(crate) fn validate(&self) -> crate::Result<()> {
        for (field, bytes) in [
            ("episode_cache_bytes", self.episode_cache_bytes),
            ("short_term_cache_bytes", self.short_term_cache_bytes),
            ("index_cache_bytes", self.index_cache_bytes),
        ] {
            if bytes > Self::MAX_DECODED_CACHE_BYTES {
                return Err(crate::Error::invalid(
                    field,
                    format!(
                        "must be at most {} bytes (1 GiB), got {bytes}",
                        Self::MAX_DECODED_CACHE_BYTES
                    ),
                ));
            }
        }
        if self.malloc_arena_max > Self::MAX_MALLOC_ARENAS {
            return Err(crate::Error::invalid(
                "malloc_arena_max",
                format!(
                    "must be at most {}, got {}",
                    Self::MAX_MALLOC_ARENAS,
                    self.malloc_arena_max
                ),
            ));
        }
        Ok(())
    }
}

/// Builder for [`crate::Memory`].
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct MemoryBuilder {
    pub(crate) opts: Options,
    /// Test knob: an engine of its own instead of sharing the process's engine for the path.
    pub(crate) separate_engine: bool,
}

impl MemoryBuilder {
    /// Store directory (created if missing).
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.opts.path = Some(path.into());
        self
    }
    /// Use a temporary directory removed when the engine closes.
    pub fn temporary(mut self) -> Self {
        self.opts.path = None;
        self
    }
    /// Durability mode.
    pub fn durability(mut self, d: Durability) -> Self {
        self.opts.durability = d;
        self
    }
    /// Most documents one index merge may write (0: unbounded); see
    /// [`Options::index_merge_max_docs`].
    pub fn index_merge_max_docs(mut self, docs: u32) -> Self {
        self.opts.index_merge_max_docs = docs;
        self
    }
    /// sled cache size in bytes.
    pub fn cache_bytes(mut self, bytes: u64) -> Self {
        self.opts.cache_bytes = bytes;
        self
    }
    /// tantivy writer memory in bytes (at least 15 MB).
    pub fn index_writer_bytes(mut self, bytes: usize) -> Self {
        self.opts.index_writer_bytes = bytes;
        self
    }
    /// Budget of the decoded-episode cache in bytes (0 turns it off; at most 1 GiB).
    pub fn episode_cache_bytes(mut self, bytes: usize) -> Self {
        self.opts.episode_cache_bytes = bytes;
        self
    }
    /// Budget of the short-term read cache in bytes (0 turns it off; at most 1 GiB).
    pub fn short_term_cache_bytes(mut self, bytes: usize) -> Self {
        self.opts.short_term_cache_bytes = bytes;
        self
    }
    /// How often free heap is given back to the OS while the store is
    /// written (`Duration::ZERO` turns it off; see [`Options::release_memory_interval`]).
    pub fn release_memory_interval(mut self, d: Duration) -> Self {
        self.opts.release_memory_interval = d;
        self
    }
    /// Budget of the decrypted search-index cache of an encrypted store in
    /// bytes (0 decrypts every read; at most 1 GiB).
    pub fn index_cache_bytes(mut self, bytes: usize) -> Self {
        self.opts.index_cache_bytes = bytes;
        self
    }
    /// Most malloc arenas glibc may create in this process (0 leaves glibc's
    /// limit; see [`Options::malloc_arena_max`]).
    pub fn malloc_arena_max(mut self, arenas: usize) -> Self {
        self.opts.malloc_arena_max = arenas;
        self
    }
    /// The mobile preset: every memory budget at its low setting (see
    /// [`Options::low_memory`]). Budgets set after this call override it.
    pub fn low_memory(mut self) -> Self {
        self.opts.apply_low_memory();
        self
    }
    /// Background index commit interval.
    pub fn index_commit_interval(mut self, d: Duration) -> Self {
        self.opts.index_commit_interval = d;
        self
    }
    /// Expired-item sweep interval.
    pub fn sweep_interval(mut self, d: Duration) -> Self {
        self.opts.sweep_interval = d;
        self
    }
    /// Input limits and capacities.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.opts.limits = limits;
        self
    }
    /// Time source (tests inject a [`crate::ManualClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.opts.clock = clock;
        self
    }
    /// Session versions kept by `optimize(medium|aggressive)`.
    pub fn session_retention(mut self, n: usize) -> Self {
        self.opts.session_retention = n;
        self
    }
    /// Add a workspace root for timesheet file detection.
    pub fn workspace_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.opts.workspace_roots.push(root.into());
        self
    }
    /// Encrypt record values at rest with this 32-byte key (see `docs/security.md`).
    /// A new store is created encrypted; an existing store must have been created
    /// with the same key (a wrong or unexpected key is `InvalidInput` on
    /// `encryption_key`, and nothing is written).
    pub fn encryption_key(mut self, key: EncryptionKey) -> Self {
        self.opts.encryption_key = Some(key);
        self
    }
    /// Open an engine of its own for a shared (PostgreSQL) store instead of
    /// sharing the one this process has open for the same URL, as a second
    /// server instance would. For tests of several instances in one process;
    /// refused for a sled store (one process, one engine).
    #[doc(hidden)]
    pub fn separate_engine(mut self) -> Self {
        self.separate_engine = true;
        self
    }
    /// The options built so far, and whether to open a separate engine
    /// (what `MemoryBuilder::open` in the crate root consumes).
    pub(crate) fn into_parts(self) -> (Options, bool) {
        (self.opts, self.separate_engine)
    }
}
