//! The one choke point between the engine's errors (and panics) and Python exceptions.
//!
//! Every call into the core goes through [`run`]: it releases the GIL and runs
//! the call through `memstrata_bindings_common::guard_binding` (panics become
//! `INTERNAL`); [`to_py`] turns the resulting `BindingError` into the exception
//! class of its `ErrorCode`.

use memstrata_bindings_common::{BindingError, ErrorCode, guard_binding};
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
    "The storage engine failed."
);
pyo3::create_exception!(
    memstrata,
    MemstrataIndexError,
    MemstrataError,
    "The full-text index failed (named so it does not shadow the builtin IndexError)."
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
pyo3::create_exception!(
    memstrata,
    ForkedError,
    MemstrataError,
    "This Memory was opened in another process and carried across fork() (multiprocessing's fork start method, a prefork server, os.fork()); nothing was read or written. Open the store in each process after it forks, or share one store through PostgreSQL or memstrata-mcp."
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

/// The exception class of `code` and its name in the module; `None` for the
/// codes raised as plain `MemstrataError` (`CLOSED`, `INTERNAL`).
fn class_of(py: Python<'_>, code: ErrorCode) -> Option<(&'static str, Bound<'_, PyType>)> {
    Some(match code {
        ErrorCode::NotFound => ("NotFoundError", py.get_type::<NotFoundError>()),
        ErrorCode::InvalidInput => ("InvalidInputError", invalid_input_type(py)),
        ErrorCode::LimitExceeded => ("LimitExceededError", py.get_type::<LimitExceededError>()),
        ErrorCode::StoreLocked => ("StoreLockedError", py.get_type::<StoreLockedError>()),
        ErrorCode::Corrupted => ("CorruptedError", py.get_type::<CorruptedError>()),
        ErrorCode::Io => ("IoError", io_error_type(py)),
        ErrorCode::Storage => ("StorageError", py.get_type::<StorageError>()),
        ErrorCode::Index => ("MemstrataIndexError", py.get_type::<MemstrataIndexError>()),
        ErrorCode::Procedure => ("ProcedureError", py.get_type::<ProcedureError>()),
        ErrorCode::Conflict => ("ConflictError", py.get_type::<ConflictError>()),
        ErrorCode::Forked => ("ForkedError", py.get_type::<ForkedError>()),
        ErrorCode::Closed | ErrorCode::Internal => return None,
    })
}

/// Register the exception classes on the module and give each its class-level `code`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let base = py.get_type::<MemstrataError>();
    let classes = ErrorCode::ALL
        .into_iter()
        .filter_map(|code| class_of(py, code).map(|(name, ty)| (name, ty, Some(code.as_str()))));
    for (name, ty, code) in std::iter::once(("MemstrataError", base, None)).chain(classes) {
        ty.setattr("code", code)?;
        // `field` is set on instances of InvalidInputError / LimitExceededError; None elsewhere.
        ty.setattr("field", py.None())?;
        m.add(name, ty)?;
    }
    Ok(())
}

/// The OS text of `errno` (`No such file or directory`), as `OSError.strerror`.
fn strerror(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    text.split(" (os error").next().unwrap_or(&text).to_owned()
}

/// Map an engine error to its Python exception (the one choke point). The
/// instance carries `code` and, where there is one, `field`; an `IoError` is an
/// `OSError` with `errno` (and `filename` for a file the caller named).
pub(crate) fn to_py(err: impl Into<BindingError>) -> PyErr {
    let e: BindingError = err.into();
    Python::attach(|py| {
        let ty = class_of(py, e.code).map_or_else(|| py.get_type::<MemstrataError>(), |(_, t)| t);
        let pyerr = match (e.code, e.os_error, &e.path) {
            (ErrorCode::Io, Some(errno), Some(path)) => {
                PyErr::from_type(ty, (errno, strerror(errno), path.display().to_string()))
            }
            (ErrorCode::Io, Some(errno), None) => PyErr::from_type(ty, (errno, e.message.clone())),
            _ => PyErr::from_type(ty, e.message.clone()),
        };
        let value = pyerr.value(py);
        // Attribute assignment on a fresh exception instance cannot fail in practice;
        // a failure would only lose the extra attributes, never the exception.
        let _ = value.setattr("code", e.code.as_str());
        if let Some(f) = &e.field {
            let _ = value.setattr("field", f);
        }
        pyerr
    })
}

/// An `InvalidInputError` raised by the binding's own argument conversion.
pub(crate) fn invalid(field: &str, reason: impl Into<String>) -> PyErr {
    to_py(BindingError::invalid(field, reason))
}

/// Run an engine call with the GIL released, catching panics and mapping errors.
///
/// This is the only way the binding calls into the core.
pub(crate) fn run<T, E, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: Send + FnOnce() -> Result<T, E>,
    E: Into<BindingError>,
    T: Send,
{
    py.detach(|| guard_binding(|| f().map_err(Into::into)))
        .map_err(to_py)
}

/// Test hook: runs a panicking closure through [`run`] so the suite can check that a
/// panic surfaces as `MemstrataError(code="INTERNAL")` and the interpreter survives.
#[pyfunction]
pub(crate) fn _panic_for_tests(py: Python<'_>) -> PyResult<()> {
    run(py, || -> Result<(), BindingError> {
        panic!("deliberate panic from memstrata._memstrata._panic_for_tests")
    })
}
