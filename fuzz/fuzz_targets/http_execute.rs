#![no_main]
//! The HTTP execute envelope with authentication on: any request to `POST
//! /mcp/v1/execute` goes through the real axum router (`memstrata_mcp::transport::router`:
//! the Host/Origin/auth guard, the body limit, the envelope decoding and the
//! dispatcher), in-process through `tower::ServiceExt::oneshot`.
//!
//! Input layout: byte 0 picks the request's headers (bits 0-1 the credentials: none, the
//! full-access key, the restricted key, or the next bytes as a bearer token; bit 2 a
//! foreign Host; bit 3 an Origin; bit 4 no JSON content type); the rest is the body.
//!
//! Must hold: never a panic; never a 5xx; a request without a valid key is refused
//! with 401 before anything runs; a foreign Host or Origin is refused with 403; a 200
//! answer is a JSON-RPC 2.0 object whose error, if any, is never `INTERNAL`,
//! `CORRUPTED`, `STORAGE` or `INDEX`; and the restricted key (write access to `fuzz-*`
//! only) never changes the sentinel in the `vault` context.
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{Request, header};
use memstrata::Memory;
use memstrata_mcp::transport::{HttpConfig, router};
use memstrata_mcp::{Access, Auth, Principal, Shared};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

const FULL_KEY: &str = "fuzz-full-key-0123456789";
const LIMITED_KEY: &str = "fuzz-limited-key-0123456789";
const SENTINEL: &str = r#"{"s":1}"#;

struct Env {
    rt: tokio::runtime::Runtime,
    app: axum::Router,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let limited = Principal::restricted("fuzz-limited", &["*"], &["fuzz-*"], Access::Read);
        let auth = Auth::disabled()
            .with_key(FULL_KEY, Principal::full("fuzz-full"))
            .with_key(LIMITED_KEY, limited);
        let shared: Arc<Shared> =
            Shared::new(Memory::temporary().expect("temporary store"), auth, false)
                .expect("shared state");
        let mut cfg = HttpConfig::new("127.0.0.1:8765".parse().expect("address"));
        cfg.max_body_bytes = 64 * 1024;
        let app = router(shared, &cfg, CancellationToken::new());
        let env = Env { rt, app };
        let (status, body) = env.send(
            Some(FULL_KEY),
            false,
            false,
            true,
            json!({"jsonrpc": "2.0", "id": 1, "method": "execute", "params": {"tool": "context_store",
                "parameters": {"key": "sentinel", "value": {"s": 1}, "namespace": "vault"}}})
            .to_string()
            .into_bytes(),
        );
        assert_eq!(status, 200, "sentinel write: {body}");
        assert_eq!(env.sentinel(), SENTINEL);
        env
    })
}

impl Env {
    fn send(
        &self,
        bearer: Option<&str>,
        foreign_host: bool,
        origin: bool,
        json_type: bool,
        body: Vec<u8>,
    ) -> (u16, Value) {
        let mut req = Request::post("/mcp/v1/execute").header(
            header::HOST,
            if foreign_host {
                "evil.example"
            } else {
                "127.0.0.1:8765"
            },
        );
        if let Some(b) = bearer {
            req = req.header(header::AUTHORIZATION, format!("Bearer {b}"));
        }
        if origin {
            req = req.header(header::ORIGIN, "https://evil.example");
        }
        if json_type {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let Ok(req) = req.body(Body::from(body)) else {
            // The token bytes make no valid header value: no request to send.
            return (0, Value::Null);
        };
        self.rt.block_on(async {
            let resp = self.app.clone().oneshot(req).await.expect("infallible");
            let status = resp.status().as_u16();
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .expect("response body");
            (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
        })
    }

    /// The vault sentinel, read with the full-access key.
    fn sentinel(&self) -> String {
        let (_, body) = self.send(
            Some(FULL_KEY),
            false,
            false,
            true,
            json!({"jsonrpc": "2.0", "id": 2, "method": "execute", "params": {"tool": "context_retrieve",
                "parameters": {"key": "sentinel", "namespace": "vault"}}})
            .to_string()
            .into_bytes(),
        );
        body["result"]["value"].to_string()
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let e = env();
    let (bearer, body): (Option<String>, &[u8]) = match flags & 3 {
        0 => (None, rest),
        1 => (Some(FULL_KEY.to_owned()), rest),
        2 => (Some(LIMITED_KEY.to_owned()), rest),
        _ => {
            // A token of the next n bytes (n = first byte % 48), then the body.
            let n = rest.first().map_or(0, |&b| usize::from(b) % 48);
            let tok = rest.get(1..1 + n).unwrap_or_default();
            let body = rest.get(1 + n..).unwrap_or_default();
            (Some(String::from_utf8_lossy(tok).into_owned()), body)
        }
    };
    let foreign_host = flags & 4 != 0;
    let origin = flags & 8 != 0;
    let json_type = flags & 16 == 0;
    let valid_key = matches!(bearer.as_deref(), Some(FULL_KEY | LIMITED_KEY));
    let (status, answer) = e.send(
        bearer.as_deref(),
        foreign_host,
        origin,
        json_type,
        body.to_vec(),
    );
    if status == 0 {
        return;
    }
    assert!(status < 500, "HTTP {status}: {answer}");
    if foreign_host || origin {
        assert_eq!(status, 403, "foreign Host/Origin not refused: {answer}");
    } else if !valid_key {
        assert_eq!(status, 401, "no valid key but not refused: {answer}");
    }
    if status == 200 {
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        let code = answer["error"]["data"]["code"].as_str().unwrap_or("");
        assert!(
            !["INTERNAL", "CORRUPTED", "STORAGE", "INDEX"].contains(&code),
            "{answer}"
        );
    }
    if bearer.as_deref() != Some(FULL_KEY) {
        assert_eq!(e.sentinel(), SENTINEL, "the vault changed without write access");
    }
});
