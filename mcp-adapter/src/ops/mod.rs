//! Tool arguments and what each tool does: a thin mapping onto the core.
//!
//! Every tool has one argument struct (its JSON Schema input, field docs
//! become descriptions) implementing [`Op`]. The MCP handler in
//! `server.rs` and the plain `/mcp/v1/execute` envelope both go through
//! [`Op::run`], so the two entry points cannot drift.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use memstrata::Memory;

use crate::error::{ToolError, ToolResult};
use crate::security::auth::{Access, Target};

mod batch;
mod continuity;
mod layers;
mod long_term;
mod procedures;
mod retention;

pub use batch::*;
pub use continuity::*;
pub use layers::*;
pub use long_term::*;
pub use procedures::*;
pub use retention::*;

/// Where a tool sends progress reports (the MCP handler turns them into
/// `notifications/progress` when the client asked for them with a progress token).
pub type ProgressSink = tokio::sync::mpsc::UnboundedSender<memstrata::admin::Progress>;

/// What a tool call runs against.
#[derive(Debug, Clone)]
pub struct Cx {
    /// A handle pinned to the context that was active when the call arrived.
    pub mem: Memory,
    /// The connection's own handle (only `context_switch` changes its active context).
    pub conn: Memory,
    /// Progress reports go here when the caller wants them.
    pub progress: Option<ProgressSink>,
}

impl Cx {
    /// Pass a progress report on (a no-op when nobody listens). Never blocks, so it is
    /// safe to call from a core progress callback.
    pub fn report(&self, p: memstrata::admin::Progress) {
        if let Some(tx) = &self.progress {
            // The receiver is gone only when the call's forwarder stopped: nothing to do.
            let _ = tx.send(p);
        }
    }

    /// The active context at call time.
    pub fn active(&self) -> String {
        self.mem.active_context()
    }

    /// The handle for `namespace` (else the active context) and its name.
    pub fn scoped(&self, namespace: &Option<String>) -> ToolResult<(Memory, String)> {
        match namespace {
            Some(ns) => {
                memstrata::contexts::validate_name("namespace", ns)?;
                Ok((self.mem.namespace(ns)?, ns.clone()))
            }
            None => Ok((self.mem.clone(), self.active())),
        }
    }
}

/// A change a mutating call made, for resource notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Canonical (context-qualified) URI of the resource that changed.
    pub uri: String,
    /// Context of the resource (`None`: engine-wide, e.g. sessions).
    pub context: Option<String>,
    /// The resource was created or deleted (the resource list changed).
    pub list_changed: bool,
}

/// A finished call: the structured result and the changes it made.
#[derive(Debug)]
pub struct Done {
    /// The tool's `structuredContent`.
    pub value: Value,
    /// Changed resources.
    pub changes: Vec<Change>,
}

impl Done {
    /// Serialize a result.
    pub fn of<T: Serialize>(v: &T) -> ToolResult<Done> {
        Ok(Done {
            value: serde_json::to_value(v)
                .map_err(|e| ToolError::internal(format!("serialize result: {e}")))?,
            changes: Vec::new(),
        })
    }

    /// Record a changed resource.
    #[must_use]
    pub fn changed(mut self, uri: String, context: Option<&str>, list_changed: bool) -> Done {
        self.changes.push(Change {
            uri,
            context: context.map(str::to_owned),
            list_changed,
        });
        self
    }
}

/// One tool's behaviour: what it touches, and what it does.
pub trait Op: DeserializeOwned + Send + 'static {
    /// Contexts / engine-wide data the call reads or writes, for authorization
    /// (runs on the worker thread: it may look things up, e.g. a task's context).
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>>;
    /// Run it (on a blocking thread).
    fn run(self, cx: &Cx) -> ToolResult<Done>;
}

/// A tool's name and kind. Implemented for every argument type by the tool
/// table (`tools!` in `server.rs`), where each tool is declared once.
pub trait Tool: Op {
    /// Tool name (as listed in docs/mcp.md).
    const NAME: &'static str;
    /// Mutating tools are audited and publish resource notifications.
    const MUTATES: bool;
}

pub(crate) fn ctx_target(
    namespace: &Option<String>,
    cx: &Cx,
    access: Access,
) -> ToolResult<Vec<Target>> {
    Ok(vec![Target::Context(
        namespace.clone().unwrap_or_else(|| cx.active()),
        access,
    )])
}
