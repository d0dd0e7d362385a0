//! Small helpers for the `__repr__`s of result objects.

use chrono::{DateTime, SecondsFormat, Utc};
use pyo3::prelude::*;

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

/// A Python-style list of strings.
pub(crate) fn pystrs(v: &[String]) -> String {
    format!(
        "[{}]",
        v.iter().map(|s| pystr(s)).collect::<Vec<_>>().join(", ")
    )
}

/// The Python repr of an object, cut to a readable length.
pub(crate) fn obj(py: Python<'_>, o: &Py<PyAny>) -> String {
    let s = o
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

/// A timestamp as an ISO 8601 string literal.
pub(crate) fn dt(t: &DateTime<Utc>) -> String {
    format!("'{}'", t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

/// An optional timestamp (None when absent).
pub(crate) fn opt_dt(t: Option<&DateTime<Utc>>) -> String {
    t.map(dt).unwrap_or_else(|| "None".to_owned())
}

/// `True` / `False`.
pub(crate) fn bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}
