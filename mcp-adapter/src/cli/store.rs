//! The store a command works on: where it is (`--store`), opening it with the global
//! flags, and where its audit trail goes.

use std::path::PathBuf;

use memstrata::{Durability, Memory};

use super::error::{CliError, CliResult};
use super::{Cli, runtime};
use crate::backend::store::StoreLocation;
use crate::security::audit;

fn default_store() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("memstrata")
        .join("default.mem")
}

/// `--store` (or `MEMSTRATA_STORE`, or the platform default) as a location.
pub(super) fn location(cli: &Cli) -> CliResult<StoreLocation> {
    crate::backend::store::parse(&cli.store.clone().unwrap_or_else(default_store))
        .map_err(CliError::Config)
}

/// The admin commands that read a store refuse to create an empty one by accident
/// (a directory without a database, or a PostgreSQL schema that does not exist).
pub(super) fn require_existing(cli: &Cli) -> CliResult<()> {
    match location(cli)? {
        StoreLocation::Dir(path) if path.join("db").exists() => Ok(()),
        StoreLocation::Dir(path) => Err(CliError::Store(format!(
            "no store at {} (pass --store or set MEMSTRATA_STORE)",
            path.display()
        ))),
        StoreLocation::Postgres(url) => {
            if runtime()?
                .block_on(crate::backend::pgnotify::schema_exists(&url))
                .map_err(CliError::Store)?
            {
                Ok(())
            } else {
                Err(CliError::Store(format!(
                    "no store at {url}: the database has no schema \"{}\" (check the URL's `schema=`)",
                    url.schema()
                )))
            }
        }
    }
}

/// Where the audit trail goes: `--audit-file`, else `<store>/audit.jsonl` for a store
/// directory; a PostgreSQL store has no directory, so without `--audit-file` it has none.
pub(super) fn audit_file(cli: &Cli) -> CliResult<Option<PathBuf>> {
    if cli.no_audit {
        return Ok(None);
    }
    if let Some(f) = &cli.audit_file {
        return Ok(Some(f.clone()));
    }
    Ok(match location(cli)? {
        StoreLocation::Dir(p) => Some(
            std::fs::canonicalize(&p)
                .unwrap_or(p)
                .join(audit::AUDIT_FILE),
        ),
        StoreLocation::Postgres(_) => None,
    })
}

/// The audit log a server appends to (see [`audit_file`]), logging where it goes.
pub(super) fn open_audit(cli: &Cli) -> CliResult<Option<audit::AuditLog>> {
    match audit_file(cli)? {
        Some(f) => {
            let log = audit::AuditLog::open_file(&f).map_err(|e| {
                CliError::file(format!("cannot open the audit file {}", f.display()), e)
            })?;
            tracing::info!(file = %f.display(), "audit trail");
            Ok(Some(log))
        }
        None if cli.no_audit => Ok(None),
        None => {
            tracing::info!(
                "audit trail off: a postgres:// store has no directory for audit.jsonl; \
                 pass --audit-file FILE (one per instance) to keep one"
            );
            Ok(None)
        }
    }
}

/// The key in `file`, named by `flag` in errors. Neither the contents nor any
/// part of the key is ever printed.
pub(super) fn read_key_file(
    flag: &str,
    file: &std::path::Path,
) -> CliResult<memstrata::EncryptionKey> {
    let contents = std::fs::read(file)
        .map_err(|e| CliError::file(format!("cannot read {flag} {}", file.display()), e))?;
    memstrata::EncryptionKey::from_key_file_contents(&contents)
        .map_err(|e| CliError::Config(format!("{flag} {}: {e}", file.display())))
}

/// Opens the store with the global flags (durability, memory budgets, encryption key,
/// workspace roots, embeddings endpoint).
pub(super) fn open(cli: &Cli) -> CliResult<Memory> {
    let location = location(cli)?;
    let path = location.open_path();
    let durability: Durability = cli.durability.parse()?;
    let mut b = Memory::builder().path(&path).durability(durability);
    // The preset first: the budget flags override it.
    if cli.low_memory {
        b = b.low_memory();
    }
    if let Some(n) = cli.episode_cache_bytes {
        b = b.episode_cache_bytes(n);
    }
    if let Some(n) = cli.short_term_cache_bytes {
        b = b.short_term_cache_bytes(n);
    }
    if let Some(n) = cli.index_cache_bytes {
        b = b.index_cache_bytes(n);
    }
    if let Some(d) = cli.release_memory_interval {
        b = b.release_memory_interval(d);
    }
    if let Some(file) = &cli.encryption_key_file {
        b = b.encryption_key(read_key_file("--encryption-key-file", file)?);
    }
    for r in &cli.workspace_roots {
        b = b.workspace_root(r);
    }
    // Without --workspace-root, llm_punch_out(detect_files=true) scans the directory the
    // server was started in (the core itself refuses detection without a root).
    if cli.workspace_roots.is_empty()
        && let Ok(cwd) = std::env::current_dir()
    {
        b = b.workspace_root(cwd);
    }
    let mem = b.open().map_err(|e| match e {
        memstrata::Error::StoreLocked { .. } => CliError::Store(format!(
            "{e} (another memstrata-mcp or program has it open; stop it or use another --store)"
        )),
        other => CliError::Store(format!("cannot open store {}: {other}", location.masked())),
    })?;
    if let (Some(url), Some(model)) = (&cli.embeddings_url, &cli.embeddings_model) {
        let e =
            crate::backend::embeddings::HttpEmbedder::new(url, model).map_err(CliError::Config)?;
        tracing::info!(url = %url, model = %model, "embedding with an OpenAI-compatible endpoint");
        mem.set_embedder(Some(std::sync::Arc::new(e)));
    }
    Ok(mem)
}
