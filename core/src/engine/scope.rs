//! The handle every layer and feature object holds: the shared engine and the
//! active context of the `Memory` handle it came from (shared with that handle,
//! so a context switch is seen by the objects it handed out), plus the
//! engine's embedder. Layers hold a `Scope`, never a `Memory`.

use std::sync::Arc;

use parking_lot::RwLock;

use super::EngineUse;
use crate::search::embedder::Embedder;

/// The context every handle starts in.
pub const DEFAULT_CONTEXT: &str = "default";

/// Engine + active context: what a layer needs to serve one call.
#[derive(Clone)]
pub(crate) struct Scope {
    /// The shared engine.
    pub(crate) engine: Arc<EngineUse>,
    active: Arc<RwLock<Arc<str>>>,
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("active_context", &*self.active.read())
            .finish_non_exhaustive()
    }
}

impl Scope {
    /// A scope on `engine` whose active context is `ctx` (a new, unshared cell).
    pub(crate) fn new(engine: Arc<EngineUse>, ctx: &str) -> Scope {
        Scope {
            engine,
            active: Arc::new(RwLock::new(Arc::from(ctx))),
        }
    }

    /// The active context, shared (no allocation: what the layers use per call).
    pub(crate) fn active_ctx(&self) -> Arc<str> {
        Arc::clone(&self.active.read())
    }

    /// The active context as an owned string.
    pub(crate) fn active_context(&self) -> String {
        self.active.read().to_string()
    }

    /// The cell holding the active context (what a context switch writes).
    pub(crate) fn active_cell(&self) -> &RwLock<Arc<str>> {
        &self.active
    }

    /// The registered embedder, if any.
    pub(crate) fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.engine.embedder.read().clone()
    }
}
