//! HTTPS and WSS with a certificate generated in the test, a real rustls client, and
//! certificate reload on SIGHUP (issue 16).

mod security_support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use rustls::RootCertStore;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use memstrata::Memory;
use memstrata_mcp::transport::HttpConfig;
use memstrata_mcp::transport::{Tls, TlsFiles};
use memstrata_mcp::{Auth, Shared};
use security_support::{envelope, request, serve};

const KEY: &str = "tls-test-key-0123";

fn write_cert(dir: &Path) -> (TlsFiles, CertificateDer<'static>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let files = TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&files.cert, ck.cert.pem()).unwrap();
    std::fs::write(&files.key, ck.key_pair.serialize_pem()).unwrap();
    (files, ck.cert.der().clone())
}

fn connector(trusted: &[&CertificateDer<'static>]) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    for c in trusted {
        roots.add((*c).clone()).unwrap();
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    TlsConnector::from(Arc::new(cfg))
}

async fn tls_connect(
    addr: SocketAddr,
    trusted: &[&CertificateDer<'static>],
) -> std::io::Result<TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    connector(trusted)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_and_wss_with_reload_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let (files, cert1) = write_cert(dir.path());
    let shared = Shared::new(
        Memory::temporary().unwrap(),
        Auth::disabled().with_full_keys([KEY]),
        false,
    )
    .unwrap();
    let mut cfg = HttpConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.tls = Some(files.clone());
    let (addr, stop) = serve(shared, cfg).await;

    // HTTPS: the execute envelope, and 401 without the key.
    let call = envelope(1, "context_store", json!({"key": "k", "value": "over tls"}));
    let io = tls_connect(addr, &[&cert1]).await.unwrap();
    let r = request(io, "POST", "/mcp/v1/execute", Some(KEY), Some(&call)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["result"]["success"], true, "{:?}", r.body);
    let io = tls_connect(addr, &[&cert1]).await.unwrap();
    let r = request(io, "POST", "/mcp/v1/execute", None, Some(&call)).await;
    assert_eq!(r.status, 401);

    // Plain HTTP on the TLS port gets no HTTP answer.
    let r = security_support::http(addr, "POST", "/mcp/v1/execute", Some(KEY), Some(&call)).await;
    assert_eq!(r.status, 0, "plain HTTP answered on a TLS port: {r:?}");

    // A client that does not trust the certificate fails the handshake.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    assert!(tls_connect(addr, &[other.cert.der()]).await.is_err());

    // WSS: an execute envelope over a WebSocket on the TLS stream.
    let io = tls_connect(addr, &[&cert1]).await.unwrap();
    let mut req = "wss://localhost/mcp/ws".into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::client_async(req, io).await.unwrap();
    let get = envelope(2, "context_retrieve", json!({"key": "k"}));
    ws.send(Message::Text(get.to_string().into()))
        .await
        .unwrap();
    let m = tokio::time::timeout(Duration::from_secs(30), ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let v: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
    assert_eq!(v["result"]["value"], "over tls", "{v}");
    drop(ws);

    // SIGHUP reloads the files: new connections get the new certificate.
    let (_, cert2) = write_cert(dir.path());
    assert_ne!(cert1, cert2);
    let pid = std::process::id().to_string();
    let mut seen = None;
    // Bounded (about a minute on a loaded machine), not timed: it ends once reloaded.
    for _ in 0..1200 {
        let ok = std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap();
        assert!(ok.success());
        tokio::time::sleep(Duration::from_millis(50)).await;
        let io = tls_connect(addr, &[&cert1, &cert2]).await.unwrap();
        let leaf = io.get_ref().1.peer_certificates().unwrap()[0].clone();
        if leaf == cert2 {
            seen = Some(io);
            break;
        }
    }
    let io = seen.expect("the certificate was not reloaded on SIGHUP");
    let r = request(io, "POST", "/mcp/v1/execute", Some(KEY), Some(&call)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    stop.cancel();
}

#[test]
fn unusable_files_are_refused_and_a_bad_reload_keeps_the_old_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = write_cert(dir.path());
    let tls = Tls::new(files.clone()).unwrap();
    std::fs::write(
        &files.key,
        "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let e = tls.reload().unwrap_err();
    assert!(e.contains("key.pem"), "{e}");
    assert!(!e.contains("bm90IGEga2V5"), "key material in an error: {e}");
    let e = Tls::new(TlsFiles {
        cert: dir.path().join("missing.pem"),
        key: files.key.clone(),
    })
    .unwrap_err();
    assert!(e.contains("missing.pem"), "{e}");
}
