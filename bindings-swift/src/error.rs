//! The one error enum Swift and Kotlin see, converted from the shared
//! `BindingError` in one place.

use memstrata_bindings_common::{BindingError, ErrorCode};

/// Why a Memstrata call failed: one case per kind, each carrying the message
/// (which names the field and the limit where one applies). Swift:
/// `MemstrataError.NotFound(message:)`; Kotlin:
/// `MemstrataException.NotFound` with `message`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Error)]
#[uniffi(flat_error)]
pub enum MemstrataError {
    /// Something that must exist does not (`update`, `sessionRestore`, `resume`, `punchOut`).
    NotFound(String),
    /// A caller-supplied value is invalid; the message names the field.
    InvalidInput(String),
    /// A configured limit was exceeded; the message names the field and the limit.
    LimitExceeded(String),
    /// Another process holds the store.
    StoreLocked(String),
    /// Stored data could not be decoded, or was written by a newer format.
    Corrupted(String),
    /// An operating-system I/O error (the message names the file when there is one).
    Io(String),
    /// The storage engine failed.
    Storage(String),
    /// The full-text index failed.
    Index(String),
    /// A procedure could not run.
    Procedure(String),
    /// A conflicting state (a run not awaiting an action, a task already closed).
    Conflict(String),
    /// The `Memory` was opened in another process and carried across `fork()`
    /// (not something an app does on Android or iOS; see docs/multiprocess.md).
    Forked(String),
    /// The `Memory` handle (or the layer object taken from it) was closed.
    Closed(String),
    /// A bug: a panic caught at the boundary, or an unexpected state.
    Internal(String),
}

impl MemstrataError {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            MemstrataError::NotFound(m)
            | MemstrataError::InvalidInput(m)
            | MemstrataError::LimitExceeded(m)
            | MemstrataError::StoreLocked(m)
            | MemstrataError::Corrupted(m)
            | MemstrataError::Io(m)
            | MemstrataError::Storage(m)
            | MemstrataError::Index(m)
            | MemstrataError::Procedure(m)
            | MemstrataError::Conflict(m)
            | MemstrataError::Forked(m)
            | MemstrataError::Closed(m)
            | MemstrataError::Internal(m) => m,
        }
    }
}

impl std::fmt::Display for MemstrataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for MemstrataError {}

impl From<BindingError> for MemstrataError {
    fn from(e: BindingError) -> Self {
        let m = e.message;
        match e.code {
            ErrorCode::NotFound => MemstrataError::NotFound(m),
            ErrorCode::InvalidInput => MemstrataError::InvalidInput(m),
            ErrorCode::LimitExceeded => MemstrataError::LimitExceeded(m),
            ErrorCode::StoreLocked => MemstrataError::StoreLocked(m),
            ErrorCode::Corrupted => MemstrataError::Corrupted(m),
            ErrorCode::Io => MemstrataError::Io(m),
            ErrorCode::Storage => MemstrataError::Storage(m),
            ErrorCode::Index => MemstrataError::Index(m),
            ErrorCode::Procedure => MemstrataError::Procedure(m),
            ErrorCode::Conflict => MemstrataError::Conflict(m),
            ErrorCode::Forked => MemstrataError::Forked(m),
            ErrorCode::Closed => MemstrataError::Closed(m),
            ErrorCode::Internal => MemstrataError::Internal(m),
        }
    }
}

impl From<memstrata::Error> for MemstrataError {
    fn from(e: memstrata::Error) -> Self {
        BindingError::from(e).into()
    }
}

/// What a host action (`ActionHandler.call`) throws to fail its step. Any
/// other exception thrown by the handler fails the step too, with the
/// exception's text.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Error)]
pub enum ActionError {
    /// The action failed; `reason` becomes the step's (and the run's) error.
    Failed {
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for ActionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActionError::Failed { reason } => f.write_str(reason),
        }
    }
}

impl std::error::Error for ActionError {}

impl From<uniffi::UnexpectedUniFFICallbackError> for ActionError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        ActionError::Failed { reason: e.reason }
    }
}

/// What an embedder (`Embedder.embed`) throws to fail the call that needed
/// the embedding (which then fails with `InvalidInput` naming `embedder` and
/// the reason). Any other exception it throws fails the call the same way.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Error)]
pub enum EmbedderError {
    /// No embedding could be computed.
    Failed {
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for EmbedderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmbedderError::Failed { reason } => f.write_str(reason),
        }
    }
}

impl std::error::Error for EmbedderError {}

impl From<uniffi::UnexpectedUniFFICallbackError> for EmbedderError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        EmbedderError::Failed { reason: e.reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_to_its_own_case_with_the_message() {
        let cases = ErrorCode::ALL.map(|c| MemstrataError::from(BindingError::new(c, c.as_str())));
        let mut names: Vec<String> = cases
            .iter()
            .map(|e| format!("{e:?}").split('(').next().unwrap().to_owned())
            .collect();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len(), "{names:?}");
        for (c, e) in ErrorCode::ALL.iter().zip(&cases) {
            assert_eq!(e.message(), c.as_str());
        }
    }

    #[test]
    fn a_handle_used_after_fork_is_the_forked_case() {
        let e = MemstrataError::from(memstrata::Error::Forked {
            opened_in: 10,
            current: 11,
        });
        assert!(matches!(e, MemstrataError::Forked(_)), "{e:?}");
        assert!(e.message().contains("process 10"), "{e}");
    }

    #[test]
    fn core_errors_keep_their_field_in_the_message() {
        let e = MemstrataError::from(memstrata::Error::invalid("key", "must not be empty"));
        assert!(matches!(e, MemstrataError::InvalidInput(_)));
        assert!(e.message().contains("`key`"), "{e}");
    }
}
