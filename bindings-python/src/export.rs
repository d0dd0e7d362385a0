//! `export` / `import_` / `import_knowledge_graph`: the JSON Lines format, to and from files.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;

use pyo3::prelude::*;

use crate::error::{io_error_at, run};

// Files are opened inside `run`, without the GIL: opening can block (a FIFO, a
// network mount). An open failure comes back as `Ok(Err(io))` so the exception
// can name the file.

pub(crate) fn export(
    py: Python<'_>,
    mem: &memstrata::Memory,
    path: PathBuf,
) -> PyResult<ExportStats> {
    let r = run(py, || {
        let file = match File::create(&path) {
            Ok(f) => f,
            Err(e) => return Ok(Err(e)),
        };
        let mut w = BufWriter::new(file);
        let stats = mem.export(&mut w)?;
        w.flush()?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        // Make a backup file durable; a pipe or a device cannot be fsynced.
        if file.metadata()?.is_file() {
            file.sync_all()?;
        }
        Ok(Ok(stats))
    })?;
    let stats = r.map_err(|e| io_error_at(e, &path))?;
    Ok(ExportStats {
        records: stats.records,
        counts: stats.counts,
    })
}

fn import_with(
    py: Python<'_>,
    path: PathBuf,
    f: impl Send + FnOnce(&mut BufReader<File>) -> memstrata::Result<memstrata::ImportStats>,
) -> PyResult<ImportStats> {
    let r = run(py, || match File::open(&path) {
        Ok(file) => f(&mut BufReader::new(file)).map(Ok),
        Err(e) => Ok(Err(e)),
    })?;
    let stats = r.map_err(|e| io_error_at(e, &path))?;
    Ok(ImportStats {
        records: stats.records,
        counts: stats.counts,
    })
}

pub(crate) fn import(
    py: Python<'_>,
    mem: &memstrata::Memory,
    path: PathBuf,
) -> PyResult<ImportStats> {
    import_with(py, path, |r| mem.import(r))
}

pub(crate) fn import_knowledge_graph(
    py: Python<'_>,
    mem: &memstrata::Memory,
    path: PathBuf,
) -> PyResult<ImportStats> {
    import_with(py, path, |r| mem.import_knowledge_graph(r))
}

macro_rules! stats_class {
    ($name:ident, $doc:literal, $records:literal) => {
        #[doc = $doc]
        #[pyclass(frozen, get_all, module = "memstrata")]
        #[derive(Debug)]
        pub struct $name {
            #[doc = $records]
            pub records: u64,
            /// Records per type (e.g. "episode", "knowledge", "session_version").
            pub counts: BTreeMap<String, u64>,
        }

        #[pymethods]
        impl $name {
            fn __repr__(&self) -> String {
                let counts: Vec<String> = self
                    .counts
                    .iter()
                    .map(|(k, v)| format!("{}: {v}", crate::repr::pystr(k)))
                    .collect();
                format!(
                    concat!(stringify!($name), "(records={}, counts={{{}}})"),
                    self.records,
                    counts.join(", ")
                )
            }
        }
    };
}

stats_class!(
    ExportStats,
    "Result of `export`.",
    "Records written after the header."
);
stats_class!(
    ImportStats,
    "Result of `import_` and `import_knowledge_graph`.",
    "Records applied."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ExportStats>()?;
    m.add_class::<ImportStats>()
}
