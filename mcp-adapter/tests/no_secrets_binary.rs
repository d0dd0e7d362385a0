//! No secret ever reaches the logs (issue 16), checked on the built binary: the
//! server runs with an API key, an encryption key file and OAuth bearer tokens
//! (valid, expired, forged, garbage) at TRACE log level; its whole stderr, the
//! audit trail and the admin commands' output (status, a wrong key file) must
//! contain none of the secrets, nor the encryption key in hex.

mod security_support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use tokio::process::Command;

use security_support::{envelope, http};

const BIN: &str = env!("CARGO_BIN_EXE_memstrata-mcp");
const API_KEY: &str = "api-key-secret-7f3a9c21d4";
const WRONG_API_KEY: &str = "wrong-api-key-secret-55e1b";
/// 32 printable bytes, so the raw key can be searched for as text too.
const ENC_KEY: &[u8; 32] = b"EncKeyRaw-Secret-0123456789abcdX";
const ISSUER: &str = "https://idp.test.example/";
const RESOURCE: &str = "http://localhost/mcp";

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn mint(key: &EncodingKey, kid: &str, exp: i64) -> String {
    let mut h = Header::new(Algorithm::ES256);
    h.kid = Some(kid.to_owned());
    let claims = json!({"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": exp,
        "iat": now(), "scope": "memstrata:write:* memstrata:global:write"});
    jsonwebtoken::encode(&h, &claims, key).unwrap()
}

/// Every fragment of a secret worth hiding: the whole string and, for a JWT, each part
/// long enough to identify it (the signature is the one that matters).
fn fragments(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_owned()];
    if secret.matches('.').count() == 2 {
        out.extend(
            secret
                .split('.')
                .filter(|p| p.len() >= 16)
                .map(str::to_owned),
        );
    }
    out
}

fn assert_clean(what: &str, text: &str, secrets: &[String]) {
    for s in secrets {
        for f in fragments(s) {
            assert!(!text.contains(&f), "a secret reached {what}: {f}\n{text}");
        }
    }
}

/// Run an admin command; (stdout, stdout + stderr).
async fn admin(store: &Path, key_file: Option<&Path>, args: &[&str]) -> (String, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("--store").arg(store);
    if let Some(f) = key_file {
        cmd.arg("--encryption-key-file").arg(f);
    }
    let out = cmd
        .args(args)
        .env("MEMSTRATA_LOG", "trace")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    (stdout, text)
}

#[tokio::test]
async fn server_logs_audit_and_admin_output_hold_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let key_file = dir.path().join("enc.key");
    std::fs::write(&key_file, ENC_KEY).unwrap();
    let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let rogue = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = ec.public_key_raw();
    let jwks = json!({"keys": [{"kty": "EC", "kid": "ec-1", "alg": "ES256", "crv": "P-256",
        "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..])}]});
    let jwks_file = dir.path().join("jwks.json");
    std::fs::write(&jwks_file, jwks.to_string()).unwrap();
    let signing = EncodingKey::from_ec_der(&ec.serialize_der());
    let forged_key = EncodingKey::from_ec_der(&rogue.serialize_der());

    // Port 0: the kernel picks a free port and the server logs it (a port probed and
    // released here could be taken by another process before the server binds it).
    let mut child = Command::new(BIN)
        .arg("--store")
        .arg(&store)
        .arg("--encryption-key-file")
        .arg(&key_file)
        .args(["http", "--listen", "127.0.0.1:0", "--api-key", API_KEY])
        .args(["--oauth-issuer", ISSUER, "--oauth-resource", RESOURCE])
        .arg("--jwks-file")
        .arg(&jwks_file)
        .env("MEMSTRATA_LOG", "trace")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (listening_tx, listening) = tokio::sync::oneshot::channel::<String>();
    let log_reader = tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let mut all = String::new();
        let mut tx = Some(listening_tx);
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("listening on http://")
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(l.clone());
            }
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    // Resolves when the server logs where it listens (or fails if it exits first).
    let line = listening
        .await
        .expect("memstrata-mcp exited before listening");
    let addr: std::net::SocketAddr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));

    let valid = mint(&signing, "ec-1", now() + 600);
    let expired = mint(&signing, "ec-1", now() - 3600);
    let forged = mint(&forged_key, "ec-1", now() + 600);
    let garbage = "garbage-bearer-secret-9d8c7b6a".to_owned();
    let store_call = |n: u64| {
        envelope(
            n,
            "context_store",
            json!({"key": format!("k{n}"), "value": {"note": "hello"}, "namespace": "team"}),
        )
    };

    let r = http(
        addr,
        "POST",
        "/mcp/v1/execute",
        Some(&valid),
        Some(&store_call(1)),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["result"]["success"], true, "{:?}", r.body);
    let r = http(
        addr,
        "POST",
        "/mcp/v1/execute",
        Some(API_KEY),
        Some(&store_call(2)),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    for bad in [&expired, &forged, &garbage, &WRONG_API_KEY.to_owned()] {
        let r = http(
            addr,
            "POST",
            "/mcp/v1/execute",
            Some(bad),
            Some(&store_call(3)),
        )
        .await;
        assert_eq!(r.status, 401, "{:?}", r.body);
        assert!(
            r.header("www-authenticate")
                .is_some_and(|h| h.contains("invalid_token"))
        );
    }
    // A refused call names no secret in its answer either.
    let r = http(
        addr,
        "POST",
        "/mcp/v1/execute",
        Some(&garbage),
        Some(&store_call(4)),
    )
    .await;
    let answer = format!("{:?} {}", r.headers, r.body);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    assert_eq!(
        http(addr, "POST", "/mcp", Some(&valid), Some(&init))
            .await
            .status,
        200
    );

    // SIGTERM: a clean shutdown flushes the store and the last log lines.
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(120), child.wait())
        .await
        .expect("server did not stop on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let logs = log_reader.await.unwrap();
    assert!(
        logs.contains("starting HTTP server"),
        "TRACE logs were not captured: {logs}"
    );
    assert!(logs.to_lowercase().contains("token"), "{logs}");
    let audit = std::fs::read_to_string(store.join("audit.jsonl")).unwrap();
    assert!(
        audit.contains("invalid-token"),
        "refusals are audited: {audit}"
    );

    let key_text = String::from_utf8(ENC_KEY.to_vec()).unwrap();
    let secrets = vec![
        API_KEY.to_owned(),
        WRONG_API_KEY.to_owned(),
        valid.clone(),
        expired,
        forged,
        garbage,
        key_text.clone(),
        hex(ENC_KEY),
        hex(ENC_KEY).to_uppercase(),
    ];
    assert_clean("the server's stderr", &logs, &secrets);
    assert_clean("the audit trail", &audit, &secrets);
    assert_clean("a 401 answer", &answer, &secrets);

    // The store is sealed with that key: status (which prints audit records) opens it.
    let (stdout, out) = admin(&store, Some(&key_file), &["status", "--json"]).await;
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["status"]["status"], "healthy", "{out}");
    assert!(
        v["audit"].as_array().is_some_and(|a| !a.is_empty()),
        "{out}"
    );
    assert_clean("status output", &out, &secrets);
    // A wrong key file (hex of another key) and a malformed one: clear errors, no key material.
    let wrong_key = "5a".repeat(32);
    let wrong_file = dir.path().join("wrong.key");
    std::fs::write(&wrong_file, format!("{wrong_key}\n")).unwrap();
    let (_, out) = admin(&store, Some(&wrong_file), &["status"]).await;
    assert!(out.contains("wrong encryption key"), "{out}");
    let mut all = secrets.clone();
    all.push(wrong_key);
    let malformed = "ZZZZ".repeat(24);
    all.push(malformed.clone());
    assert_clean("a wrong-key error", &out, &all);
    let bad_file = dir.path().join("bad.key");
    std::fs::write(&bad_file, &malformed).unwrap();
    let (_, out) = admin(&store, Some(&bad_file), &["status"]).await;
    assert!(
        out.contains("32 raw bytes or 64 hexadecimal characters"),
        "{out}"
    );
    assert_clean("a malformed-key error", &out, &all);
    // Without the key the store does not open, and says why.
    let (_, out) = admin(&store, None, &["status"]).await;
    assert!(out.contains("is encrypted"), "{out}");
}
