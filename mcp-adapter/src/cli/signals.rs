//! [`Signals`]: SIGINT and SIGTERM for the commands that write (stdio, http, import,
//! optimize), installed before the store opens.

use super::error::{CliError, CliResult};

/// SIGINT and SIGTERM, handled from the moment a command that writes starts: created
/// before the store opens, so a signal that arrives while it opens, while MCP initialises
/// or while requests are answered is kept until [`Signals::recv`] sees it, instead of
/// taking the default action (death without the flush).
pub(super) struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers now (inside `rt`, whose driver delivers them).
    pub(super) fn listen(rt: &tokio::runtime::Runtime) -> CliResult<Self> {
        let _guard = rt.enter();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let term = signal(SignalKind::terminate())
                .map_err(|e| CliError::Serve(format!("cannot handle SIGTERM: {e}")))?;
            let int = signal(SignalKind::interrupt())
                .map_err(|e| CliError::Serve(format!("cannot handle SIGINT: {e}")))?;
            tracing::info!(pid = std::process::id(), "handling SIGINT and SIGTERM");
            Ok(Self { term, int })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Resolves on the next SIGINT or SIGTERM (at once for one received earlier).
    pub(super) async fn recv(&mut self) {
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
    pub(super) fn defer(mut self, rt: &tokio::runtime::Runtime, what: &'static str) {
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
