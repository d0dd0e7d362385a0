//! # Memstrata
//!
//! An embedded, layered memory engine for AI agents: short-term key/value with
//! TTL, working memory, episodic memory with full-text search, semantic memory
//! and executable procedures, plus sessions, contexts and an LLM timesheet, on
//! sled with a derived tantivy index.
//!
//! ```
//! use memstrata::{Memory, NewEpisode, SearchFilters};
//! use serde_json::json;
//!
//! let mem = Memory::temporary()?;
//! mem.short_term().store("draft", json!({"text": "hello"}), None)?;
//! mem.episodic().record(NewEpisode::new("Deployed v2 to staging").tags(["deploy"]))?;
//! let hits = mem.episodic().search("staging deploy", &SearchFilters::default(), 10)?;
//! assert_eq!(hits[0].episode.summary, "Deployed v2 to staging");
//! # Ok::<(), memstrata::Error>(())
//! ```

#![warn(missing_docs)]

// The README's Rust example is compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

pub mod admin;
mod config;
mod continuity;
mod engine;
mod error;
mod layers;
pub mod search;
mod storage;
mod util;

/// Entry points for fuzz targets and robustness tests. Not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    use crate::layers::{episodic, semantic, short_term, working};
    use crate::storage::codec;

    /// Decode `bytes` as every stored record type; must never panic.
    /// Returns how many decoders accepted the input.
    pub fn decode_records(bytes: &[u8]) -> usize {
        let mut ok = 0;
        ok += usize::from(codec::decode::<short_term::StRecord>(bytes).is_ok());
        ok += usize::from(codec::decode::<working::WorkingState>(bytes).is_ok());
        ok += usize::from(
            episodic::EpisodeRecord::decode(&codec::Codec::default(), "id", bytes).is_ok(),
        );
        ok += usize::from(codec::decode::<semantic::KnowledgeRecord>(bytes).is_ok());
        ok += usize::from(codec::decode::<semantic::HistoryRecord>(bytes).is_ok());
        ok += usize::from(codec::decode::<serde_json::Value>(bytes).is_ok());
        ok += usize::from(codec::decode::<Vec<String>>(bytes).is_ok());
        ok
    }

    /// Encode a JSON value the way records are stored (for building seeds).
    pub fn encode_value(v: &serde_json::Value) -> Vec<u8> {
        codec::encode(v).unwrap_or_default()
    }
}

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::admin::Admin;
pub use crate::config::clock::{Clock, ManualClock, SystemClock};
pub use crate::config::{Durability, EncryptionKey, Limits, MemoryBuilder, Options};
pub use crate::continuity::contexts::Contexts;
pub use crate::continuity::sessions::Sessions;
pub use crate::continuity::timesheet::Timesheet;
pub use crate::engine::{DEFAULT_CONTEXT, FORMAT_VERSION, FORMAT_VERSION_SEALED_KEYS};
pub use crate::error::{Error, Result};
pub use crate::layers::episodic::{Episodic, NewEpisode, SearchFilters};
pub use crate::layers::procedural::{self, Procedural};
pub use crate::layers::semantic::Semantic;
pub use crate::layers::short_term::ShortTerm;
pub use crate::layers::working::Working;
pub use crate::search::{Embedder, Fusion, FusionMethod, VectorQuery};

/// The short-term layer: key/value entries with an optional TTL.
pub mod short_term {
    pub use crate::layers::short_term::{ShortTerm, ShortTermEntry};

    /// Convert a TTL in seconds (as bindings and MCP receive it) to a `Duration`,
    /// refusing zero, negative, NaN and absurd values with `InvalidInput { field: "ttl" }`.
    pub fn ttl_from_secs(secs: f64) -> crate::Result<std::time::Duration> {
        Ok(crate::util::input::ttl("ttl", Some(secs))?.unwrap_or_default())
    }
}

/// Working memory: the focus list and workspace items of a context.
pub mod working {
    pub use crate::layers::working::{Working, WorkspaceItem};
}

/// The episodic layer: recorded episodes with full-text and vector search.
pub mod episodic {
    pub use crate::layers::dedup::OnDuplicate;
    pub use crate::layers::episodic::{
        Episode, EpisodeHit, Episodic, NewEpisode, Recorded, SUMMARY_MAX_CHARS, SearchFilters,
    };
}

/// Forgetting by utility: per-context retention policies, the utility that
/// orders evictions, the eviction audit and the `rank_by_utility` search option.
pub mod retention {
    pub use crate::layers::episodic::retention::{
        Eviction, EvictionReason, RANK_HALF_LIFE_DAYS, RANK_IMPORTANCE_WEIGHT, RANK_RECENCY_WEIGHT,
        Retention, RetentionStatus, UTILITY_ACCESS_SATURATION, UTILITY_ACCESS_WEIGHT,
        UTILITY_HALF_LIFE_DAYS, UTILITY_IMPORTANCE_WEIGHT, UTILITY_RECENCY_WEIGHT, utility,
    };
}

/// The semantic layer: versioned knowledge entries.
pub mod semantic {
    pub use crate::layers::dedup::OnDuplicate;
    pub use crate::layers::semantic::{
        Knowledge, KnowledgeHit, KnowledgeVersion, NewKnowledge, ReadOptions, Semantic,
        StoreOptions, UpdateOptions,
    };
}

/// Sessions: snapshots of a context, saved (compressed, as deltas) and restored.
pub mod sessions {
    pub use crate::continuity::sessions::{
        MAX_COMPRESSION_LEVEL, SessionCreated, SessionInfo, SessionRestored, SessionSaved,
        SessionVersionInfo, Sessions,
    };
}

/// The LLM timesheet: tasks punched in and out, and reports over them.
pub mod timesheet {
    pub use crate::continuity::timesheet::{
        EPISODE_CONTEXT_CHARS, LlmTimesheet, PunchIn, PunchOut, Task, TaskFilter, TaskStatus,
        TaskStatusFilter, Timesheet, TimesheetReport,
    };
}

/// Contexts: the named partitions of a store, and values stored into a named context.
pub mod contexts {
    pub use crate::continuity::contexts::{ContextStored, ContextValue, Contexts, SwitchResult};

    /// Check a context name (`[A-Za-z0-9_.:-]{1,128}`), naming `field` in the error.
    pub fn validate_name(field: &str, name: &str) -> crate::Result<()> {
        crate::util::input::context_name(field, name)
    }
}

/// Store locations (a directory or a PostgreSQL URL): parse, validate, and mask for display.
pub use crate::storage::url as store_url;

use crate::continuity::contexts::SwitchResult;
use crate::engine::{Engine, Scope};

/// Handle on a Memstrata engine.
///
/// Cheap to clone; clones share the engine *and* the active context.
/// [`Memory::namespace`] gives a handle with its own active context.
/// Opening the same path twice in one process returns a handle on the same
/// engine; another process gets [`Error::StoreLocked`].
///
/// The handle opens stores, manages its active context, the embedder and
/// durability; everything else is reached through accessor objects that share
/// the handle's engine and active context: the layers ([`Memory::short_term`],
/// [`Memory::working`], [`Memory::episodic`], [`Memory::semantic`],
/// [`Memory::procedural`]), [`Memory::sessions`], [`Memory::timesheet`],
/// [`Memory::contexts`] and [`Memory::admin`].
#[derive(Clone)]
pub struct Memory {
    scope: Scope,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field(
                "path",
                &crate::storage::url::mask_path(self.scope.engine.path()),
            )
            .field("active_context", &self.scope.active_context())
            .finish()
    }
}

impl Memory {
    /// Open (or create) a store at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Memory> {
        Memory::builder().path(path.as_ref()).open()
    }

    /// A store in a temporary directory, removed when the last handle is dropped.
    pub fn temporary() -> Result<Memory> {
        Memory::builder().temporary().open()
    }

    /// Options builder.
    pub fn builder() -> MemoryBuilder {
        MemoryBuilder::default()
    }

    /// Open with explicit options.
    pub fn open_with(opts: Options) -> Result<Memory> {
        let engine = Engine::open(opts, &layers::REGISTRY)?;
        Ok(Memory {
            scope: Scope::new(engine, DEFAULT_CONTEXT),
        })
    }

    /// See [`MemoryBuilder::separate_engine`].
    fn open_separate(opts: Options) -> Result<Memory> {
        let engine = Engine::open_separate(opts, &layers::REGISTRY)?;
        Ok(Memory {
            scope: Scope::new(engine, DEFAULT_CONTEXT),
        })
    }

    /// A new handle on the same engine whose active context is `name`.
    pub fn namespace(&self, name: &str) -> Result<Memory> {
        self.scope.engine.check_process()?;
        util::input::context_name("name", name)?;
        Ok(Memory {
            scope: Scope::new(Arc::clone(&self.scope.engine), name),
        })
    }

    /// The active context of this handle.
    pub fn active_context(&self) -> String {
        self.scope.active_context()
    }

    /// Make `target` the active context of this handle. With `preserve_current = false`
    /// the working memory of the context being left is cleared.
    pub fn switch_context(&self, target: &str, preserve_current: bool) -> Result<SwitchResult> {
        let e = &self.scope.engine;
        e.timed("context.switch", || {
            util::input::context_name("target_context", target)?;
            let mut active = self.scope.active_cell().write();
            let previous = active.to_string();
            if !preserve_current && previous != target {
                layers::working::clear_in(e, &previous)?;
            }
            let loaded = e.context_has_data(target)?;
            *active = Arc::from(target);
            Ok(SwitchResult {
                previous_context: previous,
                context_loaded: loaded,
            })
        })
    }

    /// Short-term layer of the active context.
    pub fn short_term(&self) -> ShortTerm {
        ShortTerm {
            scope: self.scope.clone(),
        }
    }

    /// Working memory of the active context.
    pub fn working(&self) -> Working {
        Working {
            scope: self.scope.clone(),
        }
    }

    /// Episodic layer of the active context.
    pub fn episodic(&self) -> Episodic {
        Episodic {
            scope: self.scope.clone(),
        }
    }

    /// Semantic layer of the active context.
    pub fn semantic(&self) -> Semantic {
        Semantic {
            scope: self.scope.clone(),
        }
    }

    /// Procedural layer of the active context.
    pub fn procedural(&self) -> Procedural {
        Procedural {
            scope: self.scope.clone(),
        }
    }

    /// Sessions: snapshots of a context, saved and restored.
    pub fn sessions(&self) -> Sessions {
        Sessions {
            scope: self.scope.clone(),
        }
    }

    /// The LLM timesheet (tasks punched in and out, with reports).
    pub fn timesheet(&self) -> Timesheet {
        Timesheet {
            scope: self.scope.clone(),
        }
    }

    /// The store's contexts: list them, read or write a named context's values.
    pub fn contexts(&self) -> Contexts {
        Contexts {
            scope: self.scope.clone(),
        }
    }

    /// Store-wide administration: status, optimize, export and import.
    pub fn admin(&self) -> Admin {
        Admin {
            scope: self.scope.clone(),
        }
    }

    /// Commit the index and fsync everything now (what `Durability::Manual` users call).
    pub fn flush(&self) -> Result<()> {
        self.scope.engine.check_process()?;
        self.scope.engine.flush()
    }

    /// Register (or with `None` remove) the host's embedder, engine-wide.
    ///
    /// When set, the engine calls it on `episodic().record` and `semantic().store`
    /// without an embedding (text: the summary plus the content's text / the
    /// knowledge's text) and on searches with a non-empty query and no embedding.
    /// Its failures are reported as `InvalidInput` on field `embedder`.
    pub fn set_embedder(&self, embedder: Option<Arc<dyn Embedder>>) {
        self.scope.engine.set_embedder(embedder);
    }

    /// The store directory, or the PostgreSQL URL as given, *with* its password:
    /// show it with [`store_url::mask`] (as `Debug` and every error do).
    pub fn path(&self) -> PathBuf {
        self.scope.engine.path().to_owned()
    }

    /// Whether the store is temporary (deleted on close).
    pub fn is_temporary(&self) -> bool {
        self.scope.engine.is_temporary()
    }

    /// The options the engine was opened with.
    pub fn options(&self) -> &Options {
        &self.scope.engine.opts
    }

    /// Rotate the store's encryption key in place to `new_key` and reopen the
    /// store with it (see [`admin::rekey_store`]), in the same active context.
    /// Closes this handle first: it must be the last one open on the store
    /// (`StoreLocked` otherwise, and the store is left as it was). An
    /// encrypted sled store only.
    pub fn rekey(self, new_key: EncryptionKey) -> Result<Memory> {
        let e = &self.scope.engine;
        e.check_process()?;
        let Some(old) = e.opts.encryption_key.clone() else {
            return Err(Error::invalid(
                "encryption_key",
                "the store is not encrypted: a key can be given to a new store only (export, then import into a store opened with the key)",
            ));
        };
        if e.is_temporary() || store_url::is_postgres_path(e.path()) {
            return Err(Error::invalid(
                "path",
                "key rotation in place works on a sled store directory (not a temporary store; PostgreSQL: export and import)",
            ));
        }
        let mut opts = e.opts.clone();
        let path = e.path().to_owned();
        let active = self.active_context();
        drop(self);
        admin::rekey_store(&path, &old, &new_key, &|_| {})?;
        opts.encryption_key = Some(new_key);
        let mem = Memory::open_with(opts)?;
        mem.switch_context(&active, true)?;
        Ok(mem)
    }
}

impl MemoryBuilder {
    /// Open the store.
    pub fn open(self) -> Result<Memory> {
        let (opts, separate) = self.into_parts();
        if separate {
            return Memory::open_separate(opts);
        }
        Memory::open_with(opts)
    }
}

/// How text search weighs the words of a query (see `docs/api.md`): exposed
/// so that the benchmark floor (raw tantivy in `benches/`) builds exactly the
/// query Memstrata builds. Not a stable API.
#[doc(hidden)]
pub mod search_terms {
    pub use crate::search::index::query::{QUERY_STOP_WORDS, STOP_WORD_WEIGHT};
}

/// Test support for the upgrade of encrypted stores to sealed keys. Not a
/// stable API.
#[doc(hidden)]
pub mod testing {
    /// Turn the closed, encrypted store at `path` (a sled directory, or a
    /// `postgres://` URL) back into what a build before sealed keys wrote
    /// (plaintext keys, format version 2), for every entry or (`every_other`)
    /// for every other one, as a crash in the middle of the upgrade leaves
    /// it. Returns the entries rewritten. (A PostgreSQL store's search rows
    /// are left as they are.)
    pub fn unseal_keys(
        path: &std::path::Path,
        key: &crate::EncryptionKey,
        every_other: bool,
    ) -> crate::Result<usize> {
        use crate::error::DepResult;
        let store = if crate::storage::url::is_postgres_path(path) {
            postgres_store(path)?
        } else {
            crate::storage::Store::Sled(open_raw_sled(path).dep()?)
        };
        let seal = std::sync::Arc::new(crate::storage::keys::KeySeal::new(key));
        let undone = crate::storage::keys::unseal_keys(&store, &seal, every_other);
        drop(store);
        // As an engine's close does: the store can be opened at once after.
        crate::engine::wait_until_sled_unlocked(
            &crate::engine::sled_data_file(path),
            std::time::Duration::from_secs(10),
        );
        undone
    }

    /// Open the sled database of the closed store at `path` directly,
    /// waiting (up to 10 s) while sled's file lock is still held by the
    /// background I/O threads of a handle just dropped, as the engine's own
    /// open does. Drop it before opening the store again.
    pub fn open_raw_sled(path: &std::path::Path) -> sled::Result<sled::Db> {
        crate::engine::open_sled_dir(path)
    }

    #[cfg(feature = "postgres")]
    fn postgres_store(path: &std::path::Path) -> crate::Result<crate::storage::Store> {
        let url = crate::storage::url::PgUrl::parse(path.to_str().unwrap_or_default())?;
        let pg = crate::storage::pg::PgStore::open(&url, None)?;
        Ok(crate::storage::Store::Postgres(std::sync::Arc::new(pg)))
    }

    #[cfg(not(feature = "postgres"))]
    fn postgres_store(_path: &std::path::Path) -> crate::Result<crate::storage::Store> {
        Err(crate::Error::invalid(
            "path",
            "a postgres:// store needs memstrata built with the `postgres` feature",
        ))
    }
}
