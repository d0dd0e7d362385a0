//! Opening the index's one writer: its memory budget and how large its
//! merges may grow.
//!
//! tantivy's log merge policy merges a level of about eight similar segments
//! into one, so the merged segments grow by a factor of about eight per
//! level, without bound: at 1M short episodes the last merge wrote one
//! segment of ~580k documents. A merge's memory grows with the segment it
//! writes (its doc-id mapping alone is 8 bytes a document) and it reads its
//! sources whole, so the largest merge set the `low_memory` peak whenever
//! it ran (+10 MiB in the runs of `docs/benchmarks/footprint.md`,
//! fourteenth pass). [`BoundedMerges`] keeps tantivy's policy and splits any
//! merge that would write more than `merge_max_docs` documents.

use std::collections::HashMap;

use tantivy::index::{SegmentId, SegmentMeta};
use tantivy::indexer::{LogMergePolicy, MergeCandidate, MergePolicy};

use super::queued::Writer;

/// The writer's budgets: from `Options::index_writer_bytes` and
/// `Options::index_merge_max_docs`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriterBudget {
    /// tantivy's memory budget (at least its floor of 15 MB).
    pub(crate) bytes: usize,
    /// Most documents a merge may write; 0 leaves tantivy's policy unbounded.
    pub(crate) merge_max_docs: u32,
}

/// The index's one writer: one indexing thread, the budget's bytes, and
/// merges bounded as the budget says.
pub(crate) fn open_writer(index: &tantivy::Index, budget: WriterBudget) -> tantivy::Result<Writer> {
    let writer: Writer = index.writer_with_num_threads(1, budget.bytes.max(15_000_000))?;
    if budget.merge_max_docs > 0 {
        writer.set_merge_policy(Box::new(BoundedMerges::new(budget.merge_max_docs)));
    }
    Ok(writer)
}

/// tantivy's log merge policy, with no merge writing more than `max_docs`
/// documents. A segment of more than half that is never merged again (any
/// merge of it with a segment at least as large would pass the bound), so a
/// store of `n` documents ends with about `2n / max_docs` such segments
/// plus the smaller levels.
#[derive(Debug)]
pub(crate) struct BoundedMerges {
    log: LogMergePolicy,
    max_docs: u32,
}

impl BoundedMerges {
    pub(crate) fn new(max_docs: u32) -> Self {
        let mut log = LogMergePolicy::default();
        log.set_max_docs_before_merge((max_docs / 2) as usize);
        BoundedMerges { log, max_docs }
    }
}

impl MergePolicy for BoundedMerges {
    fn compute_merge_candidates(&self, segments: &[SegmentMeta]) -> Vec<MergeCandidate> {
        let docs: HashMap<SegmentId, u32> =
            segments.iter().map(|s| (s.id(), s.num_docs())).collect();
        self.log
            .compute_merge_candidates(segments)
            .into_iter()
            .filter_map(|candidate| {
                // The smallest segments of the level, as many as fit: the
                // rest wait for the next round (tantivy asks again after
                // every merge and commit).
                let mut ids = candidate.0;
                ids.sort_by_key(|id| docs.get(id).copied().unwrap_or(0));
                let mut total = 0u64;
                let fit: Vec<SegmentId> = ids
                    .into_iter()
                    .take_while(|id| {
                        total += u64::from(docs.get(id).copied().unwrap_or(0));
                        total <= u64::from(self.max_docs)
                    })
                    .collect();
                (fit.len() >= 2).then_some(MergeCandidate(fit))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use tantivy::Index;
    use tantivy::schema::{INDEXED, Schema};

    use super::*;

    /// Segment metas of the given sizes, from a throwaway index.
    fn metas(sizes: &[u32]) -> Vec<SegmentMeta> {
        let mut schema = Schema::builder();
        schema.add_u64_field("n", INDEXED);
        let index = Index::create_in_ram(schema.build());
        sizes
            .iter()
            .map(|&n| index.new_segment_meta(SegmentId::generate_random(), n))
            .collect()
    }

    fn merged(policy: &dyn MergePolicy, segs: &[SegmentMeta]) -> Vec<Vec<u32>> {
        let size = |id: &SegmentId| segs.iter().find(|s| s.id() == *id).unwrap().num_docs();
        let mut out: Vec<Vec<u32>> = policy
            .compute_merge_candidates(segs)
            .into_iter()
            .map(|c| {
                let mut v: Vec<u32> = c.0.iter().map(size).collect();
                v.sort_unstable();
                v
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_level_that_fits_merges_whole() {
        let segs = metas(&[23_000; 8]);
        assert_eq!(
            merged(&BoundedMerges::new(200_000), &segs),
            vec![vec![23_000; 8]]
        );
    }

    #[test]
    fn a_level_past_the_bound_merges_only_what_fits() {
        // tantivy's own policy merges all eight into one of 560k.
        let segs = metas(&[70_000; 8]);
        assert_eq!(
            merged(&LogMergePolicy::default(), &segs),
            vec![vec![70_000; 8]]
        );
        assert_eq!(
            merged(&BoundedMerges::new(200_000), &segs),
            vec![vec![70_000, 70_000]]
        );
    }

    /// Which also means a level never offers a lone segment: any two
    /// segments of at most half the bound fit together.
    #[test]
    fn segments_over_half_the_bound_are_left_alone() {
        let mut sizes = vec![150_000; 9];
        sizes.extend([1_000; 8]);
        let segs = metas(&sizes);
        assert_eq!(
            merged(&BoundedMerges::new(200_000), &segs),
            vec![vec![1_000; 8]]
        );
    }

    /// On a real index: many small commits, merged under a bound of 3,000,
    /// end in segments of at most 3,000 documents holding every document.
    #[test]
    fn a_real_writer_never_merges_past_the_bound() {
        let mut schema = Schema::builder();
        let n = schema.add_u64_field("n", INDEXED);
        let index = Index::create_in_ram(schema.build());
        let mut writer: tantivy::IndexWriter =
            index.writer_with_num_threads(1, 15_000_000).unwrap();
        writer.set_merge_policy(Box::new(BoundedMerges::new(3_000)));
        for c in 0..40u64 {
            for i in 0..250u64 {
                writer
                    .add_document(tantivy::doc!(n => c * 250 + i))
                    .unwrap();
            }
            writer.commit().unwrap();
        }
        writer.wait_merging_threads().unwrap();
        let segs = index.searchable_segment_metas().unwrap();
        let sizes: Vec<u32> = segs.iter().map(|s| s.num_docs()).collect();
        assert_eq!(sizes.iter().sum::<u32>(), 10_000, "{sizes:?}");
        assert!(sizes.iter().all(|&s| s <= 3_000), "{sizes:?}");
        // Merges did run: fewer segments than the 40 commits made.
        assert!(sizes.len() < 40, "{sizes:?}");
    }
}
