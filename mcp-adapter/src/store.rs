//! Where the store lives: a directory (the embedded sled store) or a PostgreSQL URL
//! (`postgres://user:password@host:port/db?schema=NAME`).
//!
//! The adapter treats a URL as a store, not a path: no directory is created, nothing
//! is written beside it (the audit trail goes to `--audit-file`, or is off), and the
//! password never reaches a log line or an error message ([`PgUrl::redacted`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Schema used when the URL has no `schema=` parameter (the core's default too).
pub const DEFAULT_SCHEMA: &str = "memstrata";

/// Longest schema name PostgreSQL keeps (NAMEDATALEN - 1 bytes).
pub const MAX_SCHEMA_BYTES: usize = 63;

/// A `--store` value.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A sled store directory.
    Dir(PathBuf),
    /// A PostgreSQL database and schema.
    Postgres(PgUrl),
}

impl StoreLocation {
    /// Classify a `--store` / `MEMSTRATA_STORE` value: `postgres://` and `postgresql://`
    /// are URLs (checked here, with errors naming the part at fault), anything else a directory.
    pub fn parse(value: &Path) -> Result<StoreLocation, String> {
        match value.to_str() {
            Some(s) if is_postgres_url(s) => Ok(StoreLocation::Postgres(PgUrl::parse(s)?)),
            _ => Ok(StoreLocation::Dir(value.to_owned())),
        }
    }

    /// What the core's `Memory::builder().path(..)` receives.
    pub fn open_path(&self) -> PathBuf {
        match self {
            StoreLocation::Dir(p) => p.clone(),
            StoreLocation::Postgres(u) => PathBuf::from(u.as_str()),
        }
    }

    /// For logs, errors and `status`: the directory, or the URL without its password.
    pub fn display(&self) -> String {
        match self {
            StoreLocation::Dir(p) => p.display().to_string(),
            StoreLocation::Postgres(u) => u.redacted(),
        }
    }

    /// The PostgreSQL URL, if this is one.
    pub fn postgres(&self) -> Option<&PgUrl> {
        match self {
            StoreLocation::Postgres(u) => Some(u),
            StoreLocation::Dir(_) => None,
        }
    }
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

pub use memstrata_bindings_common::store::is_postgres_url;
use memstrata_bindings_common::store::redact_url as redact;

/// A checked PostgreSQL store URL.
#[derive(Clone, PartialEq, Eq)]
pub struct PgUrl {
    raw: String,
    /// The URL without `schema=` (what a PostgreSQL client accepts).
    connect: String,
    schema: String,
}

impl PgUrl {
    /// Check `url`: a PostgreSQL connection URL plus an optional `schema=NAME`
    /// (default [`DEFAULT_SCHEMA`]; 1-63 characters a-z, 0-9 and _, not starting
    /// with a digit or `pg_`).
    pub fn parse(url: &str) -> Result<PgUrl, String> {
        let (base, query) = match url.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (url, None),
        };
        let mut schema: Option<String> = None;
        let mut kept: Vec<&str> = Vec::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            if pair.is_empty() {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if k == "schema" {
                if schema.is_some() {
                    return Err("--store URL: `schema` is given twice".into());
                }
                check_schema(v)?;
                let name = v.to_owned();
                schema = Some(name);
            } else {
                kept.push(pair);
            }
        }
        let connect = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let u = PgUrl {
            raw: url.to_owned(),
            connect,
            schema: schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_owned()),
        };
        // The client's own parser (host, port, user, options): its messages never
        // contain the password.
        let cfg = tokio_postgres::Config::from_str(&u.connect)
            .map_err(|e| format!("--store URL {}: {e}", u.redacted()))?;
        if cfg.get_hosts().is_empty() {
            return Err(format!("--store URL {}: no host", u.redacted()));
        }
        Ok(u)
    }

    /// The URL as given (with its password): only for connecting.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The URL for a PostgreSQL client: without `schema=`.
    pub fn connect_str(&self) -> &str {
        &self.connect
    }

    /// The schema holding the store.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The URL with any password replaced by `***` (user info and `password=` parameter).
    pub fn redacted(&self) -> String {
        redact(&self.raw)
    }

    /// The LISTEN/NOTIFY channel of this store's instances: one per schema, so stores in
    /// other schemas of the same database do not hear each other. Channel names are
    /// identifiers (at most 63 bytes): a long schema name is replaced by its hash.
    pub fn channel(&self) -> String {
        let c = format!("memstrata_changes:{}", self.schema);
        if c.len() <= MAX_SCHEMA_BYTES {
            c
        } else {
            format!("memstrata_changes:{:016x}", fnv1a(self.schema.as_bytes()))
        }
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// The core's rule for schema names (checked here too, so a bad one is refused
/// before anything connects): 1-63 characters a-z, 0-9 and _, not starting with a
/// digit or `pg_` (so the name never needs quoting and never clashes with PostgreSQL's own).
fn check_schema(name: &str) -> Result<(), String> {
    let rule = "use 1-63 characters a-z, 0-9 and _, not starting with a digit or pg_";
    if name.is_empty() {
        return Err(format!("--store URL: `schema` is empty ({rule})"));
    }
    if name.len() > MAX_SCHEMA_BYTES {
        return Err(format!(
            "--store URL: `schema` is {} characters, more than PostgreSQL's limit of {MAX_SCHEMA_BYTES}",
            name.len()
        ));
    }
    let ok = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
        && !name.starts_with("pg_");
    if ok {
        Ok(())
    } else {
        Err(format!("--store URL: `schema` {name:?}: {rule}"))
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_stay_paths() {
        for p in ["/var/lib/mem", "rel/dir", "postgres", "./postgres://x"] {
            assert_eq!(
                StoreLocation::parse(Path::new(p)).unwrap(),
                StoreLocation::Dir(PathBuf::from(p))
            );
        }
    }

    #[test]
    fn urls_are_stores_with_a_schema() {
        let l = StoreLocation::parse(Path::new("postgres://u:pw@127.0.0.1:5433/db")).unwrap();
        let u = l.postgres().unwrap();
        assert_eq!(u.schema(), DEFAULT_SCHEMA);
        assert_eq!(u.connect_str(), "postgres://u:pw@127.0.0.1:5433/db");
        let u = PgUrl::parse(
            "postgresql://u@localhost/db?sslmode=disable&schema=team_a2&connect_timeout=5",
        )
        .unwrap();
        assert_eq!(u.schema(), "team_a2");
        assert_eq!(
            u.connect_str(),
            "postgresql://u@localhost/db?sslmode=disable&connect_timeout=5"
        );
        assert_eq!(u.channel(), "memstrata_changes:team_a2");
        assert!(is_postgres_url("PostgreSQL://h/db"));
    }

    #[test]
    fn passwords_never_show() {
        let u = PgUrl::parse("postgres://bob:s3cret@db.internal:5432/mem?schema=x").unwrap();
        assert_eq!(
            u.redacted(),
            "postgres://bob:***@db.internal:5432/mem?schema=x"
        );
        assert!(!format!("{u:?} {u}").contains("s3cret"));
        let u = PgUrl::parse("postgres://bob@h/mem?password=s3cret&schema=x").unwrap();
        assert_eq!(u.redacted(), "postgres://bob@h/mem?password=***&schema=x");
        let l = StoreLocation::Postgres(u);
        assert!(!l.display().contains("s3cret"));
        assert!(!format!("{l:?}").contains("s3cret"));
        // A bad URL's error names the URL without its password.
        let e = PgUrl::parse("postgres://bob:s3cret@h:notaport/mem").unwrap_err();
        assert!(
            e.contains("--store URL postgres://bob:***@h:notaport/mem"),
            "{e}"
        );
        assert!(!e.contains("s3cret"));
    }

    #[test]
    fn bad_schemas_are_refused_by_name() {
        let long = "s".repeat(64);
        let e = PgUrl::parse(&format!("postgres://h/db?schema={long}")).unwrap_err();
        assert!(
            e.contains("`schema` is 64 characters") && e.contains("63"),
            "{e}"
        );
        let e = PgUrl::parse("postgres://h/db?schema=").unwrap_err();
        assert!(e.contains("`schema` is empty"), "{e}");
        let e = PgUrl::parse("postgres://h/db?schema=a&schema=b").unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        for bad in ["Team", "team%20a", "9lives", "pg_catalog", "a-b", "a\"b"] {
            let e = PgUrl::parse(&format!("postgres://h/db?schema={bad}")).unwrap_err();
            assert!(
                e.contains("use 1-63 characters a-z, 0-9 and _, not starting with a digit or pg_"),
                "{bad}: {e}"
            );
        }
        let e = PgUrl::parse("postgres://h/db?nosuchoption=1").unwrap_err();
        assert!(
            e.starts_with("--store URL postgres://h/db?nosuchoption=1"),
            "{e}"
        );
    }

    #[test]
    fn long_schemas_get_a_hashed_channel() {
        let u = PgUrl::parse(&format!("postgres://h/db?schema={}", "x".repeat(63))).unwrap();
        let c = u.channel();
        assert!(c.len() <= MAX_SCHEMA_BYTES, "{c}");
        let v = PgUrl::parse(&format!("postgres://h/db?schema={}y", "x".repeat(62))).unwrap();
        assert_ne!(c, v.channel());
    }
}
