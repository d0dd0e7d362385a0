//! OAuth 2.1 resource server: JWTs minted in the test by a local issuer (RS256, ES256,
//! EdDSA keys in a JWKS file), checked on a real loopback listener beside an API key;
//! and no secret (API key, token) in the logs or the audit trail (issue 16).

mod security_support;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use memstrata::Memory;
use memstrata_mcp::security::{
    DEFAULT_LEEWAY_SECS, JWKS_REREAD_SECS, JwksSource, OAuth, OAuthConfig,
};
use memstrata_mcp::transport::HttpConfig;
use memstrata_mcp::{Auth, Shared};
use security_support::{envelope, http, serve};

const API_KEY: &str = "plain-api-key-5678";
const ISSUER: &str = "https://idp.test.example/";
const RESOURCE: &str = "http://localhost/mcp";

/// A 2048-bit RSA key made for this test only (RSA generation is not in `ring`).
const RSA_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIIEvwIBADANBgkqhkiG9w0BAQEFAASCBKkwggSlAgEAAoIBAQDjzbXLv73tdEej
cWYA2s4D5v4i5S2cxvGXrDrLRn6Ye5EQT3ukXmsqeDREW0btAuJRrcGmyjOFZBko
9ADyVgsEY+UD9TM/yQW4n7JTnS7wk9Xw47J1rjsPlPJiVxRkRL7QTdFkmtEAkNVZ
Qq+rndMi9MZM7QUu2Rf8x04xgtexquE+i57+jh/aDT0fY5890FBO/xUdVwHY4YfR
DQaF55T6KMgRWTaQ5NUHZx8EPRJVmNgAdS67VcCReDrl2Qqsh9lrjR6Ws0nAzRW3
1o5wVV2U3HXTPi03F3VoRO5lZalE1/ZA3xI46FFZbxUBixXhpBUqSuM8Bi6iI4qB
yNaZ3s5zAgMBAAECggEABZimIK1DMzQqFl/Qy7CUYxAnqh/LMRDKGpnGj/vZXFGc
zLPHK9CN/WsajZtYcLYjbTJBkaFiBqLg41qrM0jd2GvD0ocRjT2ZAGIb9WXlI0/e
b56IYc+377gPBE9zVstBjMh8nmYXQFZOh3TV7/demns86+Lev7nhlvomd5zpQ5oN
NM9gasJb9QBnbw7Qst8bubZG4rZzlNMbJ9YtHLzYwZiM9LCle++9zVsN+Dq8gJuw
lDDNcRi0fi+idi6MYJXD0elWS3bi8e9dN/fb2tOzixSkINDDlYlUx45/9rFSEr2f
zWdyxYvkRSdC42CiHRZtMoV7R/H6wTY7IKQl02PLMQKBgQD0YYICyVJb6p7Z9BUS
QHxAzwUKYWbjLwj7ttAPWO7oTE8V+Nm5MmWeAlDMcLYuXEm4uDHJ5ltumc9Tj4BV
ZCjPQzHkJ08mqXL9UmU/ilURfFkRAvMayRuvBc2+ihKCKY3W8Q+L1vmA75n6O+Fs
Y6GYlq7zCr0eV9UQLIq48hA+RwKBgQDuom45mjzsbKuxzcWGrdse87ud0Qg98Zt9
9cXgxPzjn/fRsx2Dov4kt/3xYNnGgMB2wTTS4VthFx9rV3U9h6ITbnQAHIUlL8or
lUqJ8JDvHJ47jvV2jkZ1JnnOrF9u97hi4oiUiPFjK0ItHYKgodv2OYDwSJ4t/nZ+
VBX41u7odQKBgQCOIXff7v77foVM9eybZO3fM4gW9XdFgkGTREvV4T9x04/bk5Pt
ZiY7s9USUiti40HtMROj/VoIBWTTkI5vG4WwpcAKleIu9jZuptFEF0xKkyup/TEu
zvBO5u02eE8zbL+V1zXXevw5xSCkrNb6lyeQ+3Jc4E4Fq8e7VGyKDB7uWQKBgQDs
EUN5OFuMhvRSsHz2/oYF2JeBR4gfvyNTOA7IjBagF1/Q0qAf2N4Q9PMCFg1ZkYTT
9c2Lz+PV6EnsplgUxlhPYLTgZ1ZPszcMZmOWkaTO5kCiKooo/hY1ThqxmVPPMr/1
EqSKS+5/bAvLFaZjwbsXmUs0aKISXehakFQsFnPBAQKBgQDDctMxLkTNSqww4FQr
XKbIiWDDaWPFtIsDQZtKJINZK3aZ5UJO9ge0e3diqmGkXgImhQ4Hw/dbpumfE25B
+e+BG0wEsZ5Yqnxdz9DrRnD5pFKwwEm4ZZclmyLMhV4E4tZt5Wp2tFv6dZUgohY6
929tLKKVHhvj+Eh0T2eRSEZzMg==
-----END PRIVATE KEY-----";
const RSA_N: &str = "4821y7-97XRHo3FmANrOA-b-IuUtnMbxl6w6y0Z-mHuREE97pF5rKng0RFtG7QLiUa3BpsozhWQZKPQA8lYLBGPlA_UzP8kFuJ-yU50u8JPV8OOyda47D5TyYlcUZES-0E3RZJrRAJDVWUKvq53TIvTGTO0FLtkX_MdOMYLXsarhPoue_o4f2g09H2OfPdBQTv8VHVcB2OGH0Q0GheeU-ijIEVk2kOTVB2cfBD0SVZjYAHUuu1XAkXg65dkKrIfZa40elrNJwM0Vt9aOcFVdlNx10z4tNxd1aETuZWWpRNf2QN8SOOhRWW8VAYsV4aQVKkrjPAYuoiOKgcjWmd7Ocw";

struct Issuer {
    rsa: EncodingKey,
    ec: EncodingKey,
    ed: EncodingKey,
    /// An EC key that is not in the key set (bad signatures).
    rogue: EncodingKey,
    jwks: Value,
}

fn issuer() -> Issuer {
    let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let ed = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let rogue = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = ec.public_key_raw();
    assert_eq!(point.len(), 65);
    let jwks = json!({"keys": [
        {"kty": "RSA", "kid": "rsa-1", "alg": "RS256", "use": "sig", "n": RSA_N, "e": "AQAB"},
        {"kty": "EC", "kid": "ec-1", "alg": "ES256", "crv": "P-256",
         "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..])},
        {"kty": "OKP", "kid": "ed-1", "alg": "EdDSA", "crv": "Ed25519", "x": B64.encode(ed.public_key_raw())},
    ]});
    Issuer {
        rsa: EncodingKey::from_rsa_pem(RSA_PEM.as_bytes()).unwrap(),
        ec: EncodingKey::from_ec_pem(ec.serialize_pem().as_bytes()).unwrap(),
        ed: EncodingKey::from_ed_pem(ed.serialize_pem().as_bytes()).unwrap(),
        rogue: EncodingKey::from_ec_pem(rogue.serialize_pem().as_bytes()).unwrap(),
        jwks,
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn claims(scope: &str) -> Value {
    json!({"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": now() + 600, "iat": now(), "scope": scope})
}

fn mint(key: &EncodingKey, alg: Algorithm, kid: &str, claims: &Value) -> String {
    let mut h = Header::new(alg);
    h.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&h, claims, key).unwrap()
}

async fn start(dir: &std::path::Path, iss: &Issuer) -> (SocketAddr, Arc<Shared>) {
    let jwks_file = dir.join("jwks.json");
    std::fs::write(&jwks_file, iss.jwks.to_string()).unwrap();
    let oauth = OAuth::load(OAuthConfig {
        issuer: ISSUER.into(),
        resource: RESOURCE.into(),
        jwks: JwksSource::File(jwks_file),
        leeway: DEFAULT_LEEWAY_SECS,
        jwks_reread: Duration::from_secs(JWKS_REREAD_SECS),
    })
    .await
    .unwrap();
    let auth = Auth::disabled().with_full_keys([API_KEY]).with_oauth(oauth);
    let shared = Shared::new(Memory::temporary().unwrap(), auth, true).unwrap();
    let (addr, _stop) = serve(
        Arc::clone(&shared),
        HttpConfig::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    (addr, shared)
}

fn store(ns: &str) -> Value {
    envelope(
        1,
        "context_store",
        json!({"key": "k", "value": 1, "namespace": ns}),
    )
}

fn retrieve(ns: &str) -> Value {
    envelope(2, "context_retrieve", json!({"key": "k", "namespace": ns}))
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn bearer_jwts_and_api_keys_with_no_secret_in_logs() {
    let logs = Captured::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    // Global, not scoped: callsites first hit by the other test's threads must not be
    // cached as uninteresting. The only global subscriber of this test binary.
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let iss = issuer();
    let (addr, shared) = start(dir.path(), &iss).await;
    let mut secrets = vec![API_KEY.to_owned()];
    let call = |token: String, body: Value| {
        let t = token.clone();
        async move { http(addr, "POST", "/mcp/v1/execute", Some(&t), Some(&body)).await }
    };

    // RFC 9728 metadata, without credentials, at the resource's path and at the root.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let r = http(addr, "GET", path, None, None).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.body["resource"], RESOURCE);
        assert_eq!(r.body["authorization_servers"][0], ISSUER);
    }
    // 401 names the metadata.
    let r = http(
        addr,
        "POST",
        "/mcp/v1/execute",
        None,
        Some(&store("team-a")),
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate").unwrap(),
        "Bearer resource_metadata=\"http://localhost/.well-known/oauth-protected-resource/mcp\""
    );

    // Valid tokens, each algorithm, scoped to write team-* and read shared.
    let scope = "openid memstrata:write:team-* memstrata:read:shared";
    for (key, alg, kid) in [
        (&iss.rsa, Algorithm::RS256, "rsa-1"),
        (&iss.ec, Algorithm::ES256, "ec-1"),
        (&iss.ed, Algorithm::EdDSA, "ed-1"),
    ] {
        let t = mint(key, alg, kid, &claims(scope));
        secrets.push(t.clone());
        let r = call(t.clone(), store("team-a")).await;
        assert_eq!(r.status, 200, "{alg:?}: {:?}", r.body);
        assert_eq!(r.body["result"]["success"], true, "{alg:?}: {:?}", r.body);
        // Out of scope: the same refusal as a restricted API key.
        let r = call(t.clone(), store("shared")).await;
        assert_eq!(r.status, 403, "{alg:?}: {:?}", r.body);
        assert_eq!(r.body["error"]["data"]["code"], "FORBIDDEN");
        let r = call(t.clone(), retrieve("shared")).await;
        assert_eq!(r.status, 200, "{alg:?}: {:?}", r.body);
        let r = call(t, envelope(3, "system_status", json!({}))).await;
        assert_eq!(r.status, 403, "no global scope: {:?}", r.body);
    }
    // `scp` as an array, and the all-access scope.
    let mut c = claims("");
    c["scp"] = json!(["memstrata:*"]);
    let t = mint(&iss.ec, Algorithm::ES256, "ec-1", &c);
    secrets.push(t.clone());
    assert_eq!(
        call(t, envelope(3, "system_status", json!({})))
            .await
            .status,
        200
    );

    // Refused tokens: 401 invalid_token (403 insufficient_scope for a token without scope).
    let mut cases: Vec<(&str, String, u16)> = Vec::new();
    let mut expired = claims(scope);
    expired["exp"] = json!(now() - 3600);
    cases.push((
        "expired",
        mint(&iss.ec, Algorithm::ES256, "ec-1", &expired),
        401,
    ));
    let mut early = claims(scope);
    early["nbf"] = json!(now() + 3600);
    cases.push((
        "not yet valid",
        mint(&iss.ec, Algorithm::ES256, "ec-1", &early),
        401,
    ));
    let mut aud = claims(scope);
    aud["aud"] = json!("https://other.example/mcp");
    cases.push((
        "wrong audience",
        mint(&iss.rsa, Algorithm::RS256, "rsa-1", &aud),
        401,
    ));
    let mut wrong_iss = claims(scope);
    wrong_iss["iss"] = json!("https://evil.example/");
    cases.push((
        "wrong issuer",
        mint(&iss.ed, Algorithm::EdDSA, "ed-1", &wrong_iss),
        401,
    ));
    cases.push((
        "bad signature",
        mint(&iss.rogue, Algorithm::ES256, "ec-1", &claims(scope)),
        401,
    ));
    cases.push((
        "unknown kid",
        mint(&iss.ec, Algorithm::ES256, "ec-404", &claims(scope)),
        401,
    ));
    cases.push((
        "key of another algorithm",
        mint(&iss.ec, Algorithm::ES256, "rsa-1", &claims(scope)),
        401,
    ));
    let none_header = B64.encode(br#"{"alg":"none","typ":"JWT","kid":"ec-1"}"#);
    let none_body = B64.encode(claims(scope).to_string());
    cases.push(("alg none", format!("{none_header}.{none_body}."), 401));
    let hs = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims(scope),
        &EncodingKey::from_secret(b"guessable-shared-secret"),
    )
    .unwrap();
    cases.push(("HS256", hs, 401));
    cases.push((
        "missing scope",
        mint(
            &iss.rsa,
            Algorithm::RS256,
            "rsa-1",
            &claims("openid profile"),
        ),
        403,
    ));
    for (what, token, status) in cases {
        secrets.push(token.clone());
        let r = call(token, store("team-a")).await;
        assert_eq!(r.status, status, "{what}: {:?}", r.body);
        let h = r.header("www-authenticate").unwrap_or("");
        assert!(h.contains("resource_metadata="), "{what}: {h}");
        let want = if status == 401 {
            "error=\"invalid_token\""
        } else {
            "error=\"insufficient_scope\""
        };
        assert!(h.contains(want), "{what}: {h}");
    }

    // API keys keep working beside OAuth; a wrong key is refused.
    let r = call(API_KEY.to_owned(), envelope(3, "system_status", json!({}))).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let wrong = "not-the-api-key-999".to_owned();
    secrets.push(wrong.clone());
    assert_eq!(call(wrong, store("team-a")).await.status, 401);
    // The streamable HTTP endpoint too (initialize with a token).
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let t = mint(&iss.ed, Algorithm::EdDSA, "ed-1", &claims(scope));
    secrets.push(t.clone());
    let r = http(addr, "POST", "/mcp", Some(&t), Some(&init)).await;
    assert_eq!(r.status, 200);

    // No secret in the logs (captured at TRACE) or the audit trail.
    let audit = std::fs::read_to_string(shared.mem.path().join("audit.jsonl")).unwrap_or_default();
    assert!(audit.contains("invalid-token"), "{audit}");
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("refused a bearer token"),
        "the capture saw no server logs"
    );
    for s in &secrets {
        // Any JWT part long enough to matter (the signature is the secret-bearing one).
        for part in s.split('.').filter(|p| p.len() >= 16) {
            assert!(!logs.contains(part), "a secret reached the logs: {part}");
            assert!(
                !audit.contains(part),
                "a secret reached the audit trail: {part}"
            );
        }
    }
}

/// `--jwks-url`: the key set is fetched from a local issuer on loopback, and fetched
/// again when a token names a key it does not know yet (rotation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwks_url_is_fetched_and_refetched_on_an_unknown_kid() {
    use axum::routing::get;
    let iss = issuer();
    let served = Arc::new(Mutex::new(iss.jwks.clone()));
    let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (s2, f2) = (Arc::clone(&served), Arc::clone(&fetches));
    let app = axum::Router::new().route(
        "/certs",
        get(move || {
            let (s, f) = (Arc::clone(&s2), Arc::clone(&f2));
            async move {
                f.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                axum::Json(s.lock().unwrap().clone())
            }
        }),
    );
    let idp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let idp_addr = idp.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(idp, app).await });

    let oauth = OAuth::load(OAuthConfig {
        issuer: ISSUER.into(),
        resource: RESOURCE.into(),
        jwks: JwksSource::Url(format!("http://{idp_addr}/certs")),
        leeway: DEFAULT_LEEWAY_SECS,
        jwks_reread: Duration::ZERO,
    })
    .await
    .unwrap();
    let auth = Auth::disabled().with_oauth(oauth);
    let shared = Shared::new(Memory::temporary().unwrap(), auth, false).unwrap();
    let (addr, stop) = serve(shared, HttpConfig::new("127.0.0.1:0".parse().unwrap())).await;
    assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 1);
    let scope = "memstrata:write:team-*";
    let t = mint(&iss.ec, Algorithm::ES256, "ec-1", &claims(scope));
    let r = http(
        addr,
        "POST",
        "/mcp/v1/execute",
        Some(&t),
        Some(&store("team-a")),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    // The issuer rotates: a new key "ec-2" appears in its key set.
    let new_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = new_key.public_key_raw();
    served.lock().unwrap()["keys"].as_array_mut().unwrap().push(
        json!({"kty": "EC", "kid": "ec-2", "alg": "ES256", "crv": "P-256",
            "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..])}),
    );
    let enc = EncodingKey::from_ec_pem(new_key.serialize_pem().as_bytes()).unwrap();
    let t2 = mint(&enc, Algorithm::ES256, "ec-2", &claims(scope));
    let mut status = 0;
    // Bounded (about a minute on a loaded machine), not timed: it ends at the first 200.
    for _ in 0..1200 {
        let r = http(
            addr,
            "POST",
            "/mcp/v1/execute",
            Some(&t2),
            Some(&store("team-a")),
        )
        .await;
        status = r.status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200, "the rotated key was never fetched");
    assert!(fetches.load(std::sync::atomic::Ordering::SeqCst) >= 2);
    // Plain http is refused for a non-loopback issuer.
    let e = memstrata_mcp::security::fetch_jwks("http://idp.example.com/certs")
        .await
        .unwrap_err();
    assert!(e.contains("must be https"), "{e}");
    stop.cancel();
}
