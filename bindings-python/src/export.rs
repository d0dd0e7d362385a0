//! `export` / `import_` / `import_knowledge_graph`: the JSON Lines format, to and from files.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use pyo3::prelude::*;

use crate::error::{io_error_at, run};

fn open_read(path: &Path) -> PyResult<BufReader<File>> {
    File::open(path).map(BufReader::new).map_err(|e| io_error_at(e, path))
}

pub(crate) fn export(py: Python<'_>, mem: &memstrata::Memory, path: PathBuf) -> PyResult<ExportStats> {
    let file = File::create(&path).map_err(|e| io_error_at(e, &path))?;
    let stats = run(py, move || {
        let mut w = BufWriter::new(file);
        let stats = mem.export(&mut w)?;
        w.flush()?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(stats)
    })?;
    Ok(ExportStats {
        records: stats.records,
        counts: stats.counts,
    })
}

pub(crate) fn import(py: Python<'_>, mem: &memstrata::Memory, path: PathBuf) -> PyResult<ImportStats> {
    let mut r = open_read(&path)?;
    let stats = run(py, || mem.import(&mut r))?;
    Ok(ImportStats {
        records: stats.records,
        counts: stats.counts,
    })
}

pub(crate) fn import_knowledge_graph(py: Python<'_>, mem: &memstrata::Memory, path: PathBuf) -> PyResult<ImportStats> {
    let mut r = open_read(&path)?;
    let stats = run(py, || mem.import_knowledge_graph(&mut r))?;
    Ok(ImportStats {
        records: stats.records,
        counts: stats.counts,
    })
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
                format!(concat!(stringify!($name), "(records={}, counts={{{}}})"), self.records, counts.join(", "))
            }
        }
    };
}

stats_class!(ExportStats, "Result of `export`.", "Records written after the header.");
stats_class!(
    ImportStats,
    "Result of `import_` and `import_knowledge_graph`.",
    "Records applied."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ExportStats>()?;
    m.add_class::<ImportStats>()
}
