//! Store URLs: a password never shows, bad URLs and schemas are invalid input naming `path`.

use super::*;

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn a_password_parameter_never_shows_in_debug_status_or_errors() {
    // The test URL's password moves to a `password=` parameter (scripts/pg-test.sh
    // gives the server a random one; a trusting server gets a made-up one).
    let d = pg_dir();
    let given = d.path().display().to_string();
    let (scheme, rest) = given.split_once("://").unwrap();
    let (user, host) = rest.split_once('@').unwrap();
    let (user, secret) = user.split_once(':').unwrap_or((user, "hunter2"));
    let url = format!("{scheme}://{user}@{host}&password={secret}");
    let m = Memory::open(&url).unwrap();
    let debug = format!("{m:?}");
    assert!(debug.contains("password=***"), "{debug}");
    let status = m.admin().status(true, true).unwrap();
    let shown = format!(
        "{debug} {status:?} {}",
        serde_json::to_string(&status).unwrap()
    );
    assert!(!shown.contains(secret), "{shown}");
    // The key check's error names the store too.
    let e = Memory::builder()
        .path(&url)
        .encryption_key(memstrata::EncryptionKey::new([8; 32]))
        .open()
        .unwrap_err();
    assert!(!format!("{e} {e:?}").contains(secret), "{e}");
    drop(m);
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn bad_urls_are_invalid_input_naming_path() {
    for schema in ["Upper", "1digit", "pg_reserved", "with-dash", ""] {
        let url = format!("{}?schema={schema}", base_url());
        match Memory::open(&url) {
            Err(Error::InvalidInput { field, reason }) => {
                assert_eq!(field, "path", "{schema}");
                assert!(reason.contains("schema"), "{reason}");
            }
            other => panic!("schema {schema:?}: {other:?}"),
        }
    }
    // Nothing listens on port 1: a storage error naming the server, without the password.
    match Memory::open("postgres://someone:s3cret@127.0.0.1:1/db?schema=x") {
        Err(e @ Error::Storage { .. }) => {
            let text = e.to_string();
            assert!(text.contains("cannot connect"), "{text}");
            assert!(text.contains("127.0.0.1:1"), "{text}");
            assert!(!text.contains("s3cret"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // A sled store cannot get a separate engine.
    let d = tempfile::tempdir().unwrap();
    match Memory::builder().path(d.path()).separate_engine().open() {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "path"),
        other => panic!("{other:?}"),
    }
}
