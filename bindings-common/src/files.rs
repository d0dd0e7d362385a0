//! Export to and import from a file the caller names, the same way in every
//! binding and in the MCP admin commands: the export is fsynced before it
//! returns (a backup that is not on disk is not a backup), and an I/O error
//! names the file.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use memstrata::{Memory, admin::Progress};

use crate::error::{BindingError, guard_binding};
use crate::records::{ExportStats, ImportStats};

/// Write every layer of the store to `path` (JSON Lines, created or truncated),
/// then flush and fsync it (a pipe or a device is flushed but not fsynced).
pub fn export_to_path(mem: &Memory, path: &Path) -> Result<ExportStats, BindingError> {
    guard_binding(|| {
        let file = File::create(path).map_err(|e| BindingError::io_at(&e, path))?;
        let mut w = BufWriter::new(file);
        let stats = mem.admin().export(&mut w)?;
        let at = |e: std::io::Error| BindingError::io_at(&e, path);
        w.flush().map_err(at)?;
        let file = w.into_inner().map_err(|e| at(e.into_error()))?;
        if file.metadata().map_err(at)?.is_file() {
            file.sync_all().map_err(at)?;
        }
        Ok(stats.into())
    })
}

/// Import an export from `path`, reporting progress to `progress`.
pub fn import_from_path(
    mem: &Memory,
    path: &Path,
    progress: &dyn Fn(Progress),
) -> Result<ImportStats, BindingError> {
    guard_binding(|| {
        let file = File::open(path).map_err(|e| BindingError::io_at(&e, path))?;
        Ok(mem
            .admin()
            .import_with_progress(&mut BufReader::new(file), progress)?
            .into())
    })
}

/// Import the MCP reference memory server's knowledge graph (`memory.jsonl`) from `path`.
pub fn import_knowledge_graph_from_path(
    mem: &Memory,
    path: &Path,
) -> Result<ImportStats, BindingError> {
    guard_binding(|| {
        let file = File::open(path).map_err(|e| BindingError::io_at(&e, path))?;
        Ok(mem
            .admin()
            .import_knowledge_graph(&mut BufReader::new(file))?
            .into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn export_then_import_round_trips_and_io_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = Memory::temporary().unwrap();
        a.semantic()
            .store("user:alice", serde_json::json!({"role": "admin"}))
            .unwrap();
        let file = dir.path().join("backup.jsonl");
        let out = export_to_path(&a, &file).unwrap();
        assert!(out.records >= 1);
        let b = Memory::temporary().unwrap();
        let back = import_from_path(&b, &file, &|_| {}).unwrap();
        assert_eq!(back.records, out.records);
        assert_eq!(
            b.semantic().retrieve("user:alice").unwrap(),
            Some(serde_json::json!({"role": "admin"}))
        );
        let missing = dir.path().join("nope.jsonl");
        let e = import_from_path(&b, &missing, &|_| {}).unwrap_err();
        assert_eq!(e.code, ErrorCode::Io);
        assert!(e.message.contains("nope.jsonl"), "{}", e.message);
        assert_eq!(e.path.as_deref(), Some(missing.as_path()));
    }
}
