//! The one place where failures become MCP results.
//!
//! A tool that ran and failed gives [`ToolError`], which becomes a
//! `CallToolResult` with `isError: true` and a message a model can act on
//! (`"NOT_FOUND: ..."`). Malformed requests (unknown tool, unknown method,
//! unparsable JSON) are JSON-RPC errors produced by rmcp itself.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

/// Why a tool call failed.
#[derive(Debug)]
pub enum ToolError {
    /// The engine refused or failed; `hint` is extra advice for the caller.
    Core {
        /// The engine error.
        error: memstrata::Error,
        /// Appended to the message, e.g. the versions that do exist.
        hint: Option<String>,
    },
    /// The API key may not touch this context or engine-wide data.
    Forbidden(String),
    /// An argument the adapter itself checks (cursor, limit) is invalid.
    InvalidInput {
        /// Argument name.
        field: String,
        /// Why.
        reason: String,
    },
    /// Something the tool promised to return does not exist.
    NotFound(String),
    /// A bug or a panicked worker thread.
    Internal(String),
}

impl ToolError {
    /// Add a hint to a core error (no-op for the other kinds).
    pub fn hint(self, hint: impl Into<String>) -> Self {
        match self {
            ToolError::Core { error, .. } => ToolError::Core {
                error,
                hint: Some(hint.into()),
            },
            other => other,
        }
    }

    /// Stable machine-readable code: the core's codes plus `FORBIDDEN` and `INTERNAL`.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::Core { error, .. } => error.code(),
            ToolError::Forbidden(_) => "FORBIDDEN",
            ToolError::InvalidInput { .. } => "INVALID_INPUT",
            ToolError::NotFound(_) => "NOT_FOUND",
            ToolError::Internal(_) => "INTERNAL",
        }
    }

    /// The message shown to the model: `CODE: what happened. hint`.
    pub fn message(&self) -> String {
        let body = match self {
            ToolError::Core { error, hint } => match hint {
                Some(h) => format!("{error}. {h}"),
                None => error.to_string(),
            },
            ToolError::Forbidden(m) => m.clone(),
            ToolError::InvalidInput { field, reason } => {
                format!("invalid input for `{field}`: {reason}")
            }
            ToolError::NotFound(m) => m.clone(),
            ToolError::Internal(m) => format!("internal error: {m}"),
        };
        format!("{}: {body}", self.code())
    }

    /// The `isError: true` tool result.
    pub fn into_call_result(self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(self.message())])
    }

    /// JSON-RPC error code used by the plain `/mcp/v1/execute` envelope.
    pub fn jsonrpc_code(&self) -> i32 {
        match self {
            ToolError::InvalidInput { .. } => -32602,
            ToolError::Core {
                error: memstrata::Error::InvalidInput { .. },
                ..
            } => -32602,
            ToolError::Internal(_) => -32603,
            // Implementation-defined server errors.
            ToolError::Forbidden(_) => -32003,
            ToolError::NotFound(_) => -32004,
            ToolError::Core { .. } => -32000,
        }
    }

    /// JSON-RPC error object for the plain envelope.
    pub fn to_jsonrpc(&self) -> serde_json::Value {
        json!({"code": self.jsonrpc_code(), "message": self.message(), "data": {"code": self.code()}})
    }
}

impl From<memstrata::Error> for ToolError {
    fn from(error: memstrata::Error) -> Self {
        ToolError::Core { error, hint: None }
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
