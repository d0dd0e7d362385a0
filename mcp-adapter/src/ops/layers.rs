//! Layer tools: short-term, working, and `context_switch`.

use memstrata_bindings_common as common;
use memstrata_bindings_common::defaults::DEFAULT_PRESERVE_CURRENT;
use memstrata_bindings_common::options::ttl;
use memstrata_bindings_common::records::list;
use memstrata_bindings_common::{JsonValue, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Cx, Done, Op, ctx_target};
use crate::error::ToolResult;
use crate::security::auth::{Access, Target};

// ---------------------------------------------------------------- short-term

/// Arguments of `memory_store`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryStore {
    /// Key (1..=1024 bytes). Storing again under the same key replaces the value.
    pub key: String,
    /// Any JSON value (at most 16 MiB, nesting depth at most 128).
    pub value: Value,
    /// Time to live in seconds (> 0). Without it the value never expires.
    #[serde(default)]
    pub ttl: Option<f64>,
    /// Context to store in (default: the connection's active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `memory_store`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryStored {
    /// Always true when returned.
    pub success: bool,
    /// The key.
    pub key: String,
    /// Context it was stored in.
    pub context: String,
    /// When it was stored.
    pub stored_at: Timestamp,
    /// When it expires (null: never).
    pub expires_at: Option<Timestamp>,
}

impl Op for MemoryStore {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, ctx) = cx.scoped(&self.namespace)?;
        let e = mem
            .short_term()
            .store(&self.key, self.value, ttl(self.ttl)?)?;
        let e = common::ShortTermEntry::from(e);
        Done::of(&MemoryStored {
            success: true,
            key: e.key,
            context: ctx,
            stored_at: e.stored_at,
            expires_at: e.expires_at,
        })
    }
}

/// Arguments of `memory_retrieve`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryRetrieve {
    /// Key to read.
    pub key: String,
    /// Context to read from (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `memory_retrieve`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryRetrieved {
    /// False when the key is absent or its TTL has passed.
    pub found: bool,
    /// The key.
    pub key: String,
    /// The value (null when not found).
    pub value: JsonValue,
    /// When it was stored (null when not found).
    pub stored_at: Option<Timestamp>,
    /// When it expires (null: never, or not found).
    pub expires_at: Option<Timestamp>,
}

impl Op for MemoryRetrieve {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let out = match mem
            .short_term()
            .entry(&self.key)?
            .map(common::ShortTermEntry::from)
        {
            Some(e) => MemoryRetrieved {
                found: true,
                key: e.key,
                value: e.value,
                stored_at: Some(e.stored_at),
                expires_at: e.expires_at,
            },
            None => MemoryRetrieved {
                found: false,
                key: self.key,
                value: JsonValue::NULL,
                stored_at: None,
                expires_at: None,
            },
        };
        Done::of(&out)
    }
}

/// Arguments of `memory_forget`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryForget {
    /// Key to remove.
    pub key: String,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `memory_forget`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Forgotten {
    /// True when something (unexpired) was removed.
    pub forgotten: bool,
}

impl Op for MemoryForget {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        Done::of(&Forgotten {
            forgotten: mem.short_term().forget(&self.key)?,
        })
    }
}

// ---------------------------------------------------------------- working

/// Arguments of `working_focus`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkingFocus {
    /// Item to put in focus (a short text or an id). The oldest item is evicted past capacity (default 7).
    pub item: String,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `working_focus`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Focused {
    /// False when the item was already in focus.
    pub added: bool,
    /// Items in focus now, oldest first.
    pub focus: Vec<String>,
}

impl Op for WorkingFocus {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        let w = mem.working();
        let added = w.focus(&self.item)?;
        Done::of(&Focused {
            added,
            focus: w.current_focus()?,
        })
    }
}

/// Arguments of `working_get`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkingGet {
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `working_get`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkingState {
    /// The context read.
    pub context: String,
    /// Items in focus, oldest first (bounded, default 7).
    pub focus: Vec<String>,
    /// Workspace items, oldest first (bounded, default 64).
    pub workspace: Vec<common::WorkspaceItem>,
}

impl Op for WorkingGet {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Read)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, ctx) = cx.scoped(&self.namespace)?;
        let w = mem.working();
        Done::of(&WorkingState {
            context: ctx,
            focus: w.current_focus()?,
            workspace: list(w.workspace_items()?),
        })
    }
}

/// Arguments of `workspace_add`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceAdd {
    /// Any JSON value to keep at hand. The oldest item is evicted past capacity (default 64).
    pub value: Value,
    /// Context (default: the active context).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Result of `workspace_add`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Created {
    /// Id of the new item.
    pub id: String,
}

impl Op for WorkspaceAdd {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        ctx_target(&self.namespace, cx, Access::Write)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let (mem, _) = cx.scoped(&self.namespace)?;
        Done::of(&Created {
            id: mem.working().add_to_workspace(self.value)?,
        })
    }
}

// ---------------------------------------------------------------- contexts

/// Arguments of `context_switch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextSwitch {
    /// Context to make active for this connection (`[A-Za-z0-9_.:-]{1,128}`).
    pub target_context: String,
    /// Keep the working memory of the context being left (default true). With false it is cleared.
    #[serde(default)]
    pub preserve_current: Option<bool>,
}

impl Op for ContextSwitch {
    fn targets(&self, cx: &Cx) -> ToolResult<Vec<Target>> {
        let mut t = vec![Target::Context(self.target_context.clone(), Access::Read)];
        if self.preserve_current == Some(false) {
            t.push(Target::Context(cx.active(), Access::Write));
        }
        Ok(t)
    }
    fn run(self, cx: &Cx) -> ToolResult<Done> {
        let r = cx.conn.switch_context(
            &self.target_context,
            self.preserve_current.unwrap_or(DEFAULT_PRESERVE_CURRENT),
        )?;
        Done::of(&common::SwitchResult::from(r))
    }
}
