//! The delete-by-uid the writer queues before every upsert, in ~100 bytes.
//!
//! `IndexWriter::delete_term` wraps the term in a `TermQuery` and queues its
//! weight until the next commit; that weight carries a BM25 cache of 256
//! scores (about 1.1 KiB with its boxes) even though a delete never scores.
//! Every indexed write queues one, so between two commits of a steady ingest
//! (up to `20 × index_commit_interval`, tens of thousands of short episodes)
//! they were the largest part of the engine's heap: the footprint probe
//! (docs/benchmarks/footprint.md) measured 28 MiB of them live at once at
//! 100k short episodes. This weight holds the term alone and matches the
//! same documents: the postings of the uid's term, deleted ones included
//! (tantivy's delete pass filters by opstamp itself).

use tantivy::query::{ConstScorer, EmptyScorer, EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocId, Score, SegmentReader, TantivyError, Term};

/// Matches the documents holding one exact term (the uid); never scores.
#[derive(Debug, Clone)]
pub(super) struct DeleteTerm(pub Term);

impl Query for DeleteTerm {
    fn weight(&self, _scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(DeleteTermWeight(self.0.clone())))
    }
}

struct DeleteTermWeight(Term);

impl Weight for DeleteTermWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let postings = reader
            .inverted_index(self.0.field())?
            .read_postings(&self.0, IndexRecordOption::Basic)?;
        Ok(match postings {
            Some(p) => Box::new(ConstScorer::new(p, boost)),
            None => Box::new(EmptyScorer),
        })
    }

    fn explain(&self, _reader: &SegmentReader, _doc: DocId) -> tantivy::Result<Explanation> {
        Err(TantivyError::InvalidArgument(
            "a delete-by-uid does not score".to_owned(),
        ))
    }
}
