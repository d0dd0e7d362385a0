//! The vendored sled's transaction commit applies each run of keys that fall
//! into one leaf with one copy of the leaf (`Tree::insert_run`, see
//! vendor/sled/PATCHES.md). These tests hold its results to a model: a
//! `BTreeMap` per tree, after every transaction, with readers traversing the
//! trees at the same time (a traversal may split a leaf under the writer),
//! and again after the store is reopened from its log.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sled::Transactional;
use sled::transaction::ConflictableTransactionError;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

mod common;

use common::Rng;

/// A number below `n` from `rng` (a fixed sequence, so a failure repeats).
fn below(rng: &mut Rng, n: u64) -> u64 {
    rng.next() % n
}

/// One transaction's writes to one tree: `None` deletes.
type Writes = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// The writes of transaction `round`: appends in key order (as time-ordered
/// ids are written; short values, or document-sized ones in every fourth),
/// writes to random keys, overwrites and deletes of keys already stored,
/// and writes that change nothing.
fn plan(rng: &mut Rng, model: &Model, next_seq: &mut u64, round: u64) -> Writes {
    let mut w: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    let appends = below(rng, 300);
    for _ in 0..appends {
        *next_seq += 1;
        // Every fourth transaction writes document-sized values, whose
        // leaves are too large for one image (the one-key path).
        let len = if round % 4 == 3 {
            1_500 + below(rng, 1_500) as usize
        } else {
            20 + below(rng, 300) as usize
        };
        w.insert(
            format!("seq\0{:012}", *next_seq).into_bytes(),
            Some(vec![(round % 251) as u8; len]),
        );
    }
    for _ in 0..below(rng, 40) {
        let k = format!("rnd\0{:08}", below(rng, 5_000)).into_bytes();
        w.insert(k, Some(round.to_be_bytes().to_vec()));
    }
    if !model.is_empty() {
        let keys: Vec<&Vec<u8>> = model.keys().collect();
        for _ in 0..below(rng, 60) {
            let k = keys[below(rng, keys.len() as u64) as usize].clone();
            let v = match below(rng, 3) {
                0 => None,
                1 => Some(model[&k].clone()), // the same value: a no-op
                _ => Some(format!("over {round}").into_bytes()),
            };
            w.insert(k, v);
        }
    }
    // A delete of a key that is not there, also a no-op.
    w.insert(b"rnd\0absent".to_vec(), None);
    w.into_iter().collect()
}

fn apply(model: &mut Model, writes: &Writes) {
    for (k, v) in writes {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

fn assert_matches(tree: &sled::Tree, model: &Model, when: &str) {
    let stored: Model = tree
        .iter()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    assert_eq!(stored.len(), model.len(), "{when}: number of keys");
    assert!(stored == *model, "{when}: contents differ from the model");
    // Point reads descend from the root: every leaf's bounds are right.
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(tree.get(k).unwrap().as_deref(), Some(&v[..]), "{when}");
    }
}

#[test]
fn transactions_match_a_model_with_readers_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut models = [Model::new(), Model::new()];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut next_seq = 0;
    {
        let db = sled::open(dir.path()).unwrap();
        let trees = [db.open_tree("a").unwrap(), db.open_tree("b").unwrap()];
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (trees, stop) = (trees.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut seen = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        for t in &trees {
                            seen += t.iter().count();
                            let _ = t.get(format!("seq\0{:012}", seen % 9_000 + r)).unwrap();
                        }
                    }
                    seen
                })
            })
            .collect();
        for round in 0..120u64 {
            let plans = [
                plan(&mut rng, &models[0], &mut next_seq, round),
                plan(&mut rng, &models[1], &mut next_seq, round),
            ];
            (&trees[0], &trees[1])
                .transaction(|(a, b)| {
                    for (t, writes) in [(a, &plans[0]), (b, &plans[1])] {
                        for (k, v) in writes {
                            match v {
                                Some(v) => t.insert(&k[..], &v[..])?,
                                None => t.remove(&k[..])?,
                            };
                        }
                    }
                    Ok::<_, ConflictableTransactionError<()>>(())
                })
                .unwrap();
            for (m, p) in models.iter_mut().zip(&plans) {
                apply(m, p);
            }
            if round % 10 == 9 {
                for (t, m) in trees.iter().zip(&models) {
                    assert_matches(t, m, &format!("after transaction {round}"));
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        assert!(models[0].len() > 10_000, "the runs span many leaves");
        db.flush().unwrap();
    }
    // Recovery replays the log: the leaf images written for runs and the
    // single-key records alike.
    let db = sled::open(dir.path()).unwrap();
    for (name, m) in ["a", "b"].iter().zip(&models) {
        assert_matches(&db.open_tree(name).unwrap(), m, "after reopen");
    }
}

#[test]
fn an_aborted_transaction_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path()).unwrap();
    let tree = db.open_tree("t").unwrap();
    for i in 0..500u32 {
        tree.insert(format!("k{i:06}"), &i.to_be_bytes()[..])
            .unwrap();
    }
    let before: Model = tree
        .iter()
        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    let res = tree.transaction(|t| {
        for i in 0..2_000u32 {
            t.insert(format!("k{i:06}").as_bytes(), &b"new"[..])?;
        }
        sled::transaction::abort::<(), ()>(())
    });
    assert!(res.is_err());
    assert_matches(&tree, &before, "after the abort");
}
