//! Store locations as the bindings show them: a PostgreSQL URL without its password.

use std::path::Path;

/// Whether `s` names a PostgreSQL store (`postgres://` or `postgresql://`, any case).
pub fn is_postgres_url(s: &str) -> bool {
    let lower = s.get(..13).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// A store's location for display (`repr`, logs, errors): a directory as is, a
/// PostgreSQL URL with any password (user info or `password=` parameter) replaced by `***`.
pub fn display_store(path: &Path) -> String {
    let s = path.to_string_lossy();
    if is_postgres_url(&s) {
        redact_url(&s)
    } else {
        path.display().to_string()
    }
}

/// `url` with any password (in the user info or a `password=` parameter) replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    // scheme://user:password@host -> scheme://user:***@host
    if let Some(start) = out.find("://").map(|i| i + 3) {
        let end = out[start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..end].rfind('@').map(|i| start + i)
            && let Some(colon) = out[start..at].find(':').map(|i| start + i)
        {
            out.replace_range(colon + 1..at, "***");
        }
    }
    // ?password=... / &password=...
    if let Some(q) = out.find('?') {
        let (base, query) = out.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_owned(),
            })
            .collect();
        out = format!("{base}{}", query.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(
            redact_url("postgres://bob:s3cret@db:5432/mem?schema=x"),
            "postgres://bob:***@db:5432/mem?schema=x"
        );
        assert_eq!(
            redact_url("postgresql://bob@db/mem?password=s3cret&schema=x"),
            "postgresql://bob@db/mem?password=***&schema=x"
        );
        assert_eq!(redact_url("postgres://bob@db/mem"), "postgres://bob@db/mem");
        assert_eq!(
            display_store(Path::new("POSTGRES://a:b@h/d")),
            "POSTGRES://a:***@h/d"
        );
        assert_eq!(display_store(Path::new("/data/a:b@c")), "/data/a:b@c");
    }
}
