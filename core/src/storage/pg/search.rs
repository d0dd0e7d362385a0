//! Full-text search in SQL: the `search_docs` rows (tsvector columns and their DDL), the ranking query, and writing index ops as rows.

#[allow(unused_imports)]
use super::*;

/// The text search configuration of documents and queries (the English
/// Snowball stemmer and stop words, as tantivy's `en_stem` analyzer stems).
pub(super) const TS_CONFIG: &str = "english";

/// Characters of each field that enter a document's `tsvector`. PostgreSQL
/// refuses a `tsvector` whose lexemes and positions exceed 1 MiB (`string is
/// too long for tsvector`), which a record within the value limits (16 MiB)
/// could reach; within these caps a `tsvector` stays under 1 MiB whatever the
/// text (at most about 4.5 bytes of lexeme data per character, for words of
/// one 4-byte character each). Words past the caps are not searchable on
/// PostgreSQL (tantivy indexes every word).
pub(super) const TSV_SUMMARY_CHARS: u32 = 16_384;

pub(super) const TSV_BODY_CHARS: u32 = 131_072;

pub(super) const TSV_LIST_CHARS: u32 = 8_192;

/// `ts_rank`'s weights for {D, C, B, A}: summary A, tags B, body and
/// participants C, in the ratios of the tantivy path's field boosts
/// (summary 1.5, tags 1.2, body and participants 1.0). D is unused.
pub(super) const RANK_WEIGHTS: &str = "{0.1, 0.6667, 0.8, 1.0}";

/// `ts_rank`'s normalisation: 1 divides the rank by 1 + log(document
/// length), so a long document does not win on its many matches alone (BM25's
/// length normalisation plays this role on sled).
pub(super) const RANK_NORMALIZATION: i32 = 1;

/// Migration 2: the search table, its indexes and the helper its generated
/// column needs. Also removes the `meta` record of the rows' version, so the
/// engine backfills the table from the records of a store created before.
pub(super) fn search_docs_ddl(s: &str) -> String {
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

/// Migration 5, run by the engine on a store opened with a key (never on a
/// plaintext one): `tsv` becomes a plain column written from the engine's
/// hashed lexemes, the text columns may be NULL, and the sealed uid gets its
/// column. Every row is deleted: the caller writes them all again, sealed, in
/// the same transaction ([`super::SerialTx::seal_search_docs`]).
pub(super) fn sealed_search_ddl(s: &str) -> String {
    format!(
        "ALTER TABLE \"{s}\".search_docs ALTER COLUMN tsv DROP EXPRESSION;
         ALTER TABLE \"{s}\".search_docs ALTER COLUMN summary DROP NOT NULL,
             ALTER COLUMN body DROP NOT NULL, ADD COLUMN IF NOT EXISTS sealed_uid bytea;
         DELETE FROM \"{s}\".search_docs;
         INSERT INTO \"{s}\".schema_migrations (version) VALUES ({SEALED_SEARCH_MIGRATION})
             ON CONFLICT (version) DO NOTHING;"
    )
}

/// The SQL of the search table.
#[derive(Debug)]
pub(super) struct SearchSql {
    pub(super) table: String,
    pub(super) upsert: String,
    /// The upsert of a keyed store's row (no text, `tsv` and the sealed uid given).
    pub(super) upsert_sealed: String,
    pub(super) delete: String,
    pub(super) clear: String,
    pub(super) count: String,
}

/// A query whose one row is the lexemes of the text `param` as an OR `tsquery`
/// (column `tsq`, NULL when the text has none).
///
/// The lexemes come from `to_tsvector`, i.e. the documents' own parser,
/// stemmer and stop words. Each is quoted as a `tsquery` operand (a quote
/// doubled, a backslash escaped) and they are joined by `|`: the query text is
/// a parameter, never SQL, and `&|!:*()` in it only separate words.
pub(super) fn tsquery_select(param: &str) -> String {
    format!(
        r"SELECT string_agg('''' || replace(replace(lexeme, E'\\', E'\\\\'), '''', '''''') || '''', ' | ')::tsquery AS tsq FROM unnest(to_tsvector('{TS_CONFIG}'::regconfig, {param}::text))"
    )
}

impl SearchSql {
    pub(super) fn new(schema: &str) -> Self {
        let table = format!("\"{schema}\".search_docs");
        SearchSql {
            upsert: format!(
                "INSERT INTO {table} (uid, kind, ctx, summary, body, participants, tags, ts_ms, importance) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (uid) DO UPDATE SET kind = EXCLUDED.kind, ctx = EXCLUDED.ctx, \
                 summary = EXCLUDED.summary, body = EXCLUDED.body, participants = EXCLUDED.participants, \
                 tags = EXCLUDED.tags, ts_ms = EXCLUDED.ts_ms, importance = EXCLUDED.importance"
            ),
            upsert_sealed: format!(
                "INSERT INTO {table} (uid, kind, ctx, summary, body, participants, tags, ts_ms, importance, tsv, sealed_uid) \
                 VALUES ($1, $2, $3, NULL, NULL, $4, $5, $6, $7, $8::text::tsvector, $9) \
                 ON CONFLICT (uid) DO UPDATE SET kind = EXCLUDED.kind, ctx = EXCLUDED.ctx, \
                 summary = NULL, body = NULL, participants = EXCLUDED.participants, \
                 tags = EXCLUDED.tags, ts_ms = EXCLUDED.ts_ms, importance = EXCLUDED.importance, \
                 tsv = EXCLUDED.tsv, sealed_uid = EXCLUDED.sealed_uid"
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
    /// ranked; without, they come newest first with score 0. With `sealed`
    /// (a keyed store), `text` is the hashed `tsquery` of the search text
    /// ([`SealedSearch::tsquery`]), the context and filters are hashed, and
    /// each row's sealed uid comes back as a third column.
    pub(super) fn search(
        &self,
        q: &IndexQuery<'_>,
        text: Option<&str>,
        sealed: Option<&SealedSearch>,
    ) -> (String, Vec<SqlParam>) {
        let mut params: Vec<SqlParam> = Vec::new();
        let mut push = |p: SqlParam| {
            params.push(p);
            format!("${}", params.len())
        };
        let text_param = text.map(|t| push(Box::new(t.to_owned())));
        let ctx = match sealed {
            Some(s) => s.filter_value("ctx", q.ctx),
            None => q.ctx.to_owned(),
        };
        let list = |field: &str, items: &[String]| match sealed {
            Some(s) => s.filter_list(field, items),
            None => sql_list(items),
        };
        let mut conds = vec![
            format!("kind = {}", push(Box::new(q.kind.tag().to_owned()))),
            format!("ctx = {}", push(Box::new(ctx))),
        ];
        if !q.tags_all.is_empty() {
            let tags = list("tag", q.tags_all);
            conds.push(format!("tags @> {}", push(Box::new(tags))));
        }
        if !q.participants_any.is_empty() {
            let participants = list("participant", q.participants_any);
            conds.push(format!("participants && {}", push(Box::new(participants))));
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
        let extra = if sealed.is_some() { ", sealed_uid" } else { "" };
        let sql = match text_param {
            Some(t) => format!(
                "WITH q AS ({tsq}) \
                 SELECT uid, ts_rank('{RANK_WEIGHTS}'::real[], tsv, (SELECT tsq FROM q), {RANK_NORMALIZATION}) AS score{extra} \
                 FROM {table} WHERE tsv @@ (SELECT tsq FROM q) AND {conds} \
                 ORDER BY score DESC, ts_ms DESC, uid COLLATE \"C\" LIMIT {limit}",
                tsq = match sealed {
                    Some(_) => format!("SELECT {t}::text::tsquery AS tsq"),
                    None => tsquery_select(&t),
                },
            ),
            None => format!(
                "SELECT uid, 0::real AS score{extra} FROM {table} WHERE {conds} \
                 ORDER BY ts_ms DESC, uid COLLATE \"C\" LIMIT {limit}"
            ),
        };
        (sql, params)
    }
}

impl PgStore {
    /// Text search over `search_docs` (see docs/internals.md, "Search on
    /// PostgreSQL"): (index uid, score), best first. Every filter of `q` is a
    /// condition of the query. A text with lexemes matches rows holding any of
    /// them, ranked by `ts_rank`, ties newest first, then by uid; a text
    /// without any (empty, punctuation, stop words only) searches by the
    /// filters alone, newest first, score 0 (as the tantivy path does for a
    /// text without words).
    pub(crate) fn search(&self, q: &IndexQuery<'_>) -> Result<Vec<(String, f32)>> {
        if let Some(sealed) = &self.sealed {
            return self.search_sealed(sealed, q);
        }
        let sql = &self.search;
        let rows = self.with(|c| {
            let has_word = q.text.chars().any(char::is_alphanumeric);
            if has_word {
                let (stmt, params) = sql.search(q, Some(q.text), None);
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
            let (stmt, params) = sql.search(q, None, None);
            c.query(&stmt, &param_refs(&params))
        })?;
        Ok(rows
            .iter()
            .map(|r| (index_uid(r.get::<_, &str>(0)), r.get::<_, f32>(1)))
            .collect())
    }

    /// [`PgStore::search`] on a keyed store: the terms of the text are found
    /// and hashed here (none: a search by the filters alone), and each hit's
    /// uid is opened from its row.
    fn search_sealed(
        &self,
        sealed: &SealedSearch,
        q: &IndexQuery<'_>,
    ) -> Result<Vec<(String, f32)>> {
        let tsq = sealed.tsquery(q.text);
        let (stmt, params) = self.search.search(q, tsq.as_deref(), Some(sealed));
        let rows = self.with(|c| c.query(&stmt, &param_refs(&params)))?;
        rows.iter()
            .map(|r| {
                let row: &str = r.get(0);
                let uid: Option<&[u8]> = r.get(2);
                let uid = uid.ok_or_else(|| {
                    Error::corrupted("a search row of an encrypted store has no sealed uid")
                })?;
                Ok((sealed.open_uid(row, uid)?, r.get::<_, f32>(1)))
            })
            .collect()
    }
}

/// A boxed statement parameter.
pub(super) type SqlParam = Box<dyn postgres::types::ToSql + Sync>;

pub(super) fn param_refs(params: &[SqlParam]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
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
pub(super) fn sql_text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        std::borrow::Cow::Owned(s.replace('\0', " "))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

pub(super) fn sql_list(items: &[String]) -> Vec<String> {
    items.iter().map(|s| sql_text(s).into_owned()).collect()
}

/// Write `ops` to the search table on `conn` (inside the caller's transaction).
pub(super) fn write_search_ops(
    conn: &mut Conn,
    sql: &SearchSql,
    sealed: Option<&SealedSearch>,
    ops: &[IndexOp],
) -> Result<()> {
    for op in ops {
        match (op, sealed) {
            (IndexOp::Upsert(d), None) => write_search_doc(conn, sql, d).dep()?,
            (IndexOp::Upsert(d), Some(s)) => write_sealed_doc(conn, sql, s, d)?,
            (IndexOp::Delete(uid), None) => {
                conn.execute(&sql.delete, &[&row_uid(uid)]).dep()?;
            }
            (IndexOp::Delete(uid), Some(s)) => {
                conn.execute(&sql.delete, &[&s.row_uid(uid)]).dep()?;
            }
        }
    }
    Ok(())
}

/// The row of `d` in a keyed store: no text, hashed lexemes, filters and
/// context, the uid hashed and sealed (see [`SealedSearch`]).
pub(super) fn write_sealed_doc(
    conn: &mut Conn,
    sql: &SearchSql,
    s: &SealedSearch,
    d: &IndexDoc,
) -> Result<()> {
    let importance = i64::try_from(d.importance).unwrap_or(i64::MAX);
    let row = s.row_uid(&d.uid);
    let sealed_uid = s.seal_uid(&row, &d.uid)?;
    conn.execute(
        &sql.upsert_sealed,
        &[
            &row,
            &d.kind.tag(),
            &s.filter_value("ctx", &d.ctx),
            &s.filter_list("participant", &d.participants),
            &s.filter_list("tag", &d.tags),
            &d.ts_ms,
            &importance,
            &s.tsvector(d),
            &sealed_uid,
        ],
    )
    .dep()?;
    Ok(())
}

pub(super) fn write_search_doc(
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
