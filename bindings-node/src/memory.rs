//! `Memory`: the engine handle, its options, contexts and lifecycle.

use std::path::PathBuf;
use std::sync::Arc;

use memstrata_bindings_common::{BindingError, Handle, OpenOptions, SwitchResult, defaults, guard};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::callbacks::JsEmbedder;
use crate::clock::ManualClock;
use crate::episodic::Episodic;
use crate::error;
use crate::procedural::Procedural;
use crate::semantic::Semantic;
use crate::short_term::ShortTerm;
use crate::task::{spawn, with};
use crate::working::Working;

/// A Memstrata store, or a namespace handle on one. Open it with `Memory.open`.
/// Every method that touches storage returns a Promise and runs off the JS thread.
#[napi]
#[derive(Debug)]
pub struct Memory {
    pub(crate) h: Arc<Handle>,
}

/// Options of `switchContext`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct SwitchContextOptions {
    /// Keep the working memory of the context being left (default true).
    pub preserve_current: Option<bool>,
}

impl Memory {
    pub(crate) fn wrap(mem: memstrata::Memory) -> Memory {
        Memory {
            h: Handle::new(mem),
        }
    }

    fn field<'a, T: FromNapiValue + ValidateNapiValue>(
        obj: &Object<'a>,
        name: &str,
    ) -> std::result::Result<Option<T>, BindingError> {
        obj.get::<T>(name)
            .map_err(|e| BindingError::invalid(name, e.reason.clone()))
    }
}

#[napi]
impl Memory {
    /// Open (or create) the store at `path`; no path: a temporary store, deleted when
    /// its last handle is closed. Opening a path already open in this process (or in
    /// another worker thread) shares its engine; another process gets `STORE_LOCKED`.
    #[napi(
        writable = true,
        configurable = true,
        ts_args_type = "path?: string | null, options?: OpenOptions & { clock?: ManualClock }",
        ts_return_type = "Promise<Memory>"
    )]
    pub fn open<'env>(
        env: &'env Env,
        path: Option<String>,
        options: Option<Object<'env>>,
    ) -> Result<PromiseRaw<'env, Memory>> {
        let (opts, clock) = match options {
            None => (OpenOptions::default(), None),
            Some(obj) => {
                let opts = OpenOptions::from_unknown(obj.to_unknown()).map_err(|e| {
                    error::to_napi(env, BindingError::invalid("options", e.reason.clone()))
                })?;
                let clock = Self::field::<ClassInstance<'_, ManualClock>>(&obj, "clock")
                    .map_err(|e| error::to_napi(env, e))?
                    .map(|c| ManualClock::core(&c));
                (opts, clock)
            }
        };
        spawn(env, move || {
            let mut b = opts.builder(path.map(PathBuf::from))?;
            if let Some(c) = clock {
                b = b.clock(c);
            }
            Ok(Memory::wrap(guard(|| b.open())?))
        })
    }

    /// Short-term key/value layer of the active context.
    #[napi(getter)]
    pub fn short_term(&self) -> ShortTerm {
        ShortTerm {
            h: Arc::clone(&self.h),
        }
    }

    /// Working memory (focus and workspace) of the active context.
    #[napi(getter)]
    pub fn working(&self) -> Working {
        Working {
            h: Arc::clone(&self.h),
        }
    }

    /// Episodic layer of the active context.
    #[napi(getter)]
    pub fn episodic(&self) -> Episodic {
        Episodic {
            h: Arc::clone(&self.h),
        }
    }

    /// Semantic layer of the active context.
    #[napi(getter)]
    pub fn semantic(&self) -> Semantic {
        Semantic {
            h: Arc::clone(&self.h),
        }
    }

    /// Procedures of the active context.
    #[napi(getter)]
    pub fn procedural(&self) -> Procedural {
        Procedural {
            h: Arc::clone(&self.h),
        }
    }

    /// A new handle on the same store whose active context is `name`.
    #[napi]
    pub fn namespace<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> Result<PromiseRaw<'env, Memory>> {
        with(env, &self.h, move |m| Ok(Memory::wrap(m.namespace(&name)?)))
    }

    /// The active context of this handle.
    #[napi(getter)]
    pub fn active_context(&self, env: &Env) -> Result<String> {
        let m = self.h.get().map_err(|e| error::to_napi(env, e))?;
        Ok(m.active_context())
    }

    /// Make `target` the active context of this handle (and of its layer objects).
    /// With `preserveCurrent: false` the working memory of the context being left is cleared.
    #[napi]
    pub fn switch_context<'env>(
        &self,
        env: &'env Env,
        target: String,
        options: Option<SwitchContextOptions>,
    ) -> Result<PromiseRaw<'env, SwitchResult>> {
        let preserve = options
            .and_then(|o| o.preserve_current)
            .unwrap_or(defaults::DEFAULT_PRESERVE_CURRENT);
        with(env, &self.h, move |m| {
            Ok(m.switch_context(&target, preserve)?.into())
        })
    }

    /// Contexts that hold (or held) data, sorted; always includes "default".
    #[napi]
    pub fn contexts<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Vec<String>>> {
        with(env, &self.h, |m| Ok(m.contexts().list()?))
    }

    /// Commit the index and fsync everything now.
    #[napi]
    pub fn flush<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        with(env, &self.h, |m| Ok(m.flush()?))
    }

    /// Rotate the store's encryption key in place to `newKey` (a 32-byte Buffer or
    /// Uint8Array): every record and index file is sealed again under it, and the old
    /// key is refused from then on (docs/security.md). This must be the only open
    /// handle on the store (namespaces included: `STORE_LOCKED` otherwise, nothing
    /// changed); it stays open, with the new key. An encrypted store directory only.
    #[napi(ts_args_type = "newKey: Buffer | Uint8Array")]
    pub fn rekey<'env>(
        &self,
        env: &'env Env,
        new_key: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, ()>> {
        // Not bytes: the Promise rejects, as for a key of the wrong length.
        let key = Uint8Array::from_unknown(new_key)
            .map(|b| b.to_vec())
            .map_err(|_| {
                BindingError::invalid("new_key", "must be a Buffer or Uint8Array of 32 bytes")
            });
        let h = Arc::clone(&self.h);
        spawn(env, move || h.rekey(&key?))
    }

    /// Flush and release this handle: later calls on it (and on its layer objects)
    /// reject with `CLOSED`. The store closes when its last handle (namespaces
    /// included) is closed or garbage-collected. Closing twice is fine.
    #[napi]
    pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let taken = self.h.take();
        spawn(env, move || match taken {
            Some(m) => memstrata_bindings_common::handle::close_memory(m),
            None => Ok(()),
        })
    }

    /// Register `embedder(texts: string[])` (returning one `Float32Array | number[]` per
    /// text, or a Promise of that) as the store's embedder, or remove it with null. The
    /// engine calls it on `episodic.record` / `semantic.store` without an `embedding` and
    /// on searches with a non-empty query and no `embedding`. It applies to every handle
    /// on the store (namespaces, other worker threads) and runs on the JS thread that set
    /// it. If it throws, rejects or returns something else, the call rejects with
    /// `INVALID_INPUT` on field `embedder` naming the cause; nothing is stored.
    #[napi(ts_args_type = "embedder: Embedder | null")]
    pub fn set_embedder(&self, env: &Env, embedder: Option<Unknown<'_>>) -> Result<()> {
        let m = self.h.get().map_err(|e| error::to_napi(env, e))?;
        let e: Option<Arc<dyn memstrata::Embedder>> = match embedder {
            None => None,
            Some(v) if matches!(v.get_type()?, ValueType::Null | ValueType::Undefined) => None,
            Some(v) if v.get_type()? == ValueType::Function => {
                let f = Function::<'_, Vec<String>, Unknown<'static>>::from_unknown(v)?;
                let js = JsEmbedder::new(&f).map_err(|e| error::to_napi(env, e))?;
                Some(Arc::new(js))
            }
            Some(v) => {
                return Err(error::to_napi(
                    env,
                    BindingError::invalid(
                        "embedder",
                        format!("expected a function or null, got {}", v.get_type()?),
                    ),
                ));
            }
        };
        m.set_embedder(e);
        Ok(())
    }

    /// True once `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.h.is_closed()
    }

    /// The store directory.
    #[napi(getter)]
    pub fn path(&self, env: &Env) -> Result<String> {
        let m = self.h.get().map_err(|e| error::to_napi(env, e))?;
        // A PostgreSQL URL is shown with its password masked, as in errors and logs.
        Ok(memstrata::store_url::mask(&m.path().to_string_lossy()))
    }

    /// True for a temporary store (`Memory.open()` without a path).
    #[napi(getter)]
    pub fn is_temporary(&self, env: &Env) -> Result<bool> {
        let m = self.h.get().map_err(|e| error::to_napi(env, e))?;
        Ok(m.is_temporary())
    }
}
