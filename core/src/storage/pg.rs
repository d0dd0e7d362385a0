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
//!   docs/architecture.md). Without the extension the engine keeps its
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
use crate::storage::docs::RowFilter;
use crate::storage::docs::{self as index, IndexDoc, IndexOp, IndexQuery, Kind};
use crate::{Error, Result};

/// Idle connections kept for reuse.
const MAX_IDLE: usize = 16;
/// Rows fetched per page of an ordered scan.
const PAGE: i64 = 512;
/// Attempts of a transaction that keeps conflicting.
const MAX_ATTEMPTS: u32 = 64;
/// First key of the advisory locks of memstrata ("mems").
const LOCK_CLASS: i32 = 0x6d65_6d73;

/// The schema version the migrations below bring a store to.
pub(crate) const SCHEMA_VERSION: i32 = 3;

/// The text search configuration of documents and queries (the English
/// Snowball stemmer and stop words, as tantivy's `en_stem` analyzer stems).
const TS_CONFIG: &str = "english";
/// Characters of each field that enter a document's `tsvector`. PostgreSQL
/// refuses a `tsvector` whose lexemes and positions exceed 1 MiB (`string is
/// too long for tsvector`), which a record within the value limits (16 MiB)
/// could reach; within these caps a `tsvector` stays under 1 MiB whatever the
/// text (at most about 4.5 bytes of lexeme data per character, for words of
/// one 4-byte character each). Words past the caps are not searchable on
/// PostgreSQL (tantivy indexes every word).
const TSV_SUMMARY_CHARS: u32 = 16_384;
const TSV_BODY_CHARS: u32 = 131_072;
const TSV_LIST_CHARS: u32 = 8_192;
/// `ts_rank`'s weights for {D, C, B, A}: summary A, tags B, body and
/// participants C, in the ratios of the tantivy path's field boosts
/// (summary 1.5, tags 1.2, body and participants 1.0). D is unused.
const RANK_WEIGHTS: &str = "{0.1, 0.6667, 0.8, 1.0}";
/// `ts_rank`'s normalisation: 1 divides the rank by 1 + log(document
/// length), so a long document does not win on its many matches alone (BM25's
/// length normalisation plays this role on sled).
const RANK_NORMALIZATION: i32 = 1;

/// The migration that adds `<schema>.vectors` (pgvector). Optional: recorded
/// only once the table exists and holds every stored embedding, so a store
/// opened without the extension is migrated (and backfilled) by the first open
/// that has it. See [`SerialTx::migrate_vectors`].
pub(crate) const VECTORS_MIGRATION: i32 = 3;

impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
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
        TxError::Abort(e.into())
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

/// The SQL of one tree.
#[derive(Debug)]
struct TreeSql {
    table: String,
    get: String,
    upsert: String,
    delete: String,
    count: String,
    insert_new: String,
    update_if: String,
    delete_if: String,
}

impl TreeSql {
    fn new(schema: &str, t: Tree) -> Self {
        let table = format!("\"{schema}\".\"{}\"", t.name());
        TreeSql {
            get: format!("SELECT value FROM {table} WHERE key = $1"),
            upsert: format!(
                "INSERT INTO {table} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
            ),
            delete: format!("DELETE FROM {table} WHERE key = $1 RETURNING value"),
            count: format!("SELECT count(*) FROM {table}"),
            insert_new: format!(
                "INSERT INTO {table} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING"
            ),
            update_if: format!("UPDATE {table} SET value = $3 WHERE key = $1 AND value = $2"),
            delete_if: format!("DELETE FROM {table} WHERE key = $1 AND value = $2"),
            table,
        }
    }

    /// An ordered page within `(lo, hi)`.
    fn page(
        &self,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        descending: bool,
        keys_only: bool,
    ) -> (String, Vec<Vec<u8>>) {
        let mut conds = Vec::new();
        let mut params = Vec::new();
        for (b, incl, excl) in [(lo, ">=", ">"), (hi, "<=", "<")] {
            match b {
                Bound::Included(k) => {
                    params.push(k.clone());
                    conds.push(format!("key {incl} ${}", params.len()));
                }
                Bound::Excluded(k) => {
                    params.push(k.clone());
                    conds.push(format!("key {excl} ${}", params.len()));
                }
                Bound::Unbounded => {}
            }
        }
        let filter = if conds.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conds.join(" AND "))
        };
        let order = if descending { "DESC" } else { "ASC" };
        let value = if keys_only { "''::bytea" } else { "value" };
        (
            format!(
                "SELECT key, {value} FROM {}{filter} ORDER BY key {order} LIMIT {PAGE}",
                self.table
            ),
            params,
        )
    }
}

/// Migration 2: the search table, its indexes and the helper its generated
/// column needs. Also removes the `meta` record of the rows' version, so the
/// engine backfills the table from the records of a store created before.
fn search_docs_ddl(s: &str) -> String {
    let doc = |expr: &str, chars: u32, weight: char| {
        format!(
            "setweight(to_tsvector('{TS_CONFIG}'::regconfig, left({expr}, {chars})), '{weight}')"
        )
    };
    let words = |col: &str| format!("\"{s}\".search_words({col})");
    let tsv = [
        doc("summary", TSV_SUMMARY_CHARS, 'A'),
        doc(&words("tags"), TSV_LIST_CHARS, 'B'),
        doc("body", TSV_BODY_CHARS, 'C'),
        doc(&words("participants"), TSV_LIST_CHARS, 'C'),
    ]
    .join("\n                 || ");
    let marker: String = META_SEARCH_DOCS
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "CREATE OR REPLACE FUNCTION \"{s}\".search_words(text[]) RETURNS text
             LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT array_to_string($1, ' ') $$;
         CREATE TABLE IF NOT EXISTS \"{s}\".search_docs (
             uid text PRIMARY KEY,
             kind text NOT NULL,
             ctx text NOT NULL,
             summary text NOT NULL,
             body text NOT NULL,
             participants text[] NOT NULL,
             tags text[] NOT NULL,
             ts_ms bigint NOT NULL,
             importance bigint NOT NULL,
             tsv tsvector GENERATED ALWAYS AS (
                 {tsv}
             ) STORED
         );
         CREATE INDEX IF NOT EXISTS search_docs_tsv ON \"{s}\".search_docs USING gin (tsv);
         CREATE INDEX IF NOT EXISTS search_docs_scope ON \"{s}\".search_docs (kind, ctx, ts_ms);
         DELETE FROM \"{s}\".meta WHERE key = decode('{marker}', 'hex');
         INSERT INTO \"{s}\".schema_migrations (version) VALUES (2);"
    )
}

/// The SQL of the search table.
#[derive(Debug)]
struct SearchSql {
    table: String,
    upsert: String,
    delete: String,
    clear: String,
    count: String,
}

/// A query whose one row is the lexemes of the text `param` as an OR `tsquery`
/// (column `tsq`, NULL when the text has none).
///
/// The lexemes come from `to_tsvector`, i.e. the documents' own parser,
/// stemmer and stop words. Each is quoted as a `tsquery` operand (a quote
/// doubled, a backslash escaped) and they are joined by `|`: the query text is
/// a parameter, never SQL, and `&|!:*()` in it only separate words.
fn tsquery_select(param: &str) -> String {
    format!(
        r"SELECT string_agg('''' || replace(replace(lexeme, E'\\', E'\\\\'), '''', '''''') || '''', ' | ')::tsquery AS tsq FROM unnest(to_tsvector('{TS_CONFIG}'::regconfig, {param}::text))"
    )
}

impl SearchSql {
    fn new(schema: &str) -> Self {
        let table = format!("\"{schema}\".search_docs");
        SearchSql {
            upsert: format!(
                "INSERT INTO {table} (uid, kind, ctx, summary, body, participants, tags, ts_ms, importance) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (uid) DO UPDATE SET kind = EXCLUDED.kind, ctx = EXCLUDED.ctx, \
                 summary = EXCLUDED.summary, body = EXCLUDED.body, participants = EXCLUDED.participants, \
                 tags = EXCLUDED.tags, ts_ms = EXCLUDED.ts_ms, importance = EXCLUDED.importance"
            ),
            delete: format!("DELETE FROM {table} WHERE uid = $1"),
            clear: format!("DELETE FROM {table}"),
            count: format!("SELECT count(*) FROM {table}"),
            table,
        }
    }

    /// The search statement for the filters `q` sets, with its parameters: the
    /// SQL depends only on which filters are present, every value is a
    /// parameter. With `text`, rows must match one of its lexemes and are
    /// ranked; without, they come newest first with score 0.
    fn search(&self, q: &IndexQuery<'_>, text: Option<&str>) -> (String, Vec<SqlParam>) {
        let mut params: Vec<SqlParam> = Vec::new();
        let mut push = |p: SqlParam| {
            params.push(p);
            format!("${}", params.len())
        };
        let text_param = text.map(|t| push(Box::new(t.to_owned())));
        let mut conds = vec![
            format!("kind = {}", push(Box::new(q.kind.tag().to_owned()))),
            format!("ctx = {}", push(Box::new(q.ctx.to_owned()))),
        ];
        if !q.tags_all.is_empty() {
            conds.push(format!("tags @> {}", push(Box::new(sql_list(q.tags_all)))));
        }
        if !q.participants_any.is_empty() {
            conds.push(format!(
                "participants && {}",
                push(Box::new(sql_list(q.participants_any)))
            ));
        }
        if let Some(v) = q.since_ms {
            conds.push(format!("ts_ms >= {}", push(Box::new(v))));
        }
        if let Some(v) = q.until_ms {
            conds.push(format!("ts_ms <= {}", push(Box::new(v))));
        }
        if let Some(v) = q.min_importance {
            let v = i64::try_from(v).unwrap_or(i64::MAX);
            conds.push(format!("importance >= {}", push(Box::new(v))));
        }
        let limit = i64::try_from(q.limit.max(1)).unwrap_or(i64::MAX);
        let limit = push(Box::new(limit));
        let table = &self.table;
        let conds = conds.join(" AND ");
        let sql = match text_param {
            Some(t) => format!(
                "WITH q AS ({tsq}) \
                 SELECT uid, ts_rank('{RANK_WEIGHTS}'::real[], tsv, (SELECT tsq FROM q), {RANK_NORMALIZATION}) AS score \
                 FROM {table} WHERE tsv @@ (SELECT tsq FROM q) AND {conds} \
                 ORDER BY score DESC, ts_ms DESC, uid COLLATE \"C\" LIMIT {limit}",
                tsq = tsquery_select(&t),
            ),
            None => format!(
                "SELECT uid, 0::real AS score FROM {table} WHERE {conds} \
                 ORDER BY ts_ms DESC, uid COLLATE \"C\" LIMIT {limit}"
            ),
        };
        (sql, params)
    }
}

/// A boxed statement parameter.
type SqlParam = Box<dyn postgres::types::ToSql + Sync>;

fn param_refs(params: &[SqlParam]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn postgres::types::ToSql + Sync))
        .collect()
}

/// The `search_docs` key of an index uid. A uid separates kind, context and
/// key by NUL, which PostgreSQL `text` cannot hold; the row uses `/` instead
/// (`e/ctx/id`). Kind tags and context names never contain `/`, so the first
/// two `/` are the separators and the mapping is one-to-one.
pub(crate) fn row_uid(uid: &str) -> String {
    uid.replacen('\0', "/", 2)
}

/// The index uid of a `search_docs` key (see [`row_uid`]).
pub(crate) fn index_uid(row: &str) -> String {
    row.replacen('/', "\0", 2)
}

/// Text for a `text` column: PostgreSQL refuses NUL characters, which record
/// text may hold; each becomes a space (a word boundary, as for the tokenizer).
fn sql_text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        std::borrow::Cow::Owned(s.replace('\0', " "))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

fn sql_list(items: &[String]) -> Vec<String> {
    items.iter().map(|s| sql_text(s).into_owned()).collect()
}

/// Write `ops` to the search table on `conn` (inside the caller's transaction).
fn write_search_ops(
    conn: &mut Conn,
    sql: &SearchSql,
    ops: &[IndexOp],
) -> std::result::Result<(), postgres::Error> {
    for op in ops {
        match op {
            IndexOp::Upsert(d) => write_search_doc(conn, sql, d)?,
            IndexOp::Delete(uid) => {
                conn.execute(&sql.delete, &[&row_uid(uid)])?;
            }
        }
    }
    Ok(())
}

fn write_search_doc(
    conn: &mut Conn,
    sql: &SearchSql,
    d: &IndexDoc,
) -> std::result::Result<(), postgres::Error> {
    let importance = i64::try_from(d.importance).unwrap_or(i64::MAX);
    conn.execute(
        &sql.upsert,
        &[
            &row_uid(&d.uid),
            &d.kind.tag(),
            &d.ctx,
            &sql_text(&d.summary).as_ref(),
            &sql_text(&d.body).as_ref(),
            &sql_list(&d.participants),
            &sql_list(&d.tags),
            &d.ts_ms,
            &importance,
        ],
    )?;
    Ok(())
}

/// The SQL of `<schema>.vectors` (migration 3), with the extension's type and
/// operator qualified by the extension's schema (it need not be on the search path).
///
/// The column is an untyped `vector`: the dimension is fixed per context, not
/// per store, so one typed column cannot hold every context's rows. Search is
/// exact: a scan of the (kind, ctx) rows through the primary key's prefix,
/// filtered in WHERE, ordered by cosine distance `<=>`. No HNSW or IVFFlat
/// index: those need a typed column (one dimension), and an approximate index
/// applies WHERE filters after its candidate list, so a filtered search can
/// return fewer than `limit` hits or miss the best ones. See
/// docs/architecture.md for what would change that.
#[derive(Debug)]
pub(crate) struct VectorSql {
    ext: String,
    table: String,
    upsert: String,
    delete: String,
}

impl VectorSql {
    fn new(schema: &str, ext: &str) -> Self {
        let table = format!("\"{schema}\".vectors");
        VectorSql {
            upsert: format!(
                "INSERT INTO {table} (kind, ctx, key, dim, embedding, participants, tags, ts_ms, importance) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (kind, ctx, key) DO UPDATE SET dim = EXCLUDED.dim, \
                 embedding = EXCLUDED.embedding, participants = EXCLUDED.participants, tags = EXCLUDED.tags, \
                 ts_ms = EXCLUDED.ts_ms, importance = EXCLUDED.importance"
            ),
            delete: format!("DELETE FROM {table} WHERE kind = $1 AND ctx = $2 AND key = $3"),
            ext: ext.to_owned(),
            table,
        }
    }

    /// The DDL of migration 3.
    fn create(&self) -> String {
        let (t, ext) = (&self.table, &self.ext);
        format!(
            "CREATE TABLE IF NOT EXISTS {t} (
                 kind text NOT NULL,
                 ctx text NOT NULL,
                 key text NOT NULL,
                 dim integer NOT NULL,
                 embedding \"{ext}\".vector NOT NULL,
                 participants text[] NOT NULL,
                 tags text[] NOT NULL,
                 ts_ms bigint NOT NULL,
                 importance bigint NOT NULL,
                 PRIMARY KEY (kind, ctx, key)
             );"
        )
    }

    /// The search with extra WHERE conditions `conds` (each starting with ` AND `).
    /// Params: $1 query vector ([`PgVector`]), $2 kind, $3 ctx, $4 dim, $5 limit, then
    /// the conditions'. The vector is a binary parameter of the extension's type, not
    /// text cast in SQL: a generic plan of the prepared statement evaluated such a
    /// cast again for every row it scored (measured: 42 ms instead of 5 ms at 10k
    /// rows x 384 with 1 in 10 passing a filter; 226 ms unfiltered).
    fn search(&self, conds: &str) -> String {
        format!(
            "SELECT key, embedding OPERATOR(\"{ext}\".<=>) $1 AS distance \
             FROM {t} WHERE kind = $2 AND ctx = $3 AND dim = $4{conds} \
             ORDER BY distance, key LIMIT $5",
            ext = self.ext,
            t = self.table,
        )
    }
}

/// A parameter of pgvector's `vector` type, sent in its binary form
/// (`vector_recv`: dimension and a reserved word as big-endian `int16`, then the
/// elements as big-endian `float4`).
#[derive(Debug)]
struct PgVector<'a>(&'a [f32]);

impl postgres::types::ToSql for PgVector<'_> {
    fn to_sql(
        &self,
        _ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>>
    {
        let dim = u16::try_from(self.0.len())
            .map_err(|_| format!("a vector of {} dimensions", self.0.len()))?;
        out.reserve(4 + 4 * self.0.len());
        out.extend_from_slice(&dim.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        for x in self.0 {
            out.extend_from_slice(&x.to_be_bytes());
        }
        Ok(postgres::types::IsNull::No)
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        ty.name() == "vector"
    }

    postgres::types::to_sql_checked!();
}

/// The schema of the installed `vector` extension.
fn installed_vector_ext(conn: &mut Conn) -> std::result::Result<Option<String>, postgres::Error> {
    Ok(conn
        .client
        .query_opt(
            "SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace \
             WHERE e.extname = 'vector'",
            &[],
        )?
        .map(|r| r.get(0)))
}

/// Find the `vector` extension, creating it when the server has the package and
/// this role may (in `public`, else the role's default schema). Any failure
/// means "no extension": the engine then keeps its in-process vector scan.
fn vector_extension(conn: &mut Conn) -> Option<String> {
    if let Ok(Some(ext)) = installed_vector_ext(conn) {
        return Some(ext);
    }
    let available = conn
        .client
        .query_opt(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'",
            &[],
        )
        .ok()?
        .is_some();
    if !available {
        return None;
    }
    for create in [
        "CREATE EXTENSION IF NOT EXISTS vector SCHEMA public",
        "CREATE EXTENSION IF NOT EXISTS vector",
    ] {
        // Serialised database-wide: two stores (schemas) opening at once would
        // otherwise race on pg_extension's unique name.
        let created = conn.client.transaction().and_then(|mut tx| {
            tx.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext('extension:vector'))",
                &[&LOCK_CLASS],
            )?;
            tx.batch_execute(create)?;
            tx.commit()
        });
        if created.is_ok() {
            break;
        }
    }
    installed_vector_ext(conn).ok().flatten()
}

/// An open PostgreSQL store.
pub(crate) struct PgStore {
    config: postgres::Config,
    schema: String,
    sql: HashMap<Tree, TreeSql>,
    search: SearchSql,
    next_id_sql: String,
    /// `nextval` plus whether migration 3 is recorded (see [`SerialTx::next_id`]).
    next_id_probe_sql: String,
    /// The schema holding the `vector` extension, when it is installed in the database.
    vector_ext: Option<String>,
    /// Set once this store's `vectors` table is in use (migration 3 recorded).
    vectors: OnceLock<VectorSql>,
    idle: Mutex<Vec<Conn>>,
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
    pub(crate) fn open(url: &PgUrl) -> Result<PgStore> {
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
        let mut tx = conn.client.transaction()?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&LOCK_CLASS, &format!("migrate:{s}")],
        )?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS \"{s}\";
             CREATE TABLE IF NOT EXISTS \"{s}\".schema_migrations (
                 version integer PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             );"
        ))?;
        let current: Option<i32> = tx
            .query_one(
                &format!("SELECT max(version) FROM \"{s}\".schema_migrations"),
                &[],
            )?
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
            tx.batch_execute(&ddl)?;
        }
        // By its number, not the highest one: migration 3 (pgvector) is
        // optional and may have been recorded by a build without migration 2.
        let has_search_docs: bool = tx
            .query_one(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM \"{s}\".schema_migrations WHERE version = 2)"
                ),
                &[],
            )?
            .get(0);
        if !has_search_docs {
            tx.batch_execute(&search_docs_ddl(s))?;
        }
        tx.commit()?;
        Ok(())
    }

    /// A connection from the pool (or a new one).
    fn take(&self) -> Result<Conn> {
        if let Some(c) = self.idle.lock().pop()
            && !c.client.is_closed()
        {
            return Ok(c);
        }
        Ok(self.connect()?)
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
        Ok(r?)
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

    /// Text search over `search_docs` (see docs/architecture.md, "Search on
    /// PostgreSQL"): (index uid, score), best first. Every filter of `q` is a
    /// condition of the query. A text with lexemes matches rows holding any of
    /// them, ranked by `ts_rank`, ties newest first, then by uid; a text
    /// without any (empty, punctuation, stop words only) searches by the
    /// filters alone, newest first, score 0 (as the tantivy path does for a
    /// text without words).
    pub(crate) fn search(&self, q: &IndexQuery<'_>) -> Result<Vec<(String, f32)>> {
        let sql = &self.search;
        let rows = self.with(|c| {
            let has_word = q.text.chars().any(char::is_alphanumeric);
            if has_word {
                let (stmt, params) = sql.search(q, Some(q.text));
                let rows = c.query(&stmt, &param_refs(&params))?;
                if !rows.is_empty() {
                    return Ok(rows);
                }
                // No hit: was there a lexeme to look for at all?
                let check = format!("SELECT tsq IS NULL FROM ({}) q", tsquery_select("$1"));
                let none: bool = c.query(&check, &[&q.text])?[0].get(0);
                if !none {
                    return Ok(rows);
                }
            }
            let (stmt, params) = sql.search(q, None);
            c.query(&stmt, &param_refs(&params))
        })?;
        Ok(rows
            .iter()
            .map(|r| (index_uid(r.get::<_, &str>(0)), r.get::<_, f32>(1)))
            .collect())
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
            return Err(e.into());
        }
        Ok(SerialTx {
            store: Arc::clone(self),
            conn: Some(RefCell::new(conn)),
        })
    }
}

/// Upsert or delete the vector rows of `ops` (an upsert without an embedding deletes).
fn write_vector_ops(conn: &mut Conn, vs: &VectorSql, ops: &[IndexOp]) -> Result<()> {
    for op in ops {
        // Rows are keyed by (kind, ctx, key): the uid's NUL separators cannot be `text`.
        let (kind, ctx, key) = index::parse_uid(op.uid())?;
        let kind = kind.tag();
        match op {
            IndexOp::Upsert(d) => match &d.embedding {
                Some(v) => {
                    let dim = i32::try_from(v.len()).unwrap_or(i32::MAX);
                    let ts_ms = d.ts_ms;
                    let importance = i64::try_from(d.importance).unwrap_or(i64::MAX);
                    conn.execute(
                        &vs.upsert,
                        &[
                            &kind,
                            &ctx,
                            &key,
                            &dim,
                            &PgVector(v),
                            &d.participants,
                            &d.tags,
                            &ts_ms,
                            &importance,
                        ],
                    )?;
                }
                None => {
                    conn.execute(&vs.delete, &[&kind, &ctx, &key])?;
                }
            },
            IndexOp::Delete(_) => {
                conn.execute(&vs.delete, &[&kind, &ctx, &key])?;
            }
        }
    }
    Ok(())
}

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
            return Err(e.into());
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
    conn: &'a RefCell<Conn>,
    store: &'a PgStore,
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
    store: Arc<PgStore>,
    conn: Option<RefCell<Conn>>,
}

impl SerialTx {
    fn cell(&self) -> Result<&RefCell<Conn>> {
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
        let rows = cell.borrow_mut().query(sql, &[])?;
        let row = rows
            .first()
            .ok_or_else(|| Error::storage("nextval returned no row"))?;
        let id: i64 = row.get(0);
        if probe && row.get::<_, bool>(1) {
            let ext = installed_vector_ext(&mut cell.borrow_mut())?.ok_or_else(|| {
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
            )?
            .is_some();
        if done {
            return Ok(());
        }
        cell.borrow_mut().client.batch_execute(&vs.create())?;
        backfill(&mut |ops| write_vector_ops(&mut cell.borrow_mut(), &vs, ops))?;
        cell.borrow_mut().client.batch_execute(&format!(
            "INSERT INTO \"{schema}\".schema_migrations (version) VALUES ({VECTORS_MIGRATION})"
        ))?;
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
                .batch_execute("SAVEPOINT memstrata_tx")?;
            let txc = TxConn { conn: cell, store };
            let views: Vec<TxTree<'_>> = trees.iter().map(|t| TxTree::Postgres(&txc, *t)).collect();
            match f(&views) {
                Ok(r) => {
                    cell.borrow_mut()
                        .client
                        .batch_execute("RELEASE SAVEPOINT memstrata_tx")?;
                    return Ok(r);
                }
                Err(e) => {
                    cell.borrow_mut()
                        .client
                        .batch_execute("ROLLBACK TO SAVEPOINT memstrata_tx")?;
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
        let mut conn = self.cell()?.borrow_mut();
        Ok(write_search_ops(&mut conn, sql, ops)?)
    }

    /// Remove every `search_docs` row (a rebuild writes them again before committing).
    pub(crate) fn clear_search_docs(&mut self) -> Result<()> {
        let sql = &self.store.search.clear;
        self.cell()?.borrow_mut().execute(sql, &[])?;
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
                Err(e.into())
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
    store: Arc<PgStore>,
    tree: Tree,
    /// Keys not yet returned lie strictly within (lo, hi) (as bounds).
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    front: VecDeque<(Bytes, Bytes)>,
    back: VecDeque<(Bytes, Bytes)>,
    front_done: bool,
    back_done: bool,
    failed: bool,
    /// Fetch keys only (values come back empty).
    keys_only: bool,
}

fn above(key: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Included(b) => key >= b.as_slice(),
        Bound::Excluded(b) => key > b.as_slice(),
        Bound::Unbounded => true,
    }
}

fn below(key: &[u8], hi: &Bound<Vec<u8>>) -> bool {
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

    fn fetch(&mut self, descending: bool) -> Result<Vec<(Bytes, Bytes)>> {
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

    fn step(&mut self, forward: bool) -> Option<Result<(Bytes, Bytes)>> {
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
