//! Audit trail of mutating calls: one JSON object per line in `<store>/audit.jsonl`.
//!
//! ```json
//! {"time":"2026-01-01T10:00:00.123Z","who":"ci-bot","transport":"http","tool":"memory_store","context":"proj-a","ok":true}
//! ```
//! `error` carries the error code when `ok` is false (refused calls are logged too).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// File name of the audit trail inside the store directory.
pub const AUDIT_FILE: &str = "audit.jsonl";

/// One audit record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When the call finished (RFC 3339 UTC).
    pub time: String,
    /// Key id of the caller (`local` on stdio, `anonymous` without keys).
    pub who: String,
    /// `stdio`, `http`, `ws`, `execute` or `in-process`.
    pub transport: String,
    /// Tool name.
    pub tool: String,
    /// Context written (or `*` for engine-wide data).
    pub context: String,
    /// Whether the call succeeded.
    pub ok: bool,
    /// Error code when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Append-only audit log.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
}

impl AuditLog {
    /// Open (create) `<store_dir>/audit.jsonl` for appending.
    pub fn open(store_dir: &Path) -> std::io::Result<AuditLog> {
        AuditLog::open_file(&store_dir.join(AUDIT_FILE))
    }

    /// Open (create) the audit file `path` for appending (`--audit-file`).
    pub fn open_file(path: &Path) -> std::io::Result<AuditLog> {
        let path = path.to_owned();
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(AuditLog {
            path,
            file: Mutex::new(file),
        })
    }

    /// The file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record (errors are logged, never fatal to the call).
    pub fn record(
        &self,
        who: &str,
        transport: &str,
        tool: &str,
        context: &str,
        error: Option<&str>,
    ) {
        let entry = AuditEntry {
            time: now(Utc::now()),
            who: who.to_owned(),
            transport: transport.to_owned(),
            tool: tool.to_owned(),
            context: context.to_owned(),
            ok: error.is_none(),
            error: error.map(str::to_owned),
        };
        let Ok(mut line) = serde_json::to_vec(&entry) else {
            return;
        };
        line.push(b'\n');
        let mut f = self.file.lock();
        if let Err(e) = f.write_all(&line) {
            tracing::warn!(path = %self.path.display(), "cannot append to the audit log: {e}");
        }
    }
}

fn now(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The last `n` records of `<store_dir>/audit.jsonl` (oldest first); empty when there is no file.
pub fn tail(store_dir: &Path, n: usize) -> std::io::Result<Vec<AuditEntry>> {
    tail_file(&store_dir.join(AUDIT_FILE), n)
}

/// The last `n` records of the audit file `path` (oldest first); empty when there is no file.
pub fn tail_file(path: &Path, n: usize) -> std::io::Result<Vec<AuditEntry>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut ring = std::collections::VecDeque::with_capacity(n.min(4096));
    for line in BufReader::new(file).lines() {
        let line = line?;
        if let Ok(e) = serde_json::from_str::<AuditEntry>(&line) {
            if ring.len() == n {
                ring.pop_front();
            }
            if n > 0 {
                ring.push_back(e);
            }
        }
    }
    Ok(ring.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path()).unwrap();
        for i in 0..5 {
            log.record(
                "bot",
                "http",
                &format!("tool{i}"),
                "ctx",
                if i == 4 { Some("FORBIDDEN") } else { None },
            );
        }
        let t = tail(dir.path(), 2).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].tool, "tool3");
        assert!(t[0].ok);
        assert_eq!(t[1].error.as_deref(), Some("FORBIDDEN"));
        assert!(!t[1].ok);
        assert!(tail(&dir.path().join("nope"), 3).unwrap().is_empty());
    }
}
