//! Python binding of Memstrata (`import memstrata`).
//!
//! Glue only: one file per core module, argument conversions in `convert.rs`,
//! the result-class macro in `records.rs`, and the single error/panic/GIL choke
//! point in `error.rs`. Behaviour lives in the `memstrata` crate; what every
//! binding shares (result records, option records and defaults, error codes,
//! the closable handle, host-action adapters, export/import to a path) in
//! `memstrata-bindings-common`.

mod clock;
mod contexts;
mod convert;
mod embedder;
mod episodic;
mod error;
mod export;
mod memory;
mod procedural;
mod records;
mod semantic;
mod sessions;
mod short_term;
mod status;
mod timesheet;
mod working;

use pyo3::prelude::*;

/// The compiled half of the `memstrata` package; import `memstrata` instead.
#[pymodule]
fn _memstrata(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("DEFAULT_CONTEXT", memstrata::DEFAULT_CONTEXT)?;
    m.add("FORMAT_VERSION", memstrata::FORMAT_VERSION)?;
    m.add(
        "EXPORT_FORMAT_VERSION",
        memstrata::admin::EXPORT_FORMAT_VERSION,
    )?;
    m.add(
        "MAX_COMPRESSION_LEVEL",
        memstrata::sessions::MAX_COMPRESSION_LEVEL,
    )?;
    m.add("SUMMARY_MAX_CHARS", memstrata::episodic::SUMMARY_MAX_CHARS)?;
    m.add(
        "ACTIVE_SESSIONS_LIMIT",
        memstrata::admin::ACTIVE_SESSIONS_LIMIT,
    )?;
    m.add(
        "BUILTIN_ACTIONS",
        pyo3::types::PyTuple::new(m.py(), memstrata::procedural::BUILTIN_ACTIONS)?,
    )?;
    error::register(m)?;
    m.add_function(wrap_pyfunction!(error::_panic_for_tests, m)?)?;
    m.add_class::<memory::Memory>()?;
    m.add_class::<memory::SwitchResult>()?;
    m.add_class::<clock::ManualClock>()?;
    m.add_class::<short_term::ShortTerm>()?;
    m.add_class::<short_term::ShortTermEntry>()?;
    m.add_class::<working::Working>()?;
    m.add_class::<working::WorkspaceItem>()?;
    m.add_class::<episodic::Episodic>()?;
    m.add_class::<episodic::Episode>()?;
    m.add_class::<episodic::EpisodeHit>()?;
    m.add_class::<episodic::Recorded>()?;
    m.add_class::<semantic::Semantic>()?;
    m.add_class::<semantic::Knowledge>()?;
    m.add_class::<semantic::KnowledgeVersion>()?;
    m.add_class::<semantic::KnowledgeHit>()?;
    procedural::register(m)?;
    sessions::register(m)?;
    contexts::register(m)?;
    timesheet::register(m)?;
    status::register(m)?;
    export::register(m)?;
    Ok(())
}
