//! The built-in actions (`set`, `fail`, and the memory actions of
//! [`BUILTIN_ACTIONS`]) and the helpers that read their parameters.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::model::Step;
use super::parse::json_type;
use crate::engine::Engine;
use crate::layers::episodic::{self, NewEpisode, SearchFilters};
use crate::{Error, layers::semantic, layers::short_term, layers::working, util::input};

/// Names of the built-in actions. They are reserved: host actions may not use them.
pub const BUILTIN_ACTIONS: &[&str] = &[
    "set",
    "fail",
    "short_term.store",
    "short_term.retrieve",
    "episodic.record",
    "episodic.search",
    "semantic.store",
    "semantic.retrieve",
    "working.focus",
    "workspace.add",
];

/// Default `limit` of the `episodic.search` built-in.
const DEFAULT_SEARCH_LIMIT: usize = 10;

pub(super) fn is_builtin(action: &str) -> bool {
    BUILTIN_ACTIONS.contains(&action)
}

/// Why a `fail` step failed: its parameters as a string, or their `message`.
pub(super) fn fail_message(step: &Step, params: &Value) -> String {
    match params {
        Value::String(s) => s.clone(),
        Value::Object(o) => match o.get("message") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => format!("step {:?} failed", step.id),
            Some(other) => other.to_string(),
        },
        _ => format!("step {:?} failed", step.id),
    }
}

type Obj = Map<String, Value>;

fn params_obj(p: &Value) -> std::result::Result<&Obj, String> {
    p.as_object()
        .ok_or_else(|| format!("parameters must be a JSON object, got {}", json_type(p)))
}

fn req_str<'a>(o: &'a Obj, name: &str) -> std::result::Result<&'a str, String> {
    match o.get(name) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(format!("parameters.{name} is required")),
        Some(other) => Err(format!(
            "parameters.{name} must be a string, got {}",
            json_type(other)
        )),
    }
}

fn opt_str<'a>(o: &'a Obj, name: &str) -> std::result::Result<Option<&'a str>, String> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!(
            "parameters.{name} must be a string, got {}",
            json_type(other)
        )),
    }
}

fn req_value(o: &Obj, name: &str) -> std::result::Result<Value, String> {
    o.get(name)
        .cloned()
        .ok_or_else(|| format!("parameters.{name} is required"))
}

fn opt_str_list(o: &Obj, name: &str) -> std::result::Result<Vec<String>, String> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "parameters.{name}[{i}] must be a string, got {}",
                    json_type(other)
                )),
            })
            .collect(),
        Some(other) => Err(format!(
            "parameters.{name} must be a list of strings, got {}",
            json_type(other)
        )),
    }
}

fn opt_u64(o: &Obj, name: &str) -> std::result::Result<Option<u64>, String> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("parameters.{name} must be a non-negative integer, got {v}")),
    }
}

fn opt_u8(o: &Obj, name: &str) -> std::result::Result<Option<u8>, String> {
    match opt_u64(o, name)? {
        None => Ok(None),
        Some(n) => u8::try_from(n)
            .map(Some)
            .map_err(|_| format!("parameters.{name} must be in 1..=10, got {n}")),
    }
}

fn to_json<T: Serialize>(v: T) -> std::result::Result<Value, String> {
    serde_json::to_value(v).map_err(|e| format!("cannot convert the result to JSON: {e}"))
}

pub(super) fn run_builtin(
    e: &Engine,
    ctx: &str,
    action: &str,
    p: &Value,
) -> std::result::Result<Value, String> {
    let err = |x: Error| x.to_string();
    match action {
        "set" => Ok(p.clone()),
        "short_term.store" => {
            let o = params_obj(p)?;
            let key = req_str(o, "key")?;
            let value = req_value(o, "value")?;
            let ttl = match o.get("ttl") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_f64().ok_or_else(|| {
                    format!("parameters.ttl must be a number of seconds, got {v}")
                })?),
            };
            let ttl = input::ttl("parameters.ttl", ttl).map_err(err)?;
            let entry = e
                .timed("short_term.store", || {
                    short_term::store_in(e, ctx, key, value, ttl)
                })
                .map_err(err)?;
            to_json(entry)
        }
        "short_term.retrieve" => {
            let o = params_obj(p)?;
            let key = req_str(o, "key")?;
            let entry = e
                .timed("short_term.retrieve", || short_term::entry_in(e, ctx, key))
                .map_err(err)?;
            Ok(entry.map_or(Value::Null, |x| x.value))
        }
        "episodic.record" => {
            let o = params_obj(p)?;
            let ep = NewEpisode {
                summary: req_str(o, "summary")?.to_owned(),
                content: o.get("content").cloned().unwrap_or(Value::Null),
                participants: opt_str_list(o, "participants")?,
                tags: opt_str_list(o, "tags")?,
                importance: opt_u8(o, "importance")?,
                timestamp: None,
                embedding: None,
                on_duplicate: None,
            };
            let id = e
                .timed("episodic.record", || episodic::record_in(e, ctx, ep))
                .map_err(err)?;
            Ok(json!({ "id": id }))
        }
        "episodic.search" => {
            let o = params_obj(p)?;
            let query = opt_str(o, "query")?.unwrap_or("");
            let limit = match opt_u64(o, "limit")? {
                None => DEFAULT_SEARCH_LIMIT,
                Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            };
            let filters = SearchFilters {
                tags: opt_str_list(o, "tags")?,
                participants: opt_str_list(o, "participants")?,
                min_importance: opt_u8(o, "min_importance")?,
                ..SearchFilters::default()
            };
            let hits = e
                .timed("episodic.search", || {
                    episodic::search_in(
                        e,
                        ctx,
                        query,
                        &filters,
                        limit,
                        &crate::VectorQuery::default(),
                        None,
                    )
                })
                .map_err(err)?;
            Ok(json!({ "hits": to_json(hits)? }))
        }
        "semantic.store" => {
            let o = params_obj(p)?;
            let key = req_str(o, "key")?;
            let knowledge = req_value(o, "knowledge")?;
            let k = e
                .timed("semantic.store", || {
                    semantic::store_in(e, ctx, key, knowledge)
                })
                .map_err(err)?;
            to_json(k)
        }
        "semantic.retrieve" => {
            let o = params_obj(p)?;
            let key = req_str(o, "key")?;
            let k = e
                .timed("semantic.retrieve", || semantic::get_in(e, ctx, key))
                .map_err(err)?;
            Ok(k.map_or(Value::Null, |k| k.knowledge))
        }
        "working.focus" => {
            let o = params_obj(p)?;
            let item = req_str(o, "item")?;
            let added = e
                .timed("working.focus", || working::focus_in(e, ctx, item))
                .map_err(err)?;
            Ok(json!({ "added": added }))
        }
        "workspace.add" => {
            let o = params_obj(p)?;
            let value = req_value(o, "value")?;
            let id = e
                .timed("working.add_to_workspace", || {
                    working::add_in(e, ctx, value)
                })
                .map_err(err)?;
            Ok(json!({ "id": id }))
        }
        other => Err(format!("unknown built-in action {other:?}")),
    }
}
