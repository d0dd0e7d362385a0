//! Where the store lives: a directory (the embedded sled store) or a PostgreSQL URL
//! (`postgres://user:password@host:port/db?schema=NAME`).
//!
//! Parsing, checking and masking are the core's ([`memstrata::store_url`], shared with
//! every binding); this module adds what only the server needs: `--store` errors and the
//! LISTEN/NOTIFY channel. The adapter treats a URL as a store, not a path: no directory
//! is created, nothing is written beside it (the audit trail goes to `--audit-file`, or is
//! off), and the password never reaches a log line or an error message
//! ([`StoreLocation::masked`], and `Display`/`Debug` of both types).

use std::path::Path;

pub use memstrata::store_url::{MAX_SCHEMA_BYTES, PgUrl, StoreLocation};

/// Classify and check a `--store` / `MEMSTRATA_STORE` value (see [`StoreLocation::parse`]).
pub fn parse(value: &Path) -> Result<StoreLocation, String> {
    StoreLocation::parse(value).map_err(|e| match e {
        memstrata::Error::InvalidInput { reason, .. } => format!("--store: {reason}"),
        other => format!("--store: {other}"),
    })
}

/// The LISTEN/NOTIFY channel of a store's instances: one per schema, so stores in
/// other schemas of the same database do not hear each other. Channel names are
/// identifiers (at most 63 bytes): a long schema name is replaced by its hash.
pub fn channel(url: &PgUrl) -> String {
    let c = format!("memstrata_changes:{}", url.schema());
    if c.len() <= MAX_SCHEMA_BYTES {
        c
    } else {
        format!("memstrata_changes:{:016x}", fnv1a(url.schema().as_bytes()))
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
    fn store_errors_name_the_flag_and_hide_the_password() {
        let e = parse(Path::new("postgres://bob:s3cret@h:notaport/mem")).unwrap_err();
        assert!(
            e.starts_with("--store: store URL postgres://bob:***@h:notaport/mem"),
            "{e}"
        );
        assert!(!e.contains("s3cret"));
        assert!(matches!(
            parse(Path::new("rel/dir")),
            Ok(StoreLocation::Dir(_))
        ));
    }

    #[test]
    fn channels_are_per_schema_and_short() {
        let u = PgUrl::parse("postgresql://u@localhost/db?schema=team_a2").unwrap();
        assert_eq!(channel(&u), "memstrata_changes:team_a2");
        let u = PgUrl::parse(&format!("postgres://h/db?schema={}", "x".repeat(63))).unwrap();
        let c = channel(&u);
        assert!(c.len() <= MAX_SCHEMA_BYTES, "{c}");
        let v = PgUrl::parse(&format!("postgres://h/db?schema={}y", "x".repeat(62))).unwrap();
        assert_ne!(c, channel(&v));
    }
}
