//! API keys and what each may touch.
//!
//! Over HTTP and WebSocket, when keys are configured, every request carries
//! `Authorization: Bearer <key>` (or a JWT from the configured OAuth issuer,
//! [`crate::security::oauth`], whose scopes give the same kind of permissions). Each key maps to a [`Principal`]: the
//! contexts it may read, the contexts it may write, and its access to
//! engine-wide data (sessions, the timesheet, status, optimize). stdio is a
//! local, single-user transport and runs as [`Principal::local`].
//!
//! Config file (`--auth-config keys.toml`, or the same shape as JSON):
//!
//! ```toml
//! [[keys]]
//! id = "ci-bot"              # shown in the audit log; the secret never is
//! key = "s3cret-token"       # or key_env = "CI_BOT_KEY" to read it from the environment
//! read = ["default", "proj-*"]   # exact names, "prefix*" or "*"
//! write = ["proj-a"]             # write implies read
//! global = "read"            # "none" (default) | "read" | "write"
//! ```

use std::path::Path;

use serde::Deserialize;

use crate::error::ToolError;

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// No access (only meaningful for `global`).
    #[default]
    None,
    /// Read.
    Read,
    /// Read and write.
    Write,
}

/// What a call touches, checked against the caller's [`Principal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A context (namespace) of the layers.
    Context(String, Access),
    /// Engine-wide data: sessions, timesheet, status, optimize, export.
    Global(Access),
}

/// A context-name pattern: `*`, `prefix*` or an exact name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern(String);

impl Pattern {
    /// Does `ctx` match?
    pub fn matches(&self, ctx: &str) -> bool {
        match self.0.strip_suffix('*') {
            Some(prefix) => ctx.starts_with(prefix),
            None => self.0 == ctx,
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who is calling and what they may touch.
#[derive(Debug, Clone)]
pub struct Principal {
    /// Key id (audit "who"): the config `id`, `key-<fingerprint>` for `--api-key`,
    /// `local` for stdio, `anonymous` for HTTP without keys.
    pub id: String,
    read: Vec<Pattern>,
    write: Vec<Pattern>,
    global: Access,
}

impl Principal {
    /// Everything allowed.
    pub fn full(id: impl Into<String>) -> Self {
        Principal {
            id: id.into(),
            read: vec![Pattern("*".into())],
            write: vec![Pattern("*".into())],
            global: Access::Write,
        }
    }

    /// The local user on stdio.
    pub fn local() -> Self {
        Principal::full("local")
    }

    /// A restricted principal.
    pub fn restricted(
        id: impl Into<String>,
        read: &[&str],
        write: &[&str],
        global: Access,
    ) -> Self {
        Principal {
            id: id.into(),
            read: read.iter().map(|p| Pattern((*p).to_owned())).collect(),
            write: write.iter().map(|p| Pattern((*p).to_owned())).collect(),
            global,
        }
    }

    /// A principal from pattern lists (OAuth scopes, `security::oauth`).
    pub fn from_patterns(
        id: impl Into<String>,
        read: Vec<String>,
        write: Vec<String>,
        global: Access,
    ) -> Self {
        Principal {
            id: id.into(),
            read: read.into_iter().map(Pattern).collect(),
            write: write.into_iter().map(Pattern).collect(),
            global,
        }
    }

    /// May this principal do `target`?
    pub fn allows(&self, target: &Target) -> bool {
        match target {
            Target::Context(_, Access::None) => true,
            Target::Context(ctx, Access::Read) => {
                self.read.iter().any(|p| p.matches(ctx))
                    || self.write.iter().any(|p| p.matches(ctx))
            }
            Target::Context(ctx, Access::Write) => self.write.iter().any(|p| p.matches(ctx)),
            Target::Global(a) => self.global >= *a,
        }
    }

    /// May this principal read `ctx`?
    pub fn can_read(&self, ctx: &str) -> bool {
        self.allows(&Target::Context(ctx.to_owned(), Access::Read))
    }

    /// Check every target; the error names the first refused one and what is allowed.
    pub fn check(&self, targets: &[Target]) -> Result<(), ToolError> {
        for t in targets {
            if !self.allows(t) {
                let list = |v: &[Pattern]| {
                    if v.is_empty() {
                        "none".to_owned()
                    } else {
                        v.iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                };
                let msg = match t {
                    Target::Context(ctx, Access::Write) => format!(
                        "API key {:?} may not write context {ctx:?} (writable: {})",
                        self.id,
                        list(&self.write)
                    ),
                    Target::Context(ctx, _) => format!(
                        "API key {:?} may not read context {ctx:?} (readable: {}; writable: {})",
                        self.id,
                        list(&self.read),
                        list(&self.write)
                    ),
                    Target::Global(a) => format!(
                        "API key {:?} has no {} access to engine-wide data (sessions, timesheet, status, optimize); its global access is {:?}",
                        self.id,
                        if *a == Access::Write { "write" } else { "read" },
                        self.global
                    ),
                };
                return Err(ToolError::Forbidden(msg));
            }
        }
        Ok(())
    }
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A key that is not configured (and not a JWT, or no OAuth issuer is configured).
    Invalid,
    /// A JWT that failed validation; the reason never contains the token.
    InvalidToken(String),
    /// A valid JWT without any `memstrata:` scope.
    InsufficientScope,
}

/// The configured keys and OAuth issuer. Neither means authentication is off.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    keys: Vec<(String, Principal)>,
    oauth: Option<std::sync::Arc<crate::security::oauth::OAuth>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    keys: Vec<KeyEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    id: String,
    key: Option<String>,
    key_env: Option<String>,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    #[serde(default)]
    global: Access,
}

/// FNV-1a, used only to derive a printable id from a key given on the command line.
fn fingerprint(key: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("key-{:08x}", (h >> 32) as u32)
}

/// Constant-time comparison, so response timing does not reveal key prefixes.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff));
    }
    diff == 0
}

/// Shortest API key accepted, from any source.
pub const MIN_KEY_LEN: usize = 8;

impl Auth {
    /// No keys: authentication off.
    pub fn disabled() -> Self {
        Auth::default()
    }

    /// Keys with full access (`--api-key`, `MEMSTRATA_API_KEYS`).
    pub fn with_full_keys<I: IntoIterator<Item = S>, S: Into<String>>(mut self, keys: I) -> Self {
        for k in keys {
            let k: String = k.into();
            let k = k.trim().to_owned();
            if !k.is_empty() {
                let id = fingerprint(&k);
                self.keys.push((k, Principal::full(id)));
            }
        }
        self
    }

    /// [`Auth::with_full_keys`], refusing keys shorter than `MIN_KEY_LEN` characters; the
    /// error names `source` (e.g. `--api-key`) and the key's position, never the key.
    pub fn try_with_full_keys<I: IntoIterator<Item = S>, S: Into<String>>(
        self,
        keys: I,
        source: &str,
    ) -> Result<Self, String> {
        let keys: Vec<String> = keys.into_iter().map(Into::into).collect();
        for (i, k) in keys.iter().enumerate() {
            let n = k.trim().chars().count();
            if n > 0 && n < MIN_KEY_LEN {
                return Err(format!(
                    "{source}: API key #{} is shorter than {MIN_KEY_LEN} characters ({n}); use a long random secret",
                    i + 1
                ));
            }
        }
        Ok(self.with_full_keys(keys))
    }

    /// Add a restricted key.
    pub fn with_key(mut self, key: impl Into<String>, principal: Principal) -> Self {
        self.keys.push((key.into(), principal));
        self
    }

    /// Load a TOML (`.toml`) or JSON (anything else) config file.
    pub fn load_file(mut self, path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let cfg: ConfigFile = if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
        {
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?
        } else {
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?
        };
        for (i, k) in cfg.keys.into_iter().enumerate() {
            let secret = match (k.key, k.key_env) {
                (Some(s), None) => s,
                (None, Some(var)) => std::env::var(&var).map_err(|_| {
                    format!(
                        "{}: keys[{i}] ({}): environment variable {var} is not set",
                        path.display(),
                        k.id
                    )
                })?,
                _ => {
                    return Err(format!(
                        "{}: keys[{i}] ({}): give exactly one of `key` or `key_env`",
                        path.display(),
                        k.id
                    ));
                }
            };
            if secret.chars().count() < MIN_KEY_LEN {
                return Err(format!(
                    "{}: keys[{i}] ({}): key is shorter than {MIN_KEY_LEN} characters",
                    path.display(),
                    k.id
                ));
            }
            for p in k.read.iter().chain(&k.write) {
                let name = p.strip_suffix('*').unwrap_or(p);
                if !name.is_empty() {
                    memstrata::contexts::validate_name("pattern", name)
                        .map_err(|e| format!("{}: keys[{i}] ({}): {e}", path.display(), k.id))?;
                }
            }
            self.keys.push((
                secret,
                Principal {
                    id: k.id,
                    read: k.read.into_iter().map(Pattern).collect(),
                    write: k.write.into_iter().map(Pattern).collect(),
                    global: k.global,
                },
            ));
        }
        Ok(self)
    }

    /// Also accept JWT bearer tokens validated by `oauth`.
    #[must_use]
    pub fn with_oauth(mut self, oauth: crate::security::oauth::OAuth) -> Self {
        self.oauth = Some(std::sync::Arc::new(oauth));
        self
    }

    /// The OAuth resource server, when configured.
    pub fn oauth(&self) -> Option<&std::sync::Arc<crate::security::oauth::OAuth>> {
        self.oauth.as_ref()
    }

    /// Are any keys (or an OAuth issuer) configured?
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty() || self.oauth.is_some()
    }

    /// Number of configured keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no keys are configured.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Authenticate an `Authorization` header value. With no keys configured
    /// everyone is `anonymous` with full access.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, AuthFailure> {
        if !self.enabled() {
            return Ok(Principal::full("anonymous"));
        }
        let Some(h) = authorization else {
            return Err(AuthFailure::Missing);
        };
        let token = match h.split_once(' ') {
            Some((scheme, t)) if scheme.eq_ignore_ascii_case("bearer") => t.trim(),
            _ => return Err(AuthFailure::Missing),
        };
        let mut found = None;
        for (k, p) in &self.keys {
            if same(k, token) && found.is_none() {
                found = Some(p.clone());
            }
        }
        if found.is_some() {
            return found.ok_or(AuthFailure::Invalid);
        }
        match &self.oauth {
            Some(o) if token.split('.').count() == 3 => o.validate(token).map_err(|e| match e {
                crate::security::oauth::TokenError::Invalid(why) => AuthFailure::InvalidToken(why),
                crate::security::oauth::TokenError::InsufficientScope => {
                    AuthFailure::InsufficientScope
                }
            }),
            _ => Err(AuthFailure::Invalid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_full_keys_are_refused() {
        let e = Auth::disabled()
            .try_with_full_keys(["long-enough", "seven77"], "--api-key")
            .unwrap_err();
        assert!(
            e.starts_with("--api-key: API key #2 is shorter than 8 characters"),
            "{e}"
        );
        assert!(!e.contains("seven77"), "{e}");
        let a = Auth::disabled()
            .try_with_full_keys(["eight888", " "], "MEMSTRATA_API_KEYS")
            .unwrap();
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn patterns_and_access() {
        let p = Principal::restricted("k", &["default", "proj-*"], &["proj-a"], Access::Read);
        assert!(p.can_read("proj-x"));
        assert!(p.can_read("default"));
        assert!(!p.can_read("other"));
        assert!(p.allows(&Target::Context("proj-a".into(), Access::Write)));
        assert!(!p.allows(&Target::Context("proj-b".into(), Access::Write)));
        assert!(p.allows(&Target::Global(Access::Read)));
        assert!(!p.allows(&Target::Global(Access::Write)));
        let err = p
            .check(&[Target::Context("proj-b".into(), Access::Write)])
            .unwrap_err();
        assert_eq!(err.code(), "FORBIDDEN");
        assert!(err.message().contains("proj-b"), "{}", err.message());
    }

    #[test]
    fn bearer_tokens() {
        let auth = Auth::disabled().with_full_keys(["secret-one"]);
        assert_eq!(auth.authenticate(None).unwrap_err(), AuthFailure::Missing);
        assert_eq!(
            auth.authenticate(Some("Bearer nope")).unwrap_err(),
            AuthFailure::Invalid
        );
        assert_eq!(
            auth.authenticate(Some("Basic secret-one")).unwrap_err(),
            AuthFailure::Missing
        );
        let p = auth.authenticate(Some("Bearer secret-one")).unwrap();
        assert!(p.id.starts_with("key-"));
        assert!(p.allows(&Target::Global(Access::Write)));
    }

    #[test]
    fn config_file_toml_and_json() {
        let dir = tempfile::tempdir().unwrap();
        let toml_path = dir.path().join("keys.toml");
        std::fs::write(
            &toml_path,
            "[[keys]]\nid = \"bot\"\nkey = \"0123456789\"\nread = [\"a*\"]\nwrite = [\"ab\"]\nglobal = \"none\"\n",
        )
        .unwrap();
        let auth = Auth::disabled().load_file(&toml_path).unwrap();
        let p = auth.authenticate(Some("Bearer 0123456789")).unwrap();
        assert_eq!(p.id, "bot");
        assert!(p.can_read("abc") && !p.can_read("b"));
        let json_path = dir.path().join("keys.json");
        std::fs::write(&json_path, r#"{"keys": [{"id": "x", "key": "short"}]}"#).unwrap();
        assert!(
            Auth::disabled()
                .load_file(&json_path)
                .unwrap_err()
                .contains("shorter")
        );
        std::fs::write(
            &json_path,
            r#"{"keys": [{"id": "x", "key": "long-enough", "read": ["bad name"]}]}"#,
        )
        .unwrap();
        assert!(Auth::disabled().load_file(&json_path).is_err());
    }
}
