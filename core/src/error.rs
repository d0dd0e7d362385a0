//! The one error type of the engine.

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Memstrata.
///
/// Bindings map each variant at one choke point (Python exception classes,
/// JS error `code`s, uniffi error cases); see `docs/bindings.md`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Something that must exist does not (`update`, `session_restore`, `resume`, `punch_out`, ...).
    #[error("not found: {what}")]
    NotFound {
        /// What was looked for, e.g. `session 0194...` or `semantic key "user:1"`.
        what: String,
    },
    /// A caller-supplied value is invalid; `field` names the offending argument.
    #[error("invalid input for `{field}`: {reason}")]
    InvalidInput {
        /// The argument or field at fault (e.g. `key`, `steps[2].next`).
        field: String,
        /// Why it was refused, including the limit where one applies.
        reason: String,
    },
    /// A configured limit was exceeded (value size, tags, batch size, step limit...).
    #[error("limit exceeded for `{field}`: {actual} > {limit} ({what})")]
    LimitExceeded {
        /// The argument or field at fault.
        field: String,
        /// Human description of the limit.
        what: String,
        /// The limit in force.
        limit: u64,
        /// The size that was offered.
        actual: u64,
    },
    /// Another process holds the store.
    #[error("store at {} is locked by another process", path.display())]
    StoreLocked {
        /// The store directory.
        path: PathBuf,
    },
    /// Stored data could not be decoded, or the store was written by a newer format.
    #[error("corrupted or incompatible store: {0}")]
    Corrupted(String),
    /// An operating-system I/O error.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The sled storage layer failed.
    #[error("storage error: {0}")]
    Storage(String),
    /// The tantivy full-text index failed.
    #[error("index error: {0}")]
    Index(String),
    /// A procedure could not run (step limit, failed step, bad state).
    #[error("procedure error: {0}")]
    Procedure(String),
    /// A conflicting state (e.g. a run that is not awaiting an action, a task already closed).
    #[error("conflict: {0}")]
    Conflict(String),
}

impl Error {
    /// Shorthand for [`Error::InvalidInput`].
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidInput {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::NotFound`].
    pub fn not_found(what: impl Into<String>) -> Self {
        Error::NotFound { what: what.into() }
    }

    /// Shorthand for [`Error::LimitExceeded`].
    pub fn limit(
        field: impl Into<String>,
        what: impl Into<String>,
        limit: u64,
        actual: u64,
    ) -> Self {
        Error::LimitExceeded {
            field: field.into(),
            what: what.into(),
            limit,
            actual,
        }
    }

    /// A stable machine-readable code (`NOT_FOUND`, `INVALID_INPUT`, ...) used by every binding.
    pub fn code(&self) -> &'static str {
        match self {
            Error::NotFound { .. } => "NOT_FOUND",
            Error::InvalidInput { .. } => "INVALID_INPUT",
            Error::LimitExceeded { .. } => "LIMIT_EXCEEDED",
            Error::StoreLocked { .. } => "STORE_LOCKED",
            Error::Corrupted(_) => "CORRUPTED",
            Error::Io(_) => "IO",
            Error::Storage(_) => "STORAGE",
            Error::Index(_) => "INDEX",
            Error::Procedure(_) => "PROCEDURE",
            Error::Conflict(_) => "CONFLICT",
        }
    }
}

impl From<sled::Error> for Error {
    fn from(e: sled::Error) -> Self {
        match e {
            sled::Error::Io(io) => Error::Io(io),
            sled::Error::Corruption { .. } => Error::Corrupted(e.to_string()),
            other => Error::Storage(other.to_string()),
        }
    }
}

impl From<sled::transaction::TransactionError<Error>> for Error {
    fn from(e: sled::transaction::TransactionError<Error>) -> Self {
        match e {
            sled::transaction::TransactionError::Abort(e) => e,
            sled::transaction::TransactionError::Storage(e) => e.into(),
        }
    }
}

impl From<tantivy::TantivyError> for Error {
    fn from(e: tantivy::TantivyError) -> Self {
        Error::Index(e.to_string())
    }
}

impl From<rmp_serde::encode::Error> for Error {
    fn from(e: rmp_serde::encode::Error) -> Self {
        Error::Storage(format!("encode: {e}"))
    }
}

impl From<rmp_serde::decode::Error> for Error {
    fn from(e: rmp_serde::decode::Error) -> Self {
        Error::Corrupted(format!("decode: {e}"))
    }
}
