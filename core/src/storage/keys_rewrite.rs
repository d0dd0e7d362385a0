//! Rewriting every entry of a tree into another key form: sealing the
//! plaintext keys of an encrypted store written before keys were sealed (sled
//! or PostgreSQL), and key rotation (`engine::rekey`, sled). Each batch is atomic and entries already
//! in the target form are skipped, so an interrupted run is finished by the
//! next one.

use std::sync::Arc;

use super::{Batch, Bytes, KeySeal, KvTree, MIGRATE_CHUNK, SealedTree, Tree};
use crate::Result;
use crate::error::DepResult;
use crate::storage::Store;

/// Seal the keys of an encrypted store written before keys were sealed (a
/// sled store of format version 2, or a PostgreSQL store written before its
/// keys were sealed): every entry whose key is not in its stored form is
/// rewritten, [`MIGRATE_CHUNK`] entries per atomic batch (PostgreSQL: one
/// transaction each), so an interrupted run leaves every entry in one form
/// or the other and the next open goes on. Returns the entries rewritten.
pub(crate) fn seal_plaintext_keys(store: &Store, seal: &Arc<KeySeal>) -> Result<u64> {
    let mut moved = 0u64;
    for name in Tree::ALL {
        let Some(st) = SealedTree::new(store.tree(name)?, seal, name) else {
            continue;
        };
        let mut pending = Vec::new();
        for r in st.tree.iter() {
            let (k, v) = r?;
            if !st.is_stored_form(&k, &v) {
                pending.push(k);
            }
        }
        for chunk in pending.chunks(MIGRATE_CHUNK) {
            let mut b = Batch::default();
            for k in chunk {
                let (Some(v), Some(raw)) = (st.tree.get(k)?, st.key(k)) else {
                    continue;
                };
                let v = seal.wrap(&raw, k, &v)?;
                b.remove(k);
                b.insert(raw, v);
                moved += 1;
            }
            st.tree.apply_batch(b)?;
        }
    }
    Ok(moved)
}

/// Move every entry of the sled tree `name` from the key sealing `old` to
/// `new` (key rotation), its value part passed through `value`: entries
/// already in their `new` form are skipped and the rest rewritten
/// [`MIGRATE_CHUNK`] per atomic batch, so an interrupted run leaves each
/// entry in one form or the other and a second run finishes. `progress` gets
/// the entries rewritten so far. Returns the entries rewritten.
pub(crate) fn reseal_tree(
    db: &sled::Db,
    name: Tree,
    old: &Arc<KeySeal>,
    new: &Arc<KeySeal>,
    value: &dyn Fn(&[u8]) -> Result<Vec<u8>>,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    let tree = db.open_tree(name.name()).dep()?;
    let Some(st_new) = SealedTree::new(KvTree::Sled(tree.clone()), new, name) else {
        // Plain keys: only the values change.
        let keys: Vec<Bytes> = tree
            .iter()
            .keys()
            .collect::<std::result::Result<_, _>>()
            .dep()?;
        return reseal_values(&tree, &keys, value, progress);
    };
    let (mut plain, mut pending) = (Vec::new(), Vec::new());
    for r in tree.iter() {
        let (k, v) = r.dep()?;
        if st_new.is_plain_entry(&k) {
            plain.push(k);
        } else if !st_new.is_stored_form(&k, &v) {
            pending.push(k);
        }
    }
    // Keys kept as written (generated ids, the engine's `meta` records).
    let mut moved = reseal_values(&tree, &plain, value, progress)?;
    for chunk in pending.chunks(MIGRATE_CHUNK) {
        let mut b = sled::Batch::default();
        for k in chunk {
            let Some(v) = tree.get(k).dep()? else {
                continue;
            };
            let (orig, off) = old.unwrap(k, &v)?;
            let Some(raw) = new.stored_key(name, &orig) else {
                continue;
            };
            let wrapped = new.wrap(&raw, &orig, &value(&v[off..])?)?;
            b.remove(k);
            b.insert(raw, wrapped);
            moved += 1;
        }
        tree.apply_batch(b).dep()?;
        progress(moved);
    }
    Ok(moved)
}

/// [`reseal_tree`] for entries whose keys stay as written (`keys`): `value`
/// gives back a value already in its new form unchanged.
fn reseal_values(
    tree: &sled::Tree,
    keys: &[Bytes],
    value: &dyn Fn(&[u8]) -> Result<Vec<u8>>,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    let mut moved = 0u64;
    for chunk in keys.chunks(MIGRATE_CHUNK) {
        let mut b = sled::Batch::default();
        for k in chunk {
            let Some(v) = tree.get(k).dep()? else {
                continue;
            };
            let nv = value(&v)?;
            if nv[..] != v[..] {
                b.insert(k, nv);
                moved += 1;
            }
        }
        tree.apply_batch(b).dep()?;
        progress(moved);
    }
    Ok(moved)
}

/// Undo [`seal_plaintext_keys`] on `store` (of every entry, or of every
/// other one: what a crash in the middle of sealing leaves): the store as a
/// build before sealed keys wrote it, stamped format version 2. For the
/// tests of the upgrade (`memstrata::testing`). Returns the entries rewritten.
pub(crate) fn unseal_keys(store: &Store, seal: &Arc<KeySeal>, every_other: bool) -> Result<usize> {
    let mut undone = 0;
    for name in Tree::ALL {
        let tree = store.tree(name)?;
        let Some(st) = SealedTree::new(tree.clone(), seal, name) else {
            continue;
        };
        let entries: Vec<_> = tree.iter().collect::<Result<_>>()?;
        for (i, (raw, v)) in entries.into_iter().enumerate() {
            if (every_other && i % 2 == 1) || st.is_plain_entry(&raw) {
                continue;
            }
            let (orig, off) = seal.unwrap(&raw, &v)?;
            tree.remove(&raw)?;
            tree.insert(orig, &v[off..])?;
            undone += 1;
        }
    }
    store
        .tree(Tree::Meta)?
        .insert("format_version", 2u32.to_be_bytes())?;
    store.flush()?;
    Ok(undone)
}
