//! An update or a forget removes exactly the index document of its own key.
//!
//! The index finds a document by its uid through one of 4,096 bucket terms
//! and the `uid` column (`search/index/delete.rs`). With more keys than
//! buckets, every bucket holds several keys, so a lookup that matched the
//! bucket instead of the uid would delete a neighbour's document (its own
//! word would stop finding it), and one that missed would leave the old
//! version searchable. Checked on the overlay (right after the changes,
//! before any commit), after a commit, and after a reopen.

use memstrata::Memory;
use serde_json::json;

const N: usize = 5_000;

fn fact(i: usize, version: &str) -> serde_json::Value {
    json!({ "text": format!("{version}{i} fact about key {i}") })
}

/// What each key's words find: `old{i}` only for a key never updated,
/// `new{i}` only for an updated one, neither for a forgotten one.
fn check(mem: &Memory, when: &str) {
    for i in 0..N {
        let key = format!("k{i}");
        let old = mem.semantic().query(&format!("old{i}"), 5).unwrap();
        let new = mem.semantic().query(&format!("new{i}"), 5).unwrap();
        let keys = |hits: &[memstrata::semantic::KnowledgeHit]| -> Vec<String> {
            hits.iter().map(|h| h.key.clone()).collect()
        };
        let (want_old, want_new): (Vec<String>, Vec<String>) = if i % 5 == 0 {
            (vec![], vec![])
        } else if i % 3 == 0 {
            (vec![], vec![key.clone()])
        } else {
            (vec![key.clone()], vec![])
        };
        assert_eq!(keys(&old), want_old, "{when}: old{i}");
        assert_eq!(keys(&new), want_new, "{when}: new{i}");
    }
}

#[test]
fn updates_and_forgets_touch_only_their_own_key() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mem = Memory::open(dir.path()).unwrap();
        for i in 0..N {
            mem.semantic()
                .store(&format!("k{i}"), fact(i, "old"))
                .unwrap();
        }
        // Durable: the first versions sit in committed segments.
        mem.flush().unwrap();
        for i in (0..N).filter(|i| i % 3 == 0) {
            mem.semantic()
                .store(&format!("k{i}"), fact(i, "new"))
                .unwrap();
        }
        for i in (0..N).filter(|i| i % 5 == 0) {
            assert!(mem.semantic().forget(&format!("k{i}")).unwrap());
        }
        check(&mem, "before a commit");
        mem.flush().unwrap();
        check(&mem, "after a commit");
    }
    let mem = Memory::open(dir.path()).unwrap();
    check(&mem, "after a reopen");
}
