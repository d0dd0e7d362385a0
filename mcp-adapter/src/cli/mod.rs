//! The `memstrata-mcp` command line: serving MCP (stdio, HTTP) and the store admin
//! commands (status, export, import, optimize).
//!
//! ```text
//! memstrata-mcp [--store PATH|URL] stdio
//! memstrata-mcp [--store PATH|URL] http --listen 127.0.0.1:8765 [--api-key KEY]... [--auth-config FILE]
//! memstrata-mcp [--store PATH|URL] status | export FILE | import FILE [--knowledge-graph] | optimize [--level L]
//! ```
//! The store is a directory (embedded sled) or `postgres://user:pass@host:port/db?schema=NAME`
//! (PostgreSQL: any number of instances share it; see docs/mcp.md).
//! stdout carries only the MCP protocol (stdio) or command output; logs go to stderr.
//! Every command that writes handles SIGINT and SIGTERM before it opens the store
//! (`signals.rs`).

mod admin;
mod error;
mod serve;
mod signals;
mod store;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::ops::Level;

pub use error::{CliError, CliResult};

/// Parses the command line, runs the command, and turns its outcome into the exit
/// status: 0 on success; 1 after printing `memstrata-mcp: <error>` on stderr.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memstrata-mcp: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one parsed command.
fn run(cli: &Cli) -> CliResult<()> {
    match &cli.command {
        Command::Stdio => serve::stdio(cli),
        Command::Http(a) => serve::http(cli, a),
        Command::Status { json, audit } => admin::status(cli, *json, *audit),
        Command::Export { file } => admin::export(cli, file),
        Command::Import {
            file,
            knowledge_graph,
            context,
        } => admin::import(cli, file, *knowledge_graph, context),
        Command::Optimize { level, session } => admin::optimize(cli, *level, session.as_deref()),
        Command::Rekey { new_key_file } => admin::rekey(cli, new_key_file),
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "memstrata-mcp",
    version,
    about = "Memstrata layered memory as an MCP server"
)]
struct Cli {
    /// Store directory, or PostgreSQL URL postgres://user:pass@host:port/db?schema=NAME
    /// [env: MEMSTRATA_STORE; default: <platform data dir>/memstrata/default.mem]
    #[arg(long, global = true, env = "MEMSTRATA_STORE", hide_env = true)]
    store: Option<PathBuf>,
    /// Durability: immediate, periodic, periodic:<ms> or manual.
    #[arg(long, global = true, default_value = "periodic")]
    durability: String,
    /// Root scanned by llm_punch_out(detect_files=true) (repeatable; default: the working directory).
    #[arg(long = "workspace-root", global = true)]
    workspace_roots: Vec<PathBuf>,
    /// Do not append mutating calls and refused requests to the audit trail.
    #[arg(long, global = true, conflicts_with = "audit_file")]
    no_audit: bool,
    /// Audit trail file (JSON Lines) [default: <store>/audit.jsonl for a store directory;
    /// none for a postgres:// store, whose instances each need their own file].
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "MEMSTRATA_AUDIT_FILE",
        hide_env = true
    )]
    audit_file: Option<PathBuf>,
    /// Also audit read-only tool calls.
    #[arg(long, global = true)]
    audit_reads: bool,
    /// Encrypt the store at rest with the key in FILE: exactly 32 raw bytes or 64 hex
    /// characters (see docs/security.md). A store created with a key needs it on every open.
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "MEMSTRATA_ENCRYPTION_KEY_FILE",
        hide_env = true
    )]
    encryption_key_file: Option<PathBuf>,
    /// OpenAI-compatible embeddings endpoint (e.g. https://api.openai.com/v1/embeddings) used to
    /// embed episodes, knowledge and queries given without `embedding`. Off by default. The
    /// API key, if any, is read from MEMSTRATA_EMBEDDINGS_API_KEY.
    #[arg(long, global = true, value_name = "URL", requires = "embeddings_model")]
    embeddings_url: Option<String>,
    /// Model name sent to --embeddings-url.
    #[arg(long, global = true, value_name = "NAME", requires = "embeddings_url")]
    embeddings_model: Option<String>,
    /// Memory budgets for small devices: sled cache 1 MiB, index writer 15 MB, episode
    /// cache 1 MiB, short-term cache 2 MiB, index cache 4 MiB, free heap given back every
    /// 250 ms, at most 2 malloc arenas in the process (glibc), index merges of at most
    /// 200,000 documents; the budget flags below override it.
    #[arg(long, global = true)]
    low_memory: bool,
    /// Budget of the decoded-episode cache in bytes (default 8 MiB; 0 turns it off; at most 1 GiB).
    #[arg(long, global = true, value_name = "BYTES")]
    episode_cache_bytes: Option<usize>,
    /// Budget of the short-term read cache in bytes (default 16 MiB; 0 turns it off; at most 1 GiB).
    #[arg(long, global = true, value_name = "BYTES")]
    short_term_cache_bytes: Option<usize>,
    /// Budget of the decrypted search-index cache of an encrypted store in bytes (default
    /// 16 MiB; 0 decrypts every read; at most 1 GiB).
    #[arg(long, global = true, value_name = "BYTES")]
    index_cache_bytes: Option<usize>,
    /// Seconds between returns of free heap to the OS while the store is written (default 1;
    /// 0 turns it off; fractions allowed, e.g. 0.25).
    #[arg(long, global = true, value_name = "SECONDS", value_parser = parse_interval)]
    release_memory_interval: Option<std::time::Duration>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP over stdin/stdout (what Claude Desktop and IDEs launch).
    Stdio,
    /// Serve streamable HTTP at /mcp, WebSocket at /mcp/ws and POST /mcp/v1/execute.
    Http(Box<HttpArgs>),
    /// Show store health, counts and the latest audit records.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Audit records to show.
        #[arg(long, default_value_t = 20)]
        audit: usize,
    },
    /// Export every layer to a JSON Lines file.
    Export {
        /// Output file (`-` for stdout).
        file: PathBuf,
    },
    /// Import a Memstrata export, or the MCP reference memory server's knowledge graph.
    Import {
        /// Input file.
        file: PathBuf,
        /// The file is a reference memory server `memory.jsonl` knowledge graph.
        #[arg(long)]
        knowledge_graph: bool,
        /// Context that receives a knowledge graph.
        #[arg(long, default_value = "default")]
        context: String,
    },
    /// Reclaim space (purge expired items, prune session versions, merge index segments).
    Optimize {
        /// How much work to do.
        #[arg(long, value_enum, default_value_t = Level::Light)]
        level: Level,
        /// Limit session pruning to this session.
        #[arg(long)]
        session: Option<String>,
    },
    /// Rotate the encryption key of a (closed) store directory in place: every record and
    /// index file is sealed again under the key in --new-key-file; the key in
    /// --encryption-key-file is refused afterwards. Run it again after an interruption.
    Rekey {
        /// The new key: exactly 32 raw bytes or 64 hex characters.
        #[arg(long, value_name = "FILE")]
        new_key_file: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
struct HttpArgs {
    /// Address to listen on. Non-loopback addresses need an API key (or --allow-unauthenticated-remote).
    #[arg(long, default_value = "127.0.0.1:8765")]
    listen: SocketAddr,
    /// API key with access to everything (repeatable) [env: MEMSTRATA_API_KEYS, comma-separated].
    #[arg(
        long = "api-key",
        env = "MEMSTRATA_API_KEYS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    api_keys: Vec<String>,
    /// TOML or JSON file mapping API keys to the contexts they may read and write (see docs/mcp.md).
    #[arg(long)]
    auth_config: Option<PathBuf>,
    /// Allow a non-loopback listen address without any API key.
    #[arg(long)]
    allow_unauthenticated_remote: bool,
    /// Extra Host name clients use to reach the server (repeatable; `*` disables the Host check).
    #[arg(long = "allowed-host")]
    allowed_hosts: Vec<String>,
    /// Browser origin allowed to call the server, e.g. https://app.example.com (repeatable).
    #[arg(long = "allowed-origin")]
    allowed_origins: Vec<String>,
    /// Largest request body or WebSocket message, in bytes.
    #[arg(long, default_value_t = crate::transport::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    #[command(flatten)]
    limits: crate::security::limits::LimitArgs,
    /// PEM certificate chain: serve HTTPS and WSS (needs --tls-key; reloaded on SIGHUP).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    #[command(flatten)]
    oauth: crate::security::oauth::OAuthArgs,
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MEMSTRATA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .init();
}

fn runtime() -> CliResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Serve(format!("cannot start the async runtime: {e}")))
}

/// Flushes the store before exiting, saying so on stderr (tests and docs rely on the line).
fn flush(mem: &memstrata::Memory) {
    match mem.flush() {
        Ok(()) => tracing::info!("store flushed"),
        Err(e) => tracing::error!("flush failed: {e}"),
    }
}

/// `--release-memory-interval SECONDS`: finite and 0 or more (0 turns it off).
/// The same check as the bindings' `release_memory_interval` option.
fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("expected a number of seconds, got {s:?}"))?;
    memstrata_bindings_common::options::interval("release_memory_interval", secs)
        .map_err(|e| e.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_flags_parse_and_bad_intervals_are_refused() {
        let cli = Cli::try_parse_from([
            "memstrata-mcp",
            "--low-memory",
            "--index-cache-bytes",
            "0",
            "--release-memory-interval",
            "0.5",
            "stdio",
        ])
        .unwrap();
        assert!(cli.low_memory);
        assert_eq!(cli.index_cache_bytes, Some(0));
        assert_eq!(
            cli.release_memory_interval,
            Some(std::time::Duration::from_millis(500))
        );
        for bad in ["-1", "nan", "inf", "soon"] {
            let flag = format!("--release-memory-interval={bad}");
            let e = Cli::try_parse_from(["memstrata-mcp", flag.as_str(), "stdio"])
                .unwrap_err()
                .to_string();
            assert!(e.contains("--release-memory-interval"), "{e}");
        }
        let e = Cli::try_parse_from(["memstrata-mcp", "--index-cache-bytes=-1", "stdio"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--index-cache-bytes"), "{e}");
    }

    #[test]
    fn budget_flags_reach_the_store_and_over_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s").display().to_string();
        let args = |extra: &[&str]| {
            let mut a = vec!["memstrata-mcp", "--store", store.as_str(), "--low-memory"];
            a.extend_from_slice(extra);
            a.push("stdio");
            Cli::try_parse_from(a).unwrap()
        };
        let cli = args(&["--index-cache-bytes", "2147483648"]);
        let e = match store::open(&cli) {
            Ok(_) => panic!("an index cache over 1 GiB was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("index_cache_bytes"), "{e}");
        let cli = args(&[
            "--index-cache-bytes",
            "1048576",
            "--release-memory-interval",
            "0",
        ]);
        let m = store::open(&cli).unwrap();
        let o = m.options();
        assert_eq!(o.index_cache_bytes, 1 << 20);
        assert_eq!(o.release_memory_interval, std::time::Duration::ZERO);
        assert_eq!(o.short_term_cache_bytes, 2 << 20);
    }
}
