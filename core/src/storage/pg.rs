//! The PostgreSQL backend (feature `postgres`).
//!
//! A store is one schema (`?schema=NAME` in the URL, default `memstrata`,
//! created if missing) holding one table per [`Tree`]:
//! `<schema>.<tree>(key bytea primary key, value bytea not null)`. `bytea`
//! compares bytewise, like sled, so ordered scans (`ORDER BY key`) return the
//! same order on both backends. Values are the codec's bytes, as on sled.
//!
//! - Migrations are versioned in `<schema>.schema_migrations(version,
//!   applied_at)` and run under an advisory lock, so concurrent first opens
//!   are safe.
//! - [`PgStore::transaction`] runs at REPEATABLE READ and runs the closure
//!   again on a serialization failure or a deadlock (SQLSTATE 40001, 40P01).
//! - Ids come from the sequence `<schema>.ids`, so processes never collide.
//! - [`SerialTx`] (the serial write section of indexed writes) is a READ
//!   COMMITTED transaction holding a transaction-level advisory lock of the
//!   schema: index-log sequences commit in order across processes.
//! - Text search runs in SQL (migration 2): `<schema>.search_docs` holds one
//!   row per episode and knowledge entry with a generated, weighted `tsvector`
//!   under a GIN index, written in the serial section of the record's own write
//!   ([`SerialTx::apply_search_ops`]) and queried by [`PgStore::search`].
//!
//! - Vectors (migration 3, only where the `vector` extension of pgvector is
//!   installed or can be created): `<schema>.vectors`, one row per embedded
//!   episode or knowledge entry, written in the serial section with the
//!   record and searched exactly in SQL (see [`VectorSql`] and
//!   docs/internals.md). Without the extension the engine keeps its
//!   in-process exact scan.
//!
//! Connections: a small pool of synchronous `postgres` clients (idle ones are
//! kept, at most [`MAX_IDLE`]); no TLS (loopback or a private network).

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use postgres::error::SqlState;
use postgres::{Client, NoTls, Statement};

use super::url::PgUrl;
use super::{Bytes, CasMismatch, META_SEARCH_DOCS, Tree, TxError, TxResult, TxTree};
use crate::error::DepResult;
use crate::error::FromDep;
use crate::storage::docs::RowFilter;
use crate::storage::docs::{self as index, IndexDoc, IndexOp, IndexQuery, Kind};
use crate::{Error, Result};

mod serial;
#[allow(unused_imports)]
pub(crate) use serial::*;

mod vectors;
#[allow(unused_imports)]
pub(crate) use vectors::*;

mod off_runtime;

mod search;
#[allow(unused_imports)]
pub(crate) use search::*;

mod sealed;
pub(crate) use sealed::SealedSearch;

mod tree_sql;
#[allow(unused_imports)]
pub(crate) use tree_sql::*;

/// Idle connections kept for reuse.
const MAX_IDLE: usize = 16;
/// Rows fetched per page of an ordered scan.
const PAGE: i64 = 512;
/// Attempts of a transaction that keeps conflicting.
const MAX_ATTEMPTS: u32 = 64;
/// First key of the advisory locks of memstrata ("mems").
const LOCK_CLASS: i32 = 0x6d65_6d73;

/// The schema version the migrations below bring a store to.
pub(crate) const SCHEMA_VERSION: i32 = 5;

/// The migration that adds the `dedup` tree's table (duplicate detection keys).
pub(crate) const DEDUP_MIGRATION: i32 = 4;

/// The migration that takes the plaintext out of `search_docs` (a store
/// opened with a key; see [`SerialTx::seal_search_docs`]). A plaintext store
/// never gets it, so it stays at version 4 (or 3).
pub(crate) const SEALED_SEARCH_MIGRATION: i32 = 5;

/// The migration that adds `<schema>.vectors` (pgvector). Optional: recorded
/// only once the table exists and holds every stored embedding, so a store
/// opened without the extension is migrated (and backfilled) by the first open
/// that has it. See [`SerialTx::migrate_vectors`].
pub(crate) const VECTORS_MIGRATION: i32 = 3;

impl FromDep<postgres::Error> for Error {
    fn from_dep(e: postgres::Error) -> Self {
        let message = match e.as_db_error() {
            Some(db) => format!("PostgreSQL: {} ({})", db.message(), db.code().code()),
            None => format!("PostgreSQL: {e}"),
        };
        Error::Storage {
            message,
            source: Some(Box::new(e)),
        }
    }
}

fn is_conflict(e: &postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    )
}

fn tx_err(e: postgres::Error) -> TxError {
    if is_conflict(&e) {
        TxError::Conflict
    } else {
        TxError::Abort(Error::from_dep(e))
    }
}

/// One connection with its prepared statements.
struct Conn {
    client: Client,
    stmts: HashMap<String, Statement>,
}

impl Conn {
    fn stmt(&mut self, sql: &str) -> std::result::Result<Statement, postgres::Error> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.stmts.insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> std::result::Result<Vec<postgres::Row>, postgres::Error> {
        let s = self.stmt(sql)?;
        self.client.query(&s, params)
    }

    fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> std::result::Result<u64, postgres::Error> {
        let s = self.stmt(sql)?;
        self.client.execute(&s, params)
    }
}

/// An open PostgreSQL store.
pub(crate) struct PgStore {
    config: postgres::Config,
    schema: String,
    sql: HashMap<Tree, TreeSql>,
    search: SearchSql,
    /// The keys and analyzer of the search rows of a store opened with a key.
    sealed: Option<Arc<SealedSearch>>,
    next_id_sql: String,
    /// `nextval` plus whether migration 3 is recorded (see [`SerialTx::next_id`]).
    next_id_probe_sql: String,
    /// The schema holding the `vector` extension, when it is installed in the database.
    vector_ext: Option<String>,
    /// Set once this store's `vectors` table is in use (migration 3 recorded).
    vectors: OnceLock<VectorSql>,
    idle: Mutex<Vec<Conn>>,
}

impl Drop for PgStore {
    /// Closes the idle connections, off any async runtime (see [`off_runtime`]).
    fn drop(&mut self) {
        let idle = std::mem::take(self.idle.get_mut());
        if !idle.is_empty() {
            off_runtime::drop_off_runtime(idle);
        }
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connect to `url`, create the schema if missing and run the migrations.
    /// `sealed`: the store is opened with a key, its search rows hold no
    /// plaintext (written and searched through it).
    pub(crate) fn open(url: &PgUrl, sealed: Option<SealedSearch>) -> Result<PgStore> {
        let schema = url.schema().to_owned();
        // Checked by `PgUrl::parse` already; the client's messages name an option, never its value.
        let mut config: postgres::Config = url.connect_str().parse().map_err(|e| {
            Error::invalid("path", format!("not a valid PostgreSQL URL ({url}): {e}"))
        })?;
        if config.get_application_name().is_none() {
            config.application_name("memstrata");
        }
        if config.get_connect_timeout().is_none() {
            // An unreachable host fails the open instead of hanging on TCP retries.
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        let sql = Tree::ALL
            .iter()
            .map(|t| (*t, TreeSql::new(&schema, *t)))
            .collect();
        let mut store = PgStore {
            search: SearchSql::new(&schema),
            sealed: sealed.map(Arc::new),
            next_id_sql: format!("SELECT nextval('\"{schema}\".ids')"),
            next_id_probe_sql: format!(
                "SELECT nextval('\"{schema}\".ids'), EXISTS (SELECT 1 FROM \"{schema}\".schema_migrations WHERE version = {VECTORS_MIGRATION})"
            ),
            config,
            schema,
            sql,
            vector_ext: None,
            vectors: OnceLock::new(),
            idle: Mutex::new(Vec::new()),
        };
        let mut conn = store.connect().map_err(|e| Error::Storage {
            message: format!("cannot connect to PostgreSQL at {url}: {e}"),
            source: Some(Box::new(e)),
        })?;
        store.migrate(&mut conn)?;
        store.vector_ext = vector_extension(&mut conn);
        store.put(conn);
        Ok(store)
    }

    /// The schema of the `vector` extension, if the database has it (installed
    /// at open when available and this role may create it).
    pub(crate) fn vector_extension(&self) -> Option<&str> {
        self.vector_ext.as_deref()
    }

    /// Whether migration 3 (the `vectors` table) is recorded.
    pub(crate) fn vectors_migrated(&self) -> Result<bool> {
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM \"{}\".schema_migrations WHERE version = {VECTORS_MIGRATION})",
            self.schema
        );
        let rows = self.with(|c| c.query(&sql, &[]))?;
        Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
    }

    /// Whether vector searches of this store run in SQL (pgvector).
    pub(crate) fn vectors_in_sql(&self) -> bool {
        self.vectors.get().is_some()
    }

    /// Use the `vectors` table from now on (migration 3 is committed).
    pub(crate) fn use_vectors(&self, ext: &str) {
        let _ = self.vectors.set(VectorSql::new(&self.schema, ext));
    }

    /// The `depth` rows of (kind, ctx) nearest to `q` by cosine among those
    /// `filter` accepts, best first, as (key, cosine similarity); `None` when
    /// this store does not keep vectors in SQL.
    pub(crate) fn vector_search(
        &self,
        kind: Kind,
        ctx: &str,
        q: &[f32],
        filter: &RowFilter<'_>,
        depth: usize,
    ) -> Result<Option<Vec<(String, f32)>>> {
        let Some(vs) = self.vectors.get() else {
            return Ok(None);
        };
        if depth == 0 {
            return Ok(Some(Vec::new()));
        }
        let qvec = PgVector(q);
        let dim = i32::try_from(q.len()).unwrap_or(i32::MAX);
        let limit = i64::try_from(depth).unwrap_or(i64::MAX);
        let min_importance = filter
            .min_importance
            .map(|i| i64::try_from(i).unwrap_or(i64::MAX));
        let tag = kind.tag();
        let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> =
            vec![&qvec, &tag, &ctx, &dim, &limit];
        // Filters become WHERE conditions ($6 on, numbered as the params are pushed),
        // so the LIMIT counts only rows that pass them.
        let mut conds = String::new();
        let tags_all = filter.tags_all;
        let participants_any = filter.participants_any;
        let optional: [(bool, &(dyn postgres::types::ToSql + Sync), &str); 5] = [
            (!tags_all.is_empty(), &tags_all, "tags @>"),
            (
                !participants_any.is_empty(),
                &participants_any,
                "participants &&",
            ),
            (filter.since_ms.is_some(), &filter.since_ms, "ts_ms >="),
            (filter.until_ms.is_some(), &filter.until_ms, "ts_ms <="),
            (min_importance.is_some(), &min_importance, "importance >="),
        ];
        for (on, param, cond) in optional {
            if on {
                params.push(param);
                conds.push_str(&format!(" AND {cond} ${}", params.len()));
            }
        }
        let sql = vs.search(&conds);
        let rows = self.with(|c| c.query(&sql, &params))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let key: String = r.get(0);
            let distance: Option<f64> = r.get(1);
            // Cosine similarity, as the in-process scan reports it (a row pgvector
            // cannot score, a zero vector, counts 0 there too).
            let score = distance
                .map(|d| 1.0 - d)
                .filter(|s| s.is_finite())
                .unwrap_or(0.0);
            out.push((key, (score as f32).clamp(-1.0, 1.0)));
        }
        Ok(Some(out))
    }

    pub(crate) fn schema(&self) -> &str {
        &self.schema
    }

    fn connect(&self) -> std::result::Result<Conn, postgres::Error> {
        Ok(Conn {
            client: self.config.connect(NoTls)?,
            stmts: HashMap::new(),
        })
    }

    /// Create or upgrade the schema (serialised by an advisory lock).
    fn migrate(&self, conn: &mut Conn) -> Result<()> {
        let s = &self.schema;
        let mut tx = conn.client.transaction().dep()?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&LOCK_CLASS, &format!("migrate:{s}")],
        )
        .dep()?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS \"{s}\";
             CREATE TABLE IF NOT EXISTS \"{s}\".schema_migrations (
                 version integer PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             );"
        ))
        .dep()?;
        let current: Option<i32> = tx
            .query_one(
                &format!("SELECT max(version) FROM \"{s}\".schema_migrations"),
                &[],
            )
            .dep()?
            .get(0);
        let current = current.unwrap_or(0);
        if current > SCHEMA_VERSION {
            return Err(Error::corrupted(format!(
                "PostgreSQL schema {s} is at version {current}, newer than this build supports ({SCHEMA_VERSION}); upgrade memstrata"
            )));
        }
        if current < 1 {
            let mut ddl = String::new();
            for t in Tree::ALL {
                ddl.push_str(&format!(
                    "CREATE TABLE IF NOT EXISTS \"{s}\".\"{}\" (key bytea PRIMARY KEY, value bytea NOT NULL);\n",
                    t.name()
                ));
            }
            ddl.push_str(&format!(
                "CREATE SEQUENCE IF NOT EXISTS \"{s}\".ids AS bigint MINVALUE 1;\n\
                 INSERT INTO \"{s}\".schema_migrations (version) VALUES (1);"
            ));
            tx.batch_execute(&ddl).dep()?;
        }
        // By its number, not the highest one: migration 3 (pgvector) is
        // optional and may have been recorded by a build without migration 2.
        let has_search_docs: bool = tx
            .query_one(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM \"{s}\".schema_migrations WHERE version = 2)"
                ),
                &[],
            )
            .dep()?
            .get(0);
        if !has_search_docs {
            tx.batch_execute(&search_docs_ddl(s)).dep()?;
        }
        // Migration 4: the `dedup` tree (a store created by migration 1 above
        // already has it, as it creates every tree of this build).
        let has_dedup: bool = tx
            .query_one(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM \"{s}\".schema_migrations WHERE version = {DEDUP_MIGRATION})"
                ),
                &[],
            )
            .dep()?
            .get(0);
        if !has_dedup {
            tx.batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS \"{s}\".\"{}\" (key bytea PRIMARY KEY, value bytea NOT NULL);\n\
                 INSERT INTO \"{s}\".schema_migrations (version) VALUES ({DEDUP_MIGRATION});",
                Tree::Dedup.name()
            ))
            .dep()?;
        }
        tx.commit().dep()?;
        Ok(())
    }

    /// A connection from the pool (or a new one).
    fn take(&self) -> Result<Conn> {
        if let Some(c) = self.idle.lock().pop()
            && !c.client.is_closed()
        {
            return Ok(c);
        }
        self.connect().dep()
    }

    /// Return a connection to the pool (a closed one is dropped).
    fn put(&self, conn: Conn) {
        if conn.client.is_closed() {
            return;
        }
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    /// Run `f` on a pooled connection (outside any transaction).
    fn with<T>(
        &self,
        f: impl FnOnce(&mut Conn) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut c = self.take()?;
        let r = f(&mut c);
        self.put(c);
        r.dep()
    }

    fn sql(&self, t: Tree) -> &TreeSql {
        &self.sql[&t]
    }

    pub(crate) fn get(&self, t: Tree, key: &[u8]) -> Result<Option<Bytes>> {
        let rows = self.with(|c| c.query(&self.sql(t).get, &[&key]))?;
        Ok(rows.first().map(|r| Bytes::from(r.get::<_, &[u8]>(0))))
    }

    pub(crate) fn insert(&self, t: Tree, key: &[u8], value: &[u8]) -> Result<()> {
        self.with(|c| c.execute(&self.sql(t).upsert, &[&key, &value]))?;
        Ok(())
    }

    pub(crate) fn remove(&self, t: Tree, key: &[u8]) -> Result<Option<Bytes>> {
        let rows = self.with(|c| c.query(&self.sql(t).delete, &[&key]))?;
        Ok(rows.first().map(|r| Bytes::from(r.get::<_, &[u8]>(0))))
    }

    pub(crate) fn len(&self, t: Tree) -> Result<usize> {
        let rows = self.with(|c| c.query(&self.sql(t).count, &[]))?;
        let n: i64 = rows.first().map_or(0, |r| r.get(0));
        Ok(usize::try_from(n).unwrap_or(0))
    }

    pub(crate) fn count_from(&self, t: Tree, start: &[u8]) -> Result<usize> {
        let sql = format!("SELECT count(*) FROM {} WHERE key >= $1", self.sql(t).table);
        let rows = self.with(|c| c.query(&sql, &[&start]))?;
        let n: i64 = rows.first().map_or(0, |r| r.get(0));
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Bytes of the schema's tables, their indexes and TOAST data.
    pub(crate) fn bytes_on_disk(&self) -> Result<u64> {
        let rows = self.with(|c| {
            c.query(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
                &[&self.schema],
            )
        })?;
        let n: i64 = rows.first().map_or(0, |r| r.get(0));
        Ok(u64::try_from(n).unwrap_or(0))
    }

    pub(crate) fn compare_and_swap(
        &self,
        t: Tree,
        key: &[u8],
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<std::result::Result<(), CasMismatch>> {
        let sql = self.sql(t);
        let done = self.with(|c| match (old, new) {
            (None, None) => Ok(c.query(&sql.get, &[&key])?.is_empty()),
            (None, Some(n)) => Ok(c.execute(&sql.insert_new, &[&key, &n])? == 1),
            (Some(o), Some(n)) => Ok(c.execute(&sql.update_if, &[&key, &o, &n])? == 1),
            (Some(o), None) => Ok(c.execute(&sql.delete_if, &[&key, &o])? == 1),
        })?;
        Ok(if done { Ok(()) } else { Err(CasMismatch) })
    }

    pub(crate) fn apply_batch(&self, t: Tree, ops: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> Result<()> {
        let sql = self.sql(t);
        self.with(|c| {
            c.client.batch_execute("BEGIN")?;
            let r = (|| {
                for (k, v) in &ops {
                    match v {
                        Some(v) => c.execute(&sql.upsert, &[k, v])?,
                        None => c.execute(&sql.delete, &[k])?,
                    };
                }
                c.client.batch_execute("COMMIT")
            })();
            if r.is_err() {
                let _ = c.client.batch_execute("ROLLBACK");
            }
            r
        })
    }

    pub(crate) fn next_id(&self) -> Result<u64> {
        let rows = self.with(|c| c.query(&self.next_id_sql, &[]))?;
        let id: i64 = rows
            .first()
            .map(|r| r.get(0))
            .ok_or_else(|| Error::storage("nextval returned no row"))?;
        Ok(id as u64)
    }

    /// An ordered scan of `t` within the bounds, fetched page by page from both ends.
    pub(crate) fn scan(
        self: &Arc<Self>,
        t: Tree,
        bounds: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    ) -> PgIter {
        PgIter {
            store: Arc::clone(self),
            tree: t,
            lo: bounds.0,
            hi: bounds.1,
            front: VecDeque::new(),
            back: VecDeque::new(),
            front_done: false,
            back_done: false,
            failed: false,
            keys_only: false,
        }
    }

    /// Run `f` in one REPEATABLE READ transaction, again on a conflict.
    pub(crate) fn transaction<R>(
        &self,
        trees: &[Tree],
        f: impl Fn(&[TxTree<'_>]) -> TxResult<R>,
    ) -> Result<R> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let conn = RefCell::new(self.take()?);
            let outcome = {
                let begin = conn
                    .borrow_mut()
                    .client
                    .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ");
                match begin {
                    Err(e) => Err(tx_err(e)),
                    Ok(()) => {
                        let txc = TxConn {
                            conn: &conn,
                            store: self,
                        };
                        let views: Vec<TxTree<'_>> =
                            trees.iter().map(|t| TxTree::Postgres(&txc, *t)).collect();
                        match f(&views) {
                            Ok(r) => match conn.borrow_mut().client.batch_execute("COMMIT") {
                                Ok(()) => Ok(r),
                                Err(e) => Err(tx_err(e)),
                            },
                            Err(e) => Err(e),
                        }
                    }
                }
            };
            let mut conn = conn.into_inner();
            match outcome {
                Ok(r) => {
                    self.put(conn);
                    return Ok(r);
                }
                Err(e) => {
                    if conn.client.batch_execute("ROLLBACK").is_ok() {
                        self.put(conn);
                    }
                    match e {
                        TxError::Conflict if attempts < MAX_ATTEMPTS => {
                            std::thread::sleep(std::time::Duration::from_micros(
                                200 * u64::from(attempts),
                            ));
                        }
                        TxError::Conflict => {
                            return Err(Error::Conflict(format!(
                                "a PostgreSQL transaction kept conflicting with concurrent writers ({attempts} attempts)"
                            )));
                        }
                        TxError::Abort(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// Rows of `search_docs`.
    pub(crate) fn search_docs_count(&self) -> Result<u64> {
        let rows = self.with(|c| c.query(&self.search.count, &[]))?;
        let n: i64 = rows.first().map_or(0, |r| r.get(0));
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Move the entries of the GIN index's pending list into the main index
    /// and refresh the table's planner statistics (both what autovacuum does
    /// in the background); returns the pending-list pages cleaned.
    pub(crate) fn clean_search_index(&self) -> Result<u64> {
        let index = format!("\"{}\".search_docs_tsv", self.schema);
        let analyze = format!("ANALYZE {}", self.search.table);
        let rows = self.with(|c| {
            let rows = c.query(
                "SELECT gin_clean_pending_list($1::text::regclass)",
                &[&index],
            )?;
            c.client.batch_execute(&analyze)?;
            Ok(rows)
        })?;
        let n: i64 = rows.first().map_or(0, |r| r.get(0));
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Open a serial write section (see [`super::Store::serial`]).
    pub(crate) fn serial(self: &Arc<Self>) -> Result<SerialTx> {
        let mut conn = self.take()?;
        let r = conn.client.batch_execute("BEGIN").and_then(|()| {
            conn.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                &[&LOCK_CLASS, &format!("serial:{}", self.schema)],
            )
        });
        if let Err(e) = r {
            let _ = conn.client.batch_execute("ROLLBACK");
            self.put(conn);
            return Err(Error::from_dep(e));
        }
        Ok(SerialTx {
            store: Arc::clone(self),
            conn: Some(RefCell::new(conn)),
        })
    }
}
