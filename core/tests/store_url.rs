//! A store URL's password never shows: not in an open error (malformed URL, bad
//! schema, unreachable server), not in `Debug`, not in the masked location. None of
//! these needs a PostgreSQL server (nothing listens on loopback port 1); `Memory`'s
//! own `Debug` on an open PostgreSQL store is checked in pg_backend.rs.

use memstrata::store_url::{PgUrl, StoreLocation, is_postgres_url, mask};
use memstrata::{Error, Memory};

const SECRET: &str = "hunter2";

/// Every way a password can be written into a store URL that this crate accepts.
fn urls_with_a_password(port: &str) -> Vec<String> {
    vec![
        format!("postgres://bob:{SECRET}@127.0.0.1:{port}/mem?schema=team"),
        format!("postgresql://bob:{SECRET}@127.0.0.1:{port}/mem"),
        format!("postgres://bob@127.0.0.1:{port}/mem?password={SECRET}"),
        format!("postgres://bob@127.0.0.1:{port}/mem?schema=team&password={SECRET}"),
        format!("postgres://bob@127.0.0.1:{port}/mem?PassWord={SECRET}&schema=team"),
        format!("postgres://bob@127.0.0.1:{port}/mem?pass%77ord={SECRET}"),
        format!("postgres://bob@127.0.0.1:{port}/mem?sslpassword={SECRET}"),
        format!("POSTGRES://bob:{SECRET}@127.0.0.1:{port}/mem"),
        format!("PostgreSQL://bob@127.0.0.1:{port}/mem?password={SECRET}"),
        // Characters a password should percent-encode, written raw.
        format!("postgres://bob:{SECRET}/x@127.0.0.1:{port}/mem"),
        format!("postgres://bob:{SECRET}?x@127.0.0.1:{port}/mem"),
        format!("postgres://bob:{SECRET}@x@127.0.0.1:{port}/mem"),
    ]
}

fn assert_hidden(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} shows the password: {text}");
}

#[test]
fn masking_hides_every_password_form() {
    for url in urls_with_a_password("5432") {
        let m = mask(&url);
        assert_hidden(&url, &m);
        assert!(m.contains("***"), "{url} -> {m}");
        assert!(is_postgres_url(&url), "{url}");
    }
    assert_eq!(
        mask("postgres://bob:pw@db:5432/mem?schema=x"),
        "postgres://bob:***@db:5432/mem?schema=x"
    );
    assert_eq!(
        mask("postgres://bob@db/mem?Password=pw&schema=x"),
        "postgres://bob@db/mem?Password=***&schema=x"
    );
    // No password: unchanged. A directory is never rewritten, whatever it holds.
    assert_eq!(mask("postgres://bob@db/mem"), "postgres://bob@db/mem");
    assert_eq!(mask("/data/a:b@c?password=x"), "/data/a:b@c?password=x");
}

#[test]
fn parsed_locations_show_only_the_masked_url() {
    for url in urls_with_a_password("5432") {
        match StoreLocation::parse(&url) {
            Ok(loc) => {
                assert_hidden(&url, &format!("{loc} {loc:?} {}", loc.masked()));
                let pg = loc.postgres().expect("a URL");
                assert_hidden(&url, &format!("{pg} {pg:?} {}", pg.masked()));
            }
            Err(e) => assert_hidden(&url, &format!("{e} {e:?}")),
        }
    }
    let u = PgUrl::parse("POSTGRES://bob:pw@h/db?schema=team_a&sslmode=disable").unwrap();
    assert_eq!(u.schema(), "team_a");
    // The client gets a lower-case scheme and no `schema=`.
    assert_eq!(u.connect_str(), "postgres://bob:pw@h/db?sslmode=disable");
    assert!(matches!(
        StoreLocation::parse("rel/postgres"),
        Ok(StoreLocation::Dir(_))
    ));
}

#[test]
fn malformed_urls_are_refused_naming_path_without_the_password() {
    let long = "s".repeat(64);
    let mut cases = vec![
        (
            format!("postgres://bob@127.0.0.1/db?password={SECRET}&schema=Team-A"),
            "`schema` \"Team-A\"",
        ),
        (
            format!("postgres://bob:{SECRET}@h/db?schema={long}"),
            "`schema` is 64 characters, more than PostgreSQL's limit of 63",
        ),
        (
            format!("postgres://bob:{SECRET}@h/db?schema=a&schema=b"),
            "`schema` is given twice",
        ),
        (
            format!("postgres://bob:{SECRET}@h/db?schema="),
            "`schema` is empty",
        ),
        (format!("postgres:///db?password={SECRET}"), "no host"),
    ];
    // The client's parser (port, options) is there only with the `postgres` feature.
    if cfg!(feature = "postgres") {
        cases.push((
            format!("postgres://bob:{SECRET}@127.0.0.1:99999/db"),
            "port",
        ));
        cases.push((
            format!("postgres://bob@h/db?sslpassword={SECRET}"),
            "unknown option `sslpassword`",
        ));
    }
    for (url, want) in cases {
        let e = StoreLocation::parse(&url).unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(
            matches!(&e, Error::InvalidInput { field, .. } if field == "path"),
            "{e:?}"
        );
        assert!(text.contains(want), "{url}: {text}");
        assert_hidden(&url, &text);
        let e = Memory::open(&url).unwrap_err();
        assert_hidden(&url, &format!("{e} {e:?}"));
    }
}

#[cfg(feature = "postgres")]
#[test]
fn an_unreachable_server_is_reported_without_the_password() {
    // Nothing listens on loopback port 1: the open fails connecting.
    for url in urls_with_a_password("1") {
        let opened = Memory::builder().path(&url).open();
        let e = opened.expect_err(&url);
        let text = format!("{e} {e:?}");
        assert_hidden(&url, &text);
        assert!(text.contains("127.0.0.1:1"), "{url}: {text}");
        let opened = Memory::builder().path(&url).separate_engine().open();
        let e = opened.expect_err(&url);
        assert_hidden(&url, &format!("{e} {e:?}"));
    }
}

#[cfg(not(feature = "postgres"))]
#[test]
fn a_build_without_postgres_refuses_urls_without_the_password() {
    for url in urls_with_a_password("1") {
        let e = Memory::open(&url).unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(text.contains("`postgres` feature"), "{url}: {text}");
        assert_hidden(&url, &text);
    }
}
