//! The HTTP listener: streamable HTTP at `/mcp`, WebSocket at `/mcp/ws`, and
//! the plain `POST /mcp/v1/execute` envelope, behind one set of checks:
//!
//! 1. `Host` and `Origin` validation (DNS-rebinding protection): only the
//!    loopback names, the bound address and `--allowed-host` names; a
//!    browser `Origin` must name one of those hosts or be listed with
//!    `--allowed-origin`. Refused with 403.
//! 2. API keys and OAuth bearer JWTs ([`crate::security::oauth`]): with either configured,
//!    `Authorization: Bearer <key or JWT>` is required (401 otherwise, with
//!    `resource_metadata` in `WWW-Authenticate` when OAuth is on; a JWT without a
//!    `memstrata:` scope is 403 `insufficient_scope`); the [`Principal`] travels with
//!    the request and every tool checks the contexts it touches.
//!    `/.well-known/oauth-protected-resource` (RFC 9728) needs no credentials.
//! 3. Rate limit (when configured, [`crate::security::limits`]): one token per request and per
//!    principal; `429 Too Many Requests` with `Retry-After` when the bucket is empty.
//!    Over WebSocket each JSON-RPC request takes a token too.
//! 4. Size limits: request bodies and WebSocket messages are capped
//!    (`--max-body-bytes`, default 16 MiB of value plus headroom).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{DefaultBodyLimit, Extension, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rmcp::ServiceExt;
use rmcp::transport::sink_stream::SinkStreamTransport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::security::auth::{AuthFailure, Principal};
use crate::server::{Caller, MemoryServer, Shared};

/// Default request-size cap: a maximal 16 MiB value plus JSON escaping and envelope headroom.
pub const DEFAULT_MAX_BODY_BYTES: usize = 20 * 1024 * 1024;

/// Listener settings.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Address to bind.
    pub listen: SocketAddr,
    /// Extra accepted `Host` names (`name` or `name:port`); `*` disables Host checks.
    pub allowed_hosts: Vec<String>,
    /// Extra accepted browser origins (`https://app.example.com`, or `null`).
    pub allowed_origins: Vec<String>,
    /// Largest request body / WebSocket message in bytes.
    pub max_body_bytes: usize,
    /// Serve HTTPS/WSS with this certificate and key (reloaded on SIGHUP).
    pub tls: Option<crate::transport::tls::TlsFiles>,
}

impl HttpConfig {
    /// Loopback defaults on `listen`.
    pub fn new(listen: SocketAddr) -> Self {
        HttpConfig {
            listen,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            tls: None,
        }
    }

    /// Every accepted Host name: loopback names, the bound IP (when specific), the extras.
    pub fn hosts(&self) -> Vec<String> {
        let mut h: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let ip = self.listen.ip();
        if !ip.is_unspecified() && !ip.is_loopback() {
            h.push(ip.to_string());
        }
        h.extend(self.allowed_hosts.iter().map(|s| s.to_ascii_lowercase()));
        h
    }
}

#[derive(Debug)]
struct App {
    shared: Arc<Shared>,
    hosts: Vec<String>,
    any_host: bool,
    origins: Vec<String>,
    max_body: usize,
    shutdown: CancellationToken,
}

/// Split `host[:port]` / `[v6]:port` into (host, port).
fn split_authority(a: &str) -> (String, Option<&str>) {
    let a = a.trim();
    if let Some(rest) = a.strip_prefix('[')
        && let Some((h, tail)) = rest.split_once(']')
    {
        return (h.to_ascii_lowercase(), tail.strip_prefix(':'));
    }
    match a.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.chars().all(|c| c.is_ascii_digit()) => {
            (h.to_ascii_lowercase(), Some(p))
        }
        _ => (a.to_ascii_lowercase(), None),
    }
}

impl App {
    fn host_ok(&self, authority: &str) -> bool {
        if self.any_host {
            return true;
        }
        let (host, port) = split_authority(authority);
        self.hosts.iter().any(|allowed| {
            let (ah, ap) = split_authority(allowed);
            ah == host && (ap.is_none() || ap == port)
        })
    }

    fn origin_ok(&self, origin: &str) -> bool {
        if self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
            return true;
        }
        match origin.split_once("://") {
            Some((scheme, rest))
                if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") =>
            {
                let authority = rest.split('/').next().unwrap_or("");
                self.host_ok(authority)
            }
            _ => false,
        }
    }
}

fn refuse(status: StatusCode, msg: &str) -> Response {
    let mut r = (status, axum::Json(json!({"error": msg}))).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"memstrata\""),
        );
    }
    r
}

/// 401/403 for a bearer-token failure; with OAuth configured the `WWW-Authenticate`
/// header names the protected resource metadata (RFC 9728, MCP authorization).
fn refuse_bearer(app: &App, status: StatusCode, error: Option<&str>, msg: &str) -> Response {
    let mut r = refuse(status, msg);
    if let Some(o) = app.shared.auth.oauth() {
        let mut v = format!("Bearer resource_metadata=\"{}\"", o.metadata_url());
        if let Some(e) = error {
            v.push_str(&format!(", error=\"{e}\""));
        }
        if status == StatusCode::FORBIDDEN {
            v.push_str(", scope=\"memstrata:*\"");
        }
        if let Ok(h) = HeaderValue::from_str(&v) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, h);
        }
    }
    r
}

/// `429 Too Many Requests` with `Retry-After` (whole seconds, at least 1).
fn too_many(principal: &str, wait: std::time::Duration) -> Response {
    tracing::debug!(principal, wait_ms = wait.as_millis() as u64, "rate limited");
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let mut r = (
        StatusCode::TOO_MANY_REQUESTS,
        axum::Json(json!({
            "error": crate::security::limits::Limits::rate_error(principal, wait).message(),
            "retry_after_ms": wait.as_millis().max(1) as u64,
        })),
    )
        .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    r
}

/// Host/Origin validation, then bearer authentication and the rate limit; the principal
/// goes into the request.
///
/// A refusal is answered without reading the request body. hyper then closes the
/// connection instead of reusing it (unless the body happened to be buffered already), so
/// a refusal of a request with a body says `Connection: close`: a client that kept the
/// connection for its next request would otherwise, depending on timing, see it closed
/// without an answer.
async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let unread_body = has_body(req.headers());
    match admit(&app, req) {
        Ok(req) => next.run(req).await,
        Err(mut refusal) => {
            if unread_body {
                refusal
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            refusal
        }
    }
}

/// Whether a request carries a body (a non-zero `Content-Length`, or chunked).
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}

/// The checks of [`guard`]: the request to serve (with its principal), or the refusal.
#[allow(clippy::result_large_err)] // a refusal is a whole response, built once per request
fn admit(app: &App, mut req: Request) -> Result<Request, Response> {
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    match host {
        Some(h) if app.host_ok(&h) => {}
        Some(h) => {
            tracing::warn!(host = %h, "refused a request for a Host that is not allowed (DNS rebinding protection)");
            return Err(refuse(StatusCode::FORBIDDEN, "Host not allowed"));
        }
        None => return Err(refuse(StatusCode::BAD_REQUEST, "missing Host header")),
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin.to_str().is_ok_and(|o| app.origin_ok(o));
        if !ok {
            tracing::warn!(origin = ?origin, "refused a request from an Origin that is not allowed");
            return Err(refuse(StatusCode::FORBIDDEN, "Origin not allowed"));
        }
    }
    if req.uri().path().starts_with("/.well-known/") {
        // Public metadata (RFC 9728): no credentials needed to discover how to get them.
        return Ok(req);
    }
    let authz = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok());
    match app.shared.auth.authenticate(authz) {
        Ok(p) => {
            if let Err(wait) = app.shared.limits.check_rate(&p.id) {
                return Err(too_many(&p.id, wait));
            }
            req.extensions_mut().insert(p);
            Ok(req)
        }
        Err(AuthFailure::Missing) => {
            if let Some(a) = &app.shared.audit {
                a.record("anonymous", "http", "-", "-", Some("UNAUTHORIZED"));
            }
            Err(refuse_bearer(
                app,
                StatusCode::UNAUTHORIZED,
                None,
                "missing bearer token (Authorization: Bearer <key>)",
            ))
        }
        Err(AuthFailure::Invalid) => {
            if let Some(a) = &app.shared.audit {
                a.record("invalid-key", "http", "-", "-", Some("UNAUTHORIZED"));
            }
            Err(refuse_bearer(
                app,
                StatusCode::UNAUTHORIZED,
                Some("invalid_token"),
                "invalid API key",
            ))
        }
        Err(AuthFailure::InvalidToken(why)) => {
            tracing::info!(reason = %why, "refused a bearer token");
            if let Some(a) = &app.shared.audit {
                a.record("invalid-token", "http", "-", "-", Some("UNAUTHORIZED"));
            }
            Err(refuse_bearer(
                app,
                StatusCode::UNAUTHORIZED,
                Some("invalid_token"),
                &format!("invalid bearer token: {why}"),
            ))
        }
        Err(AuthFailure::InsufficientScope) => {
            if let Some(a) = &app.shared.audit {
                a.record("token-without-scope", "http", "-", "-", Some("FORBIDDEN"));
            }
            Err(refuse_bearer(
                app,
                StatusCode::FORBIDDEN,
                Some("insufficient_scope"),
                "the bearer token carries no memstrata: scope",
            ))
        }
    }
}

/// `GET /.well-known/oauth-protected-resource[/<resource path>]`: RFC 9728 metadata.
async fn resource_metadata(State(app): State<Arc<App>>) -> Response {
    match app.shared.auth.oauth() {
        Some(o) => axum::Json(o.metadata()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn ws(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let shared = Arc::clone(&app.shared);
    let limits_shared = Arc::clone(&app.shared);
    let ct = app.shutdown.child_token();
    upgrade
        .max_message_size(app.max_body)
        .max_frame_size(app.max_body)
        .on_upgrade(move |socket| async move {
            let server = MemoryServer::new(shared, "ws", Caller::Fixed(principal.clone()));
            let (sink, stream) = crate::transport::ws::transport(socket);
            // Execute envelopes are answered beside MCP on the same socket.
            let transport = crate::protocol::envelope::Envelope::new(
                SinkStreamTransport::new(sink, stream),
                server.clone(),
                principal,
            )
            .with_limits(Arc::clone(&limits_shared));
            match server.serve_with_ct(transport, ct).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::debug!("WebSocket MCP session ended during initialization: {e}"),
            }
        })
}

fn rpc_error(id: Value, code: i32, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// `POST /mcp/v1/execute`: `{"jsonrpc":"2.0","id":…,"method":"execute","params":{"tool":…,"parameters":{…}}}`.
async fn execute(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let ct_ok = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| v.starts_with("application/json"));
    if !ct_ok {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            axum::Json(rpc_error(
                Value::Null,
                -32700,
                "expected Content-Type: application/json",
            )),
        )
            .into_response();
    }
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(rpc_error(Value::Null, -32700, &format!("parse error: {e}"))),
            )
                .into_response();
        }
    };
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let bad = |m: &str| {
        (
            StatusCode::BAD_REQUEST,
            axum::Json(rpc_error(id.clone(), -32600, m)),
        )
            .into_response()
    };
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return bad("invalid request: \"jsonrpc\" must be \"2.0\"");
    }
    match msg.get("method").and_then(Value::as_str) {
        Some("execute") => {}
        Some(other) => {
            return (
                StatusCode::OK,
                axum::Json(rpc_error(
                    id,
                    -32601,
                    &format!("method not found: {other:?} (this endpoint serves \"execute\")"),
                )),
            )
                .into_response();
        }
        None => return bad("invalid request: missing \"method\""),
    }
    let server = MemoryServer::new(
        Arc::clone(&app.shared),
        "execute",
        Caller::Fixed(principal.clone()),
    );
    match crate::protocol::envelope::dispatch(&server, msg.get("params"), &principal).await {
        Ok(result) => (
            StatusCode::OK,
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})),
        )
            .into_response(),
        Err(e) => {
            let status = if e.forbidden {
                StatusCode::FORBIDDEN
            } else {
                StatusCode::OK
            };
            (
                status,
                axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": e.error})),
            )
                .into_response()
        }
    }
}

/// The axum router with every endpoint and the guard.
pub fn router(shared: Arc<Shared>, cfg: &HttpConfig, shutdown: CancellationToken) -> Router {
    let hosts = cfg.hosts();
    let any_host = cfg.allowed_hosts.iter().any(|h| h == "*");
    let app = Arc::new(App {
        shared: Arc::clone(&shared),
        hosts: hosts.clone(),
        any_host,
        origins: cfg.allowed_origins.clone(),
        max_body: cfg.max_body_bytes,
        shutdown: shutdown.clone(),
    });
    // The guard above does Host/Origin checks for every route; rmcp repeats the Host check on /mcp.
    let mut mcp_cfg = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(cfg.max_body_bytes);
    mcp_cfg = if any_host {
        mcp_cfg.disable_allowed_hosts()
    } else {
        mcp_cfg.with_allowed_hosts(hosts)
    };
    let factory_shared = Arc::clone(&shared);
    let mcp = StreamableHttpService::new(
        move || {
            Ok(MemoryServer::new(
                Arc::clone(&factory_shared),
                "http",
                Caller::PerRequest,
            ))
        },
        Arc::new(LocalSessionManager::default()),
        mcp_cfg,
    );
    let mut router = Router::new();
    if let Some(o) = shared.auth.oauth() {
        router = router.route(
            "/.well-known/oauth-protected-resource",
            get(resource_metadata),
        );
        let path = o.metadata_path();
        if path != "/.well-known/oauth-protected-resource" {
            router = router.route(&path, get(resource_metadata));
        }
    }
    router
        .route_service("/mcp", mcp)
        .route("/mcp/ws", get(ws))
        .route("/mcp/v1/execute", post(execute))
        .layer(DefaultBodyLimit::max(cfg.max_body_bytes))
        .layer(middleware::from_fn_with_state(Arc::clone(&app), guard))
        .with_state(app)
}

/// Bind `cfg.listen` and serve until `shutdown` is cancelled (over TLS when `cfg.tls` is
/// set). The certificate is loaded before binding, so a bad file fails at start.
pub async fn serve(
    shared: Arc<Shared>,
    cfg: HttpConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let tls = load_tls(&cfg)?;
    let listener = tokio::net::TcpListener::bind(cfg.listen).await?;
    serve_with(listener, tls, shared, cfg, shutdown).await
}

/// Serve on a listener the caller has already bound (for example to port 0, reading the
/// port from [`tokio::net::TcpListener::local_addr`] before any connection), until
/// `shutdown` is cancelled; `cfg.listen` is replaced by the listener's own address (the
/// Host check follows it). No port is ever probed then released, so another process
/// cannot take it in between.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    cfg: HttpConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let tls = load_tls(&cfg)?;
    serve_with(listener, tls, shared, cfg, shutdown).await
}

fn load_tls(cfg: &HttpConfig) -> std::io::Result<Option<Arc<crate::transport::tls::Tls>>> {
    cfg.tls
        .as_ref()
        .map(|files| crate::transport::tls::Tls::new(files.clone()).map_err(std::io::Error::other))
        .transpose()
}

async fn serve_with(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<crate::transport::tls::Tls>>,
    shared: Arc<Shared>,
    mut cfg: HttpConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let local = listener.local_addr()?;
    cfg.listen = local;
    if let Some(o) = shared.auth.oauth() {
        o.spawn_refresh(shutdown.child_token());
    }
    let app = router(shared, &cfg, shutdown.clone());
    let stop = shutdown.clone();
    if let Some(tls) = tls {
        tracing::info!(
            "memstrata-mcp listening on https://{local}/mcp (WebSocket wss://{local}/mcp/ws, envelope POST /mcp/v1/execute)"
        );
        tls.reload_on_sighup(shutdown.clone());
        let listener =
            crate::transport::tls::TlsListener::new(listener, tls, shutdown.child_token())?;
        return axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
    }
    tracing::info!(
        "memstrata-mcp listening on http://{local}/mcp (WebSocket ws://{local}/mcp/ws, envelope POST /mcp/v1/execute)"
    );
    // Small frames (a response after a notification) must not wait for Nagle +
    // delayed ACK (~40 ms per WebSocket write before this; docs/benchmarks/mcp.md).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        assert_eq!(
            split_authority("localhost:8765"),
            ("localhost".into(), Some("8765"))
        );
        assert_eq!(split_authority("[::1]:80"), ("::1".into(), Some("80")));
        assert_eq!(split_authority("::1"), ("::1".into(), None));
        assert_eq!(split_authority("Example.COM"), ("example.com".into(), None));
    }
}
