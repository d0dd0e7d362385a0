//! Moving a store between sled and PostgreSQL, and an encrypted store on PostgreSQL.

use std::io::Cursor;

use super::*;

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn a_store_moves_from_sled_to_postgres_and_back_losslessly() {
    let sled_dir = tempfile::tempdir().unwrap();
    let src = Memory::open(sled_dir.path()).unwrap();
    src.short_term()
        .store("k", json!({"a": [1, 2]}), None)
        .unwrap();
    src.working().focus("writing").unwrap();
    for i in 0..20 {
        src.episodic()
            .record(NewEpisode::new(format!("episode number {i}")).tags(["t"]))
            .unwrap();
    }
    src.semantic().store("fact", json!({"v": 1})).unwrap();
    src.semantic().update("fact", json!({"w": 2})).unwrap();
    let sid = src.sessions().create("s", json!({})).unwrap().session_id;
    src.sessions().save(&sid, json!({"step": 1}), 3).unwrap();
    src.sessions().save(&sid, json!({"step": 2}), 3).unwrap();
    let mut exported = Vec::new();
    let stats = src.admin().export(&mut exported).unwrap();

    let dir = pg_dir();
    let pg = Memory::open(dir.path()).unwrap();
    let istats = pg.admin().import(&mut Cursor::new(&exported)).unwrap();
    let nonzero = |m: &std::collections::BTreeMap<String, u64>| -> Vec<(String, u64)> {
        m.iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect()
    };
    assert_eq!(nonzero(&istats.counts), nonzero(&stats.counts));
    let mut again = Vec::new();
    pg.admin().export(&mut again).unwrap();
    // Same records (the header line carries the export time).
    let body = |b: &[u8]| -> Vec<String> {
        String::from_utf8(b.to_vec())
            .unwrap()
            .lines()
            .skip(1)
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(body(&again), body(&exported));
    assert_eq!(
        pg.episodic()
            .search("episode", &SearchFilters::default(), 100)
            .unwrap()
            .len(),
        20
    );

    let back_dir = tempfile::tempdir().unwrap();
    let back = Memory::open(back_dir.path()).unwrap();
    back.admin().import(&mut Cursor::new(&again)).unwrap();
    let mut third = Vec::new();
    back.admin().export(&mut third).unwrap();
    assert_eq!(body(&third), body(&exported));
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn an_encrypted_store_on_postgres_needs_its_key() {
    let dir = pg_dir();
    let url = dir.path();
    let key = memstrata::EncryptionKey::new([7; 32]);
    {
        let mem = Memory::builder()
            .path(&url)
            .encryption_key(key.clone())
            .open()
            .unwrap();
        mem.semantic().store("secret", json!("plans")).unwrap();
    }
    match Memory::open(&url) {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "encryption_key"),
        other => panic!("{other:?}"),
    }
    // A password in the URL never shows in the message (the test server trusts loopback,
    // so the password is not checked and the open reaches the key check).
    let text = url.to_str().unwrap();
    if let Some((scheme, rest)) = text.split_once("://")
        && let Some((user, host)) = rest.split_once('@')
        && !user.contains(':')
    {
        let with_password = format!("{scheme}://{user}:hunter2@{host}");
        match Memory::open(&with_password) {
            Err(e @ Error::InvalidInput { .. }) => {
                let msg = e.to_string();
                assert!(!msg.contains("hunter2"), "{msg}");
                assert!(msg.contains(":***@"), "{msg}");
            }
            other => panic!("{other:?}"),
        }
    }
    match Memory::builder()
        .path(&url)
        .encryption_key(memstrata::EncryptionKey::new([8; 32]))
        .open()
    {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "encryption_key"),
        other => panic!("{other:?}"),
    }
    // The stored bytes are sealed: the plaintext is nowhere in the table.
    let schema = common::schema_of(&url);
    let rows = client()
        .query(&format!("SELECT value FROM \"{schema}\".semantic"), &[])
        .unwrap();
    assert_eq!(rows.len(), 1);
    let v: &[u8] = rows[0].get(0);
    assert!(!v.windows(5).any(|w| w == b"plans"));
    let mem = Memory::builder()
        .path(&url)
        .encryption_key(key)
        .open()
        .unwrap();
    assert_eq!(
        mem.semantic().get("secret").unwrap().unwrap().knowledge,
        json!("plans")
    );
}
