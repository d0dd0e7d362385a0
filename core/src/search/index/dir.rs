//! The tantivy `Directory` under the search index: an `MmapDirectory` whose
//! commits can be *soft* (visible to searches, not durable).
//!
//! tantivy 0.27 has no near-real-time search: documents become searchable
//! only through a commit, and a commit fsyncs every new segment file,
//! `.managed.json`, `meta.json` and the folder (about 16 `fdatasync` on this
//! project's disks). A search must see every acknowledged write, so under a
//! mixed load nearly every search used to pay one such commit.
//!
//! The index is derived from sled, which also keeps an `index_log` of every
//! change after the last durable index commit, so a commit made to serve a
//! search need not survive a crash. This directory gives tantivy a commit
//! that does not:
//!
//! - new files (segments written by the indexing thread or by merges) are
//!   written without fsync, and remembered as unsynced;
//! - `.managed.json` (tantivy's list of files to garbage-collect) is
//!   replaced by rename, without fsync;
//! - `meta.json` (the commit point) is kept **in memory**: the reader and
//!   the writer read it from there, the disk keeps the last durable commit.
//!   That covers every `meta.json` tantivy writes on its own, including the
//!   ones at the end of a background merge;
//! - only while the engine makes a durable commit ([`SoftSyncDirectory::durable`])
//!   does a `meta.json` write go to disk: it first fsyncs every unsynced file
//!   still present, `.managed.json` and the folder, then writes `meta.json`
//!   (fsync, rename, folder fsync) and drops the in-memory copy;
//! - files of the segments the durable `meta.json` names are never deleted
//!   while it names them (a soft commit after a merge would otherwise let
//!   tantivy's garbage collection remove them): their deletion waits for the
//!   next durable `meta.json` that no longer names them.
//!
//! So after a crash the folder holds exactly the last durable commit (plus
//! unreferenced files, removed by [`remove_orphans`] at open), and the engine
//! replays the sled log after that commit's sequence. See
//! `docs/internals.md`, *The sled/tantivy sequence protocol*.
//!
//! In an encrypted store the directory has a [`Sealer`]: every file is
//! written and read in the sealed format of `crypt` (segment files through
//! [`crate::search::index::crypt::SealingWriter`] and
//! [`crate::search::index::crypt::SealedHandle`], `meta.json` and
//! `.managed.json` sealed whole). The in-memory `meta.json` of a soft commit
//! stays plaintext (it never reaches the disk). Without a key the files are
//! tantivy's own, read through `MmapDirectory` as before.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::crypt::Sealer;
use super::mapped::MappedFiles;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, TerminatingWrite,
    WatchCallback, WatchHandle, WritePtr,
};

const META: &str = "meta.json";
const MANAGED: &str = ".managed.json";

/// Shared by every clone of one [`SoftSyncDirectory`].
#[derive(Debug, Default)]
struct State {
    /// While set, `meta.json` writes go to disk (a durable commit); otherwise
    /// they stay in memory (a soft commit, or a merge between commits).
    durable: AtomicBool,
    inner: Mutex<Files>,
}

#[derive(Debug, Default)]
struct Files {
    /// `meta.json` of the last soft commit, newer than the one on disk.
    mem_meta: Option<Vec<u8>>,
    /// Files written since the last durable `meta.json`, not yet fsynced.
    unsynced: HashSet<PathBuf>,
    /// Segment ids (32 hex digits) named by the `meta.json` on disk.
    durable_segments: HashSet<String>,
    /// Deletes tantivy asked for while the durable `meta.json` named the file.
    deferred: HashSet<PathBuf>,
}

/// An `MmapDirectory` with soft (non-durable) commits; see the module docs.
#[derive(Clone)]
pub(crate) struct SoftSyncDirectory {
    mmap: MmapDirectory,
    root: PathBuf,
    state: Arc<State>,
    /// Set in an encrypted store: every file sealed.
    sealer: Option<Arc<Sealer>>,
    /// The read mappings of the folder's files (see `mapped`).
    mapped: Arc<MappedFiles>,
}

impl std::fmt::Debug for SoftSyncDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftSyncDirectory")
            .field("root", &self.root)
            .field("sealed", &self.sealer.is_some())
            .finish_non_exhaustive()
    }
}

/// Makes `meta.json` writes durable for as long as it lives.
pub(crate) struct DurableGuard<'a>(&'a SoftSyncDirectory);

impl Drop for DurableGuard<'_> {
    fn drop(&mut self) {
        self.0.state.durable.store(false, Ordering::Release);
    }
}

impl SoftSyncDirectory {
    /// Open `root` (which must exist); sealed files when `sealer` is given.
    pub(crate) fn open(root: &Path, sealer: Option<Arc<Sealer>>) -> tantivy::Result<Self> {
        let mmap = MmapDirectory::open(root)?;
        let dir = SoftSyncDirectory {
            mmap,
            root: root.to_owned(),
            state: Arc::default(),
            sealer,
            mapped: Arc::default(),
        };
        if let Some(ids) = read_meta(root, dir.sealer.as_deref())
            .ok()
            .and_then(|m| segment_ids(&m))
        {
            dir.state.inner.lock().durable_segments = ids;
        }
        Ok(dir)
    }

    /// Drop the resident pages of the index files mapped for reading (see
    /// `mapped`); returns how many files are mapped.
    pub(crate) fn release_mapped_pages(&self) -> usize {
        self.mapped.release()
    }

    /// Also release them once every `bytes` written to new index files
    /// (0: only through [`Self::release_mapped_pages`]); see `mapped`.
    pub(crate) fn release_mapped_pages_every_written(&self, bytes: u64) {
        self.mapped.release_every_written(bytes);
    }

    /// Take over `old`'s `release_mapped_pages_every_written` setting (an
    /// index recreated in place).
    pub(crate) fn release_mapped_pages_like(&self, old: &SoftSyncDirectory) {
        self.mapped
            .release_every_written(old.mapped.release_every());
    }

    /// `meta.json` writes go to disk, durably, until the guard is dropped
    /// (the caller serialises durable commits: the index writer lock).
    pub(crate) fn durable(&self) -> DurableGuard<'_> {
        self.state.durable.store(true, Ordering::Release);
        DurableGuard(self)
    }

    fn durable_meta_write(&self, files: &mut Files, data: &[u8]) -> io::Result<()> {
        for p in files.unsynced.drain() {
            match File::open(self.root.join(&p)) {
                Ok(f) => f.sync_data()?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        match File::open(self.root.join(MANAGED)) {
            Ok(f) => f.sync_data()?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        self.sync_folder()?;
        // Temp file, fsync, rename, folder fsync: MmapDirectory's own atomic write.
        let sealed = self.seal(Path::new(META), data)?;
        self.mmap.atomic_write(Path::new(META), &sealed)?;
        self.sync_folder()?;
        files.mem_meta = None;
        files.durable_segments = segment_ids(data).unwrap_or_default();
        // Deletes that waited for this commit to stop naming their segment.
        let ready: Vec<PathBuf> = files
            .deferred
            .iter()
            .filter(|p| !names_segment(&files.durable_segments, p))
            .cloned()
            .collect();
        for p in ready {
            files.deferred.remove(&p);
            let _ = self.mmap.delete(&p);
        }
        Ok(())
    }

    /// At close, after the writer's merges ended: when the in-memory
    /// `meta.json` differs from the one on disk only by merges (the same
    /// payload, i.e. the same committed sequence), write it durably, so the
    /// merged segments replace the ones they were made of. Returns whether
    /// it wrote. A soft commit that added documents stays in memory (the
    /// next open replays the sled log after the durable one).
    pub(crate) fn persist_merges(&self) -> io::Result<bool> {
        let mut files = self.state.inner.lock();
        let Some(mem) = files.mem_meta.clone() else {
            return Ok(false);
        };
        let disk = read_meta(&self.root, self.sealer.as_deref())?;
        match (payload(&mem), payload(&disk)) {
            (Some(a), Some(b)) if a == b => {}
            _ => return Ok(false),
        }
        self.durable_meta_write(&mut files, &mem)?;
        Ok(true)
    }

    /// `data` as stored in file `path`: sealed in an encrypted store.
    fn seal<'a>(&self, path: &Path, data: &'a [u8]) -> io::Result<std::borrow::Cow<'a, [u8]>> {
        match &self.sealer {
            Some(s) => Ok(s.seal_bytes(path, data)?.into()),
            None => Ok(data.into()),
        }
    }

    fn sync_folder(&self) -> io::Result<()> {
        File::open(&self.root)?.sync_data()
    }

    /// Replace `path` by `data` with a rename, without fsync.
    fn replace_unsynced(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let mut tmp = tempfile::Builder::new().tempfile_in(&self.root)?;
        tmp.write_all(&self.seal(path, data)?)?;
        tmp.flush()?;
        tmp.into_temp_path().persist(self.root.join(path))?;
        Ok(())
    }
}

impl Directory for SoftSyncDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let handle = self.mapped.open(&self.root.join(path))?;
        match &self.sealer {
            Some(s) => {
                Ok(Arc::new(s.handle(path, handle).map_err(|e| {
                    OpenReadError::wrap_io_error(e, path.to_owned())
                })?))
            }
            None => Ok(handle),
        }
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        let mut files = self.state.inner.lock();
        if names_segment(&files.durable_segments, path) {
            // Still part of the durable commit: delete once a durable commit drops it.
            files.deferred.insert(path.to_owned());
            return Ok(());
        }
        files.unsynced.remove(path);
        drop(files);
        if let Some(s) = &self.sealer {
            s.forget(path);
        }
        self.mmap.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.mmap.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.root.join(path))
            .map_err(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    OpenWriteError::FileAlreadyExists(path.to_owned())
                } else {
                    OpenWriteError::wrap_io_error(e, path.to_owned())
                }
            })?;
        self.state.inner.lock().unsynced.insert(path.to_owned());
        let file = UnsyncedFile {
            file,
            mapped: self.mapped.clone(),
        };
        match &self.sealer {
            Some(s) => {
                let w = s
                    .writer(path, file)
                    .map_err(|e| OpenWriteError::wrap_io_error(e, path.to_owned()))?;
                Ok(BufWriter::new(Box::new(w)))
            }
            None => Ok(BufWriter::new(Box::new(file))),
        }
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        if path == Path::new(META)
            && let Some(m) = &self.state.inner.lock().mem_meta
        {
            return Ok(m.clone());
        }
        let bytes = self.mmap.atomic_read(path)?;
        match &self.sealer {
            Some(s) => s
                .open_bytes(path, &bytes)
                .map_err(|e| OpenReadError::wrap_io_error(e, path.to_owned())),
            None => Ok(bytes),
        }
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let mut files = self.state.inner.lock();
        if path == Path::new(META) {
            if self.state.durable.load(Ordering::Acquire) {
                self.durable_meta_write(&mut files, data)
            } else {
                files.mem_meta = Some(data.to_vec());
                Ok(())
            }
        } else {
            // `.managed.json`: bookkeeping for garbage collection, fsynced
            // with the next durable `meta.json`.
            drop(files);
            self.replace_unsynced(path, data)
        }
    }

    fn sync_directory(&self) -> io::Result<()> {
        // The folder is fsynced with every durable `meta.json`, which is the
        // only point where durability is promised.
        Ok(())
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.mmap.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.mmap.watch(watch_callback)
    }
}

/// A segment file: flushed on `terminate`, fsynced only by the next durable
/// `meta.json`; what it writes counts towards releasing the mapped pages.
struct UnsyncedFile {
    file: File,
    mapped: Arc<MappedFiles>,
}

impl Write for UnsyncedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.mapped.note_written(n);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl TerminatingWrite for UnsyncedFile {
    fn terminate_ref(&mut self, _: AntiCallToken) -> io::Result<()> {
        self.file.flush()
    }
}

/// The 32-hex-digit segment id a segment file's name starts with.
fn segment_of(path: &Path) -> Option<&str> {
    let name = path.file_name()?.to_str()?;
    let id = name.get(..32)?;
    (id.bytes().all(|b| b.is_ascii_hexdigit()) && name.as_bytes().get(32) == Some(&b'.'))
        .then_some(id)
}

fn names_segment(ids: &HashSet<String>, path: &Path) -> bool {
    segment_of(path).is_some_and(|id| ids.contains(id))
}

/// Segment ids named by a `meta.json` (`None` if it does not parse).
fn segment_ids(meta: &[u8]) -> Option<HashSet<String>> {
    let v = serde_json::from_slice::<serde_json::Value>(meta).ok()?;
    let segments = v.get("segments")?.as_array()?;
    segments
        .iter()
        .map(|s| Some(s.get("segment_id")?.as_str()?.replace('-', "")))
        .collect()
}

/// The `payload` of a `meta.json` (the committed sequence), `None` if it
/// does not parse; a meta without one gives `Some(None)`.
fn payload(meta: &[u8]) -> Option<Option<String>> {
    let v = serde_json::from_slice::<serde_json::Value>(meta).ok()?;
    Some(v.get("payload").and_then(|p| p.as_str()).map(str::to_owned))
}

/// The `meta.json` on disk, unsealed with `sealer` (an encrypted store).
fn read_meta(root: &Path, sealer: Option<&Sealer>) -> io::Result<Vec<u8>> {
    let bytes = std::fs::read(root.join(META))?;
    match sealer {
        Some(s) => s.open_bytes(Path::new(META), &bytes),
        None => Ok(bytes),
    }
}

/// Whether the `meta.json` on disk is in the sealed format (`None`: no readable file).
pub(crate) fn meta_is_sealed(root: &Path) -> Option<bool> {
    std::fs::read(root.join(META))
        .ok()
        .map(|b| Sealer::looks_sealed(&b))
}

/// Remove segment files that the `meta.json` on disk does not name: after a
/// crash, what soft commits and merges wrote since the last durable commit.
/// Run before a writer opens the index (the store lock keeps everyone else out).
/// Does nothing when `meta.json` does not parse or does not unseal (the index
/// is rebuilt then).
pub(crate) fn remove_orphans(root: &Path, sealer: Option<&Sealer>) -> io::Result<usize> {
    let bytes = std::fs::read(root.join(META))?;
    let meta = match sealer {
        Some(s) => match s.open_bytes(Path::new(META), &bytes) {
            Ok(m) => m,
            Err(_) => return Ok(0),
        },
        None => bytes,
    };
    let Some(live) = segment_ids(&meta) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in std::fs::read_dir(root)? {
        let path = entry?.path();
        if let Some(id) = segment_of(&path)
            && !live.contains(id)
        {
            std::fs::remove_file(&path)?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_file_names() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(segment_of(Path::new(&format!("{id}.idx"))), Some(id));
        assert_eq!(segment_of(Path::new(&format!("{id}.12.del"))), Some(id));
        assert_eq!(segment_of(Path::new("meta.json")), None);
        assert_eq!(segment_of(Path::new(".managed.json")), None);
        assert_eq!(segment_of(Path::new(&format!("{id}x.idx"))), None);
        let meta =
            br#"{"segments":[{"segment_id":"01234567-89ab-cdef-0123-456789abcdef","max_doc":1}]}"#;
        assert!(segment_ids(meta).unwrap().contains(id));
        assert!(segment_ids(b"{\"segm").is_none());
    }

    #[test]
    fn a_sealed_directory_seals_every_file_and_reads_them_back() {
        use std::io::Write as _;

        use crate::config::EncryptionKey;

        let dir = tempfile::tempdir().unwrap();
        let sealer = Arc::new(Sealer::new(&EncryptionKey::new([9; 32]), 1 << 20));
        let d = SoftSyncDirectory::open(dir.path(), Some(sealer.clone())).unwrap();
        let id = "0123456789abcdef0123456789abcdef";
        let seg = PathBuf::from(format!("{id}.idx"));
        let text = b"plainword ".repeat(20_000);
        let mut w = d.open_write(&seg).unwrap();
        w.write_all(&text).unwrap();
        w.terminate().unwrap();
        let on_disk = std::fs::read(dir.path().join(&seg)).unwrap();
        assert!(Sealer::looks_sealed(&on_disk));
        assert!(!on_disk.windows(9).any(|w| w == b"plainword"));
        let h = d.get_file_handle(&seg).unwrap();
        assert_eq!(h.len(), text.len());
        assert_eq!(
            h.read_bytes(5..150_000).unwrap().as_slice(),
            &text[5..150_000]
        );

        // `.managed.json` and a durable `meta.json` are sealed on disk; a soft one stays in memory.
        let managed = br#"["x"]"#;
        d.atomic_write(Path::new(MANAGED), managed).unwrap();
        assert!(Sealer::looks_sealed(
            &std::fs::read(dir.path().join(MANAGED)).unwrap()
        ));
        assert_eq!(d.atomic_read(Path::new(MANAGED)).unwrap(), managed);
        let meta = br#"{"segments":[{"segment_id":"01234567-89ab-cdef-0123-456789abcdef"}]}"#;
        {
            let _durable = d.durable();
            d.atomic_write(Path::new(META), meta).unwrap();
        }
        assert_eq!(meta_is_sealed(dir.path()), Some(true));
        assert_eq!(d.atomic_read(Path::new(META)).unwrap(), meta);
        let soft = br#"{"segments":[]}"#;
        d.atomic_write(Path::new(META), soft).unwrap();
        assert_eq!(d.atomic_read(Path::new(META)).unwrap(), soft);
        assert_eq!(read_meta(dir.path(), Some(&sealer)).unwrap(), meta);

        // A segment of the durable commit is not deleted; an orphan is removed
        // against the sealed `meta.json` (and nothing against another key's view).
        d.delete(&seg).unwrap();
        assert!(dir.path().join(&seg).exists());
        let orphan = "fedcba9876543210fedcba9876543210.pos";
        std::fs::write(dir.path().join(orphan), b"x").unwrap();
        let other = Sealer::new(&EncryptionKey::new([8; 32]), 0);
        assert_eq!(remove_orphans(dir.path(), Some(&other)).unwrap(), 0);
        assert_eq!(remove_orphans(dir.path(), Some(&sealer)).unwrap(), 1);
        assert!(dir.path().join(&seg).exists());

        // Reopened: the durable segments come from the sealed `meta.json`.
        let again = SoftSyncDirectory::open(dir.path(), Some(sealer)).unwrap();
        again.delete(&seg).unwrap();
        assert!(dir.path().join(&seg).exists());
    }

    #[test]
    fn orphans_are_removed_only_against_a_readable_meta() {
        let dir = tempfile::tempdir().unwrap();
        let live = "0123456789abcdef0123456789abcdef";
        let orphan = "fedcba9876543210fedcba9876543210";
        for f in [
            format!("{live}.idx"),
            format!("{live}.3.del"),
            format!("{orphan}.idx"),
            format!("{orphan}.store"),
            ".managed.json".to_owned(),
            "marker".to_owned(),
        ] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        std::fs::write(dir.path().join(META), b"{\"segm").unwrap();
        assert_eq!(remove_orphans(dir.path(), None).unwrap(), 0);
        std::fs::write(
            dir.path().join(META),
            br#"{"segments":[{"segment_id":"01234567-89ab-cdef-0123-456789abcdef"}]}"#,
        )
        .unwrap();
        assert_eq!(remove_orphans(dir.path(), None).unwrap(), 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".managed.json".to_owned(),
                format!("{live}.3.del"),
                format!("{live}.idx"),
                "marker".to_owned(),
                META.to_owned()
            ]
        );
    }
}
