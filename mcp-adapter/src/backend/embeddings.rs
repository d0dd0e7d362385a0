//! `--embeddings-url`: an OpenAI-compatible embeddings endpoint as the store's embedder.
//!
//! `POST <url>` with `{"model": <name>, "input": [texts]}` and, when
//! `MEMSTRATA_EMBEDDINGS_API_KEY` is set, `Authorization: Bearer <key>`; the
//! answer's `data[i].embedding` (ordered by `data[i].index`) are the vectors.
//! HTTPS (webpki roots), or plain HTTP to a loopback host only. The engine
//! calls the embedder from blocking worker threads, so the client is a plain
//! blocking one (std TCP + rustls), with connect and read timeouts. The key
//! is never logged nor put in an error message.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::security::outbound::{Endpoint, webpki_client};

/// Environment variable holding the endpoint's API key (optional).
pub const API_KEY_ENV: &str = "MEMSTRATA_EMBEDDINGS_API_KEY";

/// Largest response accepted (a batch of 384-dimension vectors as JSON is ~10 KB each).
const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// The embedder behind `--embeddings-url`.
pub struct HttpEmbedder {
    endpoint: Endpoint,
    model: String,
    api_key: Option<String>,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for HttpEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpEmbedder")
            .field("url", &self.url())
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl HttpEmbedder {
    /// Check `url` (https, or http to a loopback host) and read the API key from the environment.
    pub fn new(url: &str, model: &str) -> Result<HttpEmbedder, String> {
        let api_key = std::env::var(API_KEY_ENV).ok().filter(|k| !k.is_empty());
        Self::with_key(url, model, api_key)
    }

    /// Like [`HttpEmbedder::new`] with an explicit key.
    pub fn with_key(
        url: &str,
        model: &str,
        api_key: Option<String>,
    ) -> Result<HttpEmbedder, String> {
        let source = format!("--embeddings-url {url}");
        if model.trim().is_empty() {
            return Err("--embeddings-model must not be empty".into());
        }
        let endpoint = Endpoint::parse(&source, url)?;
        let tls = if endpoint.https {
            Some(webpki_client(&source)?)
        } else {
            None
        };
        Ok(HttpEmbedder {
            endpoint,
            model: model.to_owned(),
            api_key,
            tls,
        })
    }

    fn url(&self) -> String {
        format!(
            "{}://{}{}",
            if self.endpoint.https { "https" } else { "http" },
            self.endpoint.authority,
            self.endpoint.path
        )
    }

    fn connect(&self) -> Result<TcpStream, String> {
        let addrs = (self.endpoint.host.as_str(), self.endpoint.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {}: {e}", self.endpoint.host))?;
        let mut last = format!("no address for {}", self.endpoint.host);
        for a in addrs {
            match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
                Ok(s) => {
                    s.set_read_timeout(Some(IO_TIMEOUT)).ok();
                    s.set_write_timeout(Some(IO_TIMEOUT)).ok();
                    return Ok(s);
                }
                Err(e) => last = format!("cannot connect to {a}: {e}"),
            }
        }
        Err(last)
    }

    /// POST `body`, return (status, response body).
    fn post(&self, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json\r\nUser-Agent: memstrata-mcp\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.endpoint.path,
            self.endpoint.authority,
            body.len()
        );
        if let Some(k) = &self.api_key {
            head.push_str("Authorization: Bearer ");
            head.push_str(k);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let tcp = self.connect()?;
        let mut raw = Vec::new();
        let io = |e: std::io::Error| format!("{}: {e}", self.url());
        match &self.tls {
            Some(cfg) => {
                let name = rustls_pki_types::ServerName::try_from(self.endpoint.host.clone())
                    .map_err(|e| format!("{}: {e}", self.url()))?;
                let conn = rustls::ClientConnection::new(Arc::clone(cfg), name)
                    .map_err(|e| format!("{}: {e}", self.url()))?;
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                tls.write_all(head.as_bytes()).map_err(io)?;
                tls.write_all(body).map_err(io)?;
                tls.flush().map_err(io)?;
                // Servers may close without close_notify after a complete response.
                if let Err(e) = (&mut tls).take(MAX_RESPONSE_BYTES).read_to_end(&mut raw)
                    && raw.is_empty()
                {
                    return Err(io(e));
                }
            }
            None => {
                let mut tcp = tcp;
                tcp.write_all(head.as_bytes()).map_err(io)?;
                tcp.write_all(body).map_err(io)?;
                (&mut tcp)
                    .take(MAX_RESPONSE_BYTES)
                    .read_to_end(&mut raw)
                    .map_err(io)?;
            }
        }
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| format!("{}: no HTTP response", self.url()))?;
        let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
        let body = &raw[split + 4..];
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("{}: bad HTTP status line", self.url()))?;
        let body = if head.contains("transfer-encoding: chunked") {
            crate::security::oauth::dechunk(body)
                .ok_or_else(|| format!("{}: bad chunked body", self.url()))?
        } else {
            body.to_vec()
        };
        Ok((status, body))
    }

    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let req = json!({ "model": self.model, "input": texts });
        let body = serde_json::to_vec(&req).map_err(|e| e.to_string())?;
        let (status, body) = self.post(&body)?;
        if status != 200 {
            let text = String::from_utf8_lossy(&body);
            let snippet: String = text.chars().take(200).collect();
            return Err(format!("{} answered HTTP {status}: {snippet}", self.url()));
        }
        let v: Value = serde_json::from_slice(&body)
            .map_err(|e| format!("{}: response is not JSON: {e}", self.url()))?;
        let data = v
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{}: response has no `data` array", self.url()))?;
        let mut out: Vec<(u64, Vec<f32>)> = Vec::with_capacity(data.len());
        for (i, d) in data.iter().enumerate() {
            let index = d.get("index").and_then(Value::as_u64).unwrap_or(i as u64);
            let emb = d
                .get("embedding")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("{}: data[{i}] has no `embedding` array", self.url()))?;
            let mut v = Vec::with_capacity(emb.len());
            for x in emb {
                v.push(x.as_f64().ok_or_else(|| {
                    format!("{}: data[{i}].embedding holds a non-number", self.url())
                })? as f32);
            }
            out.push((index, v));
        }
        out.sort_by_key(|(i, _)| *i);
        Ok(out.into_iter().map(|(_, v)| v).collect())
    }
}

impl memstrata::Embedder for HttpEmbedder {
    fn embed(&self, texts: &[&str]) -> memstrata::Result<Vec<Vec<f32>>> {
        self.embed_texts(texts).map_err(|e| {
            tracing::warn!(url = %self.url(), "embeddings request failed: {e}");
            memstrata::Error::invalid("embedder", format!("embeddings endpoint: {e}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http() {
        assert!(HttpEmbedder::with_key("http://127.0.0.1:9/v1/embeddings", "m", None).is_ok());
        assert!(HttpEmbedder::with_key("http://localhost/v1/embeddings", "m", None).is_ok());
        assert!(HttpEmbedder::with_key("https://api.example.com/v1/embeddings", "m", None).is_ok());
        let e =
            HttpEmbedder::with_key("http://api.example.com/v1/embeddings", "m", None).unwrap_err();
        assert!(e.contains("must be https"), "{e}");
        assert!(HttpEmbedder::with_key("api.example.com", "m", None).is_err());
        assert!(HttpEmbedder::with_key("http://127.0.0.1/", " ", None).is_err());
    }

    #[test]
    fn the_key_is_not_in_debug_output() {
        let e =
            HttpEmbedder::with_key("http://127.0.0.1:9/e", "m", Some("sk-secret".into())).unwrap();
        let d = format!("{e:?}");
        assert!(!d.contains("sk-secret"));
        assert!(d.contains("<set>"));
    }
}
