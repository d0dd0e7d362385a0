//! Endpoints the server itself calls (the JWKS of `--jwks-url`, the embeddings
//! endpoint of `--embeddings-url`): one URL check and one TLS client setup.

use std::sync::Arc;

/// An absolute `http(s)://host[:port]/path` URL, checked: HTTPS, or plain HTTP
/// only to a loopback host (a secret or a key set must not cross a network in clear).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub https: bool,
    /// Host without IPv6 brackets (for connecting and for TLS server names).
    pub host: String,
    pub port: u16,
    /// `host[:port]` as written (the `Host` header).
    pub authority: String,
    /// Path and query, `/` when the URL has none.
    pub path: String,
}

impl Endpoint {
    /// Parse `url`; errors start with `source` (the flag and the URL).
    pub(crate) fn parse(source: &str, url: &str) -> Result<Endpoint, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("{source}: not an absolute URL"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let https = scheme.eq_ignore_ascii_case("https");
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) => (
                h,
                p.parse::<u16>()
                    .map_err(|e| format!("{source}: bad port: {e}"))?,
            ),
            _ => (authority, if https { 443 } else { 80 }),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("{source}: no host"));
        }
        if !(https || scheme.eq_ignore_ascii_case("http") && is_loopback(host)) {
            return Err(format!(
                "{source}: must be https (plain http only to a loopback host)"
            ));
        }
        Ok(Endpoint {
            https,
            host: host.to_owned(),
            port,
            authority: authority.to_owned(),
            path: path.to_owned(),
        })
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A rustls client (ring provider) trusting the webpki roots.
pub(crate) fn webpki_client(source: &str) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("{source}: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_anywhere_http_only_to_loopback() {
        let e = Endpoint::parse("t", "https://idp.example/keys?x=1").unwrap();
        assert_eq!((e.https, e.port, e.path.as_str()), (true, 443, "/keys?x=1"));
        let e = Endpoint::parse("t", "http://[::1]:8080").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("::1", 8080, "/")
        );
        assert_eq!(e.authority, "[::1]:8080");
        assert!(Endpoint::parse("t", "http://localhost/v1").is_ok());
        let err = Endpoint::parse("--x u", "http://10.0.0.1/v1").unwrap_err();
        assert!(err.starts_with("--x u: must be https"), "{err}");
        assert!(Endpoint::parse("t", "idp.example/keys").is_err());
        assert!(Endpoint::parse("t", "https://:443/").is_err());
        assert!(Endpoint::parse("t", "https://h:99999/").is_err());
    }
}
