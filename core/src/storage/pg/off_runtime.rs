//! Closing connections safely from inside async code.
//!
//! The `postgres` client is synchronous: every call, and the close that runs
//! when a client is dropped, blocks on a tokio runtime of its own. On a thread
//! that is already driving an async runtime (a task's thread, or one inside
//! `block_on`) tokio refuses that with a panic ("Cannot start a runtime from
//! within a runtime"), and a panic in a destructor that runs while another one
//! unwinds aborts the process.
//!
//! The store's operations, and with them the locks and transactions they hold,
//! always run on threads that may block (the bindings and the MCP server call
//! them there; on an async thread their first query would fail the same way).
//! But the last handle of a store can be dropped anywhere: the MCP server's
//! session tasks released theirs while its runtime shut down, and the process
//! aborted instead of exiting 0. So closing the idle pool goes through
//! [`drop_off_runtime`]: on a thread of its own, once per store closed.
//! Always, not only inside a runtime: telling whether this thread drives one
//! would make tokio a dependency of the core (changing every core symbol's
//! hash, see layout/README.md) to save one short-lived thread per close.

/// Drop `value` on a thread of its own (which drives no async runtime),
/// waiting for it to end.
///
/// If no thread can be started, `value` is leaked rather than dropped here
/// (dropping a connection here could abort the process): the server ends its
/// session when the process exits.
pub(crate) fn drop_off_runtime<T: Send>(value: T) {
    let slot = parking_lot::Mutex::new(Some(value));
    let started = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("memstrata-pg-close".into())
            .spawn_scoped(s, || drop(slot.lock().take()))
            .is_ok()
    });
    if !started && let Some(v) = slot.into_inner() {
        std::mem::forget(v);
    }
}
