//! The engine's index path: every indexed write in sequence under the writer lock, the index log and its replay, catching up with other instances' writes, rebuilds, commits, and searches of the text index.

#[allow(unused_imports)]
use super::*;

/// Index-log entries removed per sled batch by [`Engine::prune_index_log`].
const PRUNE_BATCH_KEYS: usize = 256;

/// An indexed write runs one epoch collection round, plus one per this many
/// index ops (a batch write replaces that many leaves). Each sled insert
/// copies its leaf (up to 64 items) and defers freeing the old copy until the
/// epoch moves on; crossbeam-epoch alone collects only on every 128th pin of
/// a thread, and while sled's writers wait on its I/O threads (a read of a
/// page the small cache evicted) the deferred copies piled up: the footprint
/// probe saw the live heap jump from ~40 to ~100 MiB within 2,000 short
/// episodes. A round costs one pin and flush of this thread's deferred list.
const WRITE_COLLECT_OPS: usize = 256;

/// Epoch collection rounds after each pruning batch (each frees up to 512
/// deferred objects once the epoch has moved on; a batch defers about one per key).
const PRUNE_COLLECT_ROUNDS: usize = 4;

impl Engine {
    /// The tantivy index (sled stores only).
    pub(super) fn tantivy(&self) -> Result<&SearchIndex> {
        self.index
            .as_ref()
            .ok_or_else(|| Error::storage("this store searches in SQL: it has no tantivy index"))
    }

    /// Lock the indexed writes of this engine (see [`IndexLock`]).
    pub(crate) fn index_lock(&self) -> IndexLock<'_> {
        match &self.index {
            Some(index) => IndexLock::Tantivy(index.lock()),
            None => IndexLock::Store(self.log_cursor.lock()),
        }
    }

    /// Replay index-log records after `committed` (crash recovery).
    pub(super) fn replay_index(&self, committed: u64) -> Result<()> {
        let index = self.tantivy()?;
        let mut st = index.lock();
        self.replay_locked(index, &mut st, committed)?;
        drop(st);
        self.prune_index_log()?;
        Ok(())
    }

    pub(super) fn replay_locked(
        &self,
        index: &SearchIndex,
        st: &mut WriterState,
        committed: u64,
    ) -> Result<()> {
        let mut last = committed;
        self.for_each_logged(
            committed,
            |_| true,
            |seq, ops| {
                st.apply(seq, ops)?;
                last = seq;
                Ok(())
            },
        )?;
        if last > committed {
            index.commit_locked(st)?;
        }
        Ok(())
    }

    /// A writer operation failed: replace the writer and replay the log from
    /// the last durable commit. sled already holds the data, so the caller's
    /// write stands either way; a failure here is reported by `status`.
    pub(super) fn recover_index_locked(&self, st: &mut WriterState, cause: &Error) -> Result<()> {
        let index = self.tantivy()?;
        let r = index.reset_writer(st).and_then(|()| {
            let committed = st.committed_seq;
            self.replay_locked(index, st, committed)
        });
        *self.index_error.lock() = match &r {
            Ok(()) => None,
            Err(e) => Some(format!(
                "index writer failed ({cause}) and could not be repaired: {e}"
            )),
        };
        r
    }

    /// Make every acknowledged index change visible (a soft commit if needed,
    /// repairing a failed writer), then run `q`.
    ///
    /// On PostgreSQL the query runs in SQL over `search_docs`, which every
    /// instance's writes commit into: nothing to catch up, no local index.
    pub(crate) fn search_index(
        &self,
        q: &crate::search::index::IndexQuery<'_>,
    ) -> Result<Vec<(String, f32)>> {
        let Some(index) = &self.index else {
            return match self.store.search(q) {
                // A keyed store's row whose sealed uid fails authentication
                // (altered, or moved to another row): reported, never answered
                // from; the rows are written again from the records first, so
                // the next search answers (as the sled path rebuilds its index).
                Err(e @ Error::Corrupted { .. }) => {
                    self.rebuild_store_search(true)?;
                    Err(e)
                }
                r => r,
            };
        };
        self.sync_shared()?;
        if let Err(e) = index.refresh_for_search() {
            let mut st = index.lock();
            self.recover_index_locked(&mut st, &e)?;
            index.commit_locked(&mut st)?;
        }
        // tantivy can panic (not just fail) on some damaged segment files; treat a
        // panic like any index failure instead of unwinding into the caller
        // (a panic over a sealed chunk that failed authentication is `Corrupted`).
        let guarded = || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| index.search(q)))
                .unwrap_or_else(|payload| {
                    let text = payload
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| payload.downcast_ref::<&str>().copied())
                        .unwrap_or("");
                    if text.contains(crate::error::INDEX_SEAL_BROKEN) {
                        Err(Error::corrupted(format!("index search: {text}")))
                    } else {
                        Err(Error::index("index search panicked (damaged index files?)"))
                    }
                })
        };
        match guarded() {
            Ok(hits) => Ok(hits),
            Err(Error::Index { .. }) => {
                // A damaged segment: sled is the source of truth, rebuild and retry once.
                self.rebuild_index_in_place()?;
                guarded()
            }
            Err(e @ Error::Corrupted { .. }) => {
                // A sealed chunk that failed authentication (altered on disk, or
                // written with another key): reported, never answered from; the
                // index is rebuilt from sled first, so the next search is answered.
                self.rebuild_index_in_place()?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Commit pending index changes, repairing a failed writer if needed.
    /// (No-op without a tantivy index: PostgreSQL's search rows commit with the records.)
    pub(crate) fn commit_index(&self) -> Result<bool> {
        let Some(index) = &self.index else {
            return Ok(false);
        };
        match index.commit_pending() {
            Ok(c) => Ok(c),
            Err(e) => {
                let mut st = index.lock();
                self.recover_index_locked(&mut st, &e)?;
                index.commit_locked(&mut st)?;
                Ok(true)
            }
        }
    }

    /// The last unrepaired index failure, if any (reported as `degraded` by status).
    pub(crate) fn index_error(&self) -> Option<String> {
        self.index_error.lock().clone()
    }

    /// Re-add every episode and knowledge entry from sled into an empty index.
    pub(super) fn rebuild_index(&self) -> Result<()> {
        let index = self.tantivy()?;
        let mut st = index.lock();
        self.rebuild_locked(index, &mut st)?;
        drop(st);
        self.prune_index_log()
    }

    /// Replace a corrupt index by a fresh one built from sled (PostgreSQL:
    /// rewrite every `search_docs` row from the records).
    pub(crate) fn rebuild_index_in_place(&self) -> Result<()> {
        let Some(index) = &self.index else {
            return self.rebuild_store_search(true);
        };
        let mut st = index.lock();
        index.recreate(&mut st)?;
        self.rebuild_locked(index, &mut st)?;
        drop(st);
        *self.index_error.lock() = None;
        self.prune_index_log()
    }

    pub(super) fn rebuild_locked(&self, index: &SearchIndex, st: &mut WriterState) -> Result<()> {
        // Under the serial section no indexed write commits during the scan, so
        // `seq` (above every committed log entry) marks exactly what it covers.
        let serial = self.store.serial()?;
        let seq = self.store.generate_id()?;
        self.for_each_indexed_batch(1024, false, |batch| st.apply(seq, batch))?;
        drop(serial);
        index.commit_locked(st)?;
        Ok(())
    }

    /// The index op (an upsert) of every record of every registered source
    /// (with `only_embedded`, of those with an embedding), in batches of up to `size`.
    pub(super) fn for_each_indexed_batch(
        &self,
        size: usize,
        only_embedded: bool,
        mut f: impl FnMut(&[IndexOp]) -> Result<()>,
    ) -> Result<()> {
        let mut batch = Vec::with_capacity(size);
        for source in self.layers.sources {
            (source.scan)(self, &mut |doc| {
                if only_embedded && doc.embedding.is_none() {
                    return Ok(());
                }
                batch.push(IndexOp::Upsert(doc));
                if batch.len() >= size {
                    f(&batch)?;
                    batch.clear();
                }
                Ok(())
            })?;
        }
        f(&batch)
    }

    /// Open the search of a store that searches in SQL (PostgreSQL): build the
    /// search rows if the store has none of this version yet (a store created
    /// before they existed), and start following the index log at its end.
    pub(super) fn open_store_search(&self) -> Result<()> {
        self.rebuild_store_search(false)
    }

    /// Rewrite every search row from the records (`force`), or only when the
    /// store's `meta` does not name the current [`storage::SEARCH_DOCS_VERSION`];
    /// in one serial section, so no indexed write of any instance interleaves
    /// and concurrent opens rebuild once. With no vector set loaded (always at
    /// open), also moves the vector index's cursor to the end of the index log:
    /// a set loaded later is read from the records, so it needs nothing before.
    pub(super) fn rebuild_store_search(&self, force: bool) -> Result<()> {
        let version = storage::SEARCH_DOCS_VERSION.to_be_bytes();
        let mut cursor = self.log_cursor.lock();
        let mut serial = self.store.serial()?;
        let current = self.t.meta.get(storage::META_SEARCH_DOCS)?;
        // A store opened with a key whose rows still hold text: migrated (and
        // every row written again, sealed) in this section's transaction.
        let sealing = serial.seal_search_docs()?;
        if force || sealing || current.as_deref() != Some(&version[..]) {
            serial.clear_search_docs()?;
            self.for_each_indexed_batch(1024, false, |batch| serial.apply_search_ops(batch))?;
            serial.transaction(&[&self.t.meta], |m| {
                m[0].insert(storage::META_SEARCH_DOCS, version)?;
                Ok(())
            })?;
        }
        // Above every committed index-log entry (the section orders them).
        let seq = serial.generate_id()?;
        serial.commit()?;
        if self.vectors.is_empty() {
            // A loaded vector set must still replay what it has not followed.
            *cursor = (*cursor).max(seq);
        }
        Ok(())
    }

    /// The index op that brings `uid` in line with sled now.
    pub(super) fn current_op(&self, uid: &str) -> Result<IndexOp> {
        let (kind, ctx, key) = index::parse_uid(uid)?;
        let source = self.source(kind)?;
        let doc = (source.load)(self, &ctx, &key)?;
        Ok(match doc {
            Some(d) => IndexOp::Upsert(d),
            None => IndexOp::Delete(uid.to_owned()),
        })
    }

    /// Drop index-log records already covered by a durable index commit.
    ///
    /// A shared store keeps its log: other instances replay it (see
    /// docs/internals.md, "Storage backends").
    pub(crate) fn prune_index_log(&self) -> Result<()> {
        let Some(index) = &self.index else {
            return Ok(());
        };
        if self.store.is_shared() {
            return Ok(());
        }
        let (_, committed, _) = index.lag();
        // In batches of `PRUNE_BATCH_KEYS`, oldest first: any prefix of the
        // removal is a valid log (it only drops entries a durable commit
        // covers). One sled batch holds one epoch guard for all its removals
        // and every removal copies its leaf, so a single batch of a few
        // seconds' worth of entries (tens of thousands during a steady
        // ingest) kept that many node copies allocated until it ended; the
        // footprint probe measured ~60 MiB of the ingest's heap peak there at
        // 50k short episodes. It also held sled's write lock for as long.
        loop {
            let mut batch = storage::Batch::default();
            let mut n = 0;
            for k in self.t.index_log.range(..=committed.to_be_bytes()).keys() {
                batch.remove(k?);
                n += 1;
                if n == PRUNE_BATCH_KEYS {
                    break;
                }
            }
            if n == 0 {
                break;
            }
            self.t.index_log.apply_batch(batch)?;
            // Free the copies this batch replaced before making more.
            crate::util::heap::collect_deferred(PRUNE_COLLECT_ROUNDS);
            if n < PRUNE_BATCH_KEYS {
                break;
            }
        }
        Ok(())
    }

    /// Write `trees` in one transaction and apply the resulting index ops in sequence order.
    ///
    /// `f` gets one transactional view per tree in `trees` and returns the result plus the index ops.
    /// It may run more than once (the backend retries on conflict), so it must be free of side effects.
    pub(crate) fn indexed_write<R>(
        &self,
        trees: &[&KvTree],
        f: impl Fn(&[TxTree<'_>]) -> TxResult<(R, Vec<IndexOp>)>,
    ) -> Result<R> {
        self.indexed_write_prepared(trees, || Ok(()), |t, ()| f(t))
    }

    /// Like [`Engine::indexed_write`], with `prepare` run under the index writer
    /// lock but outside the transaction (reading a sled tree inside a sled
    /// transaction over that tree deadlocks). Every indexed write holds the same
    /// lock (and, on a shared store, the store's serial section), so what
    /// `prepare` reads cannot change before the transaction runs.
    pub(crate) fn indexed_write_prepared<R, P>(
        &self,
        trees: &[&KvTree],
        prepare: impl FnOnce() -> Result<P>,
        f: impl Fn(&[TxTree<'_>], &P) -> TxResult<(R, Vec<IndexOp>)>,
    ) -> Result<R> {
        let (r, _) = self.indexed_write_core(trees, || Ok((prepare()?, Vec::new())), f)?;
        Ok(r)
    }

    /// Like [`Engine::indexed_write_prepared`], for a write whose index ops
    /// `prepare` knows (returned next to its plan, not by the transaction):
    /// the transaction logs their uids, and the ops are applied after it
    /// as they are. `f` may run more than once, and returning the ops from
    /// it meant a copy of every document per write (a batch of 1,000
    /// episodes: 1,000 copies of each text, made and freed on the calling
    /// thread). Returns the plan too, for what the caller reports.
    pub(crate) fn indexed_write_planned<R, P>(
        &self,
        trees: &[&KvTree],
        prepare: impl FnOnce() -> Result<(P, Vec<IndexOp>)>,
        f: impl Fn(&[TxTree<'_>], &P) -> TxResult<R>,
    ) -> Result<(R, P)> {
        self.indexed_write_core(trees, prepare, |t, p| Ok((f(t, p)?, Vec::new())))
    }

    /// The indexed write: the ops are the planned ones, then those `f` returns.
    fn indexed_write_core<R, P>(
        &self,
        trees: &[&KvTree],
        prepare: impl FnOnce() -> Result<(P, Vec<IndexOp>)>,
        f: impl Fn(&[TxTree<'_>], &P) -> TxResult<(R, Vec<IndexOp>)>,
    ) -> Result<(R, P)> {
        let mut all: Vec<&KvTree> = trees.to_vec();
        all.push(&self.t.index_log);
        let mut st = self.index_lock();
        let mut serial = self.store.serial()?;
        if self.store.is_shared() {
            // Writes of other instances first, so that sequences stay in order.
            self.catch_up_locked(&mut st)?;
        }
        let (prepared, mut ops) = prepare()?;
        let seq = serial.generate_id()?;
        let (r, more) = serial.transaction(&all, |views| {
            let (data, log) = views.split_at(views.len() - 1);
            let (r, more) = f(data, &prepared)?;
            if !ops.is_empty() || !more.is_empty() {
                let uids: Vec<&str> = ops.iter().chain(&more).map(IndexOp::uid).collect();
                let enc = self.codec.encode(&uids)?;
                log[0].insert(seq.to_be_bytes(), enc)?;
            }
            Ok((r, more))
        })?;
        if ops.is_empty() {
            ops = more;
        } else {
            ops.extend(more);
        }
        // The store's own search rows (PostgreSQL), in the same transaction;
        // with pgvector, the vector rows too.
        serial.apply_search_ops(&ops)?;
        serial.apply_vector_ops(&ops)?;
        serial.commit()?;
        // The vector index follows the store whatever the text index does with the ops.
        self.vectors.apply(&ops);
        match &mut st {
            IndexLock::Tantivy(w) => {
                if let Err(e) = w.apply(seq, &ops) {
                    // The data and its log record are committed; rebuild the writer state from the log.
                    self.recover_index_locked(w, &e)?;
                }
            }
            IndexLock::Store(cursor) => **cursor = (**cursor).max(seq),
        }
        drop(st);
        self.writes.fetch_add(1, Ordering::Relaxed);
        // Free the node copies this write replaced (and older ones) now, out
        // of every lock: see `WRITE_COLLECT_OPS`.
        crate::util::heap::collect_deferred(1 + ops.len() / WRITE_COLLECT_OPS);
        self.after_write()?;
        Ok((r, prepared))
    }

    /// Shared store: apply the index-log entries other instances committed
    /// since the last one this engine applied (text and vector indexes on
    /// tantivy; the vector index alone when the store searches in SQL).
    pub(super) fn catch_up_locked(&self, st: &mut IndexLock<'_>) -> Result<()> {
        match st {
            IndexLock::Tantivy(w) => {
                let after = w.applied_seq;
                self.for_each_logged(
                    after,
                    |_| true,
                    |seq, ops| {
                        self.vectors.apply(ops);
                        w.apply(seq, ops)
                    },
                )
            }
            IndexLock::Store(cursor) => {
                if self.vectors.is_empty() {
                    // Nothing follows the log here: skip to its end (a vector set
                    // loaded later is read from the records, under this lock).
                    if let Some(k) = self.t.index_log.iter().keys().next_back() {
                        **cursor = (**cursor).max(log_seq(&k?)?);
                    }
                    return Ok(());
                }
                let after = **cursor;
                // Only the records of loaded vector sets are read.
                self.for_each_logged(
                    after,
                    |uid| self.vectors.follows(uid),
                    |seq, ops| {
                        self.vectors.apply(ops);
                        **cursor = (**cursor).max(seq);
                        Ok(())
                    },
                )
            }
        }
    }

    /// Each index-log entry above `after`, in sequence order, as the ops that
    /// bring its uids that `wanted` accepts in line with the store now.
    pub(super) fn for_each_logged(
        &self,
        after: u64,
        wanted: impl Fn(&str) -> bool,
        mut f: impl FnMut(u64, &[IndexOp]) -> Result<()>,
    ) -> Result<()> {
        for item in self.t.index_log.range((after + 1).to_be_bytes()..) {
            let (k, v) = item?;
            let seq = log_seq(&k)?;
            let uids: Vec<String> = self.codec.decode(&v)?;
            let ops = uids
                .iter()
                .filter(|uid| wanted(uid))
                .map(|uid| self.current_op(uid))
                .collect::<Result<Vec<_>>>()?;
            f(seq, &ops)?;
        }
        Ok(())
    }

    /// On a shared store, make every write acknowledged by any instance before
    /// this call searchable here (a no-op on sled: this engine made them all).
    pub(crate) fn sync_shared(&self) -> Result<()> {
        if self.store.is_shared() {
            let mut st = self.index_lock();
            if let Err(e) = self.catch_up_locked(&mut st) {
                match &mut st {
                    IndexLock::Tantivy(w) => self.recover_index_locked(w, &e)?,
                    IndexLock::Store(_) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

/// The lock every indexed write holds from its sequence to its index update:
/// the tantivy writer state (sled), or the vector index's index-log cursor
/// (PostgreSQL, where the search rows are written in the store's transaction).
pub(crate) enum IndexLock<'a> {
    Tantivy(MutexGuard<'a, WriterState>),
    Store(MutexGuard<'a, u64>),
}

/// The sequence of an index-log key.
pub(super) fn log_seq(k: &[u8]) -> Result<u64> {
    Ok(u64::from_be_bytes(
        k.try_into()
            .map_err(|_| Error::corrupted("bad index_log key"))?,
    ))
}
