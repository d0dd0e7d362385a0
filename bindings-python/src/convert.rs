//! Conversions of Python arguments: JSON-like values, TTLs, datetimes, bounded
//! integers and string lists, into what the common layer's option records and
//! the core take. Nothing here decides behaviour; defaults and range checks
//! belong to `memstrata_bindings_common` and the core.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use memstrata_bindings_common::{BindingError, Timestamp, options};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDateTime, PyDelta, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

use crate::error::{self, invalid};

/// Python object -> JSON value. `field` names the argument in errors
/// (`value.a[2]: unsupported type set`). Nesting deeper than `max_depth` is refused
/// with the core's `LimitExceeded` (the core would refuse it anyway; stopping here
/// keeps a self-referencing list from recursing forever).
pub(crate) fn to_json(obj: &Bound<'_, PyAny>, field: &str, max_depth: usize) -> PyResult<Value> {
    let mut path = field.to_owned();
    to_json_at(obj, &mut path, 1, field, max_depth)
}

/// An optional JSON argument: `None` (the Python value) is JSON null.
pub(crate) fn opt_json(
    obj: Option<&Bound<'_, PyAny>>,
    field: &str,
    max_depth: usize,
) -> PyResult<Value> {
    match obj {
        Some(o) => to_json(o, field, max_depth),
        None => Ok(Value::Null),
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

fn push_key(path: &mut String, key: &str) {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    {
        path.push('.');
        path.push_str(key);
    } else {
        let _ = write!(path, "[{}]", Value::String(key.to_owned()));
    }
}

fn to_json_at(
    obj: &Bound<'_, PyAny>,
    path: &mut String,
    depth: usize,
    root: &str,
    max_depth: usize,
) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::Number(u.into()));
        }
        return Err(invalid(
            path,
            format!("integer {obj} does not fit in 64 bits (JSON numbers are i64, u64 or float)"),
        ));
    }
    if obj.is_instance_of::<PyFloat>() {
        let f: f64 = obj.extract()?;
        return match Number::from_f64(f) {
            Some(n) => Ok(Value::Number(n)),
            None => Err(invalid(
                path,
                format!("{f} is not a valid JSON number (NaN and infinities are refused)"),
            )),
        };
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    let is_dict = obj.is_instance_of::<PyDict>();
    let is_seq = obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>();
    if (is_dict || is_seq) && depth > max_depth {
        return Err(error::to_py(memstrata::Error::limit(
            root,
            "JSON nesting depth",
            max_depth as u64,
            depth as u64,
        )));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let Ok(ks) = k.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "{path}: dict keys must be str, got {} ({})",
                    type_name(&k),
                    k.repr().map(|r| r.to_string()).unwrap_or_default()
                )));
            };
            let key = ks.to_cow()?.into_owned();
            let len = path.len();
            push_key(path, &key);
            let value = to_json_at(&v, path, depth + 1, root, max_depth);
            path.truncate(len);
            map.insert(key, value?);
        }
        return Ok(Value::Object(map));
    }
    if is_seq {
        let mut out = Vec::new();
        for (i, item) in obj.try_iter()?.enumerate() {
            let item = item?;
            let len = path.len();
            let _ = write!(path, "[{i}]");
            let value = to_json_at(&item, path, depth + 1, root, max_depth);
            path.truncate(len);
            out.push(value?);
        }
        return Ok(Value::Array(out));
    }
    Err(PyTypeError::new_err(format!(
        "{path}: unsupported type {} (expected dict, list, tuple, str, int, float, bool or None)",
        type_name(obj)
    )))
}

/// JSON value -> Python object (dict / list / str / int / float / bool / None).
pub(crate) fn to_py(py: Python<'_>, v: &Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else {
                n.as_f64()
                    .unwrap_or(f64::NAN)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any().unbind(),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(to_py(py, x)?)?;
            }
            list.into_any().unbind()
        }
        Value::Object(o) => {
            let dict = PyDict::new(py);
            for (k, x) in o {
                dict.set_item(k, to_py(py, x)?)?;
            }
            dict.into_any().unbind()
        }
    })
}

/// An optional JSON value -> Python (`None` stays `None`).
pub(crate) fn opt_to_py(py: Python<'_>, v: Option<&Value>) -> PyResult<Py<PyAny>> {
    match v {
        Some(v) => to_py(py, v),
        None => Ok(py.None()),
    }
}

/// Seconds (`int` / `float`) or a `datetime.timedelta` as seconds, unchecked;
/// any other type is a `TypeError` naming `field`.
pub(crate) fn seconds(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<f64>> {
    match obj {
        None => Ok(None),
        Some(obj) if obj.is_none() => Ok(None),
        Some(obj) if obj.is_instance_of::<PyBool>() => Err(PyTypeError::new_err(format!(
            "{field}: expected seconds (int or float) or a datetime.timedelta, got bool"
        ))),
        Some(obj) if obj.is_instance_of::<PyDelta>() => {
            Ok(Some(obj.call_method0("total_seconds")?.extract()?))
        }
        Some(obj) if obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>() => {
            Ok(Some(obj.extract()?))
        }
        Some(obj) => Err(PyTypeError::new_err(format!(
            "{field}: expected seconds (int or float) or a datetime.timedelta, got {}",
            type_name(obj)
        ))),
    }
}

/// A TTL in seconds (`int` / `float`) or a `datetime.timedelta`, checked by the
/// common layer (`options::ttl`: finite and > 0).
pub(crate) fn ttl(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    options::ttl(seconds(obj, "ttl")?).map_err(error::to_py)
}

/// A timezone-aware `datetime` (any zone) as UTC. Naive datetimes are refused:
/// they are ambiguous, and Memstrata timestamps are UTC instants.
pub(crate) fn datetime(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<DateTime<Utc>> {
    if !obj.is_instance_of::<PyDateTime>() {
        return Err(PyTypeError::new_err(format!(
            "{field}: expected a datetime.datetime, got {}",
            type_name(obj)
        )));
    }
    if obj.getattr("tzinfo")?.is_none() || obj.call_method0("utcoffset")?.is_none() {
        return Err(invalid(
            field,
            "naive datetime; pass a timezone-aware one (e.g. datetime.now(timezone.utc))",
        ));
    }
    let py = obj.py();
    let utc = py.import("datetime")?.getattr("timezone")?.getattr("utc")?;
    obj.call_method1("astimezone", (utc,))?.extract()
}

/// An optional datetime argument, as the common layer's `Timestamp`.
pub(crate) fn opt_timestamp(
    obj: Option<&Bound<'_, PyAny>>,
    field: &str,
) -> PyResult<Option<Timestamp>> {
    match obj {
        Some(o) if !o.is_none() => datetime(o, field).map(|t| Some(Timestamp(t))),
        _ => Ok(None),
    }
}

/// An integer argument converted to the core's type; out-of-range values are an
/// `InvalidInputError` naming the field, non-integers a `TypeError`.
pub(crate) fn int<T>(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<T>
where
    T: TryFrom<i128> + std::fmt::Display + num_bounds::Bounded,
{
    if !obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{field}: expected int, got {}",
            type_name(obj)
        )));
    }
    let wide: Option<i128> = obj.extract().ok();
    match wide.and_then(|w| T::try_from(w).ok()) {
        Some(v) => Ok(v),
        None => Err(invalid(
            field,
            format!("{obj} is out of range ({}..={})", T::MIN_TEXT, T::MAX_TEXT),
        )),
    }
}

/// An optional integer argument (`None` means absent).
pub(crate) fn opt_int<T>(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<T>>
where
    T: TryFrom<i128> + std::fmt::Display + num_bounds::Bounded,
{
    match obj {
        Some(o) if !o.is_none() => int(o, field).map(Some),
        _ => Ok(None),
    }
}

/// An optional string argument (`None` means absent); another type is a `TypeError` naming `field`.
pub(crate) fn opt_str(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<String>> {
    match obj {
        Some(o) if !o.is_none() => o
            .extract::<String>()
            .map(Some)
            .map_err(|_| pyo3::exceptions::PyTypeError::new_err(format!("{field}: expected str"))),
        _ => Ok(None),
    }
}

/// A result `limit` (`None`: absent). Negative is an `InvalidInputError`; a value
/// past `u32` is passed on as `u32::MAX`, which the core refuses as it would the
/// value given (`LimitExceededError`, over `max_results`).
pub(crate) fn opt_limit(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<u32>> {
    let Some(n) = opt_int::<i64>(obj, field)? else {
        return Ok(None);
    };
    if n < 0 {
        return Err(invalid(
            field,
            format!("{n} is out of range (0..={})", u32::MAX),
        ));
    }
    Ok(Some(u32::try_from(n).unwrap_or(u32::MAX)))
}

/// Range texts for the integer types the core takes.
pub(crate) mod num_bounds {
    /// The printed bounds of an integer type.
    pub(crate) trait Bounded {
        const MIN_TEXT: &'static str;
        const MAX_TEXT: &'static str;
    }
    impl Bounded for u32 {
        const MIN_TEXT: &'static str = "0";
        const MAX_TEXT: &'static str = "4294967295";
    }
    impl Bounded for i64 {
        const MIN_TEXT: &'static str = "-9223372036854775808";
        const MAX_TEXT: &'static str = "9223372036854775807";
    }
}

/// A list of strings (`None` -> empty). A bare `str` is refused (it would be split into characters).
pub(crate) fn str_list(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Vec<String>> {
    let Some(obj) = obj else {
        return Ok(Vec::new());
    };
    if obj.is_none() {
        return Ok(Vec::new());
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{field}: expected a list of str, got a single str"
        )));
    }
    let mut out = Vec::new();
    let iter = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{field}: expected a list of str, got {}",
            type_name(obj)
        ))
    })?;
    for (i, item) in iter.enumerate() {
        let item = item?;
        match item.cast::<PyString>() {
            Ok(s) => out.push(s.to_cow()?.into_owned()),
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "{field}[{i}]: expected str, got {}",
                    type_name(&item)
                )));
            }
        }
    }
    Ok(out)
}

/// A record that has no typed Python class (status metrics) goes through its
/// serde form, which cannot fail for records; if it ever did, that is a bug (`INTERNAL`).
pub(crate) fn ser_err(e: serde_json::Error) -> PyErr {
    error::to_py(BindingError::internal(format!(
        "cannot convert a result: {e}"
    )))
}

/// A sequence of numbers (list, tuple, array: anything iterable of floats; `None` -> absent).
/// A bare `str` is refused; each item must convert with `float()`.
pub(crate) fn opt_floats(
    obj: Option<&Bound<'_, PyAny>>,
    field: &str,
) -> PyResult<Option<Vec<f64>>> {
    match obj {
        Some(o) if !o.is_none() => floats(o, field).map(Some),
        _ => Ok(None),
    }
}

/// See [`opt_floats`].
pub(crate) fn floats(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Vec<f64>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{field}: expected a sequence of float, got str"
        )));
    }
    let iter = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{field}: expected a sequence of float, got {}",
            type_name(obj)
        ))
    })?;
    let mut out = Vec::new();
    for (i, item) in iter.enumerate() {
        let item = item?;
        if item.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err(format!(
                "{field}[{i}]: expected float, got bool"
            )));
        }
        out.push(item.extract::<f64>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{field}[{i}]: expected float, got {}",
                type_name(&item)
            ))
        })?);
    }
    Ok(out)
}

/// An optional float argument (`None` means absent; ints are accepted).
pub(crate) fn opt_float(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<f64>> {
    match obj {
        Some(o) if !o.is_none() => {
            if o.is_instance_of::<PyBool>() {
                return Err(PyTypeError::new_err(format!(
                    "{field}: expected float, got bool"
                )));
            }
            o.extract::<f64>().map(Some).map_err(|_| {
                PyTypeError::new_err(format!("{field}: expected float, got {}", type_name(o)))
            })
        }
        _ => Ok(None),
    }
}

/// The keys of one item of a batch (`items[3]`), a dict or any mapping with
/// str keys; a key outside `allowed` is refused (a typo would otherwise be
/// dropped silently), as is anything that is not a mapping.
pub(crate) fn item_fields<'py>(
    item: &Bound<'py, PyAny>,
    field: &str,
    allowed: &[&str],
) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    let pairs: Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)> = if let Ok(d) = item.cast::<PyDict>() {
        d.iter().collect()
    } else if let Ok(m) = item.cast::<pyo3::types::PyMapping>() {
        let mut v = Vec::new();
        for kv in m.items()?.iter() {
            let kv = kv.cast_into::<PyTuple>()?;
            v.push((kv.get_item(0)?, kv.get_item(1)?));
        }
        v
    } else {
        return Err(PyTypeError::new_err(format!(
            "{field}: expected a dict, got {}",
            type_name(item)
        )));
    };
    let mut out = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        let Ok(k) = k.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "{field}: keys must be str, got {}",
                type_name(&k)
            )));
        };
        let k = k.to_cow()?.into_owned();
        if !allowed.contains(&k.as_str()) {
            return Err(invalid(
                field,
                format!("unknown key {k:?}; an item takes {}", allowed.join(", ")),
            ));
        }
        out.push((k, v));
    }
    Ok(out)
}
