//! Built-in TLS for the HTTP listener: HTTPS and WSS with rustls on the `ring`
//! crypto provider (no OpenSSL, no aws-lc).
//!
//! `memstrata-mcp http --tls-cert cert.pem --tls-key key.pem` serves every endpoint
//! (`/mcp`, `/mcp/ws`, `/mcp/v1/execute`) over TLS 1.2/1.3 only. The files are PEM: the
//! certificate chain (leaf first) and a PKCS#8, PKCS#1 or SEC1 private key. On
//! `SIGHUP` both files are read again and new connections use the new certificate;
//! connections already open keep theirs; a file that cannot be loaded is logged and the
//! previous certificate stays in use.
//!
//! Handshakes run in their own tasks with a time limit ([`HANDSHAKE_TIMEOUT`]) and at
//! most [`MAX_HANDSHAKES`] at once, so a slow or silent client cannot hold the accept
//! loop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// Longest a client may take to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// TLS handshakes in progress at once; more connections wait in the kernel's backlog.
pub const MAX_HANDSHAKES: usize = 256;

/// Certificate and key files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// Load a rustls server configuration (ring provider, HTTP/1.1 ALPN) from `files`.
/// Errors name the file, never its contents.
pub fn load(files: &TlsFiles) -> Result<ServerConfig, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| format!("--tls-cert {}: {e}", files.cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", files.cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "--tls-cert {}: no PEM certificate found",
            files.cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        format!(
            "--tls-key {}: no usable PEM private key ({e})",
            files.key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            format!(
                "--tls-cert {} / --tls-key {}: {e}",
                files.cert.display(),
                files.key.display()
            )
        })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// The certificate in use, reloadable.
#[derive(Debug)]
pub struct Tls {
    files: TlsFiles,
    current: RwLock<Arc<ServerConfig>>,
}

impl Tls {
    /// Load `files` (fails when they cannot be used).
    pub fn new(files: TlsFiles) -> Result<Arc<Self>, String> {
        let cfg = load(&files)?;
        Ok(Arc::new(Tls {
            files,
            current: RwLock::new(Arc::new(cfg)),
        }))
    }

    /// Read the files again; on error the previous certificate stays.
    pub fn reload(&self) -> Result<(), String> {
        let cfg = load(&self.files)?;
        *self.current.write() = Arc::new(cfg);
        Ok(())
    }

    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(Arc::clone(&self.current.read()))
    }

    /// Reload on every `SIGHUP` until `stop` (Unix only).
    pub fn reload_on_sighup(self: &Arc<Self>, stop: CancellationToken) {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let mut hup = match signal(SignalKind::hangup()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("cannot listen for SIGHUP, TLS certificate reload is off: {e}");
                    return;
                }
            };
            let tls = Arc::clone(self);
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        got = hup.recv() => if got.is_none() { return },
                    }
                    match tls.reload() {
                        Ok(()) => {
                            tracing::info!(cert = %tls.files.cert.display(), "SIGHUP: TLS certificate reloaded")
                        }
                        Err(e) => tracing::error!(
                            "SIGHUP: TLS certificate not reloaded, the previous one stays in use: {e}"
                        ),
                    }
                }
            });
        }
        #[cfg(not(unix))]
        let _ = stop;
    }
}

/// A listener handing axum connections whose TLS handshake has completed.
#[derive(Debug)]
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Accept on `tcp`, handshaking with `tls`'s current certificate, until `stop`.
    pub fn new(tcp: TcpListener, tls: Arc<Tls>, stop: CancellationToken) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let Ok(permit) = Arc::clone(&handshakes).acquire_owned().await else {
                    return;
                };
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    a = tcp.accept() => a,
                };
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::debug!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!("cannot set TCP_NODELAY: {e}");
                }
                let acceptor = tls.acceptor();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(s)) => {
                            let _ = tx.send((s, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { rx, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept task ended (shutdown): wait for axum's graceful shutdown.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
