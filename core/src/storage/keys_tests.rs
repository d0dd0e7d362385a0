//! Tests of sealed record keys (`storage::keys`).

use super::*;

fn seal() -> KeySeal {
    KeySeal::new(&EncryptionKey::new([3; 32]))
}

#[test]
fn context_keys_share_a_prefix_and_suffixes_stay_ordered() {
    let s = seal();
    let a = s.stored_key(Tree::ShortTerm, b"ctx\0alpha").unwrap();
    let b = s.stored_key(Tree::ShortTerm, b"ctx\0beta").unwrap();
    let p = s.stored_prefix(Tree::ShortTerm, b"ctx\0");
    assert_eq!(p.len(), HASH);
    assert!(a.starts_with(&p) && b.starts_with(&p));
    assert_eq!(a.len(), 2 * HASH);
    // A prefix inside the key part scans the context.
    assert_eq!(s.stored_prefix(Tree::ShortTerm, b"ctx\0al"), p);
    // Other tree, other hash; no text left.
    let e = s.stored_key(Tree::Episodes, b"ctx\0alpha").unwrap();
    assert_ne!(e, a);
    assert!(!a.windows(3).any(|w| w == b"ctx"));
    // Versions stay in order after the hashed parts.
    let v1 = s.stored_key(Tree::SemanticHistory, b"c\0k\0\0\0\0\0\0\0\0\x01");
    let v2 = s.stored_key(Tree::SemanticHistory, b"c\0k\0\0\0\0\0\0\0\x01\0");
    let hp = s.stored_prefix(Tree::SemanticHistory, b"c\0k\0");
    assert_eq!(hp.len(), 2 * HASH + 1);
    assert!(v1.as_ref().unwrap().starts_with(&hp) && v1 < v2);
    // Runs: the record and its traces.
    let run = s.stored_key(Tree::Runs, b"r1").unwrap();
    let trace = s.stored_key(Tree::Runs, b"r1\0\0\0\0\0\0\0\0\x02").unwrap();
    assert!(trace.starts_with(&run) && trace.len() == HASH + 9);
    assert!(!s.stored_prefix(Tree::Runs, b"r1\0").is_empty());
    // Generated ids (UUIDs) stay, after the hashed context; other ids do not.
    let id = "0193a5b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b";
    let ep = s
        .stored_key(Tree::Episodes, format!("ctx\0{id}").as_bytes())
        .unwrap();
    assert_eq!(&ep[..HASH], s.stored_prefix(Tree::Episodes, b"ctx\0"));
    assert_eq!(&ep[HASH..], format!("\0{id}").as_bytes());
    assert_eq!(s.stored_key(Tree::Sessions, id.as_bytes()), None);
    let v = format!("{id}\0\0\0\0\0\0\0\0\x01");
    assert_eq!(s.stored_key(Tree::SessionVersions, v.as_bytes()), None);
    assert_eq!(
        s.stored_prefix(Tree::SessionVersions, format!("{id}\0").as_bytes()),
        format!("{id}\0").as_bytes()
    );
    assert!(s.stored_prefix(Tree::Runs, b"0193").is_empty());
    assert!(s.stored_key(Tree::Sessions, b"my-session").is_some());
    assert_eq!(
        s.stored_key(Tree::Episodes, b"ctx\0user-id").unwrap().len(),
        2 * HASH
    );
    // Engine keys in meta stay; context keys there do not.
    assert_eq!(s.stored_key(Tree::Meta, b"format_version"), None);
    let m = s.stored_key(Tree::Meta, b"vector_dim\0ctx").unwrap();
    assert_eq!(m[0], 0);
    assert_eq!(s.stored_key(Tree::IndexLog, &7u64.to_be_bytes()), None);
}

#[test]
fn sealed_key_opens_only_under_its_stored_key() {
    let s = seal();
    let raw = s.stored_key(Tree::Semantic, b"c\0user:alice").unwrap();
    let v = s.wrap(&raw, b"c\0user:alice", b"VALUE").unwrap();
    assert!(!v.windows(5).any(|w| w == b"alice"));
    let (orig, off) = s.unwrap(&raw, &v).unwrap();
    assert_eq!(orig, b"c\0user:alice");
    assert_eq!(&v[off..], b"VALUE");
    let other = s.stored_key(Tree::Semantic, b"c\0user:bob").unwrap();
    assert!(s.unwrap(&other, &v).is_err());
    let mut bad = v.clone();
    bad[6] ^= 1;
    assert!(s.unwrap(&raw, &bad).is_err());
    assert!(
        KeySeal::new(&EncryptionKey::new([4; 32]))
            .unwrap(&raw, &v)
            .is_err()
    );
    assert!(strip(Bytes::from(&b"\x02plain"[..])).is_err());
}

/// Every raw key of every tree of the sled store at `db`.
fn raw_keys(db: &sled::Db) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for name in Tree::ALL {
        for k in db.open_tree(name.name()).unwrap().iter().keys() {
            out.push(k.unwrap().to_vec());
        }
    }
    out
}

fn has(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// An encrypted store written before keys were sealed (format version 2,
/// plaintext keys) is sealed when it opens; half-migrated (what a crash in the
/// middle leaves: each batch is atomic) it is finished the same way.
#[test]
fn plaintext_keys_of_an_encrypted_store_are_sealed_on_open_even_half_done() {
    use crate::{Memory, NewEpisode, SearchFilters};
    use serde_json::json;
    const CTX: &str = "ctxMigrationWord";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let key = EncryptionKey::new([5; 32]);
    let open = || {
        Memory::builder()
            .path(&path)
            .encryption_key(key.clone())
            .open()
    };
    let mem = open().unwrap();
    mem.switch_context(CTX, true).unwrap();
    mem.contexts()
        .set_on_duplicate(crate::layers::dedup::OnDuplicate::Merge, None)
        .unwrap();
    for i in 0..40 {
        mem.short_term()
            .store(&format!("stkey{i}"), json!(i), None)
            .unwrap();
    }
    mem.semantic().store("user:kwKey", json!({"a": 1})).unwrap();
    mem.semantic()
        .update("user:kwKey", json!({"a": 2}))
        .unwrap();
    let ep = mem
        .episodic()
        .record(NewEpisode::new("migrated summary").embedding(vec![1.0, 0.0]))
        .unwrap();
    let sid = mem.sessions().create("sess", json!({})).unwrap().session_id;
    mem.sessions().save(&sid, json!({"s": 1}), 1).unwrap();
    drop(mem);

    for half in [true, false] {
        // Undo the sealing, of every other entry (`half`) or of all of them.
        let db = sled::open(path.join("db")).unwrap();
        let seal = Arc::new(KeySeal::new(&key));
        let mut undone = 0;
        for name in Tree::ALL {
            let Some(st) = SealedTree::new(db.open_tree(name.name()).unwrap(), &seal, name) else {
                continue;
            };
            let entries: Vec<_> = st.tree.iter().map(|r| r.unwrap()).collect();
            for (i, (raw, v)) in entries.into_iter().enumerate() {
                if (half && i % 2 == 1) || st.is_plain_entry(&raw) {
                    continue;
                }
                let (orig, off) = seal.unwrap(&raw, &v).unwrap();
                st.tree.remove(&raw).unwrap();
                st.tree.insert(orig, &v[off..]).unwrap();
                undone += 1;
            }
        }
        assert!(undone > 20, "{undone} entries unsealed");
        let meta = db.open_tree("meta").unwrap();
        meta.insert("format_version", &2u32.to_be_bytes()).unwrap();
        assert!(raw_keys(&db).iter().any(|k| has(k, CTX)));
        db.flush().unwrap();
        drop((meta, db));

        let mem = open().unwrap();
        mem.switch_context(CTX, true).unwrap();
        assert_eq!(mem.short_term().keys("stkey").unwrap().len(), 40);
        assert_eq!(mem.short_term().retrieve("stkey7").unwrap(), Some(json!(7)));
        assert_eq!(mem.semantic().keys("user:").unwrap(), vec!["user:kwKey"]);
        assert_eq!(mem.semantic().history("user:kwKey").unwrap().len(), 2);
        assert!(mem.episodic().get(&ep).unwrap().is_some());
        let hits = mem
            .episodic()
            .search("migrated", &SearchFilters::default(), 5)
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(
            mem.contexts().on_duplicate(None).unwrap(),
            crate::layers::dedup::OnDuplicate::Merge
        );
        assert!(mem.contexts().list().unwrap().contains(&CTX.to_owned()));
        assert_eq!(
            mem.sessions().restore(&sid, None).unwrap().content,
            json!({"s": 1})
        );
        drop(mem);

        let db = sled::open(path.join("db")).unwrap();
        let keys = raw_keys(&db);
        for word in [CTX, "stkey", "kwKey"] {
            assert!(!keys.iter().any(|k| has(k, word)), "{word} left in a key");
        }
        // Generated ids stay as they are (no user text in them).
        assert!(keys.iter().any(|k| has(k, &sid)));
        assert!(keys.iter().any(|k| has(k, &ep)));
        let v = db
            .open_tree("meta")
            .unwrap()
            .get("format_version")
            .unwrap()
            .unwrap();
        assert_eq!(v.as_ref(), crate::FORMAT_VERSION_SEALED_KEYS.to_be_bytes());
    }
}
