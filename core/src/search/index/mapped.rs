//! The index's files, memory-mapped for reading, with a way to let go of
//! their resident pages.
//!
//! tantivy reads segment files through `mmap`: every page a search or a merge
//! touches stays mapped into the process, and counts in its resident memory,
//! until the segment is dropped. A background merge reads every source
//! segment whole, so during the merges of a large ingest tens of MiB of index
//! pages were resident at once (measured: 48 MiB of the 148 MiB peak of a
//! 1M short-episode ingest; docs/benchmarks/footprint.md, *Sixth pass*),
//! although the kernel keeps the same pages in its page cache anyway.
//!
//! [`MappedFiles`] maps the files itself (as tantivy's `MmapDirectory` does:
//! read-only, shared, one mapping per file while anything uses it) and keeps
//! a weak reference to each mapping, so that [`MappedFiles::release`] can
//! drop the mapped pages (`madvise(MADV_DONTNEED)`) while the store is
//! written. The files are immutable once written and mapped read-only, so the
//! next read of a released page maps the same bytes again from the page cache
//! (a minor fault); nothing is lost or changed.
//!
//! The maintenance thread releases them once per tick, but a merge can read
//! its sources faster than that, and the tick waits while the thread is
//! itself committing: at the peak of a 1M-episode `low_memory` ingest 16 MiB
//! of index pages were mapped. So the files the index *writes* (a merge
//! writes about as many bytes as it reads) also release the mappings, once
//! every [`RELEASE_EVERY_WRITTEN`] bytes ([`MappedFiles::note_written`]).
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tantivy::directory::error::OpenReadError;
use tantivy::directory::{FileHandle, OwnedBytes};

/// One read-only mapping of a whole file.
struct Mapping(memmap2::Mmap);

/// The bytes of a [`Mapping`], shared by every reader of the file.
struct MappedBytes(Arc<Mapping>);

impl Deref for MappedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0.0
    }
}

// SAFETY: the bytes live in the mapping, which the `Arc` keeps alive and in
// place however the `MappedBytes` moves; `Deref` always returns that address.
unsafe impl stable_deref_trait::StableDeref for MappedBytes {}

/// Bytes written to new index files between two releases of the mapped
/// pages, when the store releases memory while it is written (see the module
/// docs): it bounds what a merge keeps mapped to about this much of its
/// sources, at one `madvise` per mapped file per 2 MiB written.
pub(crate) const RELEASE_EVERY_WRITTEN: u64 = 2 << 20;

/// The mappings of one index folder (shared by every clone of its directory).
#[derive(Default)]
pub(super) struct MappedFiles {
    maps: Mutex<HashMap<PathBuf, Weak<Mapping>>>,
    /// Release after this many bytes written (0: only when asked).
    release_every: AtomicU64,
    /// Bytes written to new index files so far.
    written: AtomicU64,
}

impl std::fmt::Debug for MappedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFiles")
            .field("files", &self.maps.lock().len())
            .finish()
    }
}

impl MappedFiles {
    /// A read handle on `full_path`: its mapping if one is alive, else a new one.
    pub(super) fn open(&self, full_path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let mut maps = self.maps.lock();
        if let Some(m) = maps.get(full_path).and_then(Weak::upgrade) {
            return Ok(Arc::new(OwnedBytes::new(MappedBytes(m))));
        }
        let wrap = |e: io::Error| OpenReadError::wrap_io_error(e, full_path.to_owned());
        let file = File::open(full_path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                OpenReadError::FileDoesNotExist(full_path.to_owned())
            } else {
                wrap(e)
            }
        })?;
        if file.metadata().map_err(wrap)?.len() == 0 {
            // An empty file cannot be mapped.
            return Ok(Arc::new(OwnedBytes::empty()));
        }
        // SAFETY: a read-only shared mapping of a file tantivy wrote whole and
        // never writes again (segment files are immutable; they are deleted,
        // never truncated, while mapped), exactly as tantivy's MmapDirectory.
        let map = Arc::new(Mapping(unsafe { memmap2::Mmap::map(&file) }.map_err(wrap)?));
        maps.retain(|_, w| w.strong_count() > 0);
        maps.insert(full_path.to_owned(), Arc::downgrade(&map));
        Ok(Arc::new(OwnedBytes::new(MappedBytes(map))))
    }

    /// From now on, [`Self::note_written`] releases the mapped pages once
    /// every `bytes` written (0: never).
    pub(super) fn release_every_written(&self, bytes: u64) {
        self.release_every.store(bytes, Ordering::Relaxed);
    }

    /// The `release_every_written` setting.
    pub(super) fn release_every(&self) -> u64 {
        self.release_every.load(Ordering::Relaxed)
    }

    /// `n` more bytes were written to a new index file (a segment the
    /// indexing thread or a merge writes): release the mapped pages when
    /// that crosses a multiple of the `release_every_written` setting.
    pub(super) fn note_written(&self, n: usize) {
        let every = self.release_every.load(Ordering::Relaxed);
        if every == 0 || n == 0 {
            return;
        }
        let n = n as u64;
        let before = self.written.fetch_add(n, Ordering::Relaxed);
        if (before + n) / every != before / every {
            self.release();
        }
    }

    /// Drop the resident pages of every live mapping (they are read again
    /// from the page cache when next touched); returns how many mappings.
    pub(super) fn release(&self) -> usize {
        let live: Vec<Arc<Mapping>> = self
            .maps
            .lock()
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for m in &live {
            release_pages(&m.0);
        }
        live.len()
    }
}

#[cfg(unix)]
fn release_pages(map: &memmap2::Mmap) {
    // SAFETY: `MADV_DONTNEED` on a read-only *shared file* mapping only
    // unmaps its pages: the next access maps the file's bytes again, which
    // are the same (the file is never written while mapped). The data is
    // never discarded, unlike on a private or anonymous mapping.
    let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
}

#[cfg(not(unix))]
fn release_pages(_map: &memmap2::Mmap) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident KiB of the mapping that holds `addr` (`/proc/self/smaps`).
    #[cfg(target_os = "linux")]
    fn resident_kib(addr: *const u8) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let a = addr as usize;
        let mut inside = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = first.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = lo <= a && a < hi;
            } else if inside && let Some(kib) = line.strip_prefix("Rss:") {
                return kib.trim().trim_end_matches(" kB").trim().parse().unwrap();
            }
        }
        panic!("no mapping holds {a:#x}");
    }

    #[test]
    fn a_released_mapping_reads_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.idx");
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let files = MappedFiles::default();
        let a = files.open(&path).unwrap();
        let b = files.open(&path).unwrap();
        assert_eq!(files.maps.lock().len(), 1, "one mapping per file");
        let before = a.read_bytes(0..bytes.len()).unwrap();
        assert_eq!(before.as_slice(), &bytes[..]);
        let sum: u64 = before.as_slice().iter().map(|&b| u64::from(b)).sum();
        assert!(sum > 0);
        #[cfg(target_os = "linux")]
        let touched = resident_kib(before.as_slice().as_ptr());
        assert_eq!(files.release(), 1);
        #[cfg(target_os = "linux")]
        {
            assert!(
                touched >= 256,
                "every page was read: {touched} KiB resident"
            );
            let released = resident_kib(before.as_slice().as_ptr());
            assert_eq!(released, 0, "released pages are no longer mapped");
        }
        assert_eq!(a.read_bytes(0..bytes.len()).unwrap().as_slice(), &bytes[..]);
        assert_eq!(
            b.read_bytes(1000..2000).unwrap().as_slice(),
            &bytes[1000..2000]
        );
        drop((a, b, before));
        assert_eq!(
            files.release(),
            0,
            "no live mapping once every reader is gone"
        );
    }

    #[test]
    fn writing_past_each_threshold_releases_the_mappings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.pos");
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let files = MappedFiles::default();
        let handle = files.open(&path).unwrap();
        let read = handle.read_bytes(0..bytes.len()).unwrap();
        let resident = || {
            #[cfg(target_os = "linux")]
            return resident_kib(read.as_slice().as_ptr());
            #[cfg(not(target_os = "linux"))]
            return 0u64;
        };
        let touch = || read.as_slice().iter().map(|&b| u64::from(b)).sum::<u64>();
        assert!(touch() > 0);
        files.note_written(10 << 20);
        let off = resident();
        files.release_every_written(1 << 20);
        files.note_written((1 << 20) - 1);
        let below = resident();
        files.note_written(1);
        let crossed = resident();
        assert!(touch() > 0);
        files.note_written(4096);
        let same_mib = resident();
        if cfg!(target_os = "linux") {
            assert!(off >= 128, "nothing released while off: {off} KiB");
            assert_eq!(below, off, "nothing released below the threshold");
            assert_eq!(crossed, 0, "released on crossing it");
            assert!(
                same_mib >= 128,
                "not again within the same MiB: {same_mib} KiB"
            );
        }
        assert_eq!(read.as_slice(), &bytes[..], "the bytes are unchanged");
    }

    #[test]
    fn missing_and_empty_files() {
        let dir = tempfile::tempdir().unwrap();
        let files = MappedFiles::default();
        assert!(matches!(
            files.open(&dir.path().join("nope")),
            Err(OpenReadError::FileDoesNotExist(_))
        ));
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(files.open(&empty).unwrap().len(), 0);
    }
}
