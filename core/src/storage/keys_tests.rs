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

#[test]
fn has_prefix_reads_one_entry_at_a_part_boundary_and_scans_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path()).unwrap();
    let seal = Arc::new(seal());
    let tree = KvTree::Sled(db.open_tree("short_term").unwrap());
    let st = SealedTree::new(tree, &seal, Tree::ShortTerm).unwrap();
    assert!(!st.has_prefix(b"").unwrap());
    st.insert(b"ctx\0alpha", b"v").unwrap();
    assert!(st.has_prefix(b"").unwrap());
    assert!(st.has_prefix(b"ctx\0").unwrap());
    assert!(!st.has_prefix(b"other\0").unwrap());
    assert!(st.has_prefix(b"ctx\0al").unwrap());
    assert!(!st.has_prefix(b"ctx\0b").unwrap());
    // A context prefix inside the name: every key is opened and compared.
    assert!(st.has_prefix(b"ct").unwrap());
    assert!(!st.has_prefix(b"cu").unwrap());
    assert_eq!(st.get(b"ctx\0alpha").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn dedup_keys_hide_context_and_id_and_keep_the_hash_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path()).unwrap();
    let seal = Arc::new(seal());
    let tree = KvTree::Sled(db.open_tree("dedup").unwrap());
    let st = SealedTree::new(tree, &seal, Tree::Dedup).unwrap();
    let band = |id: &str, h: u8| {
        let mut k = b"ctxSecret\0kb\x03".to_vec();
        k.extend_from_slice(&[h; 8]);
        k.extend_from_slice(id.as_bytes());
        k
    };
    let exact = {
        let mut k = b"ctxSecret\0kx".to_vec();
        k.extend_from_slice(&[9; 8]);
        k.extend_from_slice(b"user:secretKey");
        k
    };
    for k in [
        band("user:secretKey", 1),
        band("user:other", 1),
        band("user:x", 2),
        exact.clone(),
    ] {
        st.insert(&k, b"").unwrap();
    }
    for r in db.open_tree("dedup").unwrap().iter().keys() {
        let k = r.unwrap();
        for w in [&b"ctxSecret"[..], b"secretKey", b"other"] {
            assert!(!k.windows(w.len()).any(|x| x == w), "{k:?}");
        }
    }
    let keys = |p: &[u8]| {
        let mut it = st.scan_prefix(p);
        let mut out = Vec::new();
        while let Some(r) = it.next_front() {
            out.push(r.unwrap().0.to_vec());
        }
        out
    };
    assert_eq!(
        keys(&band("", 1)),
        vec![band("user:other", 1), band("user:secretKey", 1)]
    );
    assert_eq!(
        keys(&exact[..exact.len() - "user:secretKey".len()]),
        vec![exact.clone()]
    );
    assert_eq!(keys(b"ctxSecret\0k").len(), 4);
    // A prefix scan reads only the entries under the hashed prefix.
    let stored = seal.stored_prefix(Tree::Dedup, &band("", 1));
    assert_eq!(stored.len(), 16 + 1 + 11);
}
