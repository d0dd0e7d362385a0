//! Shared helpers: an in-process server and client over `tokio::io::duplex`,
//! and a small JSON Schema checker for `structuredContent` vs `outputSchema`.

#![allow(dead_code)]

pub mod binary;

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResult, ResourceUpdatedNotificationParam, Tool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use memstrata::Memory;
use memstrata_mcp::{Auth, Caller, MemoryServer, Principal, Shared};

/// Records resource notifications.
#[derive(Clone)]
pub struct Recorder {
    pub tx: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Recorder {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        let _ = self.tx.send(params.uri);
    }
    async fn on_resource_list_changed(&self, _c: NotificationContext<RoleClient>) {
        let _ = self.tx.send("list_changed".into());
    }
}

pub struct Harness {
    pub client: RunningService<RoleClient, Recorder>,
    pub events: mpsc::UnboundedReceiver<String>,
    pub shared: Arc<Shared>,
    pub tools: HashMap<String, Tool>,
}

/// A server on `shared` as `who`, with a connected client.
pub async fn connect(shared: Arc<Shared>, who: Principal) -> Harness {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let server = MemoryServer::new(Arc::clone(&shared), "in-process", Caller::Fixed(who));
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let (tx, events) = mpsc::unbounded_channel();
    let client = Recorder { tx }
        .serve(client_io)
        .await
        .expect("client initializes");
    let tools = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| (t.name.to_string(), t))
        .collect();
    Harness {
        client,
        events,
        shared,
        tools,
    }
}

/// Shared state over a fresh temporary store with full access.
pub fn shared_temp() -> Arc<Shared> {
    Shared::new(
        Memory::temporary().expect("temp store"),
        Auth::disabled(),
        true,
    )
    .expect("shared")
}

impl Harness {
    /// Call a tool; panics on a JSON-RPC error.
    pub async fn call_raw(&self, name: &str, args: Value) -> CallToolResult {
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        self.client
            .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
            .await
            .unwrap_or_else(|e| panic!("{name}: protocol error {e}"))
    }

    /// Call a tool that must succeed; checks `structuredContent` against the output schema.
    pub async fn call(&self, name: &str, args: Value) -> Value {
        let r = self.call_raw(name, args).await;
        assert_ne!(r.is_error, Some(true), "{name} failed: {:?}", text(&r));
        let v = r
            .structured_content
            .clone()
            .unwrap_or_else(|| panic!("{name}: no structuredContent"));
        let tool = self
            .tools
            .get(name)
            .unwrap_or_else(|| panic!("{name} not listed"));
        let schema = Value::Object(
            tool.output_schema
                .as_ref()
                .expect("output schema")
                .as_ref()
                .clone(),
        );
        if let Err(e) = check(&schema, &schema, &v, "$") {
            panic!("{name}: structuredContent does not match outputSchema: {e}\nvalue: {v:#}");
        }
        // The text content mirrors the structured result for clients without structured support.
        let t: Value = serde_json::from_str(&text(&r)).expect("text content is the JSON result");
        assert_eq!(t, v);
        v
    }

    /// Call a tool that must fail as a tool error (`isError: true`); returns the message.
    pub async fn call_err(&self, name: &str, args: Value) -> String {
        let r = self.call_raw(name, args).await;
        assert_eq!(
            r.is_error,
            Some(true),
            "{name} should have failed: {:?}",
            r.structured_content
        );
        text(&r)
    }
}

pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or("");
        for defs in ["$defs", "definitions"] {
            if let Some(s) = root.get(defs).and_then(|d| d.get(name)) {
                return resolve(root, s);
            }
        }
        panic!("unresolved $ref {r}");
    }
    schema
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// A small JSON Schema (2020-12 subset) checker: type, properties, required,
/// additionalProperties, items, enum, const, anyOf/oneOf, $ref, minimum/maximum.
pub fn check(root: &Value, schema: &Value, v: &Value, path: &str) -> Result<(), String> {
    let schema = resolve(root, schema);
    if schema == &Value::Bool(true) || schema.as_object().is_some_and(Map::is_empty) {
        return Ok(());
    }
    if let Some(t) = schema.get("type") {
        let ok = match t {
            Value::String(t) => type_ok(t, v),
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)),
            _ => true,
        };
        if !ok {
            return Err(format!("{path}: expected type {t}, got {v}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return Err(format!("{path}: {v} not in {e:?}"));
    }
    if let Some(c) = schema.get("const")
        && c != v
    {
        return Err(format!("{path}: {v} != const {c}"));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array)
            && !alts.iter().any(|s| check(root, s, v, path).is_ok())
        {
            return Err(format!("{path}: {v} matches none of {key}"));
        }
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), v.as_f64())
        && n < min
    {
        return Err(format!("{path}: {n} < minimum {min}"));
    }
    if let (Some(max), Some(n)) = (schema.get("maximum").and_then(Value::as_f64), v.as_f64())
        && n > max
    {
        return Err(format!("{path}: {n} > maximum {max}"));
    }
    if let Value::Object(obj) = v {
        let props = schema.get("properties").and_then(Value::as_object);
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap_or_default();
            if !obj.contains_key(r) {
                return Err(format!("{path}: missing required field {r:?}"));
            }
        }
        for (k, x) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(root, s, x, &format!("{path}.{k}"))?,
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return Err(format!("{path}: unexpected field {k:?}"));
                    }
                    Some(s @ Value::Object(_)) => check(root, s, x, &format!("{path}.{k}"))?,
                    _ => {}
                },
            }
        }
    }
    if let (Value::Array(items), Some(s)) = (v, schema.get("items")) {
        for (i, x) in items.iter().enumerate() {
            check(root, s, x, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}
