//! The derived tantivy index over episodes and semantic entries.
//!
//! sled is the source of truth. Every index-affecting write gets a sequence
//! number and a log record in sled (same transaction as the data). The index
//! writer applies writes in sequence order (the writer mutex is held across
//! sequence allocation, the sled transaction and `add_document`), and each
//! commit stores the last applied sequence as the commit payload. On open the
//! log past the payload is replayed; a missing or unreadable index is rebuilt
//! from sled. See `docs/internals.md`.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};
use tantivy::collector::TopDocs;
use tantivy::query::{AllQuery, BooleanQuery, BoostQuery, Occur, Query, RangeQuery, TermQuery};
use tantivy::schema::{
    FAST, INDEXED, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    TokenStream,
};
use tantivy::{Index, IndexReader, Order, ReloadPolicy, Term};

use crate::error::DepResult;
pub(crate) use crate::storage::docs::{IndexDoc, IndexOp, IndexQuery, Kind, parse_uid, uid};
use crate::{Error, Result};

mod delete;
use delete::DeleteUid;
mod checksum;
mod chunk_cache;
mod columns;
mod crypt;
pub(crate) use crypt::Sealer;
mod dir;
mod mapped;
use dir::SoftSyncDirectory;
mod overlay;
use overlay::{Overlay, SearchCommit};
mod queued;
mod writer;
use queued::{QueuedDoc, Writer};
pub(crate) use writer::WriterBudget;
mod stem;

pub(crate) mod query;
#[allow(unused_imports)]
use query::*;

/// Bumped whenever the schema or the document mapping changes; a mismatch rebuilds the index.
/// 3: `uid` is a fast (columnar) field instead of a stored one.
/// 4: `uid` is no longer an indexed term; `uid_bucket` finds it (see `delete`).
pub(crate) const INDEX_SCHEMA_VERSION: u32 = 4;

/// A steady write stream is committed at least every `20 × index_commit_interval`.
const COMMIT_MAX_DELAY_FACTOR: u32 = 20;

#[derive(Debug, Clone, Copy)]
struct Fields {
    uid: tantivy::schema::Field,
    kind: tantivy::schema::Field,
    ctx: tantivy::schema::Field,
    summary: tantivy::schema::Field,
    body: tantivy::schema::Field,
    participants: tantivy::schema::Field,
    participant_raw: tantivy::schema::Field,
    tags: tantivy::schema::Field,
    tag_raw: tantivy::schema::Field,
    ts: tantivy::schema::Field,
    importance: tantivy::schema::Field,
    /// FNV-1a of `kind\0ctx`: lets an unfiltered search run as a pure
    /// disjunction (block-WAND pruning) and drop out-of-scope hits afterwards.
    scope: tantivy::schema::Field,
    /// One of `delete::UID_BUCKETS` terms per document (a hash of its uid):
    /// with the `uid` column, how a document is found by its uid.
    uid_bucket: tantivy::schema::Field,
}

/// Stable 64-bit FNV-1a hash of a document's kind and context.
fn scope_hash(kind: Kind, ctx: &str) -> u64 {
    fnv1a(
        kind.tag()
            .bytes()
            .chain(std::iter::once(0u8))
            .chain(ctx.bytes()),
    )
}

/// 64-bit FNV-1a: the hashes stored in the index (`scope`, `uid_bucket`) are
/// part of its format.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("en_stem")
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        // A search reads each hit's uid from this column (a dictionary lookup);
        // the document store is not used (nothing is stored), see `uids_of`.
        // Not indexed: a term per document is what indexing a short episode
        // cost most; `uid_bucket` and this column find a uid (`delete`).
        uid: b.add_text_field("uid", TextOptions::from(FAST)),
        kind: b.add_text_field("kind", STRING),
        ctx: b.add_text_field("ctx", STRING),
        summary: b.add_text_field("summary", text.clone()),
        body: b.add_text_field("body", text.clone()),
        participants: b.add_text_field("participants", text.clone()),
        participant_raw: b.add_text_field("participant_raw", STRING),
        tags: b.add_text_field("tags", text),
        tag_raw: b.add_text_field("tag_raw", STRING),
        ts: b.add_i64_field("ts", INDEXED | FAST),
        importance: b.add_u64_field("importance", INDEXED | FAST),
        scope: b.add_u64_field("scope", FAST),
        uid_bucket: b.add_u64_field("uid_bucket", INDEXED),
    };
    (b.build(), fields)
}

/// Sequence numbers read without the writer lock (searches check them first).
#[derive(Debug, Default)]
struct Seqs {
    /// Highest sequence whose changes were applied to the writer (non-empty ops).
    changed: AtomicU64,
    /// Highest such sequence the reader shows (after a soft or durable commit).
    visible: AtomicU64,
}

/// How a commit is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommitKind {
    /// `meta.json` on disk, every file fsynced: the sled log may be pruned up to it.
    Durable,
    /// Visible to searches only (`meta.json` in memory, no fsync): see `index_dir`.
    Soft,
}

/// Writer state guarded by one mutex: holding it orders sequence numbers.
pub(crate) struct WriterState {
    /// `None` only transiently while a failed writer is being replaced.
    writer: Option<Writer>,
    fields: Fields,
    seqs: Arc<Seqs>,
    /// Changes applied since the reader's commit, searched without a commit.
    overlay: Arc<Overlay>,
    /// The opened `uid` columns, shared with the queued deletes.
    columns: Arc<columns::SegmentColumns>,
    /// Highest sequence applied to the writer.
    pub applied_seq: u64,
    /// Highest sequence in a durable commit.
    pub committed_seq: u64,
    /// Documents/deletes applied since the last durable commit.
    pub pending: usize,
    /// When the oldest change not yet in a durable commit was applied.
    pub pending_since: Option<Instant>,
    /// When the last change was applied.
    pub last_apply: Option<Instant>,
}

impl std::fmt::Debug for WriterState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterState")
            .field("applied_seq", &self.applied_seq)
            .field("committed_seq", &self.committed_seq)
            .field("pending", &self.pending)
            .finish()
    }
}

impl WriterState {
    /// Apply one sequence's changes (caller holds the lock, in sequence order).
    fn writer(&mut self) -> Result<&mut Writer> {
        self.writer.as_mut().ok_or_else(|| {
            Error::index("index writer unavailable (a previous failure could not be repaired)")
        })
    }

    pub(crate) fn apply(&mut self, seq: u64, ops: &[IndexOp]) -> Result<()> {
        let fields = self.fields;
        let columns = self.columns.clone();
        let w = self.writer()?;
        for op in ops {
            // A fresh uid was never indexed: deleting it would only cost a
            // lookup in every segment at the next commit.
            let fresh = matches!(op, IndexOp::Upsert(d) if d.fresh);
            if !fresh {
                w.delete_query(Box::new(DeleteUid {
                    bucket_field: fields.uid_bucket,
                    columns: columns.clone(),
                    uid: op.uid().to_owned(),
                }))
                .dep()?;
            }
            if let IndexOp::Upsert(d) = op {
                w.add_document(QueuedDoc::new(&fields, d)).dep()?;
            }
        }
        self.overlay.record(ops);
        self.applied_seq = self.applied_seq.max(seq);
        if !ops.is_empty() {
            self.seqs.changed.fetch_max(seq, Ordering::AcqRel);
            self.pending += ops.len();
            let now = Instant::now();
            self.pending_since.get_or_insert(now);
            self.last_apply = Some(now);
        }
        Ok(())
    }

    fn commit(&mut self, inner: &Inner, kind: CommitKind) -> Result<()> {
        let payload = self.applied_seq.to_string();
        let changed = self.seqs.changed.load(Ordering::Acquire);
        let mut prepared = self.writer()?.prepare_commit().dep()?;
        prepared.set_payload(&payload);
        match kind {
            CommitKind::Durable => {
                let _durable = inner.dir.durable();
                prepared.commit().dep()?;
                self.committed_seq = self.applied_seq;
                self.pending = 0;
                self.pending_since = None;
            }
            // `meta.json` stays in memory (see `index_dir`).
            CommitKind::Soft => {
                prepared.commit().dep()?;
            }
        }
        inner.reader.reload().dep()?;
        self.overlay.reset(inner.reader.searcher());
        self.columns.retain_live(&inner.reader.searcher());
        // Only now may a search skip its commit: the reader shows `changed`.
        self.seqs.visible.fetch_max(changed, Ordering::AcqRel);
        Ok(())
    }
}

/// The index handle owned by the engine.
pub(crate) struct SearchIndex {
    dir: PathBuf,
    writer_budget: WriterBudget,
    /// Keys and chunk cache of a sealed index (an encrypted store); kept across rebuilds.
    sealer: Option<Arc<Sealer>>,
    /// The overlay (default), or the behaviours before it, kept behind
    /// `MEMSTRATA_SEARCH_COMMIT=soft|durable` as benchmark baselines.
    search_commit: SearchCommit,
    seqs: Arc<Seqs>,
    overlay: Arc<Overlay>,
    /// Swapped whole when a corrupt index is rebuilt in place.
    inner: parking_lot::RwLock<Inner>,
    fields: Fields,
    state: Mutex<WriterState>,
    /// Cloned per search (a clone shares the stop-word set).
    query_analyzer: TextAnalyzer,
    /// The `uid` and `scope` columns of each segment, opened once.
    columns: Arc<columns::SegmentColumns>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("dir", &self.dir)
            .finish()
    }
}

struct Inner {
    index: Index,
    reader: IndexReader,
    dir: SoftSyncDirectory,
}

/// How the index came up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opened {
    /// An existing index with this committed sequence: replay the log after it.
    Existing(u64),
    /// A fresh empty index: everything must be re-added from sled.
    Fresh,
}

impl Drop for SearchIndex {
    /// Dropping a tantivy `IndexWriter` does not stop the merges it started:
    /// they would go on writing into the index directory after the engine is
    /// gone, racing the next engine that opens it (orphan removal, a rebuild
    /// deleting the directory). Wait for them, so a closed store is at rest.
    ///
    /// Then leave the folder as the next open would: the merges that ended
    /// after the last durable commit are made durable, and the segment files
    /// the `meta.json` on disk no longer names are removed. Until then both
    /// the merged segments and the ones they were made of stayed on disk (the
    /// reader still held the old ones, so tantivy's garbage collection kept
    /// them): the index of a 100k short-episode ingest measured 77 or 155
    /// bytes per episode right after close, depending on when a merge ended.
    fn drop(&mut self) {
        if let Some(writer) = self.state.get_mut().writer.take() {
            if writer.wait_merging_threads().is_err() {
                return;
            }
            let inner = self.inner.get_mut();
            if inner.dir.persist_merges().is_ok() {
                // Best effort: a file that cannot be removed now (mapped,
                // on Windows) is removed by the next open.
                let _ = dir::remove_orphans(&self.dir, self.sealer.as_deref());
            }
        }
    }
}

impl SearchIndex {
    /// Open the index in `dir`, or create a fresh one if it is missing or
    /// unreadable. With a `sealer` (an encrypted store) every file is sealed
    /// (`crypt`); an index found in plaintext there (written before the index
    /// was encrypted), or a file that fails authentication, is rebuilt sealed.
    pub(crate) fn open(
        dir: &Path,
        writer_budget: WriterBudget,
        schema_version_ok: bool,
        sealer: Option<Arc<Sealer>>,
    ) -> Result<(Self, Opened)> {
        let (schema, fields) = schema();
        let existing = if schema_version_ok && dir.join("meta.json").exists() {
            // tantivy may panic (not just fail) on some damaged files: either way, rebuild.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Self::open_existing(dir, &schema, writer_budget, sealer.clone())
            }))
            .ok()
            .and_then(|r| r.ok())
        } else {
            None
        };
        let ((index, writer, reader, sdir), opened) = match existing {
            Some((parts, seq)) => (parts, Opened::Existing(seq)),
            None => (
                Self::create_fresh(dir, schema, writer_budget, sealer.clone())?,
                Opened::Fresh,
            ),
        };
        let committed = match opened {
            Opened::Existing(s) => s,
            Opened::Fresh => 0,
        };
        let seqs = Arc::new(Seqs::default());
        let search_commit = SearchCommit::from_env();
        let columns = Arc::new(columns::SegmentColumns::default());
        let overlay = Arc::new(Overlay::new(
            search_commit == SearchCommit::Overlay,
            fields.uid_bucket,
            columns.clone(),
            [
                fields.summary,
                fields.body,
                fields.participants,
                fields.tags,
            ],
            [
                fields.summary,
                fields.body,
                fields.participants,
                fields.tags,
            ]
            .into_iter()
            .map(|f| index.tokenizer_for_field(f))
            .collect::<tantivy::Result<_>>()
            .dep()?,
            reader.searcher(),
        ));
        let state = WriterState {
            writer: Some(writer),
            fields,
            seqs: seqs.clone(),
            overlay: overlay.clone(),
            columns: columns.clone(),
            applied_seq: committed,
            committed_seq: committed,
            pending: 0,
            pending_since: None,
            last_apply: None,
        };
        Ok((
            SearchIndex {
                dir: dir.to_owned(),
                writer_budget,
                sealer,
                search_commit,
                seqs,
                overlay,
                inner: parking_lot::RwLock::new(Inner {
                    index,
                    reader,
                    dir: sdir,
                }),
                fields,
                state: Mutex::new(state),
                query_analyzer: query_analyzer(),
                columns,
            },
            opened,
        ))
    }

    /// Open an existing index; any failure (unreadable metas, schema change,
    /// a segment file that does not open) means "rebuild".
    fn open_existing(
        dir: &Path,
        schema: &Schema,
        writer_budget: WriterBudget,
        sealer: Option<Arc<Sealer>>,
    ) -> Result<((Index, Writer, IndexReader, SoftSyncDirectory), u64)> {
        if dir::meta_is_sealed(dir) != Some(sealer.is_some()) {
            // A plaintext index in an encrypted store (or the reverse): rebuild it.
            return Err(Error::index(
                "the index on disk is not in this store's format (sealed or plain)",
            ));
        }
        // Segment files no durable commit names (written after the last one
        // by soft commits and merges of a process that crashed).
        dir::remove_orphans(dir, sealer.as_deref())?;
        let plain = sealer.is_none();
        let sdir = SoftSyncDirectory::open(dir, sealer).dep()?;
        let index = Index::open(sdir.clone()).dep()?;
        stem::register(&index);
        if index.schema() != *schema {
            return Err(Error::index("schema changed"));
        }
        let metas = index.load_metas().dep()?;
        if plain {
            checksum::check_segment_files(dir, &metas)?;
        }
        let seq = metas
            .payload
            .as_deref()
            .and_then(|p| p.parse::<u64>().ok())
            .unwrap_or(0);
        let reader: IndexReader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .dep()?;
        let writer = writer::open_writer(&index, writer_budget).dep()?;
        Ok(((index, writer, reader, sdir), seq))
    }

    fn create_fresh(
        dir: &Path,
        schema: Schema,
        writer_budget: WriterBudget,
        sealer: Option<Arc<Sealer>>,
    ) -> Result<(Index, Writer, IndexReader, SoftSyncDirectory)> {
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        std::fs::create_dir_all(dir)?;
        let sdir = SoftSyncDirectory::open(dir, sealer).dep()?;
        let index = {
            let _durable = sdir.durable();
            Index::create(sdir.clone(), schema, tantivy::IndexSettings::default()).dep()?
        };
        stem::register(&index);
        let writer = writer::open_writer(&index, writer_budget).map_err(|e| {
            Error::index_by(
                format!("cannot open index writer in {}: {e}", dir.display()),
                e,
            )
        })?;
        let reader: IndexReader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .dep()?;
        Ok((index, writer, reader, sdir))
    }

    /// Throw the index away and start an empty one in its place (the caller
    /// re-adds every document from sled while still holding `st`).
    pub(crate) fn recreate(&self, st: &mut WriterState) -> Result<()> {
        drop(st.writer.take());
        let (schema, _) = schema();
        let mut inner = self.inner.write();
        let (index, writer, reader, dir) =
            Self::create_fresh(&self.dir, schema, self.writer_budget, self.sealer.clone())?;
        // Searches wait (on the writer lock) until the rebuild is committed.
        self.overlay.invalidate(Some(reader.searcher()));
        dir.release_mapped_pages_like(&inner.dir);
        *inner = Inner { index, reader, dir };
        self.seqs.visible.store(0, Ordering::Release);
        st.writer = Some(writer);
        st.applied_seq = 0;
        st.committed_seq = 0;
        st.pending = 0;
        st.pending_since = None;
        Ok(())
    }

    /// Replace a failed writer with a fresh one. Uncommitted changes are
    /// dropped: the caller replays the index log after `committed_seq`.
    pub(crate) fn reset_writer(&self, st: &mut WriterState) -> Result<()> {
        if let Some(old) = st.writer.take() {
            // Rolls back uncommitted work, waits for merge threads and releases the directory lock.
            drop(old);
        }
        let w = writer::open_writer(&self.inner.read().index, self.writer_budget).map_err(|e| {
            Error::index_by(
                format!("cannot reopen index writer in {}: {e}", self.dir.display()),
                e,
            )
        })?;
        st.writer = Some(w);
        // The changes since the last commit are replayed; searches commit until then.
        self.overlay.invalidate(None);
        st.applied_seq = st.committed_seq;
        st.pending = 0;
        st.pending_since = None;
        Ok(())
    }

    /// Lock the writer. Hold the guard across sequence allocation, the sled write and `apply`.
    pub(crate) fn lock(&self) -> MutexGuard<'_, WriterState> {
        self.state.lock()
    }

    /// Durably commit pending changes, if any.
    pub(crate) fn commit_pending(&self) -> Result<bool> {
        let mut st = self.state.lock();
        if st.pending == 0 && st.committed_seq == st.applied_seq {
            return Ok(false);
        }
        st.commit(&self.inner.read(), CommitKind::Durable)?;
        Ok(true)
    }

    /// Make every change applied before this call visible to searches
    /// (read-your-writes). Lock-free when the reader already shows them or
    /// the overlay holds every change since its commit (`index_overlay`);
    /// otherwise one soft commit (no fsync, nothing pruned from the sled log),
    /// shared by every search that queued for the writer lock meanwhile
    /// (group commit: each re-checks after taking the lock).
    pub(crate) fn refresh_for_search(&self) -> Result<()> {
        let target = self.seqs.changed.load(Ordering::Acquire);
        if self.seqs.visible.load(Ordering::Acquire) >= target || self.overlay.serves() {
            return Ok(());
        }
        let mut st = self.state.lock();
        if self.seqs.visible.load(Ordering::Acquire) >= target || self.overlay.serves() {
            return Ok(());
        }
        st.commit(&self.inner.read(), self.search_commit_kind())
    }

    fn search_commit_kind(&self) -> CommitKind {
        if self.search_commit == SearchCommit::Durable {
            CommitKind::Durable
        } else {
            CommitKind::Soft
        }
    }

    /// The committed searcher and the overlay for one search; when the
    /// overlay cannot serve it, a (soft) commit first, under the writer lock
    /// so that no write slips in before the snapshot.
    fn snapshot(
        &self,
        q: &IndexQuery<'_>,
        terms: &[(tantivy::schema::Field, String, f32)],
    ) -> Result<overlay::Snapshot> {
        if let Some(s) = self.overlay.snapshot(q, terms).dep()? {
            return Ok(s);
        }
        let mut st = self.state.lock();
        if let Some(s) = self.overlay.snapshot(q, terms).dep()? {
            return Ok(s);
        }
        st.commit(&self.inner.read(), self.search_commit_kind())?;
        self.overlay
            .snapshot(q, terms)
            .dep()?
            .ok_or_else(|| Error::index("index overlay not usable right after a commit"))
    }

    /// Commit if the oldest pending change is older than `interval`.
    /// Adaptive: commit once writes have paused for `interval`, or when the oldest
    /// pending change has waited `COMMIT_MAX_DELAY_FACTOR × interval`. A steady write
    /// stream then commits every few seconds instead of every `interval`
    /// (each commit stalls writers on the writer mutex). Searches never wait for
    /// this timer, and crash recovery replays the sled log.
    pub(crate) fn commit_if_due(&self, interval: std::time::Duration) -> Result<bool> {
        let due = {
            let st = self.state.lock();
            let quiet = st.last_apply.is_some_and(|t| t.elapsed() >= interval);
            let overdue = st
                .pending_since
                .is_some_and(|t| t.elapsed() >= interval.saturating_mul(COMMIT_MAX_DELAY_FACTOR));
            st.pending_since.is_some() && (quiet || overdue)
        };
        if due {
            self.commit_pending()
        } else {
            Ok(false)
        }
    }

    /// Force a commit with the given guard (used after replay / rebuild).
    pub(crate) fn commit_locked(&self, st: &mut WriterState) -> Result<()> {
        st.commit(&self.inner.read(), CommitKind::Durable)
    }

    /// (applied, committed, pending).
    pub(crate) fn lag(&self) -> (u64, u64, usize) {
        let st = self.state.lock();
        (st.applied_seq, st.committed_seq, st.pending)
    }

    /// Number of searchable documents (the overlay's changes included) and
    /// segments of the committed reader.
    pub(crate) fn doc_stats(&self) -> (u64, usize) {
        self.overlay.doc_stats()
    }

    /// Drop the resident pages of the index files mapped for reading (see
    /// `mapped`: the maintenance thread, while the store is written). Returns
    /// how many files are mapped.
    pub(crate) fn release_mapped_pages(&self) -> usize {
        self.inner.read().dir.release_mapped_pages()
    }

    /// Also release them once every `mapped::RELEASE_EVERY_WRITTEN` bytes the index writes.
    pub(crate) fn release_mapped_pages_while_writing(&self) {
        let every = mapped::RELEASE_EVERY_WRITTEN;
        self.inner
            .read()
            .dir
            .release_mapped_pages_every_written(every);
    }

    /// Segments in the last commit on disk (the reader may still show an older view:
    /// tantivy merges in the background and the reader reloads only on commit).
    pub(crate) fn committed_segments(&self) -> Result<usize> {
        Ok(self
            .inner
            .read()
            .index
            .searchable_segment_ids()
            .dep()?
            .len())
    }

    /// Merge all segments into one (used by `optimize(aggressive)`).
    pub(crate) fn merge_all(&self) -> Result<()> {
        let mut st = self.state.lock();
        st.commit(&self.inner.read(), CommitKind::Durable)?;
        let ids = self.inner.read().index.searchable_segment_ids().dep()?;
        if ids.len() > 1 {
            st.writer()?
                .merge(&ids)
                .wait()
                .map_err(|e| Error::index_by(format!("merge failed: {e}"), e))?;
        }
        st.commit(&self.inner.read(), CommitKind::Durable)?;
        // Drop files no longer referenced by any segment.
        let _ = st.writer()?.garbage_collect_files().wait();
        Ok(())
    }
}
