//! The closable handle every binding object holds.
//!
//! A binding's `Memory` and its layer objects (`short_term`, `episodic`, ...)
//! share one [`Handle`]. `close()` flushes and releases the engine handle;
//! every later call fails with `CLOSED` instead of touching a store that the
//! caller believes closed. The store itself closes when its last handle
//! (namespaces included) is released.

use std::sync::Arc;

use memstrata::Memory;
use parking_lot::RwLock;

use crate::error::{BindingError, guard};

/// A shared, closable slot holding a core [`Memory`].
#[derive(Debug)]
pub struct Handle {
    inner: RwLock<Option<Memory>>,
}

impl Handle {
    /// A new handle around `mem`.
    pub fn new(mem: Memory) -> Arc<Handle> {
        Arc::new(Handle {
            inner: RwLock::new(Some(mem)),
        })
    }

    /// The core handle (a cheap clone), or `CLOSED`.
    pub fn get(&self) -> Result<Memory, BindingError> {
        self.inner.read().clone().ok_or_else(BindingError::closed)
    }

    /// True once [`Handle::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.inner.read().is_none()
    }

    /// Take the core handle out, leaving the slot closed (`None` if it already was).
    /// For bindings that must run the flush elsewhere (off the caller's thread).
    pub fn take(&self) -> Option<Memory> {
        self.inner.write().take()
    }

    /// Flush and release. Idempotent: closing a closed handle does nothing.
    pub fn close(&self) -> Result<(), BindingError> {
        match self.take() {
            Some(mem) => close_memory(mem),
            None => Ok(()),
        }
    }
}

impl Handle {
    /// Rotate the store's encryption key in place to `new_key`
    /// ([`memstrata::Memory::rekey`]) and keep this handle open on the store
    /// with it. No other call of this handle runs meanwhile; another handle on
    /// the store (a namespace, another `Memory`) makes it fail with
    /// `STORE_LOCKED`, and this handle stays open with the old key.
    pub fn rekey(&self, new_key: &[u8]) -> Result<(), BindingError> {
        let key = guard(|| memstrata::EncryptionKey::from_slice(new_key))?;
        let mut slot = self.inner.write();
        let mem = slot.take().ok_or_else(BindingError::closed)?;
        let opts = mem.options().clone();
        let ctx = mem.active_context();
        match guard(move || mem.rekey(key)) {
            Ok(m) => {
                *slot = Some(m);
                Ok(())
            }
            Err(e) => {
                // Refused before anything changed: the store opens as before.
                if let Ok(m) = Memory::open_with(opts)
                    && m.switch_context(&ctx, true).is_ok()
                {
                    *slot = Some(m);
                }
                Err(e)
            }
        }
    }
}

/// Flush `mem`, then drop it (the store closes if it was the last handle).
pub fn close_memory(mem: Memory) -> Result<(), BindingError> {
    guard(move || {
        let r = mem.flush();
        drop(mem);
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn a_closed_handle_refuses_calls_and_closing_twice_is_fine() {
        let h = Handle::new(Memory::temporary().unwrap());
        h.get()
            .unwrap()
            .short_term()
            .store("k", serde_json::json!(1), None)
            .unwrap();
        h.close().unwrap();
        assert!(h.is_closed());
        assert_eq!(h.get().unwrap_err().code, ErrorCode::Closed);
        h.close().unwrap();
    }
}
