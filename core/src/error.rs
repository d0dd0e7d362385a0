//! The one error type of the engine.

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Memstrata.
///
/// Bindings map each variant at one choke point (Python exception classes,
/// JS error `code`s, uniffi error cases); see `docs/bindings.md`. [`Error::code`]
/// gives the stable machine-readable kind.
///
/// Errors raised by a lower component keep it as their
/// [`source`](std::error::Error::source) (I/O, storage, index and decoding
/// failures), so the whole cause chain is available; each message already
/// contains the cause's text.
///
/// Encoding a record for storage does not fail for the data the engine
/// stores (JSON values, strings and records of fixed shape). Should it fail,
/// the value offered cannot be represented in the store's format: that is
/// reported as [`Error::InvalidInput`] on field `value` (code
/// `INVALID_INPUT`), never as [`Error::Storage`], which means the storage
/// layer itself failed and the same call might succeed later.
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
    ///
    /// `source` is the decoder's or the storage layer's own error when one
    /// exists; its text is already part of `message`.
    #[error("corrupted or incompatible store: {message}")]
    Corrupted {
        /// What is wrong and where (e.g. `decode: ...`, `bad history key`).
        message: String,
        /// The underlying error, if the damage was reported by another component.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// An operating-system I/O error.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The storage layer failed (other than with an I/O error or detected corruption).
    ///
    /// `source` is the storage layer's own error; its text is already part of `message`.
    #[error("storage error: {message}")]
    Storage {
        /// What failed.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The full-text index failed. The stored data is unaffected; the index
    /// can be rebuilt from it.
    ///
    /// `source` is the index's own error; its text is already part of `message`.
    #[error("index error: {message}")]
    Index {
        /// What failed.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// A procedure could not run (step limit, failed step, bad state).
    #[error("procedure error: {0}")]
    Procedure(String),
    /// A conflicting state (e.g. a run that is not awaiting an action, a task already closed).
    #[error("conflict: {0}")]
    Conflict(String),
    /// A call from a `fork()` child on a handle its parent opened, or a sled
    /// store opened in a child whose parent had started sled. Nothing was read
    /// or written: a forked child must not inherit a store; see
    /// `docs/multiprocess.md`.
    #[error(
        "this Memory was opened in process {opened_in}, and this is process {current}, a fork() child: neither a Memory nor the sled engine survives fork(). Open stores only in processes that had none open before they forked (e.g. in each worker after the fork, not in the parent), or share one store through a PostgreSQL store or the memstrata-mcp server"
    )]
    Forked {
        /// The process that opened the engine (or first started sled).
        opened_in: u32,
        /// The process that made the call.
        current: u32,
    },
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

    /// Shorthand for [`Error::Corrupted`] without an underlying error.
    pub fn corrupted(message: impl Into<String>) -> Self {
        Error::Corrupted {
            message: message.into(),
            source: None,
        }
    }

    /// Shorthand for [`Error::Storage`] without an underlying error.
    pub fn storage(message: impl Into<String>) -> Self {
        Error::Storage {
            message: message.into(),
            source: None,
        }
    }

    /// Shorthand for [`Error::Index`] without an underlying error.
    pub fn index(message: impl Into<String>) -> Self {
        Error::Index {
            message: message.into(),
            source: None,
        }
    }

    /// [`Error::Corrupted`] caused by `source`.
    pub(crate) fn corrupted_by(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Corrupted {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// [`Error::Index`] caused by `source`.
    pub(crate) fn index_by(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Index {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The same error about the item `i` of the list argument `list`: the field
    /// of an `InvalidInput` or `LimitExceeded` becomes `list[i].field`
    /// (`items[3].content`); other errors are returned unchanged.
    pub(crate) fn in_item(self, list: &str, i: usize) -> Self {
        match self {
            Error::InvalidInput { field, reason } => Error::InvalidInput {
                field: format!("{list}[{i}].{field}"),
                reason,
            },
            Error::LimitExceeded {
                field,
                what,
                limit,
                actual,
            } => Error::LimitExceeded {
                field: format!("{list}[{i}].{field}"),
                what,
                limit,
                actual,
            },
            other => other,
        }
    }

    /// A value that cannot be encoded for storage (see the type's documentation).
    pub(crate) fn unencodable(reason: impl std::fmt::Display) -> Self {
        Error::invalid("value", format!("cannot be encoded: {reason}"))
    }

    /// A stable machine-readable code (`NOT_FOUND`, `INVALID_INPUT`, ...) used by every binding.
    pub fn code(&self) -> &'static str {
        match self {
            Error::NotFound { .. } => "NOT_FOUND",
            Error::InvalidInput { .. } => "INVALID_INPUT",
            Error::LimitExceeded { .. } => "LIMIT_EXCEEDED",
            Error::StoreLocked { .. } => "STORE_LOCKED",
            Error::Corrupted { .. } => "CORRUPTED",
            Error::Io(_) => "IO",
            Error::Storage { .. } => "STORAGE",
            Error::Index { .. } => "INDEX",
            Error::Procedure(_) => "PROCEDURE",
            Error::Conflict(_) => "CONFLICT",
            Error::Forked { .. } => "FORKED",
        }
    }
}

/// Conversion of a dependency's error into [`Error`]: crate-private, so sled,
/// tantivy, rmp-serde and postgres (and their versions) are no part of the
/// public API. Call sites convert with [`DepResult::dep`] (or `map_err(Error::from_dep)`).
pub(crate) trait FromDep<E> {
    fn from_dep(e: E) -> Self;
}

/// `result.dep()?`: the `?` of a dependency's result.
pub(crate) trait DepResult<T, E> {
    fn dep(self) -> Result<T>;
}

impl<T, E> DepResult<T, E> for std::result::Result<T, E>
where
    Error: FromDep<E>,
{
    #[inline]
    fn dep(self) -> Result<T> {
        self.map_err(Error::from_dep)
    }
}

impl FromDep<sled::Error> for Error {
    fn from_dep(e: sled::Error) -> Self {
        match e {
            sled::Error::Io(io) => Error::Io(io),
            e @ sled::Error::Corruption { .. } => Error::Corrupted {
                message: e.to_string(),
                source: Some(Box::new(e)),
            },
            other => Error::Storage {
                message: other.to_string(),
                source: Some(Box::new(other)),
            },
        }
    }
}

impl FromDep<sled::transaction::TransactionError<Error>> for Error {
    fn from_dep(e: sled::transaction::TransactionError<Error>) -> Self {
        match e {
            sled::transaction::TransactionError::Abort(e) => e,
            sled::transaction::TransactionError::Storage(e) => Error::from_dep(e),
        }
    }
}

/// In the text of every error of a sealed index file that does not decrypt
/// (`search::index::crypt`): whatever tantivy wraps it in, the engine reports
/// it as [`Error::Corrupted`], not as an index failure.
pub(crate) const INDEX_SEAL_BROKEN: &str = "sealed index data failed authentication";

impl FromDep<tantivy::TantivyError> for Error {
    fn from_dep(e: tantivy::TantivyError) -> Self {
        let text = e.to_string();
        if text.contains(INDEX_SEAL_BROKEN) || format!("{e:?}").contains(INDEX_SEAL_BROKEN) {
            return Error::corrupted_by(text, e);
        }
        Error::index_by(text, e)
    }
}

/// An encode failure is a value the store's format cannot hold: `InvalidInput`
/// on `value`, not `Storage` (see [`Error`]).
impl FromDep<rmp_serde::encode::Error> for Error {
    fn from_dep(e: rmp_serde::encode::Error) -> Self {
        Error::unencodable(e)
    }
}

impl FromDep<rmp_serde::decode::Error> for Error {
    fn from_dep(e: rmp_serde::decode::Error) -> Self {
        Error::corrupted_by(format!("decode: {e}"), e)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn wrapped_errors_keep_their_source() {
        let decode = rmp_serde::from_slice::<String>(&[0xc1]).unwrap_err();
        let text = decode.to_string();
        let e = Error::from_dep(decode);
        assert_eq!(e.code(), "CORRUPTED");
        assert_eq!(
            e.to_string(),
            format!("corrupted or incompatible store: decode: {text}")
        );
        let src = e.source().expect("decode error kept as source");
        assert!(src.downcast_ref::<rmp_serde::decode::Error>().is_some());

        let sled = Error::from_dep(sled::Error::Unsupported("nope".into()));
        assert_eq!(sled.code(), "STORAGE");
        assert!(sled.to_string().starts_with("storage error: "));
        assert!(sled.to_string().contains("nope"));
        assert!(
            sled.source()
                .unwrap()
                .downcast_ref::<sled::Error>()
                .is_some()
        );

        let io = Error::from(std::io::Error::other("disk on fire"));
        assert_eq!(io.source().unwrap().to_string(), "disk on fire");

        assert!(Error::corrupted("bad key").source().is_none());
        assert_eq!(
            Error::index("schema changed").to_string(),
            "index error: schema changed"
        );
    }

    #[test]
    fn encode_failures_are_invalid_input_not_storage() {
        let e = Error::unencodable("sequence must have a length");
        assert_eq!(e.code(), "INVALID_INPUT");
        assert!(matches!(e, Error::InvalidInput { ref field, .. } if field == "value"));
    }
}
