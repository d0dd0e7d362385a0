//! The memory layers: short-term, working, episodic, semantic and procedural.
//! Each layer is an accessor object holding a [`crate::engine::Scope`].

pub(crate) mod episodic;
pub mod procedural;
pub(crate) mod semantic;
pub(crate) mod short_term;
pub(crate) mod working;
