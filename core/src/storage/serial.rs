//! The serial section of a store: writes no other instance's indexed write
//! interleaves with. On sled (one process holds the store) it runs on the
//! database directly; on PostgreSQL it is a transaction holding the store's
//! advisory lock.

#[allow(unused_imports)]
use super::*;

/// A store-wide lock held across processes (see [`Store::shared_lock`]).
#[derive(Debug)]
pub(crate) struct SharedLock {
    #[cfg(feature = "postgres")]
    pub(super) _held: pg::HeldLock,
}

/// A serial write section (see [`Store::serial`]). Dropped without
/// [`Serial::commit`], its writes are discarded (PostgreSQL) .
pub(crate) enum Serial {
    Sled(sled::Db),
    #[cfg(feature = "postgres")]
    Postgres(Box<pg::SerialTx>),
}

impl std::fmt::Debug for Serial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Serial")
    }
}

impl Serial {
    /// A fresh id, greater than every id used by a committed serial section.
    pub(crate) fn generate_id(&mut self) -> Result<u64> {
        match self {
            Serial::Sled(db) => db.generate_id().dep(),
            #[cfg(feature = "postgres")]
            Serial::Postgres(s) => s.next_id(),
        }
    }

    /// Like [`Store::transaction`], inside the section.
    pub(crate) fn transaction<R>(
        &mut self,
        trees: &[&KvTree],
        f: impl Fn(&[TxTree<'_>]) -> TxResult<R>,
    ) -> Result<R> {
        match self {
            Serial::Sled(_) => sled_transaction(trees, f),
            #[cfg(feature = "postgres")]
            Serial::Postgres(s) => {
                s.transaction(&tree_names(trees)?, |views| f(&sealed_views(trees, views)))
            }
        }
    }

    /// Bring the store's own search rows in line with `ops`, inside the
    /// section (PostgreSQL: `search_docs`, see [`pg::SerialTx::apply_search_ops`]).
    /// sled keeps no search rows: its tantivy index follows the index log.
    pub(crate) fn apply_search_ops(&mut self, ops: &[docs::IndexOp]) -> Result<()> {
        match self {
            Serial::Sled(_) => {
                let _ = ops;
                Ok(())
            }
            #[cfg(feature = "postgres")]
            Serial::Postgres(s) => s.apply_search_ops(ops),
        }
    }

    /// Take the plaintext out of the store's search rows if it is opened with
    /// a key and they still hold it (PostgreSQL migration 5, see
    /// [`pg::SerialTx::seal_search_docs`]): true when every row was removed,
    /// to be written again through [`Serial::apply_search_ops`] before the
    /// commit. sled: false (its index is sealed on its own).
    pub(crate) fn seal_search_docs(&mut self) -> Result<bool> {
        match self {
            Serial::Sled(_) => Ok(false),
            #[cfg(feature = "postgres")]
            Serial::Postgres(s) => s.seal_search_docs(),
        }
    }

    /// Remove every search row of the store (PostgreSQL; sled keeps none), to
    /// be written again through [`Serial::apply_search_ops`] before the commit.
    pub(crate) fn clear_search_docs(&mut self) -> Result<()> {
        match self {
            Serial::Sled(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Serial::Postgres(s) => s.clear_search_docs(),
        }
    }

    /// Keep a PostgreSQL store's `vectors` table (pgvector, where in use) in
    /// line with `ops`, in the section's transaction (sled: nothing to do, its
    /// vector index is in memory).
    pub(crate) fn apply_vector_ops(&mut self, ops: &[docs::IndexOp]) -> Result<()> {
        #[cfg(not(feature = "postgres"))]
        let _ = ops;
        match self {
            Serial::Sled(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Serial::Postgres(s) => s.apply_vector_ops(ops),
        }
    }

    /// Commit the section.
    pub(crate) fn commit(self) -> Result<()> {
        match self {
            Serial::Sled(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Serial::Postgres(s) => s.commit(),
        }
    }
}
