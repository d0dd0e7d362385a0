//! Input checks shared by every entry point.

use serde_json::Value;

use crate::config::Limits;
use crate::{Error, Result};

/// Context names: `[A-Za-z0-9_.:-]{1,128}`.
pub(crate) fn context_name(field: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 128 {
        return Err(Error::invalid(
            field,
            format!(
                "context name must be 1..=128 characters, got {}",
                name.len()
            ),
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
    {
        return Err(Error::invalid(
            field,
            format!("context name may only contain [A-Za-z0-9_.:-], found {c:?}"),
        ));
    }
    Ok(())
}

/// Keys, names and ids: non-empty, at most `max_key_bytes`, no NUL.
pub(crate) fn key(limits: &Limits, field: &str, key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if key.len() > limits.max_key_bytes {
        return Err(Error::limit(
            field,
            "key size in bytes",
            limits.max_key_bytes as u64,
            key.len() as u64,
        ));
    }
    if key.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    Ok(())
}

/// The number of items of a batch write (`record_many`, `store_many`):
/// at most `max_batch_items`.
pub(crate) fn batch_items(limits: &Limits, field: &str, n: usize) -> Result<()> {
    if n > limits.max_batch_items {
        return Err(Error::limit(
            field,
            "items per batch",
            limits.max_batch_items as u64,
            n as u64,
        ));
    }
    Ok(())
}

/// The encoded size of a batch write so far: at most `max_batch_bytes`.
pub(crate) fn batch_bytes(limits: &Limits, field: &str, bytes: usize) -> Result<()> {
    if bytes > limits.max_batch_bytes {
        return Err(Error::limit(
            field,
            "encoded bytes per batch",
            limits.max_batch_bytes as u64,
            bytes as u64,
        ));
    }
    Ok(())
}

/// JSON values: depth and encoded size.
pub(crate) fn value(limits: &Limits, field: &str, v: &Value) -> Result<()> {
    let depth = json_depth(v, limits.max_json_depth + 1);
    if depth > limits.max_json_depth {
        return Err(Error::limit(
            field,
            "JSON nesting depth",
            limits.max_json_depth as u64,
            depth as u64,
        ));
    }
    let size = json_size(v);
    if size > limits.max_value_bytes {
        return Err(Error::limit(
            field,
            "value size in bytes",
            limits.max_value_bytes as u64,
            size as u64,
        ));
    }
    Ok(())
}

/// Check a search's query text (named `field`) and its result `limit` against
/// `limits`: the episode search and the knowledge query share these bounds.
pub(crate) fn search(limits: &Limits, field: &str, query: &str, limit: usize) -> Result<()> {
    if query.len() > limits.max_query_bytes {
        return Err(Error::limit(
            field,
            "query size in bytes",
            limits.max_query_bytes as u64,
            query.len() as u64,
        ));
    }
    if limit == 0 {
        return Err(Error::invalid("limit", "must be at least 1"));
    }
    if limit > limits.max_results {
        return Err(Error::limit(
            "limit",
            "results per call",
            limits.max_results as u64,
            limit as u64,
        ));
    }
    Ok(())
}

/// Depth of a JSON value, stopping early past `cap`.
pub(crate) fn json_depth(v: &Value, cap: usize) -> usize {
    // Iterative, so hostile nesting cannot overflow the stack.
    let mut max = 0usize;
    let mut stack: Vec<(&Value, usize)> = vec![(v, 1)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        if max >= cap {
            return max;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(o) => stack.extend(o.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}

/// Approximate encoded size (JSON text length) without allocating the text.
pub(crate) fn json_size(v: &Value) -> usize {
    let mut n = 0usize;
    let mut stack: Vec<&Value> = vec![v];
    while let Some(v) = stack.pop() {
        n += match v {
            Value::Null | Value::Bool(_) => 5,
            Value::Number(_) => 20,
            Value::String(s) => s.len() + 2,
            Value::Array(a) => {
                stack.extend(a.iter());
                2 + a.len()
            }
            Value::Object(o) => {
                for (k, x) in o {
                    n += k.len() + 4;
                    stack.push(x);
                }
                2
            }
        };
    }
    n
}

/// TTL in seconds: finite and > 0.
pub(crate) fn ttl(field: &str, ttl: Option<f64>) -> Result<Option<std::time::Duration>> {
    match ttl {
        None => Ok(None),
        Some(t) if t.is_finite() && t > 0.0 && t < 1.0e12 => {
            Ok(Some(std::time::Duration::from_secs_f64(t)))
        }
        Some(t) => Err(Error::invalid(
            field,
            format!("TTL must be a finite number of seconds > 0, got {t}"),
        )),
    }
}

/// All the text of a JSON value (string leaves, numbers and object keys), for indexing.
pub(crate) fn json_text(v: &Value, out: &mut String) {
    let mut stack: Vec<&Value> = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push(' ');
            }
            Value::Number(n) => {
                out.push_str(&n.to_string());
                out.push(' ');
            }
            Value::Bool(_) | Value::Null => {}
            Value::Array(a) => stack.extend(a.iter().rev()),
            Value::Object(o) => {
                for (k, x) in o.iter().rev() {
                    stack.push(x);
                    let _ = k;
                }
                for k in o.keys() {
                    out.push_str(k);
                    out.push(' ');
                }
            }
        }
    }
}
