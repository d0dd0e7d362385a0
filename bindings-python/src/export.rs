//! `export` / `import_` / `import_knowledge_graph`: the JSON Lines format, to and
//! from files, through `memstrata_bindings_common::files` (the export is fsynced;
//! an I/O error names the file). The files are opened without the GIL: opening
//! can block (a FIFO, a network mount).

use std::collections::BTreeMap;
use std::path::PathBuf;

use memstrata_bindings_common::{self as common, files};
use pyo3::prelude::*;

use crate::error::run;
use crate::records::{PyRecord, py_records};

pub(crate) fn export(
    py: Python<'_>,
    mem: &memstrata::Memory,
    path: PathBuf,
) -> PyResult<ExportStats> {
    let stats = run(py, || files::export_to_path(mem, &path))?;
    ExportStats::from_record(py, stats)
}

pub(crate) fn import(
    py: Python<'_>,
    mem: &memstrata::Memory,
    path: PathBuf,
) -> PyResult<ImportStats> {
    let stats = run(py, || files::import_from_path(mem, &path, &|_| {}))?;
    ImportStats::from_record(py, stats)
}

pub(crate) fn import_knowledge_graph(
    py: Python<'_>,
    mem: &memstrata::Memory,
    path: PathBuf,
) -> PyResult<ImportStats> {
    let stats = run(py, || files::import_knowledge_graph_from_path(mem, &path))?;
    ImportStats::from_record(py, stats)
}

py_records! {
    /// Result of `export`.
    ExportStats from common::ExportStats, repr [records, counts] {
        /// Records written after the header.
        records: i64,
        /// Records per type (e.g. "episode", "knowledge", "session_version").
        counts: BTreeMap<String, i64>,
    }

    /// Result of `import_` and `import_knowledge_graph`.
    ImportStats from common::ImportStats, repr [records, counts] {
        /// Records applied.
        records: i64,
        /// Records per type (e.g. "episode", "knowledge", "session_version").
        counts: BTreeMap<String, i64>,
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ExportStats>()?;
    m.add_class::<ImportStats>()
}
