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
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::ops::Deref;
use std::path::{Path, PathBuf};
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

/// The mappings of one index folder (shared by every clone of its directory).
#[derive(Default)]
pub(super) struct MappedFiles {
    maps: Mutex<HashMap<PathBuf, Weak<Mapping>>>,
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
