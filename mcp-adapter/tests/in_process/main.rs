//! In-process tests: an rmcp client talks to `MemoryServer` over `tokio::io::duplex`.

#[path = "../common/mod.rs"]
mod common;

mod access;
mod resources;
mod tools;
mod workflows;

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams, ResourceContents,
    SubscribeRequestParams,
};
use serde_json::{Value, json};

use common::{check, connect, shared_temp};
use memstrata::{Limits, Memory};
use memstrata_mcp::{Access, Auth, Principal, Shared};

const TOOLS: [&str; 34] = [
    "context_evictions",
    "context_retrieve",
    "context_set_on_duplicate",
    "context_set_retention",
    "context_store",
    "context_switch",
    "episode_get",
    "episode_record",
    "episode_record_many",
    "episode_search",
    "episodes_summarize",
    "knowledge_query",
    "knowledge_retrieve",
    "knowledge_store",
    "knowledge_store_many",
    "knowledge_update",
    "llm_punch_in",
    "llm_punch_out",
    "memory_forget",
    "memory_optimize",
    "memory_retrieve",
    "memory_store",
    "procedure_execute",
    "procedure_learn",
    "procedure_list",
    "procedure_resume",
    "procedure_update",
    "session_create",
    "session_restore",
    "session_save",
    "system_status",
    "working_focus",
    "working_get",
    "workspace_add",
];
