//! The rmcp [`ServerHandler`] of [`MemoryServer`]: server info, `tools/call`, logging
//! level, resources and subscriptions, prompts and completion.

use std::collections::HashMap;

use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CompletionInfo,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};
use serde_json::json;
use tokio::sync::broadcast;

use memstrata_bindings_common::defaults::{page, parse_cursor};

use super::service::{INSTRUCTIONS, MemoryServer, protocol_error};
use crate::error::{ToolError, ToolResult};
use crate::protocol::uri::ResourceRef;
use crate::protocol::{prompts, resources};
use crate::security::auth::{Access, Target};

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
