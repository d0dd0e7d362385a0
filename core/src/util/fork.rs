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
//! The same handler detaches the child from the store's lock files
//! ([`ReleasedInChild`]): a `flock` belongs to an open file description,
//! which a child shares with its parent, so a child that outlives the
//! parent's `close()` would otherwise keep the store locked.
//!
//! With `util::heap` (`malloc_trim` after close), the only `unsafe` of the
//! crate: the libc calls here, each with its safety argument below.
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
    // Runs in the child before `fork()` returns, with one thread: lock-free
    // atomics and `dup2` are all it does (async-signal-safe).
    GENERATION.fetch_add(1, Ordering::Relaxed);
    fds::detach_all();
}

fn install_handler() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        #[cfg(unix)]
        {
            fds::open_null();
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

/// A file whose descriptor a `fork()` child gives up at once: the child
/// handler points the child's copy of the descriptor at `/dev/null` (`dup2`,
/// so the number stays taken and nothing else reuses it). The parent's
/// descriptor, and the `flock` it holds, are untouched; the child's copy
/// then no longer keeps the lock alive after the parent releases it. Used for
/// `<store>/LOCK` and sled's data file, which carries sled's own lock. The
/// child's handles fail with [`Error::Forked`] anyway, so it loses nothing;
/// and whatever it might still write through that descriptor goes nowhere
/// instead of into the parent's store.
pub(crate) struct ReleasedInChild<F> {
    #[cfg(unix)]
    fd: std::os::fd::RawFd,
    // Keeps the descriptor open for as long as it is registered.
    _file: F,
}

impl<F> std::fmt::Debug for ReleasedInChild<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleasedInChild").finish_non_exhaustive()
    }
}

#[cfg(unix)]
impl<F: std::ops::Deref<Target = std::fs::File>> ReleasedInChild<F> {
    pub(crate) fn new(file: F) -> Self {
        use std::os::fd::AsRawFd;
        install_handler();
        let fd = file.as_raw_fd();
        fds::register(fd);
        ReleasedInChild { fd, _file: file }
    }
}

#[cfg(not(unix))]
impl<F> ReleasedInChild<F> {
    pub(crate) fn new(file: F) -> Self {
        ReleasedInChild { _file: file }
    }
}

impl<F> Drop for ReleasedInChild<F> {
    fn drop(&mut self) {
        // Unregistered before `_file` closes the descriptor, so the child
        // handler never touches a number that was closed and reused.
        #[cfg(unix)]
        fds::unregister(self.fd);
    }
}

/// The registry of descriptors a child gives up: a fixed array of atomics,
/// because the child handler may not take a lock or allocate.
#[cfg(unix)]
mod fds {
    use std::os::fd::RawFd;
    use std::sync::atomic::{AtomicI32, Ordering};

    /// Two descriptors per open sled store; stores beyond 64 descriptors
    /// are not detached (a live child holds their locks, as before the handler).
    const SLOTS: usize = 64;
    const FREE: i32 = -1;
    static SLOT: [AtomicI32; SLOTS] = [const { AtomicI32::new(FREE) }; SLOTS];
    /// `/dev/null`, opened once (close-on-exec) by the handler's installer.
    static NULL: AtomicI32 = AtomicI32::new(FREE);

    pub(super) fn open_null() {
        // SAFETY: `open` with a NUL-terminated path and plain flags.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd >= 0 {
            NULL.store(fd, Ordering::Release);
        }
    }

    pub(super) fn register(fd: RawFd) {
        for slot in &SLOT {
            if slot
                .compare_exchange(FREE, fd, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    pub(super) fn unregister(fd: RawFd) {
        for slot in &SLOT {
            if slot
                .compare_exchange(fd, FREE, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// In the child, right after `fork()`: every registered descriptor now
    /// refers to `/dev/null`.
    pub(super) fn detach_all() {
        let null = NULL.load(Ordering::Acquire);
        if null < 0 {
            return;
        }
        for slot in &SLOT {
            let fd = slot.load(Ordering::Acquire);
            if fd >= 0 {
                // SAFETY: `dup2` is async-signal-safe; both descriptors are
                // open in the child (inherited), and `fd` stays open, now on
                // `/dev/null`, so no other owner sees its number change.
                unsafe { libc::dup2(null, fd) };
            }
        }
    }
}
