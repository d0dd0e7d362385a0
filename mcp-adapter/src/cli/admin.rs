//! The store admin commands: `status`, `export`, `import`, `optimize`, `rekey`. Their output
//! goes to stdout (status, optimize's report, an export to `-`); progress and
//! summaries to stderr.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use memstrata_bindings_common::files::{
    export_to_path, import_from_path, import_knowledge_graph_from_path,
};
use memstrata_bindings_common::options::optimize_level;
use memstrata_bindings_common::{ExportStats, OptimizeReport};

use super::error::{CliError, CliResult};
use super::signals::Signals;
use super::{Cli, runtime, store};
use crate::ops::Level;
use crate::security::audit;

fn spinner(msg: &str) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(msg.to_owned());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

/// `status`: the store's health, counts and latest audit records, as text or JSON.
pub(super) fn status(cli: &Cli, json: bool, audit_n: usize) -> CliResult<()> {
    store::require_existing(cli)?;
    let location = store::location(cli)?;
    let (status, note) = match store::open(cli) {
        Ok(mem) => (Some(mem.admin().status(true, true)?), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let audit_path = store::audit_file(cli)?;
    let trail = match &audit_path {
        Some(f) => audit::tail_file(f, audit_n).map_err(|e| {
            CliError::file(format!("cannot read the audit file {}", f.display()), e)
        })?,
        None => Vec::new(),
    };
    let mut out = std::io::stdout().lock();
    if json {
        let v = serde_json::json!({
            "store": location.masked(),
            "status": status,
            "note": note,
            "audit_file": audit_path,
            "audit": trail,
        });
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        )?;
        return Ok(());
    }
    let _ = writeln!(out, "store: {}", location.masked());
    match &status {
        Some(s) => {
            let _ = writeln!(
                out,
                "status: {} (engine {}), sessions: {}",
                s.status,
                s.version,
                s.session_count.unwrap_or(0)
            );
            for a in s.active_sessions.iter().flatten() {
                let _ = writeln!(
                    out,
                    "  session {} {:?} (created {})",
                    a.session_id,
                    a.name,
                    a.created_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                );
            }
            for i in &s.issues {
                let _ = writeln!(out, "  issue: {i}");
            }
            if let Some(m) = &s.metrics {
                let c = &m.items;
                let _ = writeln!(
                    out,
                    "items: short-term {}, working {}, episodes {}, knowledge {}, procedures {}, runs {}, sessions {} ({} versions), tasks {}",
                    c.short_term,
                    c.working,
                    c.episodes,
                    c.semantic,
                    c.procedures,
                    c.runs,
                    c.sessions,
                    c.session_versions,
                    c.tasks
                );
                let _ = writeln!(
                    out,
                    "disk: {} bytes; index: {} documents in {} segments, {} pending",
                    m.bytes_on_disk, m.index.documents, m.index.segments, m.index.pending
                );
            }
        }
        None => {
            let _ = writeln!(out, "status: unavailable: {}", note.unwrap_or_default());
        }
    }
    match &audit_path {
        Some(f) => {
            let _ = writeln!(
                out,
                "audit trail ({} most recent mutating calls in {}):",
                trail.len(),
                f.display()
            );
        }
        None if cli.no_audit => {
            let _ = writeln!(out, "audit trail: off (--no-audit)");
        }
        None => {
            let _ = writeln!(
                out,
                "audit trail: none (a postgres:// store keeps none without --audit-file)"
            );
        }
    }
    for a in &trail {
        let _ = writeln!(
            out,
            "  {} {:<12} {:<9} {:<18} {:<16} {}",
            a.time,
            a.who,
            a.transport,
            a.tool,
            a.context,
            if a.ok {
                "ok".to_owned()
            } else {
                a.error.clone().unwrap_or_default()
            }
        );
    }
    Ok(())
}

/// Counts bytes written, for the spinner of an export to stdout.
struct Counting<W> {
    inner: W,
    pb: ProgressBar,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.pb.inc(n as u64);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// `export FILE`: to a file through the bindings' `export_to_path` (flushed and
/// fsynced, like every binding's export); `-` streams to stdout.
pub(super) fn export(cli: &Cli, file: &Path) -> CliResult<()> {
    store::require_existing(cli)?;
    let mem = store::open(cli)?;
    let stats = if file == Path::new("-") {
        let pb = ProgressBar::new_spinner();
        pb.set_style(
            ProgressStyle::with_template("{spinner} exporting {bytes} written {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        pb.enable_steady_tick(Duration::from_millis(120));
        let mut w = Counting {
            inner: BufWriter::new(std::io::stdout().lock()),
            pb: pb.clone(),
        };
        let s = mem.admin().export(&mut w)?;
        w.flush()?;
        pb.finish_and_clear();
        ExportStats::from(s)
    } else {
        let pb = spinner(&format!("exporting to {}", file.display()));
        let s = export_to_path(&mem, file)?;
        pb.finish_and_clear();
        s
    };
    eprintln!(
        "exported {} records: {}",
        stats.records,
        counts(&stats.counts)
    );
    Ok(())
}

/// `import FILE`: through the bindings' `import_from_path` (or
/// `import_knowledge_graph_from_path` into `context`).
pub(super) fn import(
    cli: &Cli,
    file: &Path,
    knowledge_graph: bool,
    context: &str,
) -> CliResult<()> {
    let rt = runtime()?;
    Signals::listen(&rt)?.defer(&rt, "import");
    let mem = store::open(cli)?;
    tracing::info!(file = %file.display(), "importing");
    let pb = spinner(&format!("importing {}", file.display()));
    let stats = if knowledge_graph {
        let ns = mem.namespace(context)?;
        import_knowledge_graph_from_path(&ns, file)
    } else {
        // Lines checked while the file is parsed and validated, then records written.
        let applying = std::cell::Cell::new(false);
        import_from_path(&mem, file, &|p| {
            if p.stage != "apply" {
                pb.set_message(format!(
                    "importing {}: {} lines checked",
                    file.display(),
                    p.done
                ));
                return;
            }
            if !applying.replace(true) {
                pb.set_style(
                    ProgressStyle::with_template("{bar:40} {pos}/{len} records written {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                pb.set_length(p.total.unwrap_or(0));
            }
            pb.set_position(p.done);
        })
    }?;
    pb.finish_and_clear();
    mem.flush()?;
    eprintln!(
        "imported {} records: {}",
        stats.records,
        counts(&stats.counts)
    );
    Ok(())
}

/// Records per kind as one JSON object, kinds sorted.
fn counts(c: &std::collections::HashMap<String, i64>) -> String {
    let sorted: std::collections::BTreeMap<_, _> = c.iter().collect();
    serde_json::to_string(&sorted).unwrap_or_default()
}

/// `optimize`: reclaim space; a signal lets it finish and flush (see [`Signals::defer`]).
pub(super) fn optimize(cli: &Cli, level: Level, session: Option<&str>) -> CliResult<()> {
    let rt = runtime()?;
    Signals::listen(&rt)?.defer(&rt, "optimization");
    store::require_existing(cli)?;
    let mem = store::open(cli)?;
    tracing::info!(level = level.as_str(), "optimizing");
    let lvl = optimize_level(Some(level.as_str()))?;
    let pb = spinner(&format!("optimizing ({})", lvl.as_str()));
    let report = mem.admin().optimize_with_progress(lvl, session, &|p| {
        let counts = match p.total {
            Some(t) => format!(" {}/{t}", p.done),
            None => String::new(),
        };
        pb.set_message(format!(
            "optimizing ({}): {}{counts}: {}",
            lvl.as_str(),
            p.stage,
            p.message
        ));
    })?;
    pb.finish_and_clear();
    // The binding layer's record: the wire shape of the `optimize` tool (with `success`).
    let report = OptimizeReport::from(report);
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    Ok(())
}

/// `rekey --new-key-file FILE`: rotate the key of a closed store directory in
/// place (`memstrata::admin::rekey_store`), from --encryption-key-file's key.
pub(super) fn rekey(cli: &Cli, new_key_file: &Path) -> CliResult<()> {
    let path = match store::location(cli)? {
        crate::backend::store::StoreLocation::Dir(p) => p,
        crate::backend::store::StoreLocation::Postgres(_) => {
            return Err(CliError::Config(
                "rekey works on a store directory; rotate a PostgreSQL store by export and import"
                    .into(),
            ));
        }
    };
    store::require_existing(cli)?;
    let Some(old_file) = &cli.encryption_key_file else {
        return Err(CliError::Config(
            "rekey needs the store's current key: pass --encryption-key-file".into(),
        ));
    };
    let old = store::read_key_file("--encryption-key-file", old_file)?;
    let new = store::read_key_file("--new-key-file", new_key_file)?;
    let pb = spinner(&format!("re-sealing {}", path.display()));
    let stats = memstrata::admin::rekey_store(&path, &old, &new, &|p| {
        pb.set_message(format!(
            "re-sealing {}: {} {}{}",
            path.display(),
            p.stage,
            p.done,
            p.total.map(|t| format!(" of {t}")).unwrap_or_default()
        ));
    })
    .map_err(|e| match e {
        memstrata::Error::StoreLocked { .. } => CliError::Store(format!(
            "{e} (close every program that has it open, then run rekey again)"
        )),
        other => CliError::Memory(other),
    })?;
    pb.finish_and_clear();
    eprintln!(
        "rekeyed {}: {} records and {} index files sealed under the new key{}; the old key is refused from now on",
        path.display(),
        stats.records,
        stats.index_files,
        if stats.resumed {
            " (an interrupted rotation finished)"
        } else {
            ""
        }
    );
    Ok(())
}
