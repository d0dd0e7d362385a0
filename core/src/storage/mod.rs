//! The storage boundary: every record the layers keep goes through this module.
//!
//! A store is a set of ordered byte-keyed trees ([`Tree`], names are part of
//! the format). Two backends implement them, chosen by the store path:
//!
//! - **sled** (default, embedded): one sled database in `<store>/db`.
//! - **PostgreSQL** (feature `postgres`, a `postgres://` path): one table per
//!   tree in a schema (see [`pg`]).
//!
//! Dispatch is an enum ([`Store`], [`KvTree`], [`Iter`], [`TxTree`]), not a
//! trait object, so the sled path is a direct call. Values are the codec's
//! bytes (MessagePack, sealed when encrypted) for both backends, so
//! encryption and export/import do not depend on the backend. No `sled::`
//! type is used outside this module (error conversion aside): values are
//! [`Bytes`], batches [`Batch`], transactions [`Store::transaction`].

use std::ops::{Bound, RangeBounds};

#[cfg(feature = "postgres")]
use std::sync::Arc;

use sled::transaction::{TransactionalTree, UnabortableTransactionError};

use crate::error::DepResult;
use crate::error::FromDep;
use crate::{Error, Result};

mod serial;
#[allow(unused_imports)]
pub(crate) use serial::*;

mod tx;
#[allow(unused_imports)]
pub(crate) use tx::*;

pub(crate) mod codec;
pub(crate) mod docs;
pub(crate) mod kdf;
pub(crate) mod keys;
#[cfg(feature = "postgres")]
pub(crate) mod pg;
pub mod url;

/// Total size of the regular files under `dir` (links are not followed).
pub(crate) fn dir_size(dir: &std::path::Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for ent in rd.flatten() {
            // Files may vanish while we walk (sled and tantivy rotate files): skip them.
            let Ok(md) = std::fs::symlink_metadata(ent.path()) else {
                continue;
            };
            if md.is_dir() {
                stack.push(ent.path());
            } else if md.is_file() {
                total += md.len();
            }
        }
    }
    total
}

/// The `meta` record naming the version of a PostgreSQL store's `search_docs`
/// rows (the mapping from records to rows). Migration 2 removes it, and the
/// engine (re)builds every row from the records when it is missing or differs
/// from [`SEARCH_DOCS_VERSION`]: a store created before migration 2 is
/// backfilled on its first open by a build that has it.
pub(crate) const META_SEARCH_DOCS: &[u8] = b"pg_search_docs_version";
/// Bumped whenever the rows written for a record change (see [`META_SEARCH_DOCS`]).
pub(crate) const SEARCH_DOCS_VERSION: u32 = 1;

/// A stored key or value (cheap to clone; derefs to `[u8]`).
pub(crate) type Bytes = sled::IVec;

/// The trees of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Tree {
    Meta,
    Contexts,
    ShortTerm,
    Working,
    Episodes,
    Semantic,
    SemanticHistory,
    Procedures,
    Runs,
    Sessions,
    SessionVersions,
    Tasks,
    IndexLog,
    Dedup,
}

impl Tree {
    /// Every tree, in a fixed order.
    pub(crate) const ALL: [Tree; 14] = [
        Tree::Meta,
        Tree::Contexts,
        Tree::ShortTerm,
        Tree::Working,
        Tree::Episodes,
        Tree::Semantic,
        Tree::SemanticHistory,
        Tree::Procedures,
        Tree::Runs,
        Tree::Sessions,
        Tree::SessionVersions,
        Tree::Tasks,
        Tree::IndexLog,
        Tree::Dedup,
    ];

    /// The tree's name (sled tree name, PostgreSQL table name).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tree::Meta => "meta",
            Tree::Contexts => "contexts",
            Tree::ShortTerm => "short_term",
            Tree::Working => "working",
            Tree::Episodes => "episodes",
            Tree::Semantic => "semantic",
            Tree::SemanticHistory => "semantic_history",
            Tree::Procedures => "procedures",
            Tree::Runs => "runs",
            Tree::Sessions => "sessions",
            Tree::SessionVersions => "session_versions",
            Tree::Tasks => "tasks",
            Tree::IndexLog => "index_log",
            Tree::Dedup => "dedup",
        }
    }
}

/// An open store.
#[derive(Clone)]
pub(crate) enum Store {
    Sled(sled::Db),
    #[cfg(feature = "postgres")]
    Postgres(Arc<pg::PgStore>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::Sled(_) => f.write_str("Store::Sled"),
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => write!(f, "Store::Postgres({})", p.schema()),
        }
    }
}

/// A failed transaction attempt: `Conflict` makes the backend run the closure
/// again, `Abort` ends the transaction with that error (nothing written).
#[derive(Debug)]
pub(crate) enum TxError {
    Conflict,
    Abort(Error),
}

impl From<Error> for TxError {
    fn from(e: Error) -> Self {
        TxError::Abort(e)
    }
}

impl From<UnabortableTransactionError> for TxError {
    fn from(e: UnabortableTransactionError) -> Self {
        match e {
            UnabortableTransactionError::Conflict => TxError::Conflict,
            UnabortableTransactionError::Storage(s) => TxError::Abort(Error::from_dep(s)),
        }
    }
}

/// Result of a transaction closure.
pub(crate) type TxResult<T> = std::result::Result<T, TxError>;

impl Store {
    /// One tree of the store.
    pub(crate) fn tree(&self, t: Tree) -> Result<KvTree> {
        Ok(match self {
            Store::Sled(db) => KvTree::Sled(db.open_tree(t.name()).dep()?),
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => KvTree::Postgres(Arc::clone(p), t),
        })
    }

    /// One tree of an encrypted store whose keys are sealed (see [`keys`]),
    /// on either backend; a tree whose keys stay plain as [`Store::tree`].
    pub(crate) fn tree_sealed(
        &self,
        t: Tree,
        seal: &std::sync::Arc<keys::KeySeal>,
    ) -> Result<KvTree> {
        let tree = self.tree(t)?;
        Ok(match keys::SealedTree::new(tree.clone(), seal, t) {
            Some(st) => KvTree::Sealed(st),
            None => tree,
        })
    }

    /// Make every acknowledged write durable (sled: fsync; PostgreSQL commits are durable already).
    pub(crate) fn flush(&self) -> Result<()> {
        match self {
            Store::Sled(db) => {
                db.flush().dep()?;
            }
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => {}
        }
        Ok(())
    }

    /// A fresh, increasing id (never repeats, across processes for PostgreSQL).
    pub(crate) fn generate_id(&self) -> Result<u64> {
        match self {
            Store::Sled(db) => db.generate_id().dep(),
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => p.next_id(),
        }
    }

    /// Whether several processes may share the store (no local writer owns it).
    pub(crate) fn is_shared(&self) -> bool {
        match self {
            Store::Sled(_) => false,
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => true,
        }
    }

    /// Run `f` atomically over `trees`: it gets one view per tree, in order.
    /// `f` may run more than once (on a conflict), so it must be free of side effects.
    pub(crate) fn transaction<R>(
        &self,
        trees: &[&KvTree],
        f: impl Fn(&[TxTree<'_>]) -> TxResult<R>,
    ) -> Result<R> {
        match self {
            Store::Sled(_) => sled_transaction(trees, f),
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => {
                p.transaction(&tree_names(trees)?, |views| f(&sealed_views(trees, views)))
            }
        }
    }

    /// Text search in the store's own search table (PostgreSQL, see
    /// [`pg::PgStore::search`]). sled has none: its engine searches tantivy.
    pub(crate) fn search(&self, q: &docs::IndexQuery<'_>) -> Result<Vec<(String, f32)>> {
        match self {
            Store::Sled(_) => {
                let _ = q;
                Err(Error::storage("a sled store has no search table"))
            }
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => p.search(q),
        }
    }

    /// Rows of the store's search table (sled: none, see [`Store::search`]).
    pub(crate) fn search_docs_count(&self) -> Result<u64> {
        match self {
            Store::Sled(_) => Ok(0),
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => p.search_docs_count(),
        }
    }

    /// Fold pending search-index entries into the index (PostgreSQL: the GIN
    /// index's pending list; returns the pages cleaned). sled: nothing.
    pub(crate) fn clean_search_index(&self) -> Result<u64> {
        match self {
            Store::Sled(_) => Ok(0),
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => p.clean_search_index(),
        }
    }

    /// Hold the store-wide lock `name` across processes until the returned
    /// guard drops (sled: `None`, one process owns the store and its own
    /// mutexes suffice).
    pub(crate) fn shared_lock(&self, name: &str) -> Result<Option<SharedLock>> {
        #[cfg(not(feature = "postgres"))]
        let _ = name;
        match self {
            Store::Sled(_) => Ok(None),
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => Ok(Some(SharedLock {
                _held: p.lock(name)?,
            })),
        }
    }

    /// Start a serial write section: while it is open no other serial section
    /// of any process commits (sled: one process owns the store and the caller
    /// holds the index writer lock, so this is free). `ids` and the writes made
    /// through [`Serial::transaction`] commit together at [`Serial::commit`].
    pub(crate) fn serial(&self) -> Result<Serial> {
        Ok(match self {
            Store::Sled(db) => Serial::Sled(db.clone()),
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => Serial::Postgres(Box::new(p.serial()?)),
        })
    }
}

/// One tree of a store.
#[derive(Clone)]
pub(crate) enum KvTree {
    Sled(sled::Tree),
    /// A tree of an encrypted store, keys sealed (see [`keys`]).
    Sealed(keys::SealedTree),
    #[cfg(feature = "postgres")]
    Postgres(Arc<pg::PgStore>, Tree),
}

impl std::fmt::Debug for KvTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvTree::Sled(t) => write!(f, "KvTree::Sled({:?})", String::from_utf8_lossy(&t.name())),
            KvTree::Sealed(t) => write!(f, "KvTree::{t:?}"),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(_, t) => write!(f, "KvTree::Postgres({})", t.name()),
        }
    }
}

/// `compare_and_swap` found another value than the expected one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CasMismatch;

impl KvTree {
    pub(crate) fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        match self {
            KvTree::Sled(t) => t.get(key).dep(),
            KvTree::Sealed(t) => t.get(key.as_ref()),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => p.get(*t, key.as_ref()),
        }
    }

    pub(crate) fn insert(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        match self {
            KvTree::Sled(t) => {
                t.insert(key.as_ref(), value.as_ref()).dep()?;
                Ok(())
            }
            KvTree::Sealed(t) => t.insert(key.as_ref(), value.as_ref()),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => p.insert(*t, key.as_ref(), value.as_ref()),
        }
    }

    /// Remove `key`; returns the value it had.
    pub(crate) fn remove(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        match self {
            KvTree::Sled(t) => t.remove(key).dep(),
            KvTree::Sealed(t) => t.remove(key.as_ref()),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => p.remove(*t, key.as_ref()),
        }
    }

    pub(crate) fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        match self {
            KvTree::Sled(t) => t.contains_key(key).dep(),
            KvTree::Sealed(t) => t.contains_key(key.as_ref()),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => Ok(p.get(*t, key.as_ref())?.is_some()),
        }
    }

    /// Set `key` to `new` (`None`: remove) only if its value is `old` (`None`: absent).
    pub(crate) fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        old: Option<impl AsRef<[u8]>>,
        new: Option<impl AsRef<[u8]>>,
    ) -> Result<std::result::Result<(), CasMismatch>> {
        match self {
            KvTree::Sled(t) => Ok(t
                .compare_and_swap(
                    key.as_ref(),
                    old.as_ref().map(AsRef::as_ref),
                    new.as_ref().map(|v| v.as_ref()),
                )
                .dep()?
                .map_err(|_| CasMismatch)),
            KvTree::Sealed(t) => t.compare_and_swap(
                key.as_ref(),
                old.as_ref().map(AsRef::as_ref),
                new.as_ref().map(AsRef::as_ref),
            ),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => p.compare_and_swap(
                *t,
                key.as_ref(),
                old.as_ref().map(AsRef::as_ref),
                new.as_ref().map(AsRef::as_ref),
            ),
        }
    }

    /// Every record whose key starts with `prefix`, in key order.
    pub(crate) fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        match self {
            KvTree::Sled(t) => Iter::Sled(t.scan_prefix(prefix)),
            KvTree::Sealed(t) => Iter::Sealed(t.scan_prefix(prefix.as_ref())),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => Iter::Postgres(p.scan(*t, prefix_bounds(prefix.as_ref()))),
        }
    }

    /// Whether any record's key starts with `prefix` (cheaper than a scan on
    /// sealed keys, see [`keys`]).
    pub(crate) fn has_prefix(&self, prefix: impl AsRef<[u8]>) -> Result<bool> {
        match self {
            KvTree::Sealed(t) => t.has_prefix(prefix.as_ref()),
            _ => Ok(self.scan_prefix(prefix).next().transpose()?.is_some()),
        }
    }

    /// Records with keys in `range`, in key order.
    pub(crate) fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        match self {
            KvTree::Sled(t) => Iter::Sled(t.range(range)),
            KvTree::Sealed(t) => Iter::Sealed(t.range((
                owned_bound(range.start_bound()),
                owned_bound(range.end_bound()),
            ))),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => Iter::Postgres(p.scan(
                *t,
                (
                    owned_bound(range.start_bound()),
                    owned_bound(range.end_bound()),
                ),
            )),
        }
    }

    /// Every record, in key order.
    pub(crate) fn iter(&self) -> Iter {
        match self {
            KvTree::Sled(t) => Iter::Sled(t.iter()),
            KvTree::Sealed(t) => Iter::Sealed(t.scan_prefix(&[])),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => {
                Iter::Postgres(p.scan(*t, (Bound::Unbounded, Bound::Unbounded)))
            }
        }
    }

    /// Number of records with a key at or above `start`.
    pub(crate) fn count_from(&self, start: impl AsRef<[u8]>) -> Result<usize> {
        match self {
            KvTree::Sled(t) => Ok(t.range(start.as_ref()..).count()),
            KvTree::Sealed(_) => Ok(self.range(start.as_ref()..).count()),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => p.count_from(*t, start.as_ref()),
        }
    }

    /// Number of records.
    pub(crate) fn len(&self) -> Result<usize> {
        match self {
            KvTree::Sled(t) => Ok(t.len()),
            KvTree::Sealed(t) => t.len(),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => p.len(*t),
        }
    }

    /// Apply every write of `batch` atomically.
    pub(crate) fn apply_batch(&self, batch: Batch) -> Result<()> {
        match self {
            KvTree::Sled(t) => {
                let mut b = sled::Batch::default();
                for (k, v) in batch.ops {
                    match v {
                        Some(v) => b.insert(k, v),
                        None => b.remove(k),
                    }
                }
                t.apply_batch(b).dep()?;
                Ok(())
            }
            KvTree::Sealed(t) => t.apply_batch(batch.ops),
            #[cfg(feature = "postgres")]
            KvTree::Postgres(p, t) => p.apply_batch(*t, batch.ops),
        }
    }
}

fn owned_bound<K: AsRef<[u8]>>(b: Bound<&K>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The key range of a prefix: `[prefix, next)` where `next` is the smallest key above every
/// key starting with `prefix` (unbounded when the prefix is all 0xFF).
#[cfg(feature = "postgres")]
fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return (Bound::Included(prefix.to_vec()), Bound::Excluded(end));
        }
    }
    (Bound::Included(prefix.to_vec()), Bound::Unbounded)
}

/// Writes applied together by [`KvTree::apply_batch`].
#[derive(Debug, Default)]
pub(crate) struct Batch {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Batch {
    pub(crate) fn insert(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.ops
            .push((key.as_ref().to_vec(), Some(value.as_ref().to_vec())));
    }

    pub(crate) fn remove(&mut self, key: impl AsRef<[u8]>) {
        self.ops.push((key.as_ref().to_vec(), None));
    }
}

/// An ordered scan (both ends).
pub(crate) enum Iter {
    Sled(sled::Iter),
    Sealed(keys::SealedIter),
    #[cfg(feature = "postgres")]
    Postgres(pg::PgIter),
}

impl std::fmt::Debug for Iter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Iter")
    }
}

impl Iterator for Iter {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Sled(i) => i.next().map(|r| r.map_err(Error::from_dep)),
            Iter::Sealed(i) => i.next_front(),
            #[cfg(feature = "postgres")]
            Iter::Postgres(i) => i.next(),
        }
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Sled(i) => i.next_back().map(|r| r.map_err(Error::from_dep)),
            Iter::Sealed(i) => i.next_back(),
            #[cfg(feature = "postgres")]
            Iter::Postgres(i) => i.next_back(),
        }
    }
}

impl Iter {
    /// The keys only (PostgreSQL then fetches no values).
    pub(crate) fn keys(self) -> impl DoubleEndedIterator<Item = Result<Bytes>> {
        let this = match self {
            #[cfg(feature = "postgres")]
            Iter::Postgres(i) => Iter::Postgres(i.keys_only()),
            other => other,
        };
        this.map(|r| r.map(|(k, _)| k))
    }
}

/// One tree inside a transaction.
pub(crate) enum TxTree<'a> {
    Sled(&'a TransactionalTree),
    /// A tree whose keys are sealed: the backend's view behind the sealing.
    Sealed(Box<TxTree<'a>>, &'a keys::SealedTree),
    #[cfg(feature = "postgres")]
    Postgres(&'a pg::TxConn<'a>, Tree),
}

impl std::fmt::Debug for TxTree<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TxTree")
    }
}

impl TxTree<'_> {
    /// The same view, borrowed.
    #[cfg(feature = "postgres")]
    pub(crate) fn reborrow(&self) -> TxTree<'_> {
        match self {
            TxTree::Sled(t) => TxTree::Sled(t),
            TxTree::Sealed(inner, s) => TxTree::Sealed(Box::new(inner.reborrow()), s),
            #[cfg(feature = "postgres")]
            TxTree::Postgres(c, t) => TxTree::Postgres(c, *t),
        }
    }

    pub(crate) fn get(&self, key: impl AsRef<[u8]>) -> TxResult<Option<Bytes>> {
        match self {
            TxTree::Sled(t) => Ok(t.get(key)?),
            TxTree::Sealed(t, s) => s.tx_get(t, key.as_ref()),
            #[cfg(feature = "postgres")]
            TxTree::Postgres(c, t) => c.get(*t, key.as_ref()),
        }
    }

    pub(crate) fn insert(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> TxResult<()> {
        match self {
            // The old value is not wanted: `insert_blind` skips the tree
            // lookup (and the copy of the value) `insert` makes to return it.
            TxTree::Sled(t) => Ok(t.insert_blind(key.as_ref(), value.as_ref())?),
            TxTree::Sealed(t, s) => s.tx_insert(t, key.as_ref(), value.as_ref()),
            #[cfg(feature = "postgres")]
            TxTree::Postgres(c, t) => c.insert(*t, key.as_ref(), value.as_ref()),
        }
    }

    /// Remove `key`; returns the value it had.
    pub(crate) fn remove(&self, key: impl AsRef<[u8]>) -> TxResult<Option<Bytes>> {
        match self {
            TxTree::Sled(t) => Ok(t.remove(key.as_ref())?),
            TxTree::Sealed(t, s) => s.tx_remove(t, key.as_ref()),
            #[cfg(feature = "postgres")]
            TxTree::Postgres(c, t) => c.remove(*t, key.as_ref()),
        }
    }
}

/// Take the store directory's `LOCK` file (held for as long as the returned
/// file is open); `StoreLocked` when another process holds it.
pub(crate) fn lock_store_dir(path: &std::path::Path) -> crate::Result<std::fs::File> {
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.join("LOCK"))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(crate::Error::StoreLocked {
            path: path.to_owned(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(crate::Error::Io(e)),
    }
}
