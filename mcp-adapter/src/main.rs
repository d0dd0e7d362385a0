//! `memstrata-mcp`: the standalone Memstrata MCP server and its admin commands.
//!
//! ```text
//! memstrata-mcp [--store PATH|URL] stdio
//! memstrata-mcp [--store PATH|URL] http --listen 127.0.0.1:8765 [--api-key KEY]... [--auth-config FILE]
//! memstrata-mcp [--store PATH|URL] status | export FILE | import FILE [--knowledge-graph] | optimize [--level L]
//! ```
//! The store is a directory (embedded sled) or `postgres://user:pass@host:port/db?schema=NAME`
//! (PostgreSQL: any number of instances share it; see docs/mcp.md).
//! stdout carries only the MCP protocol (stdio) or command output; logs go to stderr.

use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rmcp::ServiceExt;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio_util::sync::CancellationToken;

use memstrata::{Durability, Memory};
use memstrata_bindings_common::ExportStats;
use memstrata_bindings_common::files::{
    export_to_path, import_from_path, import_knowledge_graph_from_path,
};
use memstrata_bindings_common::options::optimize_level;
use memstrata_mcp::drain::DrainOnEof;
use memstrata_mcp::envelope::Envelope;
use memstrata_mcp::http::{self, HttpConfig};
use memstrata_mcp::ops::Level;
use memstrata_mcp::store::StoreLocation;
use memstrata_mcp::{Auth, Caller, MemoryServer, Principal, Shared, audit};

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
    #[arg(long, default_value_t = http::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    #[command(flatten)]
    limits: memstrata_mcp::limits::LimitArgs,
    /// PEM certificate chain: serve HTTPS and WSS (needs --tls-key; reloaded on SIGHUP).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    #[command(flatten)]
    oauth: memstrata_mcp::oauth::OAuthArgs,
}

fn default_store() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("memstrata")
        .join("default.mem")
}

fn store_location(cli: &Cli) -> Result<StoreLocation, String> {
    memstrata_mcp::store::parse(&cli.store.clone().unwrap_or_else(default_store))
}

/// The admin commands that read a store refuse to create an empty one by accident
/// (a directory without a database, or a PostgreSQL schema that does not exist).
fn require_existing(cli: &Cli) -> Result<(), String> {
    match store_location(cli)? {
        StoreLocation::Dir(path) if path.join("db").exists() => Ok(()),
        StoreLocation::Dir(path) => Err(format!(
            "no store at {} (pass --store or set MEMSTRATA_STORE)",
            path.display()
        )),
        StoreLocation::Postgres(url) => {
            if runtime()?.block_on(memstrata_mcp::pgnotify::schema_exists(&url))? {
                Ok(())
            } else {
                Err(format!(
                    "no store at {url}: the database has no schema \"{}\" (check the URL's `schema=`)",
                    url.schema()
                ))
            }
        }
    }
}

/// Where the audit trail goes: `--audit-file`, else `<store>/audit.jsonl` for a store
/// directory; a PostgreSQL store has no directory, so without `--audit-file` it has none.
fn audit_file(cli: &Cli) -> Result<Option<PathBuf>, String> {
    if cli.no_audit {
        return Ok(None);
    }
    if let Some(f) = &cli.audit_file {
        return Ok(Some(f.clone()));
    }
    Ok(match store_location(cli)? {
        StoreLocation::Dir(p) => Some(
            std::fs::canonicalize(&p)
                .unwrap_or(p)
                .join(audit::AUDIT_FILE),
        ),
        StoreLocation::Postgres(_) => None,
    })
}

/// The audit log a server appends to (see [`audit_file`]), logging where it goes.
fn open_audit(cli: &Cli) -> Result<Option<audit::AuditLog>, String> {
    match audit_file(cli)? {
        Some(f) => {
            let log = audit::AuditLog::open_file(&f)
                .map_err(|e| format!("cannot open the audit file {}: {e}", f.display()))?;
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

fn open(cli: &Cli) -> Result<Memory, String> {
    let location = store_location(cli)?;
    let path = location.open_path();
    let durability: Durability = cli
        .durability
        .parse()
        .map_err(|e: memstrata::Error| e.to_string())?;
    let mut b = Memory::builder().path(&path).durability(durability);
    if let Some(file) = &cli.encryption_key_file {
        // Neither the contents nor any part of the key is ever printed.
        let contents = std::fs::read(file)
            .map_err(|e| format!("cannot read --encryption-key-file {}: {e}", file.display()))?;
        let key = memstrata::EncryptionKey::from_key_file_contents(&contents)
            .map_err(|e| format!("--encryption-key-file {}: {e}", file.display()))?;
        b = b.encryption_key(key);
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
        memstrata::Error::StoreLocked { .. } => {
            format!(
                "{e} (another memstrata-mcp or program has it open; stop it or use another --store)"
            )
        }
        other => format!("cannot open store {}: {other}", location.masked()),
    })?;
    if let (Some(url), Some(model)) = (&cli.embeddings_url, &cli.embeddings_model) {
        let e = memstrata_mcp::embeddings::HttpEmbedder::new(url, model)?;
        tracing::info!(url = %url, model = %model, "embedding with an OpenAI-compatible endpoint");
        mem.set_embedder(Some(std::sync::Arc::new(e)));
    }
    Ok(mem)
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

/// SIGINT and SIGTERM, handled from the moment a command that writes starts: created
/// before the store opens, so a signal that arrives while it opens, while MCP initialises
/// or while requests are answered is kept until [`Signals::recv`] sees it, instead of
/// taking the default action (death without the flush).
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers now (inside `rt`, whose driver delivers them).
    fn listen(rt: &tokio::runtime::Runtime) -> Result<Self, String> {
        let _guard = rt.enter();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let term = signal(SignalKind::terminate())
                .map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
            let int = signal(SignalKind::interrupt())
                .map_err(|e| format!("cannot handle SIGINT: {e}"))?;
            tracing::info!(pid = std::process::id(), "handling SIGINT and SIGTERM");
            Ok(Self { term, int })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Resolves on the next SIGINT or SIGTERM (at once for one received earlier).
    async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {},
            _ = self.int.recv() => {},
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }

    /// For an admin command that writes (import, optimize): a signal lets the work in
    /// progress finish and be flushed (the command then exits 0); a second one ends the
    /// process at once with status 130 (the store stays consistent, as after a crash).
    fn defer(mut self, rt: &tokio::runtime::Runtime, what: &'static str) {
        rt.spawn(async move {
            self.recv().await;
            tracing::warn!(
                "signal received: finishing the {what} and flushing before exiting (signal again to stop at once)"
            );
            self.recv().await;
            tracing::warn!("second signal: exiting without finishing the {what}");
            std::process::exit(130);
        });
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

fn flush(mem: &Memory) {
    match mem.flush() {
        Ok(()) => tracing::info!("store flushed"),
        Err(e) => tracing::error!("flush failed: {e}"),
    }
}

fn serve_stdio(cli: &Cli) -> Result<(), String> {
    let rt = runtime()?;
    let mut signals = Signals::listen(&rt)?;
    let location = store_location(cli)?;
    let mem = open(cli)?;
    let shared = Shared::with_audit_log(
        mem.clone(),
        Auth::disabled(),
        open_audit(cli)?,
        cli.audit_reads,
        memstrata_mcp::limits::Limits::default(),
    );
    let max_line = mem.options().limits.max_value_bytes.saturating_mul(2) + (1 << 20);
    let bridge_stop = CancellationToken::new();
    let r = rt.block_on(async {
        let server = MemoryServer::new(shared.clone(), "stdio", Caller::Fixed(Principal::local()));
        let envelope_server = server.clone();
        let transport = AsyncRwTransport::<rmcp::RoleServer, _, _>::new(
            tokio::io::stdin(),
            tokio::io::stdout(),
        )
        .with_max_line_length(max_line);
        // Execute envelopes are answered beside MCP; at EOF, answer every request already
        // received before letting rmcp wind down.
        let transport = DrainOnEof::new(Envelope::new(
            transport,
            envelope_server,
            Principal::local(),
        ));
        let start = async {
            bridge(&shared, &location, &bridge_stop).await;
            tracing::info!(store = %location.masked(), "memstrata-mcp serving MCP on stdio");
            server.serve(transport).await
        };
        let running = tokio::select! {
            r = start => match r {
                Ok(r) => r,
                // Input ended before any MCP request (a script that only sent execute envelopes).
                Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
                Err(e) => return Err(format!("MCP initialization failed: {e}")),
            },
            () = signals.recv() => {
                tracing::info!("signal received before MCP initialization finished, shutting down");
                return Ok(());
            }
        };
        let ct = running.cancellation_token();
        tokio::select! {
            r = running.waiting() => {
                if let Err(e) = r {
                    tracing::warn!("MCP session ended with an error: {e}");
                }
            }
            () = signals.recv() => {
                tracing::info!("signal received, shutting down");
                ct.cancel();
            }
        }
        Ok::<(), String>(())
    });
    bridge_stop.cancel();
    // tokio's stdin reader sits in a blocking read(2); do not wait for it.
    rt.shutdown_background();
    r?;
    flush(&mem);
    Ok(())
}

fn serve_http(cli: &Cli, args: &HttpArgs) -> Result<(), String> {
    let rt = runtime()?;
    let mut signals = Signals::listen(&rt)?;
    // clap takes the keys from --api-key when given, else from MEMSTRATA_API_KEYS.
    let from_flag = std::env::args().any(|a| a == "--api-key" || a.starts_with("--api-key="));
    let source = if from_flag {
        "--api-key"
    } else {
        "MEMSTRATA_API_KEYS"
    };
    let mut auth = Auth::disabled().try_with_full_keys(args.api_keys.iter().cloned(), source)?;
    if let Some(p) = &args.auth_config {
        auth = auth.load_file(p)?;
    }
    if let Some(c) = args.oauth.config()? {
        auth = auth.with_oauth(rt.block_on(memstrata_mcp::oauth::OAuth::load(c))?);
    }
    if !args.listen.ip().is_loopback() && !auth.enabled() && !args.allow_unauthenticated_remote {
        return Err(format!(
            "refusing to listen on non-loopback address {} without an API key: pass --api-key / --auth-config \
             (or --allow-unauthenticated-remote if the network is trusted)",
            args.listen
        ));
    }
    if args.listen.ip().is_unspecified() && args.allowed_hosts.is_empty() {
        tracing::warn!(
            "listening on {} but only loopback Host names are accepted; list the names remote clients use with --allowed-host",
            args.listen
        );
    }
    let location = store_location(cli)?;
    let mem = open(cli)?;
    let n_keys = auth.len();
    let limits = memstrata_mcp::limits::Limits::new(args.limits.config());
    let shared =
        Shared::with_audit_log(mem.clone(), auth, open_audit(cli)?, cli.audit_reads, limits);
    let cfg = HttpConfig {
        listen: args.listen,
        allowed_hosts: args.allowed_hosts.clone(),
        allowed_origins: args.allowed_origins.clone(),
        max_body_bytes: args.max_body_bytes,
        tls: args
            .tls_cert
            .clone()
            .zip(args.tls_key.clone())
            .map(|(cert, key)| memstrata_mcp::tls::TlsFiles { cert, key }),
    };
    tracing::info!(store = %location.masked(), api_keys = n_keys, "starting HTTP server");
    rt.block_on(async {
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            signals.recv().await;
            tracing::info!("signal received, shutting down");
            stop.cancel();
        });
        tokio::select! {
            () = bridge(&shared, &location, &shutdown) => {},
            () = shutdown.cancelled() => return Ok(()),
        }
        let server = tokio::spawn(http::serve(shared, cfg, shutdown.clone()));
        match server.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("HTTP server on {}: {e}", args.listen)),
            Err(e) => Err(format!("HTTP server task failed: {e}")),
        }
    })?;
    flush(&mem);
    Ok(())
}

/// On a PostgreSQL store, deliver resource changes across instances (LISTEN/NOTIFY),
/// waiting briefly for the first LISTEN so subscriptions work from the first request.
async fn bridge(shared: &Shared, location: &StoreLocation, stop: &CancellationToken) {
    let Some(url) = location.postgres() else {
        return;
    };
    shared.bridge_postgres(url, stop.clone());
    if let Some(b) = shared.bridge()
        && !b.wait_listening(Duration::from_secs(10)).await
    {
        tracing::warn!(
            store = %url,
            "not yet listening for other instances' changes; subscribers hear of them once connected"
        );
    }
}

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

fn status(cli: &Cli, json: bool, audit_n: usize) -> Result<(), String> {
    require_existing(cli)?;
    let location = store_location(cli)?;
    let (status, note) = match open(cli) {
        Ok(mem) => (
            Some(mem.admin().status(true, true).map_err(|e| e.to_string())?),
            None,
        ),
        Err(e) => (None, Some(e)),
    };
    let audit_path = audit_file(cli)?;
    let trail = match &audit_path {
        Some(f) => audit::tail_file(f, audit_n)
            .map_err(|e| format!("cannot read the audit file {}: {e}", f.display()))?,
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
        )
        .map_err(|e| e.to_string())?;
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
fn export(cli: &Cli, file: &Path) -> Result<(), String> {
    require_existing(cli)?;
    let mem = open(cli)?;
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
        let s = mem.admin().export(&mut w).map_err(|e| e.to_string())?;
        w.flush().map_err(|e| e.to_string())?;
        pb.finish_and_clear();
        ExportStats::from(s)
    } else {
        let pb = spinner(&format!("exporting to {}", file.display()));
        let s = export_to_path(&mem, file).map_err(|e| e.to_string())?;
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
fn import(cli: &Cli, file: &Path, knowledge_graph: bool, context: &str) -> Result<(), String> {
    let rt = runtime()?;
    Signals::listen(&rt)?.defer(&rt, "import");
    let mem = open(cli)?;
    tracing::info!(file = %file.display(), "importing");
    let pb = spinner(&format!("importing {}", file.display()));
    let stats = if knowledge_graph {
        let ns = mem.namespace(context).map_err(|e| e.to_string())?;
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
    }
    .map_err(|e| e.to_string())?;
    pb.finish_and_clear();
    mem.flush().map_err(|e| e.to_string())?;
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

fn optimize(cli: &Cli, level: Level, session: Option<&str>) -> Result<(), String> {
    let rt = runtime()?;
    Signals::listen(&rt)?.defer(&rt, "optimization");
    require_existing(cli)?;
    let mem = open(cli)?;
    tracing::info!(level = level.as_str(), "optimizing");
    let lvl = optimize_level(Some(level.as_str())).map_err(|e| e.to_string())?;
    let pb = spinner(&format!("optimizing ({})", lvl.as_str()));
    let report = mem
        .admin()
        .optimize_with_progress(lvl, session, &|p| {
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
        })
        .map_err(|e| e.to_string())?;
    pb.finish_and_clear();
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let r = match &cli.command {
        Command::Stdio => serve_stdio(&cli),
        Command::Http(a) => serve_http(&cli, a),
        Command::Status { json, audit } => status(&cli, *json, *audit),
        Command::Export { file } => export(&cli, file),
        Command::Import {
            file,
            knowledge_graph,
            context,
        } => import(&cli, file, *knowledge_graph, context),
        Command::Optimize { level, session } => optimize(&cli, *level, session.as_deref()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memstrata-mcp: {e}");
            ExitCode::FAILURE
        }
    }
}
