//! Finding a document by its uid, for the delete the writer queues before
//! every upsert of a known id, and for the overlay's masks.
//!
//! The uid is not an indexed term. A term per document was the largest part
//! of indexing a short episode: every segment's term dictionary (an FST) and
//! posting lists got one more entry per document, at every flush and every
//! merge (the uid is also the `uid` fast column, which resolves hits). So
//! each document carries instead one of [`UID_BUCKETS`] bucket terms (a hash
//! of its uid, field `uid_bucket`), and a lookup reads that bucket's postings
//! and keeps the documents whose `uid` column holds this uid: exact, at the
//! cost of a posting list of about one document in 4,096 of the segment.
//!
//! [`DeleteUid`] is the query queued with `IndexWriter::delete_query`; it
//! holds the uid, the bucket field and the shared cache of opened `uid`
//! columns. (`delete_term` wraps its term in a
//! `TermQuery`, whose weight carries a BM25 cache of 256 scores, ~1.1 KiB,
//! until the next commit: the footprint probe measured 28 MiB of them live at
//! once at 100k short episodes.)

use std::sync::Arc;

use tantivy::query::{EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, Score, SegmentReader, TERMINATED, TantivyError, Term};

use super::columns::SegmentColumns;

/// How many bucket terms the uids are spread over. Few enough that a flushed
/// segment (tens of thousands of documents) holds each bucket term many
/// times, so indexing adds no term per document; enough that a lookup reads
/// ~250 postings per million documents.
pub(super) const UID_BUCKETS: u64 = 4096;

/// The bucket of `uid` (FNV-1a; part of the index format: changing it
/// requires a new index schema version).
pub(super) fn uid_bucket(uid: &str) -> u64 {
    super::fnv1a(uid.bytes()) % UID_BUCKETS
}

/// The documents of `reader` whose uid is `uid`, deleted ones included
/// (ascending).
pub(super) fn docs_with_uid(
    reader: &SegmentReader,
    bucket_field: Field,
    columns: &SegmentColumns,
    uid: &str,
) -> tantivy::Result<Vec<DocId>> {
    // The uid's own dictionary first: a segment that never held it (all but
    // one or two of them) is left after one lookup. The column is opened
    // once per segment: parsing its dictionary's block index on every
    // lookup made the commit after 20k updates of known keys 3x slower.
    let column = columns
        .uid_of(reader)
        .map_err(|e| TantivyError::InternalError(e.to_string()))?;
    let Some(ord) = column.dictionary().term_ord(uid)? else {
        return Ok(Vec::new());
    };
    let term = Term::from_field_u64(bucket_field, uid_bucket(uid));
    let Some(mut postings) = reader
        .inverted_index(bucket_field)?
        .read_postings(&term, IndexRecordOption::Basic)?
    else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let ords = column.ords();
    let mut doc = postings.doc();
    while doc != TERMINATED {
        if ords.first(doc) == Some(ord) {
            out.push(doc);
        }
        doc = postings.advance();
    }
    Ok(out)
}

/// Matches the documents with one uid; never scores.
#[derive(Clone)]
pub(super) struct DeleteUid {
    pub bucket_field: Field,
    pub columns: Arc<SegmentColumns>,
    pub uid: String,
}

impl std::fmt::Debug for DeleteUid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeleteUid").field("uid", &self.uid).finish()
    }
}

impl Query for DeleteUid {
    fn weight(&self, _scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(self.clone()))
    }
}

impl Weight for DeleteUid {
    fn scorer(&self, reader: &SegmentReader, _boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        Ok(Box::new(Docs::new(docs_with_uid(
            reader,
            self.bucket_field,
            &self.columns,
            &self.uid,
        )?)))
    }

    fn explain(&self, _reader: &SegmentReader, _doc: DocId) -> tantivy::Result<Explanation> {
        Err(TantivyError::InvalidArgument(
            "a delete-by-uid does not score".to_owned(),
        ))
    }
}

/// A scorer over a sorted list of documents (tantivy's `VecDocSet` is
/// compiled for its own tests only).
struct Docs {
    docs: Vec<DocId>,
    at: usize,
}

impl Docs {
    fn new(docs: Vec<DocId>) -> Self {
        Docs { docs, at: 0 }
    }
}

impl DocSet for Docs {
    fn advance(&mut self) -> DocId {
        if self.at < self.docs.len() {
            self.at += 1;
        }
        self.doc()
    }

    fn doc(&self) -> DocId {
        self.docs.get(self.at).copied().unwrap_or(TERMINATED)
    }

    fn size_hint(&self) -> u32 {
        (self.docs.len() - self.at.min(self.docs.len())) as u32
    }
}

impl Scorer for Docs {
    fn score(&mut self) -> Score {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bucket is stored in every index document: it must not change
    /// between builds (the FNV-1a reference values, then one bucket).
    #[test]
    fn the_bucket_hash_is_fnv1a() {
        assert_eq!(super::super::fnv1a(*b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::super::fnv1a(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(uid_bucket("a"), 0xaf63_dc4c_8601_ec8c % UID_BUCKETS);
        assert!((0..10_000).all(|i| uid_bucket(&format!("e\0default\0{i}")) < UID_BUCKETS));
    }
}
