//! pgvector: the `<schema>.vectors` table, its SQL, and the binary vector parameter.

#[allow(unused_imports)]
use super::*;
use crate::error::DepResult;

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
/// docs/internals.md for what would change that.
#[derive(Debug)]
pub(crate) struct VectorSql {
    ext: String,
    table: String,
    upsert: String,
    delete: String,
}

impl VectorSql {
    pub(super) fn new(schema: &str, ext: &str) -> Self {
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
    pub(super) fn create(&self) -> String {
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
    pub(super) fn search(&self, conds: &str) -> String {
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
pub(super) struct PgVector<'a>(pub(super) &'a [f32]);

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
pub(super) fn installed_vector_ext(
    conn: &mut Conn,
) -> std::result::Result<Option<String>, postgres::Error> {
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
pub(super) fn vector_extension(conn: &mut Conn) -> Option<String> {
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

/// Upsert or delete the vector rows of `ops` (an upsert without an embedding deletes).
pub(super) fn write_vector_ops(conn: &mut Conn, vs: &VectorSql, ops: &[IndexOp]) -> Result<()> {
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
                    )
                    .dep()?;
                }
                None => {
                    conn.execute(&vs.delete, &[&kind, &ctx, &key]).dep()?;
                }
            },
            IndexOp::Delete(_) => {
                conn.execute(&vs.delete, &[&kind, &ctx, &key]).dep()?;
            }
        }
    }
    Ok(())
}
