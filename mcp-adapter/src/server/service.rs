//! [`MemoryServer`]: one MCP connection, and how it runs a tool for a caller
//! (authorize, run on a blocking thread, audit, publish changes, report progress).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, Extensions, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken, ResourceUpdatedNotificationParam,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use memstrata_bindings_common::ErrorCode;

use super::conn::{Caller, Conn, level_rank};
use super::shared::Shared;
use crate::error::{ToolError, ToolResult};
use crate::ops::{self, Cx, Tool};
use crate::protocol::uri::ResourceRef;
use crate::security::auth::{Access, Principal, Target};

/// One MCP connection.
#[derive(Debug, Clone)]
pub struct MemoryServer {
    pub(super) shared: Arc<Shared>,
    pub(super) conn: Arc<Conn>,
    pub(super) tool_router: ToolRouter<MemoryServer>,
}

pub(super) const INSTRUCTIONS: &str = "Memstrata is a layered memory for agents. Each connection has an active context \
(namespace, default \"default\"); context_switch changes it, and layer tools take an optional `namespace`. \
Layers: short-term key/value with TTL (memory_*), working memory (working_*, workspace_add), episodes with \
full-text search (episode_*), semantic knowledge with merge-patch updates and history (knowledge_*), and \
procedures (procedure_*: steps whose actions are not built in pause the run; do the action yourself and call \
procedure_resume with its output). Continuity: sessions (session_create/save/restore: versioned snapshots), \
context_store/context_retrieve, a timesheet (llm_punch_in/llm_punch_out), system_status and memory_optimize. \
Tool failures come back as isError results whose text starts with a code (NOT_FOUND, INVALID_INPUT, \
LIMIT_EXCEEDED, CONFLICT, FORBIDDEN, ...). Lists are paged: pass `next_cursor` back as `cursor`.";

impl MemoryServer {
    /// A connection on `shared`, starting in the `default` context.
    pub fn new(shared: Arc<Shared>, transport: &'static str, caller: Caller) -> Self {
        let mem = shared
            .mem
            .namespace(memstrata::DEFAULT_CONTEXT)
            .expect("the default context name is valid");
        MemoryServer {
            conn: Arc::new(Conn {
                mem,
                transport,
                caller,
                subscriptions: Mutex::new(HashMap::new()),
                last_principal: Mutex::new(None),
                log_level: Mutex::new(LoggingLevel::Warning),
                peer: OnceLock::new(),
                listen_rx: Mutex::new(std::collections::VecDeque::new()),
                cancel: CancellationToken::new(),
            }),
            shared,
            tool_router: Self::tool_router(),
        }
    }

    /// The connection's active context.
    pub fn active_context(&self) -> String {
        self.conn.mem.active_context()
    }

    /// Who is calling: the connection's principal, or the one the HTTP layer
    /// attached to this request.
    pub fn principal(&self, ext: &Extensions) -> ToolResult<Principal> {
        let p = match &self.conn.caller {
            Caller::Fixed(p) => p.clone(),
            Caller::PerRequest => ext
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Principal>())
                .cloned()
                .ok_or_else(|| {
                    ToolError::Forbidden("request carries no authenticated caller".into())
                })?,
        };
        *self.conn.last_principal.lock() = Some(p.clone());
        Ok(p)
    }

    pub(super) fn audit(
        &self,
        who: &Principal,
        tool: &str,
        targets: &[Target],
        err: Option<&ToolError>,
    ) {
        let Some(a) = &self.shared.audit else { return };
        let ctx = targets
            .iter()
            .find_map(|t| match t {
                Target::Context(c, Access::Write) => Some(c.clone()),
                _ => None,
            })
            .or_else(|| {
                targets.iter().find_map(|t| match t {
                    Target::Context(c, _) => Some(c.clone()),
                    Target::Global(_) => None,
                })
            })
            .unwrap_or_else(|| if targets.is_empty() { "-" } else { "*" }.to_owned());
        a.record(
            &who.id,
            self.conn.transport,
            tool,
            &ctx,
            err.map(ToolError::code),
        );
    }

    /// Run a tool for `who`: authorize, run on a blocking thread, audit, publish changes.
    pub async fn execute<A: Tool>(&self, args: A, who: &Principal) -> ToolResult<Value> {
        self.execute_with_progress(args, who, None).await
    }

    /// [`MemoryServer::execute`], passing the tool's progress reports (if it makes any) to
    /// `progress`. The sender is dropped when the tool finishes.
    pub async fn execute_with_progress<A: Tool>(
        &self,
        args: A,
        who: &Principal,
        progress: Option<ops::ProgressSink>,
    ) -> ToolResult<Value> {
        let active = self.conn.mem.active_context();
        let cx = Cx {
            mem: self.conn.mem.namespace(&active)?,
            conn: self.conn.mem.clone(),
            progress,
        };
        let who2 = who.clone();
        // Started only once the concurrency bound lets it (the future is lazy).
        let work = async move {
            tokio::task::spawn_blocking(move || {
                let targets = match args.targets(&cx) {
                    Ok(t) => t,
                    Err(e) => return (Vec::new(), Err(e)),
                };
                if let Err(e) = who2.check(&targets) {
                    return (targets, Err(e));
                }
                let res = args.run(&cx);
                (targets, res)
            })
            .await
            .map_err(|e| ToolError::internal(format!("tool worker failed: {e}")))
        };
        let (targets, res) = match self.shared.limits.run(A::NAME, work).await {
            Ok(done) => done,
            Err(e) => (Vec::new(), Err(e)),
        };
        // Mutating calls, refusals (out of scope) and, with --audit-reads, reads.
        if A::MUTATES || self.shared.audit_reads || matches!(res, Err(ToolError::Forbidden(_))) {
            self.audit(who, A::NAME, &targets, res.as_ref().err());
        }
        tracing::debug!(tool = A::NAME, who = %who.id, ok = res.is_ok(), "tool call");
        res.map(|done| {
            self.shared.publish(done.changes);
            done.value
        })
    }

    /// Deserialize `params` as `A`'s arguments and run it (the `/mcp/v1/execute` envelope).
    pub(super) async fn execute_params<A: Tool>(
        &self,
        params: Value,
        who: &Principal,
    ) -> ToolResult<Value> {
        let args: A = match serde_json::from_value(params) {
            Ok(a) => a,
            Err(e) => {
                let err = ToolError::invalid("parameters", e.to_string());
                self.audit(who, A::NAME, &[], Some(&err));
                return Err(err);
            }
        };
        self.execute(args, who).await
    }

    pub(super) async fn call<A: Tool>(
        &self,
        args: A,
        rc: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        // With a `_meta.progressToken`, the tool's progress reports become
        // `notifications/progress`, all sent before the result.
        let (sink, forwarder) = match rc.meta.get_progress_token() {
            Some(token) => {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                (
                    Some(tx),
                    Some(tokio::spawn(forward_progress(rc.peer.clone(), token, rx))),
                )
            }
            None => (None, None),
        };
        let res = match self.principal(&rc.extensions) {
            Ok(who) => self.execute_with_progress(args, &who, sink).await,
            Err(e) => {
                drop(sink);
                Err(e)
            }
        };
        if let Some(f) = forwarder {
            // The sender went with the tool's worker, so the forwarder ends once drained.
            let _ = f.await;
        }
        match res {
            Ok(v) => {
                if A::MUTATES {
                    self.log(
                        &rc.peer,
                        LoggingLevel::Debug,
                        json!({"tool": A::NAME, "ok": true}),
                    )
                    .await;
                }
                CallToolResult::structured(v)
            }
            Err(e) => {
                self.log(
                    &rc.peer,
                    LoggingLevel::Warning,
                    json!({"tool": A::NAME, "error": e.code(), "message": e.message()}),
                )
                .await;
                e.into_call_result()
            }
        }
    }

    /// Send a `notifications/message` when `level` passes the client's threshold.
    pub(super) async fn log(&self, peer: &Peer<RoleServer>, level: LoggingLevel, data: Value) {
        if level_rank(level) < level_rank(*self.conn.log_level.lock()) {
            return;
        }
        let _ = peer
            .notify_logging_message(
                LoggingMessageNotificationParam::new(level, data).with_logger("memstrata"),
            )
            .await;
    }

    /// Forward resource changes to this connection's client (once per connection).
    pub(super) fn start_forwarding(&self, peer: Peer<RoleServer>) {
        if self.conn.peer.set(peer.clone()).is_err() {
            return;
        }
        let mut rx = self.shared.hub.subscribe();
        let weak: Weak<Conn> = Arc::downgrade(&self.conn);
        let cancel = self.conn.cancel.clone();
        tokio::spawn(async move {
            loop {
                let change = tokio::select! {
                    _ = cancel.cancelled() => break,
                    r = rx.recv() => match r {
                        Ok(c) => c,
                        Err(broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!("a connection fell {n} resource notifications behind");
                            continue;
                        }
                        Err(broadcast::error::RecvError::Closed) => break,
                    },
                };
                let Some(conn) = weak.upgrade() else { break };
                let (updated, list_changed) = conn.route(&change);
                drop(conn);
                for u in updated {
                    if peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(u))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                if list_changed && peer.notify_resource_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }

    pub(super) fn qualify(&self, uri: &str) -> Result<ResourceRef, ErrorData> {
        ResourceRef::parse(uri)
            .map(|r| r.qualified(&self.conn.mem.active_context()))
            .ok_or_else(|| {
                ErrorData::resource_not_found(
                    format!("{uri} is not a memstrata resource URI (see resources/templates/list)"),
                    Some(json!({"uri": uri})),
                )
            })
    }
}

/// Send a tool's progress reports as `notifications/progress` for `token` until the tool
/// drops its sender.
///
/// Reports come in stages (`memstrata::admin::Progress`), each counting from 0, while MCP wants one
/// strictly increasing `progress` per request. So `progress` counts work units across
/// stages (every report advances it by the items done since the previous report of its
/// stage, at least 1); `total`, sent when the stage's size is known, is where the current
/// stage will end on that scale; `message` names the stage.
async fn forward_progress(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<memstrata::admin::Progress>,
) {
    let mut position = 0u64;
    let mut stage: Option<&'static str> = None;
    let mut stage_done = 0u64;
    let mut peer_gone = false;
    while let Some(p) = rx.recv().await {
        if peer_gone {
            continue; // keep draining so the tool never notices
        }
        if stage != Some(p.stage) {
            stage = Some(p.stage);
            stage_done = 0;
        }
        position += p.done.saturating_sub(stage_done).max(1);
        stage_done = stage_done.max(p.done);
        let msg = format!("{}: {}", p.stage, p.message);
        let mut n =
            ProgressNotificationParam::new(token.clone(), position as f64).with_message(msg);
        if let Some(t) = p.total {
            n = n.with_total((position + t.saturating_sub(p.done)) as f64);
        }
        if peer.notify_progress(n).await.is_err() {
            peer_gone = true;
        }
    }
}

/// A failure outside `tools/call` (resources, prompts, completion) as a JSON-RPC error.
pub(super) fn protocol_error(e: ToolError) -> ErrorData {
    let data = Some(json!({"code": e.code()}));
    match e.error_code() {
        Some(ErrorCode::InvalidInput | ErrorCode::LimitExceeded) => {
            ErrorData::invalid_params(e.message(), data)
        }
        Some(ErrorCode::NotFound) => ErrorData::resource_not_found(e.message(), data),
        None => ErrorData::new(rmcp::model::ErrorCode(-32003), e.message(), data),
        Some(_) => ErrorData::internal_error(e.message(), data),
    }
}
