//! The one conversion choke point from engine errors (and panics) to what a
//! binding raises.
//!
//! [`ErrorCode`] is the stable, machine-readable kind every language sees: the
//! core's kinds plus [`ErrorCode::Closed`] (a call on a closed handle) and
//! [`ErrorCode::Internal`] (a bug: a panic caught at the boundary). Bindings
//! turn a [`BindingError`] into their own error type in one function each
//! (Python exception classes, JS `MemstrataError` with `code`, a uniffi error
//! enum); the MCP adapter adds its own `FORBIDDEN` on top.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::Serialize;

/// Stable kinds of failure, the same in every binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
pub enum ErrorCode {
    /// Something that must exist does not (`update`, `session_restore`, `resume`, `punch_out`).
    NotFound,
    /// A caller-supplied value is invalid; the message names the field.
    InvalidInput,
    /// A configured limit was exceeded; the message names the field and the limit.
    LimitExceeded,
    /// Another process holds the store.
    StoreLocked,
    /// Stored data could not be decoded, or was written by a newer format.
    Corrupted,
    /// An operating-system I/O error.
    Io,
    /// The storage engine failed.
    Storage,
    /// The full-text index failed.
    Index,
    /// A procedure could not run.
    Procedure,
    /// A conflicting state (a run not awaiting an action, a task already closed).
    Conflict,
    /// The handle was opened in another process and carried across `fork()`
    /// (or a sled store was opened in a child whose parent had started sled).
    Forked,
    /// The handle was closed.
    Closed,
    /// A bug: a panic was caught at the language boundary, or an unexpected state.
    Internal,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::NotFound,
        ErrorCode::InvalidInput,
        ErrorCode::LimitExceeded,
        ErrorCode::StoreLocked,
        ErrorCode::Corrupted,
        ErrorCode::Io,
        ErrorCode::Storage,
        ErrorCode::Index,
        ErrorCode::Procedure,
        ErrorCode::Conflict,
        ErrorCode::Forked,
        ErrorCode::Closed,
        ErrorCode::Internal,
    ];

    /// `"NOT_FOUND"`, `"INVALID_INPUT"`, ... (what JS `code` and MCP messages carry).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::LimitExceeded => "LIMIT_EXCEEDED",
            ErrorCode::StoreLocked => "STORE_LOCKED",
            ErrorCode::Corrupted => "CORRUPTED",
            ErrorCode::Io => "IO",
            ErrorCode::Storage => "STORAGE",
            ErrorCode::Index => "INDEX",
            ErrorCode::Procedure => "PROCEDURE",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::Forked => "FORKED",
            ErrorCode::Closed => "CLOSED",
            ErrorCode::Internal => "INTERNAL",
        }
    }

    /// The code of a core error (an unknown future kind is `Internal`).
    pub fn of(e: &memstrata::Error) -> ErrorCode {
        let code = e.code();
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == code)
            .unwrap_or(ErrorCode::Internal)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a binding raises: a code, a message (the error and its causes), and
/// the field at fault when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingError {
    /// The stable kind.
    pub code: ErrorCode,
    /// Human-readable message naming the field and the limit where one applies;
    /// the cause chain is appended (`outer: inner: innermost`).
    pub message: String,
    /// The argument at fault (`InvalidInput`, `LimitExceeded`).
    pub field: Option<String>,
    /// The path involved, for I/O errors on a file the caller named.
    pub path: Option<std::path::PathBuf>,
    /// The OS error number, for I/O errors that have one.
    pub os_error: Option<i32>,
}

impl BindingError {
    /// A new error of `code`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        BindingError {
            code,
            message: message.into(),
            field: None,
            path: None,
            os_error: None,
        }
    }

    /// `CLOSED`: a call on a handle after `close()`.
    pub fn closed() -> Self {
        Self::new(
            ErrorCode::Closed,
            "this Memory handle is closed; open the store again to use it",
        )
    }

    /// `INTERNAL`: a bug surfaced at the boundary.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// `INVALID_INPUT` for `field`.
    pub fn invalid(field: &str, reason: impl Into<String>) -> Self {
        memstrata::Error::invalid(field, reason).into()
    }

    /// `INTERNAL` for a caught panic, with its message.
    pub fn from_panic(payload: &(dyn std::any::Any + Send)) -> Self {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        Self::internal(format!("internal error (a bug in memstrata): {what}"))
    }

    /// An I/O error opening or writing the file at `path` (the message names it).
    pub fn io_at(e: &std::io::Error, path: &std::path::Path) -> Self {
        BindingError {
            code: ErrorCode::Io,
            message: format!("i/o error at {}: {e}", path.display()),
            field: None,
            path: Some(path.to_owned()),
            os_error: e.raw_os_error(),
        }
    }
}

impl std::fmt::Display for BindingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BindingError {}

/// `error: cause: cause ...` (each source once; a source whose text the outer
/// message already contains is not repeated).
pub fn message_with_causes(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !msg.contains(&t) {
            msg.push_str(": ");
            msg.push_str(&t);
        }
        src = s.source();
    }
    msg
}

impl From<memstrata::Error> for BindingError {
    fn from(e: memstrata::Error) -> Self {
        let code = ErrorCode::of(&e);
        let field = match &e {
            memstrata::Error::InvalidInput { field, .. }
            | memstrata::Error::LimitExceeded { field, .. } => Some(field.clone()),
            _ => None,
        };
        let (path, os_error) = match &e {
            memstrata::Error::StoreLocked { path } => (Some(path.clone()), None),
            memstrata::Error::Io(io) => (None, io.raw_os_error()),
            _ => (None, None),
        };
        BindingError {
            code,
            message: message_with_causes(&e),
            field,
            path,
            os_error,
        }
    }
}

/// Run `f`, turning a core error or a panic into a [`BindingError`]. Every
/// binding calls the engine through this (or through its own wrapper of it),
/// so no panic crosses a language boundary.
pub fn guard<T>(f: impl FnOnce() -> memstrata::Result<T>) -> Result<T, BindingError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(BindingError::from),
        Err(payload) => Err(BindingError::from_panic(payload.as_ref())),
    }
}

/// [`guard`] for closures that already produce a [`BindingError`].
pub fn guard_binding<T>(f: impl FnOnce() -> Result<T, BindingError>) -> Result<T, BindingError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(BindingError::from_panic(payload.as_ref())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_kind_has_its_code() {
        let cases = [
            (memstrata::Error::not_found("x"), ErrorCode::NotFound),
            (
                memstrata::Error::invalid("key", "empty"),
                ErrorCode::InvalidInput,
            ),
            (
                memstrata::Error::limit("tags", "tags", 64, 65),
                ErrorCode::LimitExceeded,
            ),
            (memstrata::Error::Conflict("c".into()), ErrorCode::Conflict),
            (
                memstrata::Error::Procedure("p".into()),
                ErrorCode::Procedure,
            ),
            (
                memstrata::Error::Forked {
                    opened_in: 1,
                    current: 2,
                },
                ErrorCode::Forked,
            ),
        ];
        for (e, code) in cases {
            let b = BindingError::from(e);
            assert_eq!(b.code, code);
        }
        let b = BindingError::from(memstrata::Error::limit("tags", "tags per episode", 64, 65));
        assert_eq!(b.field.as_deref(), Some("tags"));
        assert!(b.message.contains("64"), "{}", b.message);
    }

    #[test]
    fn codes_round_trip_through_their_strings() {
        for c in ErrorCode::ALL {
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::json!(c.as_str())
            );
        }
    }

    #[test]
    fn panics_become_internal_errors() {
        let r: Result<(), _> = guard(|| panic!("boom"));
        let e = r.unwrap_err();
        assert_eq!(e.code, ErrorCode::Internal);
        assert!(e.message.contains("boom"));
    }

    #[test]
    fn causes_are_appended_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("reading the log")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::other("disk gone"));
        assert_eq!(message_with_causes(&e), "reading the log: disk gone");
    }
}
