//! MCP resources: listing and reading `memstrata://` URIs (blocking; called on a worker thread).

use rmcp::model::{Resource, ResourceContents, ResourceTemplate};
use serde_json::{Value, json};

use memstrata::Memory;

use crate::error::{ToolError, ToolResult};
use crate::protocol::uri::{self, ResourceRef};
use crate::security::auth::{Access, Principal, Target};

/// Resources per `resources/list` page.
pub const PAGE: usize = 100;
/// Text of one listed name, in characters.
const NAME_CHARS: usize = 80;

fn short(s: &str) -> String {
    let mut out: String = s.chars().take(NAME_CHARS).collect();
    if s.chars().count() > NAME_CHARS {
        out.push('…');
    }
    out
}

/// The URI templates (`resources/templates/list`).
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("memstrata://sessions/{session_id}", "session")
            .with_title("Session")
            .with_description("A session: name, metadata, stored versions and the latest saved content")
            .with_mime_type("application/json"),
        ResourceTemplate::new("memstrata://episodes/{id}", "episode")
            .with_title("Episode (active context)")
            .with_description("An episode of the connection's active context")
            .with_mime_type("application/json"),
        ResourceTemplate::new("memstrata://knowledge/{key}", "knowledge")
            .with_title("Knowledge entry (active context)")
            .with_description(
                "A semantic-memory entry of the active context, with its version history (keys percent-encoded)",
            )
            .with_mime_type("application/json"),
        ResourceTemplate::new("memstrata://contexts/{context}/episodes/{id}", "context-episode")
            .with_title("Episode (named context)")
            .with_description("An episode of a named context")
            .with_mime_type("application/json"),
        ResourceTemplate::new("memstrata://contexts/{context}/knowledge/{key}", "context-knowledge")
            .with_title("Knowledge entry (named context)")
            .with_description("A semantic-memory entry of a named context")
            .with_mime_type("application/json"),
    ]
}

/// Every resource the principal may see, in listing order: status, sessions,
/// the active context's knowledge entries, then its most recent episodes
/// (at most the engine's `max_results`; older ones are reachable by search).
pub fn list_all(mem: &Memory, who: &Principal) -> ToolResult<Vec<Resource>> {
    let mut out = Vec::new();
    let active = mem.active_context();
    if who.allows(&Target::Global(Access::Read)) {
        out.push(
            Resource::new(ResourceRef::Status.uri(), "status")
                .with_title("Engine status")
                .with_description(
                    "Health, version, uptime, active sessions and per-operation metrics",
                )
                .with_mime_type("application/json"),
        );
        for s in mem.sessions().list()? {
            out.push(
                Resource::new(uri::session(&s.session_id), short(&s.name))
                    .with_description(format!(
                        "Session {:?}: {} stored version(s), latest {}",
                        s.name,
                        s.version_count,
                        s.latest_version
                            .map_or_else(|| "none".to_owned(), |v| v.to_string())
                    ))
                    .with_mime_type("application/json"),
            );
        }
    }
    if who.can_read(&active) {
        for key in mem.semantic().keys("")? {
            let r = ResourceRef::Knowledge {
                ctx: None,
                key: key.clone(),
            };
            out.push(
                Resource::new(r.uri(), short(&key))
                    .with_description(format!("Knowledge entry {key:?} in context {active:?}"))
                    .with_mime_type("application/json"),
            );
        }
        let max = mem.options().limits.max_results;
        for ep in mem.episodic().recent(max)? {
            let r = ResourceRef::Episode {
                ctx: None,
                id: ep.id.clone(),
            };
            out.push(
                Resource::new(r.uri(), short(&ep.summary))
                    .with_description(format!(
                        "Episode of {} in context {active:?}",
                        ep.timestamp.to_rfc3339()
                    ))
                    .with_mime_type("application/json"),
            );
        }
    }
    Ok(out)
}

/// What reading a resource needs the principal to hold.
pub fn target(r: &ResourceRef) -> Target {
    match r.context() {
        Some(ctx) => Target::Context(ctx.to_owned(), Access::Read),
        None => Target::Global(Access::Read),
    }
}

/// Read a qualified resource; `Ok(None)` when it does not exist.
pub fn read(mem: &Memory, r: &ResourceRef) -> ToolResult<Option<Value>> {
    Ok(match r {
        ResourceRef::Status => {
            Some(serde_json::to_value(mem.admin().status(true, true)?).map_err(internal)?)
        }
        ResourceRef::Session(id) => {
            let Some(info) = mem
                .sessions()
                .list()?
                .into_iter()
                .find(|s| &s.session_id == id)
            else {
                return Ok(None);
            };
            let versions = mem.sessions().versions(id)?;
            let latest = match info.latest_version {
                Some(v) => Some(mem.sessions().restore(id, Some(v))?),
                None => None,
            };
            Some(json!({"session": info, "versions": versions, "latest": latest}))
        }
        ResourceRef::Episode { ctx, id } => {
            let m = scoped(mem, ctx.as_deref())?;
            match m.episodic().get(id)? {
                Some(e) => Some(serde_json::to_value(e).map_err(internal)?),
                None => None,
            }
        }
        ResourceRef::Knowledge { ctx, key } => {
            let m = scoped(mem, ctx.as_deref())?;
            let s = m.semantic();
            match s.get(key)? {
                Some(k) => {
                    let history = s.history(key)?;
                    Some(json!({"entry": k, "history": history}))
                }
                None => None,
            }
        }
    })
}

/// The resource as MCP contents.
pub fn contents(uri: &str, v: &Value) -> ResourceContents {
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    ResourceContents::text(text, uri).with_mime_type("application/json")
}

fn scoped(mem: &Memory, ctx: Option<&str>) -> ToolResult<Memory> {
    match ctx {
        Some(c) => {
            memstrata::contexts::validate_name("context", c)?;
            Ok(mem.namespace(c)?)
        }
        None => Ok(mem.clone()),
    }
}

fn internal(e: serde_json::Error) -> ToolError {
    ToolError::internal(e)
}
