//! Continuity across conversations: sessions (snapshots of a context and their
//! codec), context values, and the LLM timesheet.

pub(crate) mod contexts;
pub(crate) mod session_codec;
pub(crate) mod sessions;
pub(crate) mod timesheet;
