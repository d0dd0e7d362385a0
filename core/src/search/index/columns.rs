//! The `uid` and `scope` fast columns of each segment, kept between searches.
//!
//! Opening a fast column reads its bytes whole (tantivy's columnar reader:
//! the `uid` column's dictionary, the `scope` values). On a memory-mapped
//! index that costs nothing, but a sealed index (`crypt`) decrypts what is
//! read: per search, the uid dictionary alone is about 10 bytes per document
//! of the segment. Segments are immutable (deletes do not touch their fast
//! columns), so a column opened once serves every later search of that
//! segment; entries of segments no longer searched are dropped.

use std::collections::HashMap;

use parking_lot::Mutex;
use tantivy::Searcher;
use tantivy::columnar::{Column, StrColumn};
use tantivy::index::SegmentId;

use crate::error::DepResult;
use crate::{Error, Result};

#[derive(Clone, Default)]
struct Columns {
    uid: Option<StrColumn>,
    scope: Option<Column<u64>>,
}

/// Opened fast columns per segment id.
#[derive(Default)]
pub(super) struct SegmentColumns {
    open: Mutex<HashMap<SegmentId, Columns>>,
}

impl std::fmt::Debug for SegmentColumns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentColumns")
            .field("segments", &self.open.lock().len())
            .finish()
    }
}

impl SegmentColumns {
    /// The columns kept for segment `ord` of `searcher`, opening the missing
    /// one with `open`; a miss also drops the segments `searcher` no longer
    /// has (merged away: their files may be deleted, their bytes not held).
    fn get<T: Clone>(
        &self,
        searcher: &Searcher,
        ord: u32,
        pick: impl Fn(&mut Columns) -> &mut Option<T>,
        open: impl FnOnce(&tantivy::SegmentReader) -> Result<T>,
    ) -> Result<T> {
        self.cached(searcher.segment_reader(ord), pick, open, Some(searcher))
    }

    /// The column kept for `reader`'s segment, opened with `open` on a miss;
    /// with `prune`, a miss also keeps only that searcher's segments.
    fn cached<T: Clone>(
        &self,
        reader: &tantivy::SegmentReader,
        pick: impl Fn(&mut Columns) -> &mut Option<T>,
        open: impl FnOnce(&tantivy::SegmentReader) -> Result<T>,
        prune: Option<&Searcher>,
    ) -> Result<T> {
        let id = reader.segment_id();
        if let Some(c) = self.open.lock().get_mut(&id).and_then(|c| pick(c).clone()) {
            return Ok(c);
        }
        let col = open(reader)?;
        let mut map = self.open.lock();
        if let Some(searcher) = prune {
            retain_segments_of(&mut map, searcher);
        }
        *pick(map.entry(id).or_default()) = Some(col.clone());
        Ok(col)
    }

    /// The `uid` column of `reader`'s segment, for a lookup by uid outside
    /// a search (a queued delete, applied to segments of tantivy's own
    /// readers). Entries of segments merged away are dropped by the next
    /// search that misses, and by [`Self::retain_live`] after each commit.
    pub(super) fn uid_of(&self, reader: &tantivy::SegmentReader) -> Result<StrColumn> {
        self.cached(reader, |c| &mut c.uid, open_uid, None)
    }

    /// Drop the columns of segments `searcher` no longer has.
    pub(super) fn retain_live(&self, searcher: &Searcher) {
        retain_segments_of(&mut self.open.lock(), searcher);
    }

    /// The `uid` column of segment `ord`.
    pub(super) fn uid(&self, searcher: &Searcher, ord: u32) -> Result<StrColumn> {
        self.get(searcher, ord, |c| &mut c.uid, open_uid)
    }

    /// The `scope` column of segment `ord`.
    pub(super) fn scope(&self, searcher: &Searcher, ord: u32) -> Result<Column<u64>> {
        self.get(
            searcher,
            ord,
            |c| &mut c.scope,
            |r| r.fast_fields().u64("scope").dep(),
        )
    }
}

fn open_uid(reader: &tantivy::SegmentReader) -> Result<StrColumn> {
    reader
        .fast_fields()
        .str("uid")
        .dep()?
        .ok_or_else(|| Error::index("index segment without its uid column"))
}

/// Keep only the entries of `searcher`'s segments.
fn retain_segments_of(map: &mut HashMap<SegmentId, Columns>, searcher: &Searcher) {
    let live: Vec<SegmentId> = searcher
        .segment_readers()
        .iter()
        .map(|r| r.segment_id())
        .collect();
    map.retain(|k, _| live.contains(k));
}
