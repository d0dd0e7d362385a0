//! Store-wide administration: status and metrics, optimisation, export and import.

pub(crate) mod export;
pub(crate) mod optimize;
pub(crate) mod status;

use crate::engine::Scope;

/// Store-wide administration: status, optimisation, export and import.
/// Get it from [`Memory::admin`](crate::Memory::admin).
#[derive(Debug, Clone)]
pub struct Admin {
    pub(crate) scope: Scope,
}
