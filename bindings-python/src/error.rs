//! The one choke point between `memstrata::Error` (and panics) and Python exceptions.
//!
//! Every call into the core goes through [`run`]: it releases the GIL, catches
//! panics, and maps the core error to the matching exception class.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::exceptions::{PyException, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

pyo3::create_exception!(
    memstrata,
    MemstrataError,
    PyException,
    "Base class of every error raised by memstrata. `code` is the stable machine-readable code (\"NOT_FOUND\", \"INVALID_INPUT\", ...)."
);
pyo3::create_exception!(
    memstrata,
    NotFoundError,
    MemstrataError,
    "Something that must exist does not (update, session_restore, resume, punch_out, ...)."
);
pyo3::create_exception!(
    memstrata,
    LimitExceededError,
    MemstrataError,
    "A configured limit was exceeded (value size, number of tags, results per call, step limit...). `field` names the argument."
);
pyo3::create_exception!(
    memstrata,
    StoreLockedError,
    MemstrataError,
    "Another process holds the store."
);
pyo3::create_exception!(
    memstrata,
    CorruptedError,
    MemstrataError,
    "Stored data could not be decoded, or the store was written by a newer format."
);
pyo3::create_exception!(
    memstrata,
    StorageError,
    MemstrataError,
    "The sled storage layer failed."
);
pyo3::create_exception!(
    memstrata,
    MemstrataIndexError,
    MemstrataError,
    "The tantivy full-text index failed (named so it does not shadow the builtin IndexError)."
);
pyo3::create_exception!(
    memstrata,
    ProcedureError,
    MemstrataError,
    "A procedure could not run."
);
pyo3::create_exception!(
    memstrata,
    ConflictError,
    MemstrataError,
    "A conflicting state (e.g. resuming a run that is not awaiting an action, a task already closed)."
);

/// `InvalidInputError(MemstrataError, ValueError)` and `IoError(MemstrataError, OSError)`
/// have two bases, which `create_exception!` cannot express: they are made with `type()`.
static INVALID_INPUT: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static IO_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn two_base_type<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
    second: Bound<'py, PyType>,
    doc: &str,
) -> Bound<'py, PyType> {
    cell.get_or_init(py, || {
        let make = || -> PyResult<Py<PyType>> {
            let bases = PyTuple::new(py, [py.get_type::<MemstrataError>(), second])?;
            let dict = PyDict::new(py);
            dict.set_item("__module__", "memstrata")?;
            dict.set_item("__doc__", doc)?;
            let ty = py.get_type::<PyType>().call1((name, bases, dict))?;
            Ok(ty.cast_into::<PyType>()?.unbind())
        };
        // Building a class from two builtin exception bases cannot fail; if it ever did,
        // fall back to the base class rather than panicking.
        make().unwrap_or_else(|_| py.get_type::<MemstrataError>().unbind())
    })
    .bind(py)
    .clone()
}

/// `memstrata.InvalidInputError`: a caller-supplied value is invalid; also a `ValueError`.
pub(crate) fn invalid_input_type(py: Python<'_>) -> Bound<'_, PyType> {
    two_base_type(
        py,
        &INVALID_INPUT,
        "InvalidInputError",
        py.get_type::<PyValueError>(),
        "A caller-supplied value is invalid; `field` names the offending argument. Also a ValueError.",
    )
}

/// `memstrata.IoError`: an operating-system I/O error; also an `OSError`.
pub(crate) fn io_error_type(py: Python<'_>) -> Bound<'_, PyType> {
    two_base_type(
        py,
        &IO_ERROR,
        "IoError",
        py.get_type::<PyOSError>(),
        "An operating-system I/O error. Also an OSError (errno is set when the OS gave one).",
    )
}

/// Register the exception classes on the module and give each its class-level `code`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let classes: [(&str, Bound<'_, PyType>, Option<&str>); 11] = [
        ("MemstrataError", py.get_type::<MemstrataError>(), None),
        (
            "NotFoundError",
            py.get_type::<NotFoundError>(),
            Some("NOT_FOUND"),
        ),
        (
            "InvalidInputError",
            invalid_input_type(py),
            Some("INVALID_INPUT"),
        ),
        (
            "LimitExceededError",
            py.get_type::<LimitExceededError>(),
            Some("LIMIT_EXCEEDED"),
        ),
        (
            "StoreLockedError",
            py.get_type::<StoreLockedError>(),
            Some("STORE_LOCKED"),
        ),
        (
            "CorruptedError",
            py.get_type::<CorruptedError>(),
            Some("CORRUPTED"),
        ),
        ("IoError", io_error_type(py), Some("IO")),
        (
            "StorageError",
            py.get_type::<StorageError>(),
            Some("STORAGE"),
        ),
        (
            "MemstrataIndexError",
            py.get_type::<MemstrataIndexError>(),
            Some("INDEX"),
        ),
        (
            "ProcedureError",
            py.get_type::<ProcedureError>(),
            Some("PROCEDURE"),
        ),
        (
            "ConflictError",
            py.get_type::<ConflictError>(),
            Some("CONFLICT"),
        ),
    ];
    for (name, ty, code) in classes {
        ty.setattr("code", code)?;
        // `field` is set on instances of InvalidInputError / LimitExceededError; None elsewhere.
        ty.setattr("field", py.None())?;
        m.add(name, ty)?;
    }
    Ok(())
}

/// Map a core error to its Python exception (the one choke point).
pub(crate) fn to_py(err: memstrata::Error) -> PyErr {
    Python::attach(|py| {
        let msg = err.to_string();
        let code = err.code();
        let mut field = None;
        let pyerr = match &err {
            memstrata::Error::NotFound { .. } => NotFoundError::new_err(msg),
            memstrata::Error::InvalidInput { field: f, .. } => {
                field = Some(f.clone());
                PyErr::from_type(invalid_input_type(py), msg)
            }
            memstrata::Error::LimitExceeded { field: f, .. } => {
                field = Some(f.clone());
                LimitExceededError::new_err(msg)
            }
            memstrata::Error::StoreLocked { .. } => StoreLockedError::new_err(msg),
            memstrata::Error::Corrupted(_) => CorruptedError::new_err(msg),
            memstrata::Error::Io(io) => match io.raw_os_error() {
                Some(errno) => PyErr::from_type(io_error_type(py), (errno, msg)),
                None => PyErr::from_type(io_error_type(py), msg),
            },
            memstrata::Error::Storage(_) => StorageError::new_err(msg),
            memstrata::Error::Index(_) => MemstrataIndexError::new_err(msg),
            memstrata::Error::Procedure(_) => ProcedureError::new_err(msg),
            memstrata::Error::Conflict(_) => ConflictError::new_err(msg),
            // `memstrata::Error` is non-exhaustive: a kind added later is still a MemstrataError.
            _ => MemstrataError::new_err(msg),
        };
        let value = pyerr.value(py);
        // Attribute assignment on a fresh exception instance cannot fail in practice;
        // a failure would only lose the extra attributes, never the exception.
        let _ = value.setattr("code", code);
        if let Some(f) = field {
            let _ = value.setattr("field", f);
        }
        pyerr
    })
}

/// An `InvalidInputError` raised by the binding's own argument conversion.
pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> PyErr {
    to_py(memstrata::Error::invalid(field, reason))
}

/// The error every call on a closed `Memory` raises.
pub(crate) fn closed() -> PyErr {
    Python::attach(|py| {
        let e = MemstrataError::new_err(
            "this Memory is closed; open a new memstrata.Memory to continue",
        );
        let _ = e.value(py).setattr("code", "CLOSED");
        e
    })
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

/// A panic caught at the boundary: a `MemstrataError` with code `"INTERNAL"`, never a `PanicException`.
fn internal(payload: &(dyn std::any::Any + Send)) -> PyErr {
    Python::attach(|py| {
        let e = MemstrataError::new_err(format!(
            "internal error in memstrata (a bug, please report it): {}",
            panic_message(payload)
        ));
        let _ = e.value(py).setattr("code", "INTERNAL");
        e
    })
}

/// Run a core call with the GIL released, catching panics and mapping errors.
///
/// This is the only way the binding calls into the core.
pub(crate) fn run<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: Send + FnOnce() -> memstrata::Result<T>,
    T: Send,
{
    match py.detach(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_py(e)),
        Err(payload) => Err(internal(payload.as_ref())),
    }
}

/// Test hook: runs a panicking closure through [`run`] so the suite can check that a
/// panic surfaces as `MemstrataError(code="INTERNAL")` and the interpreter survives.
#[pyfunction]
pub(crate) fn _panic_for_tests(py: Python<'_>) -> PyResult<()> {
    run(py, || -> memstrata::Result<()> {
        panic!("deliberate panic from memstrata._memstrata._panic_for_tests")
    })
}

/// An I/O error on a file the binding opened itself (export / import): an `IoError`
/// (an `OSError`) with `errno`, the message and `filename` set.
pub(crate) fn io_error_at(e: std::io::Error, path: &std::path::Path) -> PyErr {
    Python::attach(|py| {
        let shown = path.display().to_string();
        let err = match e.raw_os_error() {
            Some(errno) => {
                let text = e.to_string();
                let strerror = text.split(" (os error").next().unwrap_or(&text).to_owned();
                PyErr::from_type(io_error_type(py), (errno, strerror, shown))
            }
            None => PyErr::from_type(io_error_type(py), format!("i/o error on {shown}: {e}")),
        };
        let _ = err.value(py).setattr("code", "IO");
        err
    })
}
