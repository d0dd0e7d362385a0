//! The one place where failures become MCP results.
//!
//! A tool that ran and failed gives [`ToolError`], which becomes a
//! `CallToolResult` with `isError: true` and a message a model can act on
//! (`"NOT_FOUND: ..."`). Its codes are the bindings' [`ErrorCode`]s plus the
//! MCP-only `FORBIDDEN`; engine errors reach it only through
//! [`BindingError::from`] (the choke point every binding shares, which keeps
//! the cause chain in the message). Malformed requests (unknown tool, unknown
//! method, unparsable JSON) are JSON-RPC errors produced by rmcp itself.

use memstrata_bindings_common::{BindingError, ErrorCode};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolError {
    /// The engine, or a check of the adapter, refused or failed.
    Failed {
        /// What every binding would raise.
        error: BindingError,
        /// Appended to the message, e.g. the tool to use instead.
        hint: Option<String>,
    },
    /// The API key may not touch this context or engine-wide data (MCP only).
    Forbidden(String),
}

impl ToolError {
    /// `INVALID_INPUT` for an argument the adapter itself checks (cursor, ids).
    pub fn invalid(field: &str, reason: impl Into<String>) -> Self {
        BindingError::invalid(field, reason).into()
    }

    /// `NOT_FOUND`: something the tool promised to return does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        BindingError::new(ErrorCode::NotFound, message).into()
    }

    /// `INTERNAL`: a bug or a panicked worker thread.
    pub fn internal(message: impl std::fmt::Display) -> Self {
        BindingError::internal(format!("internal error: {message}")).into()
    }

    /// Add a hint (no-op for `FORBIDDEN`).
    #[must_use]
    pub fn hint(self, hint: impl Into<String>) -> Self {
        match self {
            ToolError::Failed { error, .. } => ToolError::Failed {
                error,
                hint: Some(hint.into()),
            },
            other => other,
        }
    }

    /// Add a hint when the error is of kind `code`.
    #[must_use]
    pub fn hint_on(self, code: ErrorCode, hint: impl Into<String>) -> Self {
        if self.error_code() == Some(code) {
            self.hint(hint)
        } else {
            self
        }
    }

    /// The bindings' code (`None` for `FORBIDDEN`).
    pub fn error_code(&self) -> Option<ErrorCode> {
        match self {
            ToolError::Failed { error, .. } => Some(error.code),
            ToolError::Forbidden(_) => None,
        }
    }

    /// Stable machine-readable code: an [`ErrorCode`]'s string, or `FORBIDDEN`.
    pub fn code(&self) -> &'static str {
        self.error_code().map_or("FORBIDDEN", ErrorCode::as_str)
    }

    /// The message shown to the model: `CODE: what happened. hint`.
    pub fn message(&self) -> String {
        let body = match self {
            ToolError::Failed { error, hint } => match hint {
                Some(h) => format!("{}. {h}", error.message),
                None => error.message.clone(),
            },
            ToolError::Forbidden(m) => m.clone(),
        };
        format!("{}: {body}", self.code())
    }

    /// The `isError: true` tool result.
    pub fn into_call_result(self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(self.message())])
    }

    /// JSON-RPC error code used by the plain `/mcp/v1/execute` envelope.
    pub fn jsonrpc_code(&self) -> i32 {
        match self.error_code() {
            Some(ErrorCode::InvalidInput) => -32602,
            Some(ErrorCode::Internal) => -32603,
            // Implementation-defined server errors.
            None => -32003,
            Some(ErrorCode::NotFound) => -32004,
            Some(_) => -32000,
        }
    }

    /// JSON-RPC error object for the plain envelope.
    pub fn to_jsonrpc(&self) -> serde_json::Value {
        json!({"code": self.jsonrpc_code(), "message": self.message(), "data": {"code": self.code()}})
    }
}

impl From<BindingError> for ToolError {
    fn from(error: BindingError) -> Self {
        ToolError::Failed { error, hint: None }
    }
}

impl From<memstrata::Error> for ToolError {
    fn from(error: memstrata::Error) -> Self {
        BindingError::from(error).into()
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for ToolError {}

/// Result alias for tool implementations.
pub type ToolResult<T> = Result<T, ToolError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forked_engine_is_a_forked_tool_error() {
        // The server never forks; a library embedding the adapter in a forked
        // child would still get a clear tool error rather than a hang.
        let e = ToolError::from(memstrata::Error::Forked {
            opened_in: 10,
            current: 11,
        });
        assert_eq!(e.code(), "FORKED");
        assert!(
            e.message()
                .starts_with("FORKED: this Memory was opened in process 10"),
            "{}",
            e.message()
        );
        let r = e.into_call_result();
        assert_eq!(r.is_error, Some(true));
    }
}
