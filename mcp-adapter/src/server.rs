//! The MCP service: one [`MemoryServer`] per connection, each with its own
//! active context (a `Memory::namespace("default")` handle on the shared engine).
//!
//! Tools are thin: each one deserializes its arguments (`ops.rs`), checks the
//! caller's access, runs the core call on a blocking thread, audits mutating
//! calls, and publishes resource changes to every connection.

#![allow(deprecated)] // logging is deprecated by SEP-2577 but still what 2025-era clients use

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{ToolCallContext, schema_for_output};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    CompletionInfo, ContentBlock, Extensions, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Reference, ResourceUpdatedNotificationParam, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use memstrata::Memory;
use memstrata_bindings_common::defaults::{page, parse_cursor};
use memstrata_bindings_common::{self as common, ErrorCode};

use crate::audit::AuditLog;
use crate::auth::{Access, Auth, Principal, Target};
use crate::error::{ToolError, ToolResult};
use crate::ops::{self, Change, Cx, Tool};
use crate::uri::ResourceRef;
use crate::{prompts, resources};

/// Engine-wide state shared by every connection of one server process.
#[derive(Debug)]
pub struct Shared {
    /// Root handle on the engine.
    pub mem: Memory,
    /// Configured API keys (HTTP/WebSocket).
    pub auth: Auth,
    /// Audit trail of mutating calls and refused requests.
    pub audit: Option<AuditLog>,
    /// Also audit successful read-only calls.
    pub audit_reads: bool,
    /// Rate limits, call time limit and concurrency bound (off unless configured).
    pub limits: crate::limits::Limits,
    hub: broadcast::Sender<Change>,
    /// On a PostgreSQL store: the LISTEN/NOTIFY bridge to the other instances.
    bridge: OnceLock<crate::pgnotify::Bridge>,
}

impl Shared {
    /// Shared state over an open engine (a store directory); `audit` appends to
    /// `<store>/audit.jsonl`.
    pub fn new(mem: Memory, auth: Auth, audit: bool) -> std::io::Result<Arc<Shared>> {
        Shared::with_audit(mem, auth, audit, false)
    }

    /// [`Shared::new`]; with `audit_reads`, read-only calls are audited too (`--audit-reads`).
    pub fn with_audit(
        mem: Memory,
        auth: Auth,
        audit: bool,
        audit_reads: bool,
    ) -> std::io::Result<Arc<Shared>> {
        Shared::with_limits(
            mem,
            auth,
            audit,
            audit_reads,
            crate::limits::Limits::default(),
        )
    }

    /// [`Shared::with_audit`] with rate limits, a call time limit and a concurrency bound.
    pub fn with_limits(
        mem: Memory,
        auth: Auth,
        audit: bool,
        audit_reads: bool,
        limits: crate::limits::Limits,
    ) -> std::io::Result<Arc<Shared>> {
        let audit = if audit {
            Some(AuditLog::open(&mem.path())?)
        } else {
            None
        };
        Ok(Shared::with_audit_log(
            mem,
            auth,
            audit,
            audit_reads,
            limits,
        ))
    }

    /// Shared state with the audit trail given explicitly (`None`: off): what a
    /// PostgreSQL store uses, having no directory (`--audit-file`).
    pub fn with_audit_log(
        mem: Memory,
        auth: Auth,
        audit: Option<AuditLog>,
        audit_reads: bool,
        limits: crate::limits::Limits,
    ) -> Arc<Shared> {
        let (hub, _) = broadcast::channel(1024);
        Arc::new(Shared {
            mem,
            auth,
            audit,
            audit_reads,
            limits,
            hub,
            bridge: OnceLock::new(),
        })
    }

    /// Deliver resource changes across instances over one PostgreSQL store: this
    /// instance's changes are NOTIFYed on `url`'s channel and the other instances'
    /// re-published to local subscribers (see [`crate::pgnotify`]). Runs until
    /// `shutdown`. Returns `false` if a bridge was already started.
    pub fn bridge_postgres(&self, url: &crate::store::PgUrl, shutdown: CancellationToken) -> bool {
        self.bridge
            .set(crate::pgnotify::Bridge::start(
                url,
                self.hub.clone(),
                shutdown,
            ))
            .is_ok()
    }

    /// The running LISTEN/NOTIFY bridge, if any.
    pub fn bridge(&self) -> Option<&crate::pgnotify::Bridge> {
        self.bridge.get()
    }

    /// Subscribe to every resource change this instance sees (its own and, with a
    /// bridge, the other instances').
    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.hub.subscribe()
    }

    /// Publish the changes a call made: to this instance's subscribers and, on a
    /// PostgreSQL store, to the other instances.
    pub fn publish(&self, changes: Vec<Change>) {
        let bridge = self.bridge.get();
        for c in changes {
            if let Some(b) = bridge {
                b.send(c.clone());
            }
            // No receivers is fine: nobody is listening.
            let _ = self.hub.send(c);
        }
    }
}

/// How a connection identifies its caller.
#[derive(Debug, Clone)]
pub enum Caller {
    /// One principal for the whole connection (stdio, WebSocket, in-process).
    Fixed(Principal),
    /// Authenticated per HTTP request by the HTTP layer.
    PerRequest,
}

#[derive(Debug)]
struct Conn {
    mem: Memory,
    transport: &'static str,
    caller: Caller,
    /// Canonical URI -> URI as the client subscribed to it.
    subscriptions: Mutex<HashMap<String, String>>,
    /// Principal of the latest request (filters notifications on per-request connections).
    last_principal: Mutex<Option<Principal>>,
    log_level: Mutex<LoggingLevel>,
    peer: OnceLock<Peer<RoleServer>>,
    /// Change receivers opened when a `subscriptions/listen` filter is accepted, i.e. before
    /// the acknowledgment goes out, so no change made after the ack can be missed.
    listen_rx: Mutex<std::collections::VecDeque<broadcast::Receiver<Change>>>,
    cancel: CancellationToken,
}

impl Conn {
    /// URIs to notify for `change`, and whether to send `list_changed`, for this connection's caller.
    fn route(&self, change: &Change) -> (Vec<String>, bool) {
        let who = match &self.caller {
            Caller::Fixed(p) => Some(p.clone()),
            Caller::PerRequest => self.last_principal.lock().clone(),
        };
        let Some(who) = who else {
            return (Vec::new(), false);
        };
        let visible = match &change.context {
            Some(ctx) => who.can_read(ctx),
            None => who.allows(&Target::Global(Access::Read)),
        };
        if !visible {
            return (Vec::new(), false);
        }
        let subs = self.subscriptions.lock();
        let mut updated: Vec<String> = subs.get(&change.uri).cloned().into_iter().collect();
        if let Some(s) = subs.get(&ResourceRef::Status.uri())
            && who.allows(&Target::Global(Access::Read))
        {
            updated.push(s.clone());
        }
        (updated, change.list_changed)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn level_rank(l: LoggingLevel) -> u8 {
    match l {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// One MCP connection.
#[derive(Debug, Clone)]
pub struct MemoryServer {
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    tool_router: ToolRouter<MemoryServer>,
}

const INSTRUCTIONS: &str = "Memstrata is a layered memory for agents. Each connection has an active context \
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

    fn audit(&self, who: &Principal, tool: &str, targets: &[Target], err: Option<&ToolError>) {
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
    async fn execute_params<A: Tool>(&self, params: Value, who: &Principal) -> ToolResult<Value> {
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

    async fn call<A: Tool>(&self, args: A, rc: &RequestContext<RoleServer>) -> CallToolResult {
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
    async fn log(&self, peer: &Peer<RoleServer>, level: LoggingLevel, data: Value) {
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
    fn start_forwarding(&self, peer: Peer<RoleServer>) {
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

    fn qualify(&self, uri: &str) -> Result<ResourceRef, ErrorData> {
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
fn protocol_error(e: ToolError) -> ErrorData {
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

        #[tool_router]
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

    /// Record an episode (something that happened): summary, optional JSON content, participants, tags, importance 1..=10. Returns its id; the next search finds it.
    episode_record(ops::EpisodeRecord) -> ops::Created {
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
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .build();
        // The tool and prompt lists are fixed for the life of the server: say so explicitly
        // (no notifications/tools|prompts/list_changed is ever sent).
        if let Some(t) = capabilities.tools.as_mut() {
            t.list_changed = Some(false);
        }
        if let Some(p) = capabilities.prompts.as_mut() {
            p.list_changed = Some(false);
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "memstrata-mcp",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.clone();
        if self.tool_router.get(&name).is_none() {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}; tools/list gives the tool names"),
                Some(json!({"tool": name})),
            ));
        }
        // Who is calling, for the audit record of arguments that cannot be decoded.
        let who = self.principal(&context.extensions).ok();
        let tcc = ToolCallContext::new(self, request, context);
        let mut response = self.tool_router.call(tcc).await?;
        // Argument errors from rmcp's deserializer: give them the same `CODE: message` shape as ours.
        if let CallToolResponse::Complete(r) = &mut response
            && r.is_error == Some(true)
        {
            for c in &mut r.content {
                if let ContentBlock::Text(t) = c
                    && let Some(rest) = t.text.strip_prefix("failed to deserialize parameters: ")
                {
                    t.text = format!(
                        "INVALID_INPUT: invalid arguments for {name}: {rest}. The tool's inputSchema lists the fields"
                    );
                    if let Some(who) = &who {
                        self.audit(who, &name, &[], Some(&ToolError::invalid("arguments", "")));
                    }
                }
            }
        }
        Ok(response)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.start_forwarding(context.peer);
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.conn.log_level.lock() = request.level;
        self.start_forwarding(context.peer);
        Ok(())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let who = self
            .principal(&context.extensions)
            .map_err(protocol_error)?;
        let cursor = request.and_then(|r| r.cursor);
        let offset = parse_cursor(cursor.as_deref()).map_err(|e| protocol_error(e.into()))?;
        let mem = self.conn.mem.clone();
        let all = tokio::task::spawn_blocking(move || resources::list_all(&mem, &who))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            .map_err(protocol_error)?;
        let (items, next) = page(all, offset, resources::PAGE);
        let mut r = ListResourcesResult::with_all_items(items);
        r.next_cursor = next;
        Ok(r)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let who = self
            .principal(&context.extensions)
            .map_err(protocol_error)?;
        let r = self.qualify(&request.uri)?;
        who.check(&[resources::target(&r)])
            .map_err(protocol_error)?;
        let mem = self.conn.mem.clone();
        let r2 = r.clone();
        let v = tokio::task::spawn_blocking(move || resources::read(&mem, &r2))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            .map_err(protocol_error)?;
        match v {
            Some(v) => {
                Ok(ReadResourceResult::new(vec![resources::contents(&request.uri, &v)]).into())
            }
            None => Err(ErrorData::resource_not_found(
                format!(
                    "{} does not exist (it may have been forgotten, or it lives in another context)",
                    request.uri
                ),
                Some(json!({"uri": request.uri})),
            )),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let who = self
            .principal(&context.extensions)
            .map_err(protocol_error)?;
        let r = self.qualify(&request.uri)?;
        who.check(&[resources::target(&r)])
            .map_err(protocol_error)?;
        self.conn.subscriptions.lock().insert(r.uri(), request.uri);
        self.start_forwarding(context.peer);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let mut subs = self.conn.subscriptions.lock();
        subs.retain(|_, as_given| *as_given != request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.conn
            .listen_rx
            .lock()
            .push_back(self.shared.hub.subscribe());
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let who = self
            .principal(&context.request_context().extensions)
            .map_err(protocol_error)?;
        let accepted = context.accepted().clone();
        let mut wanted: HashMap<String, String> = HashMap::new();
        for u in accepted.resource_subscriptions.iter().flatten() {
            if let Some(r) = ResourceRef::parse(u) {
                let r = r.qualified(&self.conn.mem.active_context());
                if who.allows(&resources::target(&r)) {
                    wanted.insert(r.uri(), u.clone());
                }
            }
        }
        let list = accepted.resources_list_changed == Some(true);
        let queued = self.conn.listen_rx.lock().pop_front();
        let mut rx = queued.unwrap_or_else(|| self.shared.hub.subscribe());
        loop {
            let change = tokio::select! {
                _ = context.cancelled() => return Ok(()),
                r = rx.recv() => match r {
                    Ok(c) => c,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            };
            let visible = match &change.context {
                Some(ctx) => who.can_read(ctx),
                None => who.allows(&Target::Global(Access::Read)),
            };
            if !visible {
                continue;
            }
            if let Some(u) = wanted.get(&change.uri)
                && context
                    .sink()
                    .notify_resource_updated(u.clone())
                    .await
                    .is_err()
            {
                return Ok(());
            }
            if let Some(u) = wanted.get(&ResourceRef::Status.uri())
                && context
                    .sink()
                    .notify_resource_updated(u.clone())
                    .await
                    .is_err()
            {
                return Ok(());
            }
            if list
                && change.list_changed
                && context.sink().notify_resource_list_changed().await.is_err()
            {
                return Ok(());
            }
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompts::list()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let who = self
            .principal(&context.extensions)
            .map_err(protocol_error)?;
        if !prompts::list().iter().any(|p| p.name == request.name) {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown prompt {:?}; prompts are resume_session, recall, handoff",
                    request.name
                ),
                None,
            ));
        }
        let active = self.conn.mem.active_context();
        who.check(&prompts::targets(&request.name, &active))
            .map_err(protocol_error)?;
        let mem = self.conn.mem.clone();
        let args = request.arguments.unwrap_or_default();
        let name = request.name.clone();
        let r = tokio::task::spawn_blocking(move || prompts::get(&mem, &name, &args))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            .map_err(protocol_error)?;
        r.map(Into::into).ok_or_else(|| {
            ErrorData::invalid_params(format!("unknown prompt {:?}", request.name), None)
        })
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let who = self
            .principal(&context.extensions)
            .map_err(protocol_error)?;
        let prefix = request.argument.value.clone();
        let arg = request.argument.name.clone();
        let kind = match &request.r#ref {
            Reference::Prompt(p) if p.name == "resume_session" && arg == "session_id" => "session",
            Reference::Resource(r) if r.uri.contains("{session_id}") => "session",
            Reference::Resource(r) if r.uri.contains("{key}") => "key",
            Reference::Resource(r) if r.uri.contains("{context}") && arg == "context" => "context",
            _ => "",
        };
        let mem = self.conn.mem.clone();
        let values = tokio::task::spawn_blocking(move || -> ToolResult<Vec<String>> {
            Ok(match kind {
                "session" if who.allows(&Target::Global(Access::Read)) => mem
                    .sessions()
                    .list()?
                    .into_iter()
                    .map(|s| s.session_id)
                    .filter(|id| id.starts_with(&prefix))
                    .collect(),
                "key" if who.can_read(&mem.active_context()) => mem.semantic().keys(&prefix)?,
                "context" => mem
                    .contexts()
                    .list()?
                    .into_iter()
                    .filter(|c| c.starts_with(&prefix) && who.can_read(c))
                    .collect(),
                _ => Vec::new(),
            })
        })
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
        .map_err(protocol_error)?;
        let total = values.len();
        let shown: Vec<String> = values
            .into_iter()
            .take(CompletionInfo::MAX_VALUES)
            .collect();
        let mut info =
            CompletionInfo::new(shown).map_err(|e| ErrorData::internal_error(e, None))?;
        info.total = u32::try_from(total).ok();
        info.has_more = Some(total > CompletionInfo::MAX_VALUES);
        Ok(CompleteResult::new(info))
    }
}
