//! Running the core's synchronous calls off the caller's thread.
//!
//! The core has no async runtime and never will (it is an embedded store), so
//! an exported `async fn` hands its work to `blocking`'s thread pool and
//! awaits the result. uniffi polls that future from Swift's or Kotlin's own
//! executor, so no runtime is started here and the caller's thread (a UI
//! thread included) is free while the store works. Every call runs under
//! `guard_binding`: a panic becomes `MemstrataError::Internal`.

use memstrata_bindings_common::{BindingError, guard_binding};

use crate::MemstrataError;

/// Run `f` on the blocking pool and await its result.
pub(crate) async fn run<T, F>(f: F) -> Result<T, MemstrataError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, BindingError> + Send + 'static,
{
    blocking::unblock(move || guard_binding(f))
        .await
        .map_err(MemstrataError::from)
}

/// Run a core call (`memstrata::Result`) on the blocking pool and await it.
pub(crate) async fn core<T, F>(f: F) -> Result<T, MemstrataError>
where
    T: Send + 'static,
    F: FnOnce() -> memstrata::Result<T> + Send + 'static,
{
    run(move || f().map_err(BindingError::from)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    #[test]
    fn work_runs_off_the_calling_thread_and_returns_its_result() {
        let caller = std::thread::current().id();
        let (value, worker) = block_on(run(|| Ok((21 * 2, std::thread::current().id())))).unwrap();
        assert_eq!(value, 42);
        assert_ne!(worker, caller);
    }

    #[test]
    fn core_errors_and_panics_become_memstrata_errors() {
        let e = block_on(core(|| -> memstrata::Result<()> {
            Err(memstrata::Error::not_found("session \"s\""))
        }))
        .unwrap_err();
        assert!(
            matches!(e, MemstrataError::NotFound(ref m) if m.contains("session")),
            "{e:?}"
        );
        let e = block_on(run(|| -> Result<(), BindingError> { panic!("boom") })).unwrap_err();
        assert!(
            matches!(e, MemstrataError::Internal(ref m) if m.contains("boom")),
            "{e:?}"
        );
        // The pool still works after a panic.
        assert_eq!(block_on(run(|| Ok(1))).unwrap(), 1);
    }
}
