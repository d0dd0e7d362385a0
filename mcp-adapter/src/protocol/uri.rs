//! `memstrata://` resource URIs.
//!
//! | URI | resource |
//! |---|---|
//! | `memstrata://status` | engine status |
//! | `memstrata://sessions/{session_id}` | a session (metadata, versions, latest content) |
//! | `memstrata://episodes/{id}` | an episode of the connection's active context |
//! | `memstrata://knowledge/{key}` | a knowledge entry of the active context |
//! | `memstrata://contexts/{context}/episodes/{id}` | an episode of a named context |
//! | `memstrata://contexts/{context}/knowledge/{key}` | a knowledge entry of a named context |
//!
//! Keys are percent-encoded (UTF-8) in the last segment; `:` and `@` stay as they are.

/// Scheme prefix of every resource URI.
pub const SCHEME: &str = "memstrata://";

/// A parsed resource URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceRef {
    /// `memstrata://status`.
    Status,
    /// A session.
    Session(String),
    /// An episode; `ctx: None` means the active context.
    Episode {
        /// Context, when named in the URI.
        ctx: Option<String>,
        /// Episode id.
        id: String,
    },
    /// A knowledge entry; `ctx: None` means the active context.
    Knowledge {
        /// Context, when named in the URI.
        ctx: Option<String>,
        /// Key.
        key: String,
    },
}

/// Percent-encode a path segment (everything but `A-Za-z0-9-._~:@`).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'@') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decode a percent-encoded segment; `None` on malformed escapes or invalid UTF-8.
pub fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl ResourceRef {
    /// Parse a URI; `None` when it is not one of ours.
    pub fn parse(uri: &str) -> Option<ResourceRef> {
        let rest = uri.strip_prefix(SCHEME)?;
        let parts: Vec<&str> = rest.split('/').collect();
        let nonempty = |s: &str| (!s.is_empty()).then_some(());
        match parts.as_slice() {
            ["status"] => Some(ResourceRef::Status),
            ["sessions", id] => {
                nonempty(id)?;
                Some(ResourceRef::Session(decode(id)?))
            }
            ["episodes", id] => {
                nonempty(id)?;
                Some(ResourceRef::Episode {
                    ctx: None,
                    id: decode(id)?,
                })
            }
            ["knowledge", key] => {
                nonempty(key)?;
                Some(ResourceRef::Knowledge {
                    ctx: None,
                    key: decode(key)?,
                })
            }
            ["contexts", ctx, "episodes", id] => {
                nonempty(ctx)?;
                nonempty(id)?;
                Some(ResourceRef::Episode {
                    ctx: Some(decode(ctx)?),
                    id: decode(id)?,
                })
            }
            ["contexts", ctx, "knowledge", key] => {
                nonempty(ctx)?;
                nonempty(key)?;
                Some(ResourceRef::Knowledge {
                    ctx: Some(decode(ctx)?),
                    key: decode(key)?,
                })
            }
            _ => None,
        }
    }

    /// The same resource with the context made explicit.
    pub fn qualified(self, active: &str) -> ResourceRef {
        match self {
            ResourceRef::Episode { ctx: None, id } => ResourceRef::Episode {
                ctx: Some(active.to_owned()),
                id,
            },
            ResourceRef::Knowledge { ctx: None, key } => ResourceRef::Knowledge {
                ctx: Some(active.to_owned()),
                key,
            },
            other => other,
        }
    }

    /// The context this resource lives in (`None`: engine-wide).
    pub fn context(&self) -> Option<&str> {
        match self {
            ResourceRef::Episode { ctx, .. } | ResourceRef::Knowledge { ctx, .. } => ctx.as_deref(),
            _ => None,
        }
    }

    /// Render as a URI.
    pub fn uri(&self) -> String {
        match self {
            ResourceRef::Status => format!("{SCHEME}status"),
            ResourceRef::Session(id) => format!("{SCHEME}sessions/{}", encode(id)),
            ResourceRef::Episode { ctx: None, id } => format!("{SCHEME}episodes/{}", encode(id)),
            ResourceRef::Knowledge { ctx: None, key } => {
                format!("{SCHEME}knowledge/{}", encode(key))
            }
            ResourceRef::Episode { ctx: Some(c), id } => {
                format!("{SCHEME}contexts/{}/episodes/{}", encode(c), encode(id))
            }
            ResourceRef::Knowledge { ctx: Some(c), key } => {
                format!("{SCHEME}contexts/{}/knowledge/{}", encode(c), encode(key))
            }
        }
    }
}

/// Canonical (context-qualified) URI of an episode.
pub fn episode(ctx: &str, id: &str) -> String {
    ResourceRef::Episode {
        ctx: Some(ctx.to_owned()),
        id: id.to_owned(),
    }
    .uri()
}

/// Canonical (context-qualified) URI of a knowledge entry.
pub fn knowledge(ctx: &str, key: &str) -> String {
    ResourceRef::Knowledge {
        ctx: Some(ctx.to_owned()),
        key: key.to_owned(),
    }
    .uri()
}

/// URI of a session.
pub fn session(id: &str) -> String {
    ResourceRef::Session(id.to_owned()).uri()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for r in [
            ResourceRef::Status,
            ResourceRef::Session("0194-abc".into()),
            ResourceRef::Episode {
                ctx: None,
                id: "e1".into(),
            },
            ResourceRef::Knowledge {
                ctx: Some("proj:a".into()),
                key: "user:alice/with space%".into(),
            },
        ] {
            assert_eq!(ResourceRef::parse(&r.uri()), Some(r.clone()), "{}", r.uri());
        }
        assert_eq!(
            knowledge("p", "a b"),
            "memstrata://contexts/p/knowledge/a%20b"
        );
        assert_eq!(ResourceRef::parse("memstrata://knowledge/"), None);
        assert_eq!(ResourceRef::parse("memstrata://knowledge/%zz"), None);
        assert_eq!(ResourceRef::parse("file:///etc/passwd"), None);
        assert_eq!(
            ResourceRef::parse("memstrata://knowledge/k")
                .unwrap()
                .qualified("proj")
                .uri(),
            "memstrata://contexts/proj/knowledge/k"
        );
    }
}
