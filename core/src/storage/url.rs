//! Store locations: parse, validate and mask, once for the core, every binding
//! and the MCP server.
//!
//! A store location is a directory (the embedded sled store) or a PostgreSQL
//! URL, `postgres://` or `postgresql://` (the scheme in any case):
//! `postgres://user:password@host:port/db?schema=NAME&sslmode=...`. The
//! `schema` parameter is the core's (default [`DEFAULT_SCHEMA`]); every other
//! parameter goes to the PostgreSQL client. `key=value` connection strings are
//! not store locations (they would be taken for a directory name), so only
//! URLs need masking.
//!
//! Anything shown to a person (errors, `Debug`, `Display`, logs, `status`,
//! `repr`) goes through [`mask`] / [`StoreLocation::masked`]: the password in
//! the user info and every query parameter whose (percent-decoded) name
//! contains `password`, in any case (`password`, `sslpassword`), become `***`.
//! Only [`PgUrl::as_str`] and [`PgUrl::connect_str`] hold the password, for
//! connecting.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Schema used when the URL has no `schema=` parameter.
pub const DEFAULT_SCHEMA: &str = "memstrata";

/// Longest schema name PostgreSQL keeps (NAMEDATALEN - 1 bytes).
pub const MAX_SCHEMA_BYTES: usize = 63;

/// Whether `s` names a PostgreSQL store: `postgres://` or `postgresql://`, the
/// scheme in any case (URL schemes are case-insensitive).
pub fn is_postgres_url(s: &str) -> bool {
    scheme_len(s).is_some()
}

/// Length of the `postgres://` / `postgresql://` prefix of `s`, if it has one.
fn scheme_len(s: &str) -> Option<usize> {
    ["postgres://", "postgresql://"].into_iter().find_map(|p| {
        s.get(..p.len())
            .filter(|head| head.eq_ignore_ascii_case(p))
            .map(|_| p.len())
    })
}

/// Whether `path` is a PostgreSQL URL (see [`is_postgres_url`]).
pub(crate) fn is_postgres_path(path: &Path) -> bool {
    path.to_str().is_some_and(is_postgres_url)
}

/// A store location for people: a directory as given, a PostgreSQL URL with its
/// password (user info, and any parameter named like `password`) replaced by
/// `***`. Works on malformed URLs too (what an error about one shows): when in
/// doubt it hides more, never less.
pub fn mask(location: &str) -> String {
    let Some(start) = scheme_len(location) else {
        return location.to_owned();
    };
    let rest = &location[start..];
    // The user info ends at the last `@` before the query. A password written
    // with a raw `?` puts its `@` after the first `?`: then the last `@` of all,
    // when what precedes it has a `:` (hiding the host too, rather than a part
    // of the password).
    let query_at = rest.find('?').unwrap_or(rest.len());
    let at = rest[..query_at].rfind('@').or_else(|| {
        rest.rfind('@')
            .filter(|&a| rest[..a].split('?').next().unwrap_or("").contains(':'))
    });
    let mut out = String::with_capacity(location.len());
    out.push_str(&location[..start]);
    let after_user = match at {
        Some(at) => {
            let user = &rest[..at];
            match user.find(':') {
                Some(colon) => {
                    out.push_str(&user[..colon]);
                    out.push_str(":***@");
                }
                None => {
                    out.push_str(user);
                    out.push('@');
                }
            }
            &rest[at + 1..]
        }
        None => rest,
    };
    match after_user.split_once('?') {
        Some((base, query)) => {
            out.push_str(base);
            out.push('?');
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| {
                    let key = pair.split_once('=').map_or(pair, |(k, _)| k);
                    if is_secret_key(key) {
                        format!("{key}=***")
                    } else {
                        pair.to_owned()
                    }
                })
                .collect();
            out.push_str(&pairs.join("&"));
        }
        None => out.push_str(after_user),
    }
    out
}

/// A query parameter that holds a secret: its name, percent-decoded, contains
/// `password` in any case (`password`, `sslpassword`).
fn is_secret_key(key: &str) -> bool {
    percent_decode(key)
        .to_ascii_lowercase()
        .contains("password")
}

/// `%XX` decoded (invalid escapes kept as written; the PostgreSQL client decodes
/// parameter names, so `pass%77ord` is `password` to it).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// [`mask`] for a path (a directory shown with [`Path::display`]).
pub(crate) fn mask_path(path: &Path) -> String {
    match path.to_str() {
        Some(s) if is_postgres_url(s) => mask(s),
        _ => path.display().to_string(),
    }
}

/// Where a store lives.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A sled store directory.
    Dir(PathBuf),
    /// A PostgreSQL database and schema.
    Postgres(PgUrl),
}

impl StoreLocation {
    /// Classify and check a store location: a `postgres://` / `postgresql://`
    /// URL is parsed and checked ([`PgUrl::parse`]); anything else is a
    /// directory. Errors are [`Error::InvalidInput`] for `path`, with the URL
    /// masked.
    pub fn parse(location: impl AsRef<Path>) -> Result<StoreLocation> {
        let path = location.as_ref();
        match path.to_str() {
            Some(s) if is_postgres_url(s) => Ok(StoreLocation::Postgres(PgUrl::parse(s)?)),
            _ => Ok(StoreLocation::Dir(path.to_owned())),
        }
    }

    /// The PostgreSQL URL, if this is one.
    pub fn postgres(&self) -> Option<&PgUrl> {
        match self {
            StoreLocation::Postgres(u) => Some(u),
            StoreLocation::Dir(_) => None,
        }
    }

    /// What `Memory::builder().path(..)` takes to open this store (a URL with its password).
    pub fn open_path(&self) -> PathBuf {
        match self {
            StoreLocation::Dir(p) => p.clone(),
            StoreLocation::Postgres(u) => PathBuf::from(u.as_str()),
        }
    }

    /// For people (errors, logs, `status`, `repr`): the directory, or the URL without its password.
    pub fn masked(&self) -> String {
        match self {
            StoreLocation::Dir(p) => p.display().to_string(),
            StoreLocation::Postgres(u) => u.masked(),
        }
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Dir(p) => f.debug_tuple("Dir").field(p).finish(),
            StoreLocation::Postgres(u) => f.debug_tuple("Postgres").field(u).finish(),
        }
    }
}

/// A checked PostgreSQL store URL. `Display` and `Debug` show it masked.
#[derive(Clone, PartialEq, Eq)]
pub struct PgUrl {
    raw: String,
    /// The URL for the client: lower-case scheme, without `schema=`.
    connect: String,
    schema: String,
}

impl PgUrl {
    /// Check `url`: a PostgreSQL connection URL plus an optional `schema=NAME`
    /// (default [`DEFAULT_SCHEMA`]; 1-63 characters a-z, 0-9 and _, not
    /// starting with a digit or `pg_`), with a host. With the `postgres`
    /// feature the client's parser checks the rest (port, options); its
    /// messages name the option, never its value.
    pub fn parse(url: &str) -> Result<PgUrl> {
        let bad =
            |reason: String| Error::invalid("path", format!("store URL {}: {reason}", mask(url)));
        let Some(start) = scheme_len(url) else {
            return Err(bad("not a postgres:// or postgresql:// URL".into()));
        };
        let (base, query) = match url[start..].split_once('?') {
            Some((b, q)) => (&url[start..start + b.len()], Some(q)),
            None => (&url[start..], None),
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
                    return Err(bad("`schema` is given twice".into()));
                }
                check_schema(v).map_err(bad)?;
                schema = Some(v.to_owned());
            } else {
                kept.push(pair);
            }
        }
        // The client accepts only the lower-case schemes.
        let scheme = url[..start].to_ascii_lowercase();
        let connect = if kept.is_empty() {
            format!("{scheme}{base}")
        } else {
            format!("{scheme}{base}?{}", kept.join("&"))
        };
        check_client(&connect).map_err(bad)?;
        Ok(PgUrl {
            raw: url.to_owned(),
            connect,
            schema: schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_owned()),
        })
    }

    /// The URL as given (with its password): only for connecting.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The URL for a PostgreSQL client (with its password): lower-case scheme, without `schema=`.
    pub fn connect_str(&self) -> &str {
        &self.connect
    }

    /// The schema holding the store.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The URL with its password replaced by `***` (see [`mask`]).
    pub fn masked(&self) -> String {
        mask(&self.raw)
    }
}

impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgUrl({})", self.masked())
    }
}

/// The rule for schema names: 1-63 characters a-z, 0-9 and _, not starting
/// with a digit or `pg_` (so the name never needs quoting and never clashes
/// with PostgreSQL's own).
fn check_schema(name: &str) -> std::result::Result<(), String> {
    let rule = "use 1-63 characters a-z, 0-9 and _, not starting with a digit or pg_";
    if name.is_empty() {
        return Err(format!("`schema` is empty ({rule})"));
    }
    if name.len() > MAX_SCHEMA_BYTES {
        return Err(format!(
            "`schema` is {} characters, more than PostgreSQL's limit of {MAX_SCHEMA_BYTES}",
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
        Err(format!("`schema` {name:?}: {rule}"))
    }
}

/// The client's own parser (host, port, options), and a host.
#[cfg(feature = "postgres")]
fn check_client(connect: &str) -> std::result::Result<(), String> {
    let cfg: postgres::Config =
        connect
            .parse()
            .map_err(|e: postgres::Error| match std::error::Error::source(&e) {
                Some(cause) => format!("{e}: {cause}"),
                None => e.to_string(),
            })?;
    if cfg.get_hosts().is_empty() {
        return Err("no host".into());
    }
    Ok(())
}

/// Without the client: a host at least (the engine refuses URLs in this build anyway).
#[cfg(not(feature = "postgres"))]
fn check_client(connect: &str) -> std::result::Result<(), String> {
    let rest = connect.split_once("://").map_or("", |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() {
        return Err("no host".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_stay_paths() {
        for p in [
            "/var/lib/mem",
            "rel/dir",
            "postgres",
            "./postgres://x",
            "postgres:/x",
        ] {
            assert_eq!(
                StoreLocation::parse(p).unwrap(),
                StoreLocation::Dir(PathBuf::from(p))
            );
            assert_eq!(mask(p), p);
        }
    }

    #[test]
    fn schemes_in_any_case() {
        for s in ["postgres://h/d", "POSTGRES://h/d", "PostgreSQL://h/d"] {
            assert!(is_postgres_url(s), "{s}");
        }
        for s in ["postgres:/h", "postgre://h", "pg://h", "", "p"] {
            assert!(!is_postgres_url(s), "{s}");
        }
    }

    #[test]
    fn masks_userinfo_and_password_parameters() {
        assert_eq!(
            mask("postgres://bob:s3cret@db:5432/mem?schema=x"),
            "postgres://bob:***@db:5432/mem?schema=x"
        );
        assert_eq!(
            mask("postgresql://bob@db/mem?password=s3cret&schema=x"),
            "postgresql://bob@db/mem?password=***&schema=x"
        );
        assert_eq!(
            mask("postgres://h/d?sslpassword=a&PASSWORD=b&pass%77ord=c&sslmode=require"),
            "postgres://h/d?sslpassword=***&PASSWORD=***&pass%77ord=***&sslmode=require"
        );
        assert_eq!(mask("POSTGRES://a:b@h/d"), "POSTGRES://a:***@h/d");
        assert_eq!(mask("postgres://a:b/c@h/d"), "postgres://a:***@h/d");
        assert_eq!(mask("postgres://a:b@c@h/d"), "postgres://a:***@h/d");
        assert_eq!(mask("postgres://a:b?c@h/d"), "postgres://a:***@h/d");
        // An `@` in a parameter value is not user info.
        assert_eq!(
            mask("postgres://h/d?application_name=a@b&password=p"),
            "postgres://h/d?application_name=a@b&password=***"
        );
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("pass%77ord"), "password");
        assert_eq!(percent_decode("a%zzb%"), "a%zzb%");
    }

    #[test]
    fn schemas() {
        let u = PgUrl::parse("postgres://u:pw@127.0.0.1:5433/db").unwrap();
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
        for bad in ["Team", "team%20a", "9lives", "pg_catalog", "a-b", "a\"b"] {
            let e = PgUrl::parse(&format!("postgres://h/db?schema={bad}")).unwrap_err();
            assert!(
                e.to_string().contains(
                    "use 1-63 characters a-z, 0-9 and _, not starting with a digit or pg_"
                ),
                "{bad}: {e}"
            );
        }
    }
}
