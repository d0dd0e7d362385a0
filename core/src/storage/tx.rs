//! Transactions over several trees: the sled transaction of a set of trees,
//! and the PostgreSQL views of trees whose keys are sealed.

#[allow(unused_imports)]
use super::*;
use sled::Transactional;
use sled::transaction::ConflictableTransactionError;

#[cfg(feature = "postgres")]
pub(super) fn tree_names(trees: &[&KvTree]) -> Result<Vec<Tree>> {
    trees
        .iter()
        .map(|t| {
            let raw = match t {
                KvTree::Sealed(s) => &*s.tree,
                other => other,
            };
            match raw {
                KvTree::Postgres(_, n) => Ok(*n),
                _ => Err(Error::Storage {
                    message: "a sled tree in a PostgreSQL transaction".into(),
                    source: None,
                }),
            }
        })
        .collect()
}

/// The backend's transaction views of `trees` (PostgreSQL), each behind its
/// key sealing where the tree has one.
#[cfg(feature = "postgres")]
pub(crate) fn sealed_views<'b>(trees: &[&'b KvTree], views: &'b [TxTree<'b>]) -> Vec<TxTree<'b>> {
    views
        .iter()
        .zip(trees)
        .map(|(v, t)| match t {
            KvTree::Sealed(s) => TxTree::Sealed(Box::new(v.reborrow()), s),
            _ => v.reborrow(),
        })
        .collect()
}

pub(super) fn sled_transaction<R>(
    trees: &[&KvTree],
    f: impl Fn(&[TxTree<'_>]) -> TxResult<R>,
) -> Result<R> {
    let mut sled_trees: Vec<&sled::Tree> = Vec::with_capacity(trees.len());
    let mut sealed: Vec<Option<&keys::SealedTree>> = Vec::with_capacity(trees.len());
    for t in trees {
        match t {
            KvTree::Sled(s) => {
                sled_trees.push(s);
                sealed.push(None);
            }
            KvTree::Sealed(s) => match &*s.tree {
                KvTree::Sled(t) => {
                    sled_trees.push(t);
                    sealed.push(Some(s));
                }
                _ => {
                    return Err(Error::Storage {
                        message: "a PostgreSQL tree in a sled transaction".into(),
                        source: None,
                    });
                }
            },
            #[cfg(feature = "postgres")]
            KvTree::Postgres(..) => {
                return Err(Error::Storage {
                    message: "a PostgreSQL tree in a sled transaction".into(),
                    source: None,
                });
            }
        }
    }
    sled_trees
        .as_slice()
        .transaction(|views| {
            let tx: Vec<TxTree<'_>> = views
                .iter()
                .zip(&sealed)
                .map(|(v, s)| match s {
                    Some(s) => TxTree::Sealed(Box::new(TxTree::Sled(v)), s),
                    None => TxTree::Sled(v),
                })
                .collect();
            f(&tx).map_err(|e| match e {
                TxError::Conflict => ConflictableTransactionError::Conflict,
                TxError::Abort(e) => ConflictableTransactionError::Abort(e),
            })
        })
        .dep()
}
