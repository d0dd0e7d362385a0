//! The two serving commands, `stdio` and `http`. Both install [`Signals`] before the
//! store opens, and flush it before exiting 0 on EOF (stdio) or a signal.

use std::time::Duration;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use super::error::{CliError, CliResult};
use super::signals::Signals;
use super::{Cli, HttpArgs, flush, runtime, store};
use crate::backend::store::StoreLocation;
use crate::security::oauth::OAuth;
use crate::transport::http::{self, HttpConfig};
use crate::transport::tls::TlsFiles;
use crate::{Auth, Caller, MemoryServer, Principal, Shared};

/// `stdio`: MCP over stdin/stdout until EOF or a signal, then flush.
pub(super) fn stdio(cli: &Cli) -> CliResult<()> {
    let rt = runtime()?;
    let mut signals = Signals::listen(&rt)?;
    let location = store::location(cli)?;
    let mem = store::open(cli)?;
    let shared = Shared::with_audit_log(
        mem.clone(),
        Auth::disabled(),
        store::open_audit(cli)?,
        cli.audit_reads,
        crate::security::limits::Limits::default(),
    );
    let max_line = mem.options().limits.max_value_bytes.saturating_mul(2) + (1 << 20);
    let bridge_stop = CancellationToken::new();
    let r = rt.block_on(async {
        let server = MemoryServer::new(shared.clone(), "stdio", Caller::Fixed(Principal::local()));
        let transport = crate::transport::stdio::transport(&server, max_line);
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
                Err(e) => return Err(CliError::Serve(format!("MCP initialization failed: {e}"))),
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
        Ok::<(), CliError>(())
    });
    bridge_stop.cancel();
    // tokio's stdin reader sits in a blocking read(2); do not wait for it.
    rt.shutdown_background();
    r?;
    flush(&mem);
    Ok(())
}

/// `http`: streamable HTTP, WebSocket and the execute envelope until a signal, then flush.
pub(super) fn http(cli: &Cli, args: &HttpArgs) -> CliResult<()> {
    let rt = runtime()?;
    let mut signals = Signals::listen(&rt)?;
    // clap takes the keys from --api-key when given, else from MEMSTRATA_API_KEYS.
    let from_flag = std::env::args().any(|a| a == "--api-key" || a.starts_with("--api-key="));
    let source = if from_flag {
        "--api-key"
    } else {
        "MEMSTRATA_API_KEYS"
    };
    let mut auth = Auth::disabled()
        .try_with_full_keys(args.api_keys.iter().cloned(), source)
        .map_err(CliError::Config)?;
    if let Some(p) = &args.auth_config {
        auth = auth.load_file(p).map_err(CliError::Config)?;
    }
    if let Some(c) = args.oauth.config().map_err(CliError::Config)? {
        let oauth = rt.block_on(OAuth::load(c)).map_err(CliError::Config)?;
        auth = auth.with_oauth(oauth);
    }
    if !args.listen.ip().is_loopback() && !auth.enabled() && !args.allow_unauthenticated_remote {
        return Err(CliError::Config(format!(
            "refusing to listen on non-loopback address {} without an API key: pass --api-key / --auth-config \
             (or --allow-unauthenticated-remote if the network is trusted)",
            args.listen
        )));
    }
    if args.listen.ip().is_unspecified() && args.allowed_hosts.is_empty() {
        tracing::warn!(
            "listening on {} but only loopback Host names are accepted; list the names remote clients use with --allowed-host",
            args.listen
        );
    }
    let location = store::location(cli)?;
    let mem = store::open(cli)?;
    let n_keys = auth.len();
    let limits = crate::security::limits::Limits::new(args.limits.config());
    let shared = Shared::with_audit_log(
        mem.clone(),
        auth,
        store::open_audit(cli)?,
        cli.audit_reads,
        limits,
    );
    let cfg = HttpConfig {
        listen: args.listen,
        allowed_hosts: args.allowed_hosts.clone(),
        allowed_origins: args.allowed_origins.clone(),
        max_body_bytes: args.max_body_bytes,
        tls: args
            .tls_cert
            .clone()
            .zip(args.tls_key.clone())
            .map(|(cert, key)| TlsFiles { cert, key }),
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
            Ok(Err(e)) => Err(CliError::Serve(format!(
                "HTTP server on {}: {e}",
                args.listen
            ))),
            Err(e) => Err(CliError::Serve(format!("HTTP server task failed: {e}"))),
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
