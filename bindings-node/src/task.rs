//! Running an engine call off the JS thread: every storage method returns a Promise
//! whose work runs on napi's tokio blocking pool (the core is synchronous). The pool
//! grows on demand, so a host action that awaits another call on the same store while
//! its procedure waits for it cannot starve the pool (libuv's 4 threads could).

use std::sync::Arc;

use memstrata_bindings_common::{BindingError, Handle, guard_binding};
use napi::bindgen_prelude::*;

use crate::error;

/// Run `f` on the blocking pool; resolve with its value, or reject with its error
/// (a panic is caught and rejects with `INTERNAL`).
pub(crate) fn spawn<T, F>(env: &Env, f: F) -> Result<PromiseRaw<'_, T>>
where
    T: ToNapiValue + Send + 'static,
    F: FnOnce() -> std::result::Result<T, BindingError> + Send + 'static,
{
    env.spawn_future_with_callback(
        async move { Ok(spawn_blocking(move || guard_binding(f)).await) },
        |env, joined| match joined {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(error::to_napi(env, e)),
            Err(e) => Err(error::to_napi(
                env,
                BindingError::internal(format!("engine call did not complete: {e}")),
            )),
        },
    )
}

/// [`spawn`] with the core handle of `h` (`CLOSED` once the handle was closed).
pub(crate) fn with<'env, T, F>(env: &'env Env, h: &Arc<Handle>, f: F) -> Result<PromiseRaw<'env, T>>
where
    T: ToNapiValue + Send + 'static,
    F: FnOnce(memstrata::Memory) -> std::result::Result<T, BindingError> + Send + 'static,
{
    let h = Arc::clone(h);
    spawn(env, move || f(h.get()?))
}
