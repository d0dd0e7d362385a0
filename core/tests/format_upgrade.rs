//! On-disk format upgrades: a store written in an older layout opens, reads
//! and searches as before, and is stamped with the current version.
//!
//! Format 1 stored episode records as MessagePack maps with field names;
//! format 2 stores them as arrays (fields by position) without the id,
//! which is the key's. The old layout is
//! written here with sled directly, record by record, as a format-1 build
//! wrote it.

use memstrata::{FORMAT_VERSION, Memory, NewEpisode, SearchFilters};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// An episode record as format 1 wrote it (named fields, no embedding).
#[derive(Debug, Serialize, Deserialize)]
struct V1Episode {
    id: String,
    timestamp: i64,
    summary: String,
    content: Value,
    participants: Vec<String>,
    tags: Vec<String>,
    importance: u8,
}

/// An episode record as format 2 writes it (an array; the id is the key's).
#[derive(Debug, Deserialize)]
struct V2Episode {
    timestamp: i64,
    summary: String,
    content: Value,
    participants: Vec<String>,
    tags: Vec<String>,
    importance: u8,
}

/// Whether a stored plaintext record (tag byte 0) holds a MessagePack map.
fn is_map_record(v: &[u8]) -> bool {
    assert_eq!(v[0], 0, "a plaintext, uncompressed record");
    matches!(v[1], 0x80..=0x8f | 0xde | 0xdf)
}

/// Whether a stored plaintext record (tag byte 0) holds a MessagePack array.
fn is_array_record(v: &[u8]) -> bool {
    assert_eq!(v[0], 0, "a plaintext, uncompressed record");
    matches!(v[1], 0x90..=0x9f | 0xdc | 0xdd)
}

fn format_version(db: &sled::Db) -> u32 {
    let v = db
        .open_tree("meta")
        .unwrap()
        .get("format_version")
        .unwrap()
        .unwrap();
    u32::from_be_bytes(v.as_ref().try_into().unwrap())
}

#[test]
fn current_build_writes_episodes_as_arrays() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mem = Memory::open(dir.path()).unwrap();
        mem.episodic()
            .record(NewEpisode::new("compact record").tags(["t"]))
            .unwrap();
    }
    let db = sled::open(dir.path().join("db")).unwrap();
    assert_eq!(format_version(&db), FORMAT_VERSION);
    assert_eq!(FORMAT_VERSION, 2);
    let eps = db.open_tree("episodes").unwrap();
    let (_, v) = eps.iter().next().unwrap().unwrap();
    assert!(is_array_record(&v), "{:x?}", &v[..4]);
    // Six fields (no id, no embedding): a fixarray of 6.
    assert_eq!(v[1], 0x96);
    let r: V2Episode = rmp_serde::from_slice(&v[1..]).unwrap();
    assert_eq!(r.summary, "compact record");
    assert_eq!(r.tags, vec!["t"]);
}

#[test]
fn format_1_store_opens_reads_searches_and_is_stamped_2() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<String>;
    {
        let mem = Memory::open(dir.path()).unwrap();
        let ep = mem.episodic();
        ids = vec![
            ep.record(
                NewEpisode::new("deployed the staging cluster")
                    .content(json!({"pr": 42, "note": "rollback plan ready"}))
                    .participants(["alice", "bob"])
                    .tags(["deploy"])
                    .importance(8),
            )
            .unwrap(),
            ep.record(NewEpisode::new("lunch with the design team"))
                .unwrap(),
        ];
    }
    // Rewrite the store in the format-1 layout: every episode a named map, the stamp 1.
    {
        let db = sled::open(dir.path().join("db")).unwrap();
        let eps = db.open_tree("episodes").unwrap();
        let mut n = 0;
        for item in eps.iter() {
            let (k, v) = item.unwrap();
            assert!(is_array_record(&v));
            let r: V2Episode = rmp_serde::from_slice(&v[1..]).unwrap();
            let id = std::str::from_utf8(k.strip_prefix(b"default\0").unwrap()).unwrap();
            assert!(ids.iter().any(|x| x == id));
            let rec = V1Episode {
                id: id.to_owned(),
                timestamp: r.timestamp,
                summary: r.summary,
                content: r.content,
                participants: r.participants,
                tags: r.tags,
                importance: r.importance,
            };
            let mut old = vec![0u8];
            old.extend(rmp_serde::to_vec_named(&rec).unwrap());
            assert!(is_map_record(&old));
            eps.insert(k, old).unwrap();
            n += 1;
        }
        assert_eq!(n, 2);
        db.open_tree("meta")
            .unwrap()
            .insert("format_version", &1u32.to_be_bytes())
            .unwrap();
        db.flush().unwrap();
    }
    // The index is derived: without it, open rebuilds it from the format-1 records.
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let new_id;
    {
        let mem = Memory::open(dir.path()).unwrap();
        let ep = mem.episodic();
        let first = ep.get(&ids[0]).unwrap().expect("format-1 episode readable");
        assert_eq!(first.summary, "deployed the staging cluster");
        assert_eq!(
            first.content,
            json!({"pr": 42, "note": "rollback plan ready"})
        );
        assert_eq!(first.participants, vec!["alice", "bob"]);
        assert_eq!(first.tags, vec!["deploy"]);
        assert_eq!(first.importance, 8);
        let hits = ep
            .search("rollback staging", &SearchFilters::default(), 10)
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].episode.id, ids[0]);
        assert_eq!(ep.recent(10).unwrap().len(), 2);
        // A new episode next to the old ones, and an export of all of them.
        new_id = ep
            .record(NewEpisode::new("staging cluster upgraded"))
            .unwrap();
        let mut out = Vec::new();
        mem.admin().export(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for id in ids.iter().chain([&new_id]) {
            assert!(text.contains(id.as_str()), "export misses {id}");
        }
        let hits = ep.search("staging", &SearchFilters::default(), 10).unwrap();
        assert_eq!(hits.len(), 2);
    }
    let db = sled::open(dir.path().join("db")).unwrap();
    assert_eq!(
        format_version(&db),
        2,
        "stamped with the new version at open"
    );
    let eps = db.open_tree("episodes").unwrap();
    let (mut maps, mut arrays) = (0, 0);
    for item in eps.iter() {
        let (_, v) = item.unwrap();
        if is_map_record(&v) {
            maps += 1;
        } else if is_array_record(&v) {
            arrays += 1;
        }
    }
    // Nothing was rewritten: the old records stay maps, the new one is an array.
    assert_eq!((maps, arrays), (2, 1));
}
