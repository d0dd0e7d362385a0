//! The [`Admin`] accessor object (its operations live in the sibling modules).

use crate::engine::Scope;

/// Store-wide administration: status, optimisation, export and import.
/// Get it from [`Memory::admin`](crate::Memory::admin).
#[derive(Debug, Clone)]
pub struct Admin {
    pub(crate) scope: Scope,
}
