//! Store-wide administration: status and metrics, optimisation, export and import.

pub(crate) mod export;
pub(crate) mod optimize;
pub(crate) mod status;
