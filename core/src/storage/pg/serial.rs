//! The serial section of a PostgreSQL store (one transaction holding the store's advisory lock), named advisory locks, and the paged range iterator.

#[allow(unused_imports)]
use super::*;
use crate::error::DepResult;

/// A session-level advisory lock, released when dropped (or by the server if
/// the connection is lost).
pub(crate) struct HeldLock {
    store: Arc<PgStore>,
    conn: Option<Conn>,
    name: String,
}

impl std::fmt::Debug for HeldLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLock")
            .field("name", &self.name)
            .finish()
    }
}

impl PgStore {
    /// Take the advisory lock `name` of this schema (waits for other holders).
    pub(crate) fn lock(self: &Arc<Self>, name: &str) -> Result<HeldLock> {
        let mut conn = self.take()?;
        let name = format!("{name}:{}", self.schema);
        if let Err(e) = conn.execute(
            "SELECT pg_advisory_lock($1, hashtext($2))",
            &[&LOCK_CLASS, &name],
        ) {
            self.put(conn);
            return Err(Error::from_dep(e));
        }
        Ok(HeldLock {
            store: Arc::clone(self),
            conn: Some(conn),
            name,
        })
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            let unlocked = conn.execute(
                "SELECT pg_advisory_unlock($1, hashtext($2))",
                &[&LOCK_CLASS, &self.name],
            );
            // A connection whose unlock failed may still hold the lock: close it.
            if unlocked.is_ok() {
                self.store.put(conn);
            }
        }
    }
}

/// The connection of a transaction in progress, shared by its tree views.
pub(crate) struct TxConn<'a> {
    pub(super) conn: &'a RefCell<Conn>,
    pub(super) store: &'a PgStore,
}

impl TxConn<'_> {
    pub(crate) fn get(&self, t: Tree, key: &[u8]) -> TxResult<Option<Bytes>> {
        let rows = self
            .conn
            .borrow_mut()
            .query(&self.store.sql(t).get, &[&key])
            .map_err(tx_err)?;
        Ok(rows.first().map(|r| Bytes::from(r.get::<_, &[u8]>(0))))
    }

    pub(crate) fn insert(&self, t: Tree, key: &[u8], value: &[u8]) -> TxResult<()> {
        self.conn
            .borrow_mut()
            .execute(&self.store.sql(t).upsert, &[&key, &value])
            .map_err(tx_err)?;
        Ok(())
    }

    pub(crate) fn remove(&self, t: Tree, key: &[u8]) -> TxResult<Option<Bytes>> {
        let rows = self
            .conn
            .borrow_mut()
            .query(&self.store.sql(t).delete, &[&key])
            .map_err(tx_err)?;
        Ok(rows.first().map(|r| Bytes::from(r.get::<_, &[u8]>(0))))
    }
}

/// A serial write section: a READ COMMITTED transaction holding the schema's
/// advisory lock. Rolled back when dropped without [`SerialTx::commit`].
pub(crate) struct SerialTx {
    pub(super) store: Arc<PgStore>,
    pub(super) conn: Option<RefCell<Conn>>,
}

impl SerialTx {
    pub(super) fn cell(&self) -> Result<&RefCell<Conn>> {
        self.conn
            .as_ref()
            .ok_or_else(|| Error::storage("serial write section already ended"))
    }

    /// A fresh id. Until this process uses the `vectors` table, the same
    /// statement also asks whether another process created it (migration 3,
    /// e.g. an instance started after pgvector was installed): from then on
    /// this section and every later one writes vector rows too. It runs after
    /// the section's lock is held, so it sees every committed migration.
    pub(crate) fn next_id(&mut self) -> Result<u64> {
        let store = &self.store;
        let probe = store.vectors.get().is_none();
        let sql = if probe {
            &store.next_id_probe_sql
        } else {
            &store.next_id_sql
        };
        let cell = self.cell()?;
        let rows = cell.borrow_mut().query(sql, &[]).dep()?;
        let row = rows
            .first()
            .ok_or_else(|| Error::storage("nextval returned no row"))?;
        let id: i64 = row.get(0);
        if probe && row.get::<_, bool>(1) {
            let ext = installed_vector_ext(&mut cell.borrow_mut())
                .dep()?
                .ok_or_else(|| {
                    Error::storage(format!(
                        "schema {} has a vectors table but the database has no vector extension",
                        store.schema
                    ))
                })?;
            store.use_vectors(&ext);
        }
        Ok(id as u64)
    }

    /// Bring `<schema>.vectors` in line with `ops` (inside the section, so in
    /// the same transaction as the records they come from); a no-op unless the
    /// store keeps vectors in SQL.
    pub(crate) fn apply_vector_ops(&mut self, ops: &[IndexOp]) -> Result<()> {
        let Some(vs) = self.store.vectors.get() else {
            return Ok(());
        };
        write_vector_ops(&mut self.cell()?.borrow_mut(), vs, ops)
    }

    /// Migration 3: create `<schema>.vectors` with the extension in schema
    /// `ext`, fill it through `backfill` (called with a sink for batches of
    /// ops; under the section no indexed write commits, so a scan of the
    /// records sees exactly what the table must hold) and record the version,
    /// all in this section's transaction. Does nothing when another process
    /// did it first. The caller commits, then calls [`PgStore::use_vectors`].
    pub(crate) fn migrate_vectors(
        &mut self,
        ext: &str,
        backfill: impl FnOnce(&mut dyn FnMut(&[IndexOp]) -> Result<()>) -> Result<()>,
    ) -> Result<()> {
        let schema = self.store.schema.clone();
        let vs = VectorSql::new(&schema, ext);
        let cell = self.cell()?;
        let done = cell
            .borrow_mut()
            .client
            .query_opt(
                &format!(
                    "SELECT 1 FROM \"{schema}\".schema_migrations WHERE version = {VECTORS_MIGRATION}"
                ),
                &[],
            ).dep()?
            .is_some();
        if done {
            return Ok(());
        }
        cell.borrow_mut().client.batch_execute(&vs.create()).dep()?;
        backfill(&mut |ops| write_vector_ops(&mut cell.borrow_mut(), &vs, ops))?;
        cell.borrow_mut()
            .client
            .batch_execute(&format!(
                "INSERT INTO \"{schema}\".schema_migrations (version) VALUES ({VECTORS_MIGRATION})"
            ))
            .dep()?;
        Ok(())
    }

    /// Run `f` inside the section (in a savepoint, again on a deadlock).
    pub(crate) fn transaction<R>(
        &mut self,
        trees: &[Tree],
        f: impl Fn(&[TxTree<'_>]) -> TxResult<R>,
    ) -> Result<R> {
        let cell = self.cell()?;
        let store: &PgStore = &self.store;
        let mut attempts = 0;
        loop {
            attempts += 1;
            cell.borrow_mut()
                .client
                .batch_execute("SAVEPOINT memstrata_tx")
                .dep()?;
            let txc = TxConn { conn: cell, store };
            let views: Vec<TxTree<'_>> = trees.iter().map(|t| TxTree::Postgres(&txc, *t)).collect();
            match f(&views) {
                Ok(r) => {
                    cell.borrow_mut()
                        .client
                        .batch_execute("RELEASE SAVEPOINT memstrata_tx")
                        .dep()?;
                    return Ok(r);
                }
                Err(e) => {
                    cell.borrow_mut()
                        .client
                        .batch_execute("ROLLBACK TO SAVEPOINT memstrata_tx")
                        .dep()?;
                    match e {
                        TxError::Conflict if attempts < MAX_ATTEMPTS => {}
                        TxError::Conflict => {
                            return Err(Error::Conflict(format!(
                                "a PostgreSQL write kept conflicting with concurrent writers ({attempts} attempts)"
                            )));
                        }
                        TxError::Abort(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// Bring `search_docs` in line with `ops` (an upsert writes the row, a
    /// delete removes it), in this section's transaction: the rows commit
    /// with the records and their index-log entry, or not at all.
    pub(crate) fn apply_search_ops(&mut self, ops: &[IndexOp]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let sql = &self.store.search;
        let sealed = self.store.sealed.as_deref();
        let mut conn = self.cell()?.borrow_mut();
        write_search_ops(&mut conn, sql, sealed, ops)
    }

    /// On a store opened with a key whose `search_docs` still has its
    /// plaintext form, run migration 5 in this section's transaction: the
    /// table loses its text and generated column and every row is deleted;
    /// returns true, and the caller writes every row again (sealed) before
    /// committing, so the rows change form all at once or not at all. False
    /// (nothing done) on a plaintext store or one already migrated (by this
    /// or another process: checked under the section's lock). The table's
    /// own form decides (its `sealed_uid` column), not the recorded version: a
    /// `search_docs` created again by migration 2 is migrated again.
    pub(crate) fn seal_search_docs(&mut self) -> Result<bool> {
        if self.store.sealed.is_none() {
            return Ok(false);
        }
        let schema = self.store.schema.clone();
        let cell = self.cell()?;
        let done = cell
            .borrow_mut()
            .client
            .query_opt(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = $1 \
                 AND table_name = 'search_docs' AND column_name = 'sealed_uid'",
                &[&schema],
            )
            .dep()?
            .is_some();
        if done {
            return Ok(false);
        }
        cell.borrow_mut()
            .client
            .batch_execute(&sealed_search_ddl(&schema))
            .dep()?;
        Ok(true)
    }

    /// Remove every `search_docs` row (a rebuild writes them again before committing).
    pub(crate) fn clear_search_docs(&mut self) -> Result<()> {
        let sql = &self.store.search.clear;
        self.cell()?.borrow_mut().execute(sql, &[]).dep()?;
        Ok(())
    }

    pub(crate) fn commit(mut self) -> Result<()> {
        let Some(cell) = self.conn.take() else {
            return Ok(());
        };
        let mut conn = cell.into_inner();
        match conn.client.batch_execute("COMMIT") {
            Ok(()) => {
                self.store.put(conn);
                Ok(())
            }
            Err(e) => {
                let _ = conn.client.batch_execute("ROLLBACK");
                Err(Error::from_dep(e))
            }
        }
    }
}

impl Drop for SerialTx {
    fn drop(&mut self) {
        if let Some(cell) = self.conn.take() {
            let mut conn = cell.into_inner();
            if conn.client.batch_execute("ROLLBACK").is_ok() {
                self.store.put(conn);
            }
        }
    }
}

/// An ordered scan, fetched a page at a time from either end.
pub(crate) struct PgIter {
    pub(super) store: Arc<PgStore>,
    pub(super) tree: Tree,
    /// Keys not yet returned lie strictly within (lo, hi) (as bounds).
    pub(super) lo: Bound<Vec<u8>>,
    pub(super) hi: Bound<Vec<u8>>,
    pub(super) front: VecDeque<(Bytes, Bytes)>,
    pub(super) back: VecDeque<(Bytes, Bytes)>,
    pub(super) front_done: bool,
    pub(super) back_done: bool,
    pub(super) failed: bool,
    /// Fetch keys only (values come back empty).
    pub(super) keys_only: bool,
}

pub(super) fn above(key: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Included(b) => key >= b.as_slice(),
        Bound::Excluded(b) => key > b.as_slice(),
        Bound::Unbounded => true,
    }
}

pub(super) fn below(key: &[u8], hi: &Bound<Vec<u8>>) -> bool {
    match hi {
        Bound::Included(b) => key <= b.as_slice(),
        Bound::Excluded(b) => key < b.as_slice(),
        Bound::Unbounded => true,
    }
}

impl PgIter {
    /// The same scan without values (before the first item is read).
    pub(crate) fn keys_only(mut self) -> Self {
        self.keys_only = true;
        self
    }

    pub(super) fn fetch(&mut self, descending: bool) -> Result<Vec<(Bytes, Bytes)>> {
        let (sql, params) =
            self.store
                .sql(self.tree)
                .page(&self.lo, &self.hi, descending, self.keys_only);
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|p| p as &(dyn postgres::types::ToSql + Sync))
            .collect();
        let rows = self.store.with(|c| c.query(&sql, &refs))?;
        Ok(rows
            .iter()
            .map(|r| {
                (
                    Bytes::from(r.get::<_, &[u8]>(0)),
                    Bytes::from(r.get::<_, &[u8]>(1)),
                )
            })
            .collect())
    }

    pub(super) fn step(&mut self, forward: bool) -> Option<Result<(Bytes, Bytes)>> {
        if self.failed {
            return None;
        }
        let (buf_empty, done) = if forward {
            (self.front.is_empty(), self.front_done)
        } else {
            (self.back.is_empty(), self.back_done)
        };
        if buf_empty && !done {
            match self.fetch(!forward) {
                Ok(rows) => {
                    let last_page = (rows.len() as i64) < PAGE;
                    if forward {
                        self.front.extend(rows);
                        self.front_done = last_page;
                    } else {
                        self.back.extend(rows);
                        self.back_done = last_page;
                    }
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        let item = if forward {
            self.front.pop_front()
        } else {
            self.back.pop_front()
        }?;
        if !(above(&item.0, &self.lo) && below(&item.0, &self.hi)) {
            // The other end already returned it: the scan is over.
            self.front.clear();
            self.back.clear();
            self.front_done = true;
            self.back_done = true;
            return None;
        }
        if forward {
            self.lo = Bound::Excluded(item.0.to_vec());
        } else {
            self.hi = Bound::Excluded(item.0.to_vec());
        }
        Some(Ok(item))
    }
}

impl Iterator for PgIter {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

impl DoubleEndedIterator for PgIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}
