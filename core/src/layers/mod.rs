//! The memory layers: short-term, working, episodic, semantic and procedural.
//! Each layer is an accessor object holding a [`crate::engine::Scope`].

pub(crate) mod dedup;
pub(crate) mod episodic;
pub mod procedural;
pub(crate) mod semantic;
pub(crate) mod short_term;
pub(crate) mod working;

use crate::engine::Registrations;

/// What the layers register with the engine: the indexed sources (episodes,
/// knowledge), the short-term expiry sweep, and the episode cache.
pub(crate) static REGISTRY: Registrations = Registrations {
    sources: &[episodic::SOURCE, semantic::SOURCE],
    sweeps: &[short_term::sweep_expired, episodic::retention::sweep],
    flushes: &[episodic::retention::flush_access],
    states: &[
        episodic::new_cache,
        dedup::new_state,
        episodic::retention::new_state,
    ],
};
