//! SQLite FTS5: what a developer would reach for instead.
//!
//! The lean, idiomatic layout: one ordinary table holding each episode once
//! (summary, participants, tags, content JSON, timestamp, importance) and a
//! contentless FTS5 index over summary, content text, participants and tags
//! with the `porter unicode61` tokenizer (stemming, like tantivy's `en_stem`).
//! WAL journal with `synchronous = NORMAL`: every insert is its own committed
//! transaction without an fsync, the closest match to `Durability::Periodic`.
//! Queries are the same natural-language text, made safe the usual way
//! (each word quoted, words OR-ed), ranked by `bm25()` with the same column
//! weights as Memstrata (summary 1.5, tags 1.2), top 10, each hit's row read
//! and its content JSON parsed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::{Connection, params};

use super::{Result, SearchEngine, idx_from_id, query_words};
use crate::corpus::EpisodeDoc;
use crate::stats::Latency;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS episodes(
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    ts INTEGER NOT NULL,
    importance INTEGER NOT NULL,
    summary TEXT NOT NULL,
    participants TEXT NOT NULL,
    tags TEXT NOT NULL,
    content TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS episodes_fts USING fts5(
    summary, body, participants, tags,
    content = '', contentless_delete = 1,
    tokenize = 'porter unicode61'
);
";

const SEARCH: &str = "
SELECT e.id, e.ts, e.summary, e.content, e.participants, e.tags, e.importance
FROM (SELECT rowid, bm25(episodes_fts, 1.5, 1.0, 1.0, 1.2) AS score
      FROM episodes_fts WHERE episodes_fts MATCH ?1 ORDER BY score LIMIT ?2) AS h
JOIN episodes AS e ON e.rowid = h.rowid
ORDER BY h.score";

/// An SQLite database with an FTS5 index.
#[derive(Debug)]
pub struct Fts5 {
    path: PathBuf,
    conn: Connection,
}

impl Fts5 {
    /// Open (or create) the database file `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        conn.set_prepared_statement_cache_capacity(16);
        Ok(Fts5 {
            path: path.to_owned(),
            conn,
        })
    }

    /// The SQLite library version (for the report).
    pub fn sqlite_version() -> String {
        rusqlite::version().to_owned()
    }

    /// Database, WAL and shared-memory files.
    pub fn files(&self) -> Vec<PathBuf> {
        let p = self.path.to_string_lossy();
        vec![
            self.path.clone(),
            format!("{p}-wal").into(),
            format!("{p}-shm").into(),
        ]
    }

    /// The FTS5 MATCH expression for natural-language text.
    pub fn match_expr(query: &str) -> String {
        query_words(query)
            .iter()
            .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" OR ")
    }
}

impl SearchEngine for Fts5 {
    fn name(&self) -> &'static str {
        "sqlite fts5"
    }
    fn ingest(&mut self, batch: &[EpisodeDoc], lat: &mut Latency) -> Result<()> {
        let rows: Vec<_> = batch
            .iter()
            .map(|d| {
                (
                    d.idx as i64 + 1,
                    d.id.clone(),
                    d.ts_ms,
                    i64::from(d.importance),
                    d.summary.clone(),
                    d.participants.join(" "),
                    d.tags.join(" "),
                    d.content.to_string(),
                    d.body(),
                )
            })
            .collect();
        for (rowid, id, ts, imp, summary, parts, tags, content, body) in rows {
            let t = Instant::now();
            let tx = self.conn.transaction()?;
            tx.prepare_cached(
                "INSERT INTO episodes(rowid, id, ts, importance, summary, participants, tags, content)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![rowid, id, ts, imp, summary, parts, tags, content])?;
            tx.prepare_cached("INSERT INTO episodes_fts(rowid, summary, body, participants, tags) VALUES (?1, ?2, ?3, ?4, ?5)")?
                .execute(params![rowid, summary, body, parts, tags])?;
            tx.commit()?;
            lat.record(t.elapsed());
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
    fn search(&self, query: &str, limit: usize) -> Result<Vec<usize>> {
        let expr = Fts5::match_expr(query);
        if expr.is_empty() {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn.prepare_cached(SEARCH)?;
        let mut rows = stmt.query(params![expr, limit as i64])?;
        let mut out = Vec::with_capacity(limit);
        while let Some(row) = rows.next()? {
            let id: String = row.get(0)?;
            let content: String = row.get(3)?;
            let v: serde_json::Value = serde_json::from_str(&content)?;
            std::hint::black_box((&v, row.get_ref(2)?, row.get_ref(4)?, row.get_ref(5)?));
            out.extend(idx_from_id(&id));
        }
        Ok(out)
    }
}
