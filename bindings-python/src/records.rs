//! Result classes: typed, read-only Python objects built from the records of
//! `memstrata_bindings_common`, and their `__repr__`s.
//!
//! [`py_records!`] declares each class once: its fields (the names of the
//! common record's fields, with their Python-side types), how it is built from
//! the record ([`IntoField`] per field), and its repr (`Name(field=..., ...)`
//! over the listed fields, or a hand-written one). Field conversions that are
//! the same in every language (timestamps, integers, scores) already happened
//! in the common layer; what is left here is Python's: JSON values become
//! Python objects, nested records become their classes.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, SecondsFormat, Utc};
use memstrata_bindings_common::{JsonValue, StatusMetrics, Timestamp};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert;

/// A Python class built from the common record [`PyRecord::Record`].
pub(crate) trait PyRecord: Sized {
    /// The common record it is built from.
    type Record;
    /// Build the class from its record.
    fn from_record(py: Python<'_>, r: Self::Record) -> PyResult<Self>;
}

/// A core result as its Python class, through its common record.
pub(crate) fn class<C: PyRecord>(py: Python<'_>, value: impl Into<C::Record>) -> PyResult<C> {
    C::from_record(py, value.into())
}

/// A list of core results as their Python classes.
pub(crate) fn classes<C: PyRecord, T: Into<C::Record>>(
    py: Python<'_>,
    values: Vec<T>,
) -> PyResult<Vec<C>> {
    values.into_iter().map(|v| class(py, v)).collect()
}

/// How a field of a common record becomes the field of its Python class.
pub(crate) trait IntoField<T> {
    fn into_field(self, py: Python<'_>) -> PyResult<T>;
}

macro_rules! same_field {
    ($($t:ty),*) => {$(
        impl IntoField<$t> for $t {
            fn into_field(self, _py: Python<'_>) -> PyResult<$t> {
                Ok(self)
            }
        }
    )*};
}

same_field!(String, bool, f64, i64, u32, Vec<String>);

impl IntoField<DateTime<Utc>> for Timestamp {
    fn into_field(self, _py: Python<'_>) -> PyResult<DateTime<Utc>> {
        Ok(self.0)
    }
}

impl IntoField<Py<PyAny>> for JsonValue {
    fn into_field(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        convert::to_py(py, &self.0)
    }
}

/// A list of JSON values (procedure steps) as a Python list.
impl IntoField<Py<PyAny>> for Vec<JsonValue> {
    fn into_field(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let list = PyList::empty(py);
        for v in &self {
            list.append(convert::to_py(py, &v.0)?)?;
        }
        Ok(list.into_any().unbind())
    }
}

/// Per-kind counts, sorted by kind (as the dict and the repr show them).
impl IntoField<BTreeMap<String, i64>> for HashMap<String, i64> {
    fn into_field(self, _py: Python<'_>) -> PyResult<BTreeMap<String, i64>> {
        Ok(self.into_iter().collect())
    }
}

/// `status(include_metrics=True)`'s metrics have no class: a dict (None when not asked for).
impl IntoField<Py<PyAny>> for Option<StatusMetrics> {
    fn into_field(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self {
            Some(m) => convert::to_py(py, &serde_json::to_value(m).map_err(convert::ser_err)?),
            None => Ok(py.None()),
        }
    }
}

impl<U: IntoField<V>, V> IntoField<Option<V>> for Option<U> {
    fn into_field(self, py: Python<'_>) -> PyResult<Option<V>> {
        self.map(|u| u.into_field(py)).transpose()
    }
}

impl<U: IntoField<Py<C>>, C> IntoField<Vec<Py<C>>> for Vec<U> {
    fn into_field(self, py: Python<'_>) -> PyResult<Vec<Py<C>>> {
        self.into_iter().map(|u| u.into_field(py)).collect()
    }
}

/// A field as it appears in a `__repr__`.
pub(crate) trait PyRepr {
    fn py_repr(&self, py: Python<'_>) -> String;
}

impl PyRepr for String {
    fn py_repr(&self, _py: Python<'_>) -> String {
        pystr(self)
    }
}

impl PyRepr for bool {
    fn py_repr(&self, _py: Python<'_>) -> String {
        if *self { "True" } else { "False" }.to_owned()
    }
}

macro_rules! display_repr {
    ($($t:ty),*) => {$(
        impl PyRepr for $t {
            fn py_repr(&self, _py: Python<'_>) -> String {
                self.to_string()
            }
        }
    )*};
}

display_repr!(i64, u32, f64);

impl PyRepr for DateTime<Utc> {
    fn py_repr(&self, _py: Python<'_>) -> String {
        format!("'{}'", self.to_rfc3339_opts(SecondsFormat::AutoSi, true))
    }
}

impl PyRepr for Py<PyAny> {
    /// The object's own repr, cut to a readable length.
    fn py_repr(&self, py: Python<'_>) -> String {
        let s = self
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "<?>".to_owned());
        if s.chars().count() > 80 {
            let cut: String = s.chars().take(77).collect();
            format!("{cut}...")
        } else {
            s
        }
    }
}

impl PyRepr for Vec<String> {
    fn py_repr(&self, _py: Python<'_>) -> String {
        let items: Vec<String> = self.iter().map(|s| pystr(s)).collect();
        format!("[{}]", items.join(", "))
    }
}

impl PyRepr for BTreeMap<String, i64> {
    fn py_repr(&self, _py: Python<'_>) -> String {
        let items: Vec<String> = self
            .iter()
            .map(|(k, v)| format!("{}: {v}", pystr(k)))
            .collect();
        format!("{{{}}}", items.join(", "))
    }
}

impl<T: PyRepr> PyRepr for Option<T> {
    fn py_repr(&self, py: Python<'_>) -> String {
        self.as_ref()
            .map_or_else(|| "None".to_owned(), |v| v.py_repr(py))
    }
}

/// A Python-style string literal ('text').
pub(crate) fn pystr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Declares result classes: `Name from common::Record, repr [fields] { fields }`.
///
/// Each class is `#[pyclass(frozen, get_all)]` with the listed fields, built
/// from the record's fields of the same names ([`IntoField`]), and usable as a
/// nested field of another class (`Py<Name>`, `Vec<Py<Name>>`). `repr [a, b]`
/// gives `Name(a=..., b=...)`; `repr custom` calls the class's own
/// `fn repr(&self, py) -> String`.
macro_rules! py_records {
    ($(
        $(#[$meta:meta])*
        $name:ident from $rec:path, repr $repr:tt {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)?
        }
    )*) => {$(
        $(#[$meta])*
        #[pyo3::pyclass(frozen, get_all, module = "memstrata")]
        #[derive(Debug)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::records::PyRecord for $name {
            type Record = $rec;
            fn from_record(
                py: pyo3::Python<'_>,
                r: $rec,
            ) -> pyo3::PyResult<Self> {
                Ok($name {
                    $( $field: $crate::records::IntoField::into_field(r.$field, py)?, )*
                })
            }
        }

        impl $crate::records::IntoField<pyo3::Py<$name>> for $rec {
            fn into_field(self, py: pyo3::Python<'_>) -> pyo3::PyResult<pyo3::Py<$name>> {
                pyo3::Py::new(py, <$name as $crate::records::PyRecord>::from_record(py, self)?)
            }
        }

        py_records!(@repr $name $repr);
    )*};

    (@repr $name:ident custom) => {
        #[pyo3::pymethods]
        impl $name {
            fn __repr__(&self, py: pyo3::Python<'_>) -> String {
                self.repr(py)
            }
        }
    };

    (@repr $name:ident [$($f:ident),* $(,)?]) => {
        #[pyo3::pymethods]
        impl $name {
            fn __repr__(&self, py: pyo3::Python<'_>) -> String {
                let fields: Vec<String> = vec![$(
                    format!(
                        "{}={}",
                        stringify!($f),
                        $crate::records::PyRepr::py_repr(&self.$f, py)
                    ),
                )*];
                format!("{}({})", stringify!($name), fields.join(", "))
            }
        }
    };
}

pub(crate) use py_records;
