//! Fork detection: an engine is bound to the process that opened it.
//!
//! After `fork()` the child holds a copy of the engine in which no background
//! thread runs, locks held by the parent's other threads stay locked forever,
//! and the store's files and lock are shared with the parent. Every call
//! through a handle first compares the process's *fork generation* with the
//! one its engine was opened in ([`Origin::check`]) and fails with
//! [`Error::Forked`] before taking any lock or touching any file.
//!
//! The generation is a process-global counter bumped in the child by a
//! `pthread_atfork` handler (installed the first time an engine opens), so the
//! check is one relaxed atomic load and a compare. `std::process::id()` would
//! do too, but it is a system call on every call (glibc no longer caches the
//! pid). See docs/multiprocess.md for the measured cost.
//!
//! With `util::heap` (`malloc_trim` after close), the only `unsafe` of the
//! crate: two libc calls, each with its safety argument below.
#![allow(unsafe_code)]

use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::{Error, Result};

/// Forks since this process image started (bumped in each child).
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// `pthread_atfork` failed: fall back to comparing process ids.
static NO_HANDLER: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn after_fork_in_child() {
    // Runs in the child before `fork()` returns, with one thread: a
    // lock-free atomic add is all it does (async-signal-safe).
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

fn install_handler() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        #[cfg(unix)]
        {
            // SAFETY: registers a child handler that only does an atomic add
            // on a static; the prepare/parent handlers are none. The handler
            // is a plain `extern "C"` function that lives as long as the
            // process, so it can be called at any later `fork()`.
            let rc = unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
            if rc != 0 {
                NO_HANDLER.store(true, Ordering::Relaxed);
            }
        }
    });
}

/// The process an engine was opened in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    generation: u64,
    pid: u32,
}

impl Origin {
    /// The current process (installs the fork handler on first use).
    pub(crate) fn here() -> Origin {
        install_handler();
        Origin {
            generation: GENERATION.load(Ordering::Relaxed),
            pid: std::process::id(),
        }
    }

    /// Whether this is still the process the engine was opened in.
    #[inline]
    pub(crate) fn is_here(&self) -> bool {
        GENERATION.load(Ordering::Relaxed) == self.generation
            && !(NO_HANDLER.load(Ordering::Relaxed) && std::process::id() != self.pid)
    }

    /// `Ok` in the process the engine was opened in, else [`Error::Forked`].
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        if self.is_here() {
            Ok(())
        } else {
            Err(self.forked())
        }
    }

    #[cold]
    #[inline(never)]
    fn forked(&self) -> Error {
        Error::Forked {
            opened_in: self.pid,
            current: std::process::id(),
        }
    }
}

/// The process that first opened a sled store in this process image.
static SLED_STARTED: std::sync::OnceLock<Origin> = std::sync::OnceLock::new();

/// `Error::Forked` when a sled store was opened before a `fork()` that led to
/// this process. sled's I/O thread pool is process-global: in a forked child
/// its counters say that worker threads are waiting, but none exist there, so
/// sled's first write or flush would wait forever (and work queued by the
/// parent's threads could run on the parent's files). A child must not start
/// sled at all, even on another store; PostgreSQL stores are not affected.
pub(crate) fn check_sled_usable() -> Result<()> {
    match SLED_STARTED.get() {
        Some(origin) => origin.check(),
        None => Ok(()),
    }
}

/// Record that this process started sled (see [`check_sled_usable`]).
pub(crate) fn sled_started() {
    SLED_STARTED.get_or_init(Origin::here);
}
