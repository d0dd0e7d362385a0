//! The tool table: every tool declared once (name, arguments, result, annotations),
//! from which the `tools/list` entries, the rmcp router and the execute dispatch come.

use std::sync::Arc;

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use serde_json::Value;

use memstrata_bindings_common::{self as common};

use super::service::MemoryServer;
use crate::error::ToolResult;
use crate::ops::{self};
use crate::security::auth::Principal;

fn out<T: schemars::JsonSchema + 'static>() -> Arc<rmcp::model::JsonObject> {
    schema_for_output::<T>()
}

/// Declares every tool once. From one table row per tool (doc comment = the
/// tool's description; name; argument type; result type; annotations) it
/// generates:
///
/// - [`TOOL_NAMES`], in table order (the order fuzz inputs index tools by:
///   append new tools at the end, never reorder);
/// - each argument type's [`ops::Tool`] impl (`NAME`, and `MUTATES` = not
///   `read_only`: mutating calls are audited and publish resource changes);
/// - the `#[tool_router]` impl with one `#[tool]` method per tool. rmcp's
///   attribute macros run after this macro has expanded, so they see ordinary
///   methods; every matched piece they read (doc attributes, annotation values)
///   is passed as `tt` so it reaches them as plain tokens, not as an opaque
///   fragment;
/// - [`MemoryServer::execute_json`], the `/mcp/v1/execute` dispatch by name.
///
/// Every tool has `open_world_hint = false` (it touches only the store).
macro_rules! tools {
    ($(
        $(#[$($doc:tt)*])*
        $name:ident($args:ty) -> $out:ty {
            title: $title:tt, read_only: $ro:tt $(, $hint:ident: $val:tt)* $(,)?
        }
    )*) => {
        /// Every tool's name, in the order of the tool table (fuzz inputs index it).
        pub const TOOL_NAMES: &[&str] = &[$(stringify!($name)),*];

        $(impl ops::Tool for $args {
            const NAME: &'static str = stringify!($name);
            const MUTATES: bool = !$ro;
        })*

        #[tool_router(vis = "pub(super)")]
        impl MemoryServer {
            $(
                $(#[$($doc)*])*
                #[tool(
                    annotations(title = $title, read_only_hint = $ro, $($hint = $val,)* open_world_hint = false),
                    output_schema = out::<$out>()
                )]
                async fn $name(
                    &self,
                    Parameters(a): Parameters<$args>,
                    rc: RequestContext<RoleServer>,
                ) -> CallToolResult {
                    self.call(a, &rc).await
                }
            )*
        }

        impl MemoryServer {
            /// Run a tool from raw JSON arguments (the `/mcp/v1/execute` envelope).
            /// `None` when no tool has this name.
            pub async fn execute_json(
                &self,
                tool: &str,
                params: Value,
                who: &Principal,
            ) -> Option<ToolResult<Value>> {
                Some(match tool {
                    $(stringify!($name) => self.execute_params::<$args>(params, who).await,)*
                    _ => return None,
                })
            }
        }
    };
}

tools! {
    /// Read a value stored with context_store. A key that was never stored, was forgotten or has expired answers success=false with value null.
    context_retrieve(ops::ContextRetrieve) -> ops::ContextRetrieved {
        title: "Read a context value", read_only: true
    }

    /// Store a value in the short-term memory of a context (namespace, else the active context), optionally with a TTL in seconds.
    context_store(ops::ContextStore) -> common::ContextStored {
        title: "Store a context value", read_only: false, destructive_hint: true, idempotent_hint: true
    }

    /// Make another context active for this connection. With preserve_current=false the working memory of the context being left is cleared.
    context_switch(ops::ContextSwitch) -> common::SwitchResult {
        title: "Switch context", read_only: false, destructive_hint: true, idempotent_hint: true
    }

    /// Get one episode by id. `found` is false when it does not exist in the context.
    episode_get(ops::EpisodeGet) -> ops::EpisodeFound {
        title: "Get an episode", read_only: true
    }

    /// Record an episode (something that happened): summary, optional JSON content, participants, tags, importance 1..=10. Returns its id; the next search finds it. Duplicates of earlier episodes are caught (on_duplicate: keep, skip, merge, link; duplicate_of names the one found).
    episode_record(ops::EpisodeRecord) -> common::Recorded {
        title: "Record an episode", read_only: false, destructive_hint: false, idempotent_hint: false
    }

    /// Full-text search (BM25) over episodes with optional filters (tags: all, participants: any, time range, minimum importance). Paged with `cursor`.
    episode_search(ops::EpisodeSearch) -> ops::EpisodeHits {
        title: "Search episodes", read_only: true
    }

    /// Summarize episodes by id: deterministic, extractive, chronological, bounded length (no LLM).
    episodes_summarize(ops::EpisodesSummarize) -> ops::Summary {
        title: "Summarize episodes", read_only: true
    }

    /// Full-text query over knowledge keys and content. Paged with `cursor`.
    knowledge_query(ops::KnowledgeQuery) -> ops::KnowledgeHits {
        title: "Query knowledge", read_only: true
    }

    /// Read a knowledge entry with its version and timestamps. `found` is false when the key is absent.
    knowledge_retrieve(ops::KnowledgeRetrieve) -> ops::KnowledgeFound {
        title: "Read knowledge", read_only: true
    }

    /// Store (replace) a knowledge entry under a key; the previous version stays in its history.
    knowledge_store(ops::KnowledgeStore) -> ops::KnowledgeStored {
        title: "Store knowledge", read_only: false, destructive_hint: true, idempotent_hint: false
    }

    /// Apply an RFC 7386 JSON Merge Patch to an existing knowledge entry (NOT_FOUND if it does not exist). Returns the updated entry.
    knowledge_update(ops::KnowledgeUpdate) -> common::Knowledge {
        title: "Update knowledge", read_only: false, destructive_hint: true, idempotent_hint: false
    }

    /// Start a timesheet task for a model; `context` is free-text additional context, `namespace` the Memstrata context (default: the active one). Returns task_id and start_time.
    llm_punch_in(ops::LlmPunchIn) -> common::PunchIn {
        title: "Punch in", read_only: false, destructive_hint: false, idempotent_hint: false
    }

    /// Finish a timesheet task: duration, optionally the files modified under the workspace roots (default: the server's working directory; `scanned_roots` says which); records an episode tagged `task`.
    llm_punch_out(ops::LlmPunchOut) -> ops::PunchedOut {
        title: "Punch out", read_only: false, destructive_hint: false, idempotent_hint: false
    }

    /// Remove a short-term value.
    memory_forget(ops::MemoryForget) -> ops::Forgotten {
        title: "Forget a short-term value", read_only: false, destructive_hint: true, idempotent_hint: true
    }

    /// Reclaim space: light purges expired items; medium also prunes old session versions and recompresses; aggressive also merges index segments.
    memory_optimize(ops::MemoryOptimize) -> common::OptimizeReport {
        title: "Optimize storage", read_only: false, destructive_hint: true, idempotent_hint: true
    }

    /// Read a short-term value. `found` is false when the key is absent or expired.
    memory_retrieve(ops::MemoryRetrieve) -> ops::MemoryRetrieved {
        title: "Read a short-term value", read_only: true
    }

    /// Store a JSON value under a key in short-term memory, optionally with a TTL in seconds. Replaces any previous value.
    memory_store(ops::MemoryStore) -> ops::MemoryStored {
        title: "Store a short-term value", read_only: false, destructive_hint: true, idempotent_hint: true
    }

    /// Run a procedure. Built-in actions run here; any other action pauses the run (status awaiting_action, `pending` says what to do): perform it and call procedure_resume with its output.
    procedure_execute(ops::ProcedureExecute) -> ops::BoundedRun {
        title: "Execute a procedure", read_only: false, destructive_hint: true, idempotent_hint: false
    }

    /// Learn a new procedure: a list of steps {id, description, action, parameters, next}. CONFLICT if the name exists (use procedure_update).
    procedure_learn(ops::ProcedureLearn) -> common::Procedure {
        title: "Learn a procedure", read_only: false, destructive_hint: false, idempotent_hint: false
    }

    /// List procedure names of a context, sorted. Paged with `cursor`.
    procedure_list(ops::ProcedureList) -> ops::ProcedureNames {
        title: "List procedures", read_only: true
    }

    /// Continue a run paused on an action: `output` becomes that step's output, then execution goes on until it completes, fails or pauses again.
    procedure_resume(ops::ProcedureResume) -> ops::BoundedRun {
        title: "Resume a procedure run", read_only: false, destructive_hint: true, idempotent_hint: false
    }

    /// Replace the steps of an existing procedure (NOT_FOUND otherwise); its version goes up by one.
    procedure_update(ops::ProcedureUpdate) -> common::Procedure {
        title: "Update a procedure", read_only: false, destructive_hint: true, idempotent_hint: false
    }

    /// Create a session (a named, versioned snapshot store for an agent's state). Returns session_id and created_at.
    session_create(ops::SessionCreate) -> common::SessionCreated {
        title: "Create a session", read_only: false, destructive_hint: false, idempotent_hint: false
    }

    /// Restore a session version (the latest when version is omitted): content exactly as saved, plus the session metadata.
    session_restore(ops::SessionRestore) -> common::SessionRestored {
        title: "Restore a session", read_only: true
    }

    /// Save content as the next version (1, 2, 3…) of a session, at compression level 0..=3.
    session_save(ops::SessionSave) -> common::SessionSaved {
        title: "Save a session version", read_only: false, destructive_hint: false, idempotent_hint: false
    }

    /// Engine health (healthy / degraded / error), version, uptime; optionally the most recently active sessions with the session count, and metrics.
    system_status(ops::SystemStatus) -> common::Status {
        title: "System status", read_only: true
    }

    /// Put an item in working-memory focus (bounded; the oldest item is evicted). Returns the focus list.
    working_focus(ops::WorkingFocus) -> ops::Focused {
        title: "Focus on an item", read_only: false, destructive_hint: true, idempotent_hint: true
    }

    /// Read working memory: the focus list and the workspace items.
    working_get(ops::WorkingGet) -> ops::WorkingState {
        title: "Read working memory", read_only: true
    }

    /// Add a JSON value to the working-memory workspace (bounded; the oldest item is evicted). Returns its id.
    workspace_add(ops::WorkspaceAdd) -> ops::Created {
        title: "Add to the workspace", read_only: false, destructive_hint: true, idempotent_hint: false
    }

    /// Record many episodes in one call (each item: the arguments of episode_record without namespace). All or nothing: one transaction; a bad item fails the call naming items[i].field and nothing is stored. Returns the ids in order.
    episode_record_many(ops::EpisodeRecordMany) -> ops::RecordedMany {
        title: "Record many episodes", read_only: false, destructive_hint: false, idempotent_hint: false
    }

    /// Store (replace) many knowledge entries in one call, applied in order. All or nothing: one transaction; a bad item fails the call naming items[i].field and nothing is stored. Returns the new entries in order.
    knowledge_store_many(ops::KnowledgeStoreMany) -> ops::KnowledgeStoredMany {
        title: "Store many knowledge entries", read_only: false, destructive_hint: true, idempotent_hint: false
    }

    // Appended after the original table (fuzz inputs index tools by table order).
    /// Set the duplicate policy of a context (namespace, else the active one): what episode_record and knowledge_store do, when they give no on_duplicate, with a write that duplicates an earlier item (keep, skip, merge, link).
    context_set_on_duplicate(ops::ContextSetOnDuplicate) -> ops::OnDuplicateSet {
        title: "Set a context's duplicate policy", read_only: false, destructive_hint: false, idempotent_hint: true
    }

    /// Set the retention policy of a context (namespace, else the active one): max_episodes, max_bytes, max_age (seconds). Past a limit the lowest-utility episodes (importance, recency, how often searches returned them) are evicted, each one audited (context_evictions); with no limit, the policy is cleared. Enforced at once, on writes past a limit and by memory_optimize.
    context_set_retention(ops::ContextSetRetention) -> ops::RetentionSet {
        title: "Set a context's retention policy", read_only: false, destructive_hint: true, idempotent_hint: true
    }

    /// The audit of episodes a context's retention policy evicted (id, time, reason, utility), newest first.
    context_evictions(ops::ContextEvictions) -> ops::Evictions {
        title: "List a context's evictions", read_only: true
    }
}
