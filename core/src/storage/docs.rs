//! The search documents every backend stores and every index reads: what the
//! layers hand to the engine (an [`IndexOp`] per indexed write, logged in the
//! store's index log), what a text search asks ([`IndexQuery`]) and what a
//! vector search filters on ([`RowFilter`]). The tantivy index, the in-memory
//! vector index and the PostgreSQL backend's SQL search all speak it, so it
//! sits at the storage level, below search.

use crate::{Error, Result};

/// What a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Episode,
    Knowledge,
}

impl Kind {
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Kind::Episode => "e",
            Kind::Knowledge => "k",
        }
    }
}

/// Unique id of a document: kind, context and key separated by NUL.
pub(crate) fn uid(kind: Kind, ctx: &str, key: &str) -> String {
    format!("{}\0{}\0{}", kind.tag(), ctx, key)
}

/// Split a uid into (kind, ctx, key).
pub(crate) fn parse_uid(uid: &str) -> Result<(Kind, String, String)> {
    let mut parts = uid.splitn(3, '\0');
    let kind = match parts.next() {
        Some("e") => Kind::Episode,
        Some("k") => Kind::Knowledge,
        _ => return Err(Error::corrupted(format!("bad index uid {uid:?}"))),
    };
    let ctx = parts
        .next()
        .ok_or_else(|| Error::corrupted("uid without context"))?;
    let key = parts
        .next()
        .ok_or_else(|| Error::corrupted("uid without key"))?;
    Ok((kind, ctx.to_owned(), key.to_owned()))
}

/// A document to (re)index.
#[derive(Debug, Clone)]
pub(crate) struct IndexDoc {
    pub uid: String,
    pub kind: Kind,
    pub ctx: String,
    pub summary: String,
    pub body: String,
    pub participants: Vec<String>,
    pub tags: Vec<String>,
    pub ts_ms: i64,
    pub importance: u64,
    /// The record's embedding, for the vector index (the text index ignores it).
    pub embedding: Option<std::sync::Arc<[f32]>>,
    /// The uid was made for this write (a new record under an id the engine
    /// generated), so no document can hold it yet: the text index adds it
    /// without deleting the uid first. Ops rebuilt from the index log
    /// (replay, catch-up, recovery) are never fresh.
    pub fresh: bool,
}

impl IndexDoc {
    /// This document, marked [fresh](IndexDoc::fresh).
    pub(crate) fn fresh(mut self) -> Self {
        self.fresh = true;
        self
    }
}

/// One change to apply to the index.
#[derive(Debug, Clone)]
pub(crate) enum IndexOp {
    Upsert(IndexDoc),
    Delete(String),
}

impl IndexOp {
    pub(crate) fn uid(&self) -> &str {
        match self {
            IndexOp::Upsert(d) => &d.uid,
            IndexOp::Delete(u) => u,
        }
    }
}

/// A search over the index.
#[derive(Debug)]
pub(crate) struct IndexQuery<'a> {
    pub kind: Kind,
    pub ctx: &'a str,
    pub text: &'a str,
    pub tags_all: &'a [String],
    pub participants_any: &'a [String],
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub min_importance: Option<u64>,
    pub limit: usize,
}

/// Filters of the vector list (same semantics as the text index's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowFilter<'a> {
    pub tags_all: &'a [String],
    pub participants_any: &'a [String],
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub min_importance: Option<u64>,
}

impl RowFilter<'_> {
    pub(crate) const NONE: RowFilter<'static> = RowFilter {
        tags_all: &[],
        participants_any: &[],
        since_ms: None,
        until_ms: None,
        min_importance: None,
    };

    pub(crate) fn is_empty(&self) -> bool {
        self.tags_all.is_empty()
            && self.participants_any.is_empty()
            && self.since_ms.is_none()
            && self.until_ms.is_none()
            && self.min_importance.is_none()
    }
}

/// Splits text into the terms a store's own search table holds when it keeps
/// no plaintext (a PostgreSQL store with a key writes each term as a keyed
/// hash, see `pg::sealed`). The search layer implements it with the text
/// index's analyzer and the engine hands it down: storage never names search.
#[cfg(feature = "postgres")]
pub(crate) trait Lexer: Send + Sync {
    /// Each term of `text`, in order, with its position (1 for the first
    /// word; a word the analyzer drops, such as a stop word, keeps its place).
    fn terms(&self, text: &str, out: &mut dyn FnMut(&str, u32));
}
