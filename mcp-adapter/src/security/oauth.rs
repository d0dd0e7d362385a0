//! OAuth 2.1 resource server (MCP authorization specification): bearer JWTs issued
//! by an authorization server, checked against its JSON Web Key Set.
//!
//! `memstrata-mcp http --oauth-issuer https://idp.example.com/ --oauth-resource
//! https://mem.example.com/mcp --jwks-file jwks.json` accepts
//! `Authorization: Bearer <JWT>` beside the API keys. A token is accepted when:
//!
//! - its header names `RS256`, `ES256` or `EdDSA` (anything else, `none` included, is
//!   refused) and a `kid` found in the key set (a set of one key may omit `kid`), and the
//!   signature verifies with that key;
//! - `iss` is the configured issuer, `aud` contains the configured resource URI, `exp`
//!   is in the future and `nbf` (when present) in the past, both with a leeway of
//!   [`DEFAULT_LEEWAY_SECS`] seconds;
//! - it carries at least one `memstrata:` scope (`scope`, space-separated, or `scp`, an
//!   array). Without one the answer is `403` with `error="insufficient_scope"`.
//!
//! Scopes map onto the permissions of API keys ([`crate::security::auth`]):
//!
//! | scope | grants |
//! | --- | --- |
//! | `memstrata:read:<pattern>` | read contexts matching `<pattern>` (`name`, `prefix*` or `*`) |
//! | `memstrata:write:<pattern>` | read and write contexts matching `<pattern>` |
//! | `memstrata:global:read` / `memstrata:global:write` | engine-wide data (sessions, timesheet, status, optimize) |
//! | `memstrata:*` | everything (as a full API key) |
//!
//! The principal (audit "who", rate-limit bucket) is `jwt:<sub>` (or `jwt:<client_id>`
//! when there is no `sub`). The key set file is read at start and again when a token
//! names an unknown `kid` (at most once every [`JWKS_REREAD_SECS`] seconds), so keys can be
//! rotated without a restart. Tokens never appear in logs or the audit trail.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::security::auth::{Access, Principal};
use crate::security::outbound::{Endpoint, webpki_client};

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
pub const DEFAULT_LEEWAY_SECS: u64 = 60;
/// Shortest interval between two re-reads of the key set for an unknown `kid`.
pub const JWKS_REREAD_SECS: u64 = 30;
/// Accepted signature algorithms.
pub const ALGORITHMS: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// The command-line flags of `memstrata-mcp http` for OAuth bearer tokens.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OAuthArgs {
    /// Accept JWT bearer tokens from this issuer (its `iss`, e.g. https://idp.example.com/).
    #[arg(long, value_name = "URL", requires = "oauth_resource")]
    pub oauth_issuer: Option<String>,
    /// This server's resource URI, required in the tokens' `aud` (e.g. https://mem.example.com/mcp).
    #[arg(long, value_name = "URI", requires = "oauth_issuer")]
    pub oauth_resource: Option<String>,
    /// The issuer's JSON Web Key Set (a local copy of its jwks_uri document).
    #[arg(
        long,
        value_name = "FILE",
        requires = "oauth_issuer",
        conflicts_with = "jwks_url"
    )]
    pub jwks_file: Option<PathBuf>,
    /// The issuer's jwks_uri: fetched at start, again every hour and on an unknown kid
    /// (https, or http on loopback only).
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub jwks_url: Option<String>,
}

impl OAuthArgs {
    /// The configuration, when `--oauth-issuer` was given.
    pub fn config(&self) -> Result<Option<OAuthConfig>, String> {
        let Some(issuer) = self.oauth_issuer.clone() else {
            return Ok(None);
        };
        let jwks = match (&self.jwks_file, &self.jwks_url) {
            (Some(f), None) => JwksSource::File(f.clone()),
            (None, Some(u)) => JwksSource::Url(u.clone()),
            _ => return Err("--oauth-issuer needs one of --jwks-file or --jwks-url".into()),
        };
        Ok(Some(OAuthConfig {
            issuer,
            resource: self.oauth_resource.clone().unwrap_or_default(),
            jwks,
            leeway: DEFAULT_LEEWAY_SECS,
            jwks_reread: Duration::from_secs(JWKS_REREAD_SECS),
        }))
    }
}

/// What to accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// Expected `iss`.
    pub issuer: String,
    /// This server's resource URI, expected in `aud`.
    pub resource: String,
    /// Where the key set comes from.
    pub jwks: JwksSource,
    /// Leeway on `exp`/`nbf` in seconds.
    pub leeway: u64,
    /// Shortest interval between two re-reads of the key set for an unknown `kid`.
    pub jwks_reread: Duration,
}

/// Where the issuer's JSON Web Key Set comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A local file (read again on an unknown `kid`).
    File(PathBuf),
    /// The issuer's `jwks_uri` (fetched again every hour and on an unknown `kid`).
    Url(String),
}

/// How often a `--jwks-url` key set is fetched again without being asked.
pub const JWKS_REFRESH: Duration = Duration::from_secs(3600);
/// Largest key set document accepted.
const MAX_JWKS_BYTES: u64 = 1 << 20;

/// Why a token was refused (never contains the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Malformed, badly signed, expired, wrong issuer or audience, unknown key.
    Invalid(String),
    /// Valid, but with no `memstrata:` scope.
    InsufficientScope,
}

#[derive(Debug)]
struct Keys {
    set: JwkSet,
    read_at: Instant,
}

/// A configured OAuth resource server.
#[derive(Debug)]
pub struct OAuth {
    cfg: OAuthConfig,
    keys: Mutex<Keys>,
    /// Asks the `--jwks-url` refresher for a fetch now.
    refresh: tokio::sync::Notify,
}

#[derive(Debug, Deserialize)]
struct Claims {
    sub: Option<String>,
    client_id: Option<String>,
    scope: Option<String>,
    scp: Option<Vec<String>>,
}

fn read_jwks(path: &std::path::Path) -> Result<JwkSet, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--jwks-file {}: {e}", path.display()))?;
    parse_jwks(text.as_bytes(), &format!("--jwks-file {}", path.display()))
}

fn parse_jwks(bytes: &[u8], source: &str) -> Result<JwkSet, String> {
    let set: JwkSet = serde_json::from_slice(bytes)
        .map_err(|e| format!("{source}: not a JSON Web Key Set: {e}"))?;
    if set.keys.is_empty() {
        return Err(format!("{source}: no keys"));
    }
    Ok(set)
}

/// GET a key set over HTTPS (webpki roots), or plain HTTP to a loopback host.
pub async fn fetch_jwks(url: &str) -> Result<JwkSet, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let source = format!("--jwks-url {url}");
    let Endpoint {
        https,
        host,
        port,
        authority,
        path,
    } = Endpoint::parse(&source, url)?;
    let io_err = |e: std::io::Error| format!("{source}: {e}");
    let tcp = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    .map_err(|_| format!("{source}: connection timed out"))?
    .map_err(io_err)?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nUser-Agent: memstrata-mcp\r\nConnection: close\r\n\r\n"
    );
    let mut raw = Vec::new();
    let exchange = async {
        if https {
            let cfg = webpki_client(&source)?;
            let name = rustls_pki_types::ServerName::try_from(host.clone())
                .map_err(|e| format!("{source}: {e}"))?;
            let mut tls = tokio_rustls::TlsConnector::from(cfg)
                .connect(name, tcp)
                .await
                .map_err(io_err)?;
            tls.write_all(req.as_bytes()).await.map_err(io_err)?;
            // Servers may close without close_notify after a complete response.
            let _ = (&mut tls).take(MAX_JWKS_BYTES).read_to_end(&mut raw).await;
        } else {
            let mut tcp = tcp;
            tcp.write_all(req.as_bytes()).await.map_err(io_err)?;
            (&mut tcp)
                .take(MAX_JWKS_BYTES)
                .read_to_end(&mut raw)
                .await
                .map_err(io_err)?;
        }
        Ok::<(), String>(())
    };
    tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .map_err(|_| format!("{source}: timed out"))??;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("{source}: no HTTP response"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let body = &raw[split + 4..];
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("{source}: HTTP status {status}"));
    }
    if head.contains("transfer-encoding: chunked") {
        parse_jwks(
            &dechunk(body).ok_or_else(|| format!("{source}: bad chunked body"))?,
            &source,
        )
    } else {
        parse_jwks(body, &source)
    }
}

/// Decode a `Transfer-Encoding: chunked` body.
pub(crate) fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&b[..eol]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

/// The permissions granted by `scopes`; `None` when none is a `memstrata:` scope.
pub fn principal_from_scopes<'a>(
    id: String,
    scopes: impl IntoIterator<Item = &'a str>,
) -> Option<Principal> {
    let (mut read, mut write, mut global, mut any) = (Vec::new(), Vec::new(), Access::None, false);
    for s in scopes {
        let Some(rest) = s.strip_prefix("memstrata:") else {
            continue;
        };
        match rest.split_once(':') {
            None if rest == "*" => return Some(Principal::full(id)),
            Some(("read", p)) if !p.is_empty() => read.push(p.to_owned()),
            Some(("write", p)) if !p.is_empty() => write.push(p.to_owned()),
            Some(("global", "read")) => global = global.max(Access::Read),
            Some(("global", "write")) => global = Access::Write,
            _ => continue,
        }
        any = true;
    }
    any.then(|| Principal::from_patterns(id, read, write, global))
}

impl OAuth {
    /// Read (or fetch) the key set and check the configuration.
    pub async fn load(cfg: OAuthConfig) -> Result<Self, String> {
        if cfg.issuer.trim().is_empty() || cfg.resource.trim().is_empty() {
            return Err("--oauth-issuer and --oauth-resource must not be empty".into());
        }
        let set = match &cfg.jwks {
            JwksSource::File(f) => read_jwks(f)?,
            JwksSource::Url(u) => fetch_jwks(u).await?,
        };
        Ok(OAuth {
            cfg,
            keys: Mutex::new(Keys {
                set,
                read_at: Instant::now(),
            }),
            refresh: tokio::sync::Notify::new(),
        })
    }

    /// With `--jwks-url`: fetch the key set every `JWKS_REFRESH` and when a token names
    /// an unknown `kid`, until `stop`. A failed fetch keeps the previous keys.
    pub fn spawn_refresh(self: &std::sync::Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let JwksSource::Url(url) = self.cfg.jwks.clone() else {
            return;
        };
        let me = std::sync::Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(JWKS_REFRESH) => {}
                    () = me.refresh.notified() => {}
                }
                match fetch_jwks(&url).await {
                    Ok(set) => {
                        let mut k = me.keys.lock();
                        k.set = set;
                        k.read_at = Instant::now();
                    }
                    Err(e) => tracing::warn!("key set not refreshed, the previous keys stay: {e}"),
                }
            }
        });
    }

    /// The configuration.
    pub fn config(&self) -> &OAuthConfig {
        &self.cfg
    }

    fn key(&self, kid: Option<&str>) -> Option<Jwk> {
        let find = |set: &JwkSet| match kid {
            Some(k) => set.find(k).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        let mut keys = self.keys.lock();
        if let Some(k) = find(&keys.set) {
            return Some(k);
        }
        // Unknown kid: the issuer may have rotated its keys; re-read, rate-limited.
        if keys.read_at.elapsed() >= self.cfg.jwks_reread {
            keys.read_at = Instant::now();
            match &self.cfg.jwks {
                JwksSource::File(f) => match read_jwks(f) {
                    Ok(set) => keys.set = set,
                    Err(e) => tracing::warn!("cannot re-read the key set: {e}"),
                },
                // Fetched in the background; this token is refused, a retry may pass.
                JwksSource::Url(_) => self.refresh.notify_one(),
            }
            return find(&keys.set);
        }
        None
    }

    /// Validate a bearer token and map its scopes to a [`Principal`].
    pub fn validate(&self, token: &str) -> Result<Principal, TokenError> {
        let bad = |m: &str| TokenError::Invalid(m.to_owned());
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| TokenError::Invalid(format!("malformed token: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(TokenError::Invalid(format!(
                "algorithm {:?} not accepted (RS256, ES256, EdDSA)",
                header.alg
            )));
        }
        let jwk = self
            .key(header.kid.as_deref())
            .ok_or_else(|| bad("no key in the key set for the token's kid"))?;
        if let Some(ka) = jwk.common.key_algorithm
            && format!("{ka:?}") != format!("{:?}", header.alg)
        {
            return Err(bad("the token's algorithm does not match its key"));
        }
        let key = DecodingKey::from_jwk(&jwk)
            .map_err(|e| TokenError::Invalid(format!("unusable key in the key set: {e}")))?;
        let mut v = Validation::new(header.alg);
        v.algorithms = vec![header.alg];
        v.leeway = self.cfg.leeway;
        v.validate_nbf = true;
        v.set_issuer(&[&self.cfg.issuer]);
        v.set_audience(&[&self.cfg.resource]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Claims>(token, &key, &v)
            .map_err(|e| TokenError::Invalid(format!("{:?}", e.kind())))?;
        let c = data.claims;
        let who = c
            .sub
            .or(c.client_id)
            .ok_or_else(|| bad("the token has neither sub nor client_id"))?;
        let mut scopes: HashSet<String> = c
            .scope
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        scopes.extend(c.scp.unwrap_or_default());
        principal_from_scopes(format!("jwt:{who}"), scopes.iter().map(String::as_str))
            .ok_or(TokenError::InsufficientScope)
    }

    /// Path of the RFC 9728 metadata for the resource URI: `/.well-known/oauth-protected-resource`
    /// followed by the resource's path (`/mcp` for `https://host/mcp`).
    pub fn metadata_path(&self) -> String {
        let path = resource_path(&self.cfg.resource);
        format!("/.well-known/oauth-protected-resource{path}")
    }

    /// Absolute URL of the metadata, for `WWW-Authenticate: Bearer resource_metadata=`.
    pub fn metadata_url(&self) -> String {
        let r = &self.cfg.resource;
        let origin_end = r
            .find("://")
            .map(|i| i + 3)
            .and_then(|s| r[s..].find('/').map(|j| s + j))
            .unwrap_or(r.len());
        format!("{}{}", &r[..origin_end], self.metadata_path())
    }

    /// RFC 9728 protected resource metadata.
    pub fn metadata(&self) -> Value {
        json!({
            "resource": self.cfg.resource,
            "authorization_servers": [self.cfg.issuer],
            "bearer_methods_supported": ["header"],
            "resource_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"],
            "scopes_supported": [
                "memstrata:*",
                "memstrata:read:*",
                "memstrata:write:*",
                "memstrata:global:read",
                "memstrata:global:write"
            ],
            "resource_name": "Memstrata MCP server",
        })
    }
}

/// The path of a URI (`/mcp` for `https://host/mcp`), without a trailing `/`.
fn resource_path(uri: &str) -> &str {
    let rest = uri.split_once("://").map_or(uri, |(_, r)| r);
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    let path = path.split(['?', '#']).next().unwrap_or("");
    path.trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_map_to_permissions() {
        let p = principal_from_scopes(
            "jwt:a".into(),
            ["openid", "memstrata:read:team-*", "memstrata:write:mine"],
        )
        .unwrap();
        assert!(p.can_read("team-x") && p.can_read("mine") && !p.can_read("other"));
        assert!(p.allows(&crate::security::auth::Target::Context(
            "mine".into(),
            Access::Write
        )));
        assert!(!p.allows(&crate::security::auth::Target::Context(
            "team-x".into(),
            Access::Write
        )));
        assert!(!p.allows(&crate::security::auth::Target::Global(Access::Read)));
        assert!(principal_from_scopes("x".into(), ["openid", "profile"]).is_none());
        let all = principal_from_scopes("x".into(), ["memstrata:*"]).unwrap();
        assert!(all.allows(&crate::security::auth::Target::Global(Access::Write)));
        let g = principal_from_scopes("x".into(), ["memstrata:global:read"]).unwrap();
        assert!(g.allows(&crate::security::auth::Target::Global(Access::Read)));
        assert!(!g.can_read("default"));
    }

    #[test]
    fn metadata_paths() {
        assert_eq!(resource_path("https://m.example.com/mcp"), "/mcp");
        assert_eq!(resource_path("https://m.example.com/"), "");
        assert_eq!(resource_path("https://m.example.com"), "");
    }
}
