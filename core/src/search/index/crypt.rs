//! Sealed index files: the format under the search index of an encrypted store.
//!
//! Every file tantivy writes (segment files, `meta.json`, `.managed.json`) is
//! stored as a 24-byte header followed by chunks of at most 64 KiB of
//! plaintext, each sealed with XChaCha20-Poly1305 (ciphertext, then its
//! 16-byte tag):
//!
//! ```text
//! header: "MSIX" | version 1 | log2(chunk size) = 16 | 0 0 | salt (16 random bytes)
//! chunk i: XChaCha20-Poly1305(file key, nonce = salt ‖ u64le(i | final << 63),
//!                             aad = header, plaintext i)
//! ```
//!
//! - The **file key** is HKDF-SHA256 of the store key (salt
//!   `"memstrata index v1"`), with the file's name as info: a chunk moved to
//!   another file does not authenticate there.
//! - The **nonce** holds the chunk's index and whether it is the last one:
//!   chunks cannot be reordered, and cutting a file at a chunk boundary (or
//!   appending to it) leaves a last chunk not sealed as last. The header, with
//!   the chunk size, is the associated data of every chunk.
//! - The **salt** is drawn from the operating system for every file written,
//!   so the rewrites of `meta.json` and `.managed.json` never reuse a nonce,
//!   and a chunk of an older version of a file does not authenticate in a newer one.
//!
//! The plaintext length follows from the file's size (every chunk but the
//! last is full), so a read of `start..end` decrypts only the chunks it
//! touches: tantivy's random reads stay random reads. Decrypted chunks and
//! multi-chunk ranges are kept in a bounded cache ([`ChunkCache`]). A chunk
//! that fails authentication is an `io::Error` whose text carries
//! [`crate::error::INDEX_SEAL_BROKEN`], which the engine reports as `CORRUPTED`.
//!
//! What stays visible: file names (segment ids, tantivy's component
//! extensions), sizes (the plaintext size to within the 40 bytes of header
//! and tag per 64 KiB) and times. See `docs/security.md`.

use std::collections::HashMap;
use std::io::{self, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use parking_lot::Mutex;
use tantivy::HasLen;
use tantivy::directory::{AntiCallToken, FileHandle, OwnedBytes, TerminatingWrite};

use super::chunk_cache::{ChunkCache, Key};
use crate::config::EncryptionKey;
use crate::error::INDEX_SEAL_BROKEN;
use crate::storage::kdf::{hkdf_expand, hkdf_extract};

const MAGIC: [u8; 4] = *b"MSIX";
const VERSION: u8 = 1;
/// 64 KiB of plaintext per chunk.
const CHUNK_LOG2: u8 = 16;
const HEADER: usize = 24;
const TAG: usize = 16;
const SALT: usize = 16;
const FINAL: u64 = 1 << 63;
/// HKDF salt of the index key: binds file keys to this use of the store key.
const KDF_SALT: &[u8] = b"memstrata index v1";

/// The error of a sealed file that does not decrypt: `InvalidData`, with
/// [`INDEX_SEAL_BROKEN`] in its text (see `FromDep<TantivyError>`).
fn broken(name: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{INDEX_SEAL_BROKEN}: {}: {what}", name.display()),
    )
}

fn key_name(name: &Path) -> String {
    name.to_string_lossy().into_owned()
}

/// Keys and decrypted-data cache of one encrypted index (all its files).
pub(crate) struct Sealer {
    /// HKDF pseudo-random key: file keys are expanded from it.
    prk: [u8; 32],
    cache: ChunkCache,
    ids: Mutex<FileIds>,
}

/// Cache ids per (file name, salt), and the last id given.
#[derive(Default)]
struct FileIds {
    ids: HashMap<(String, [u8; SALT]), u32>,
    last: u32,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl Drop for Sealer {
    fn drop(&mut self) {
        self.prk.fill(0);
        std::hint::black_box(&self.prk);
    }
}

/// A file's header, parsed.
#[derive(Clone, Copy)]
struct Header {
    bytes: [u8; HEADER],
    chunk_log2: u8,
}

impl Header {
    fn fresh() -> io::Result<Self> {
        let mut bytes = [0u8; HEADER];
        bytes[..4].copy_from_slice(&MAGIC);
        bytes[4] = VERSION;
        bytes[5] = CHUNK_LOG2;
        getrandom::fill(&mut bytes[8..]).map_err(|e| {
            io::Error::other(format!(
                "no operating-system randomness for an index file salt: {e}"
            ))
        })?;
        Ok(Header {
            bytes,
            chunk_log2: CHUNK_LOG2,
        })
    }

    fn parse(name: &Path, bytes: &[u8]) -> io::Result<Self> {
        let Some(h) = bytes.get(..HEADER) else {
            return Err(broken(name, "shorter than a sealed file's header"));
        };
        if h[..4] != MAGIC {
            return Err(broken(
                name,
                "not a sealed index file (an index written without the encryption key?)",
            ));
        }
        if h[4] != VERSION || !(12..=20).contains(&h[5]) {
            return Err(broken(
                name,
                format!("unknown sealed format {} / chunk size 2^{}", h[4], h[5]),
            ));
        }
        let mut b = [0u8; HEADER];
        b.copy_from_slice(h);
        Ok(Header {
            bytes: b,
            chunk_log2: h[5],
        })
    }

    fn salt(&self) -> [u8; SALT] {
        let mut s = [0u8; SALT];
        s.copy_from_slice(&self.bytes[8..]);
        s
    }

    fn chunk(&self) -> usize {
        1 << self.chunk_log2
    }

    fn nonce(&self, n: u64, last: bool) -> XNonce {
        let mut b = [0u8; 24];
        b[..SALT].copy_from_slice(&self.bytes[8..]);
        b[SALT..].copy_from_slice(&(n | if last { FINAL } else { 0 }).to_le_bytes());
        XNonce::from(b)
    }

    /// (plaintext length, chunk count) of a sealed file of `file_len` bytes.
    fn layout(&self, name: &Path, file_len: usize) -> io::Result<(usize, u64)> {
        let sealed = self.chunk() + TAG;
        let body = file_len.saturating_sub(HEADER);
        let n = body.div_ceil(sealed).max(1);
        let last = body.saturating_sub((n - 1) * sealed);
        if body < TAG || last < TAG {
            return Err(broken(
                name,
                format!("a sealed file cannot be {file_len} bytes long (truncated?)"),
            ));
        }
        Ok(((n - 1) * self.chunk() + last - TAG, n as u64))
    }
}

impl Sealer {
    /// The sealer of an index under `key`, caching up to `cache_bytes` of decrypted data.
    pub(crate) fn new(key: &EncryptionKey, cache_bytes: usize) -> Self {
        Sealer {
            prk: hkdf_extract(KDF_SALT, key.bytes()),
            cache: ChunkCache::new(cache_bytes),
            ids: Mutex::new(FileIds::default()),
        }
    }

    fn file_cipher(&self, name: &Path) -> XChaCha20Poly1305 {
        let mut k = [0u8; 32];
        hkdf_expand(&self.prk, key_name(name).as_bytes(), &mut k);
        let c = XChaCha20Poly1305::new((&k).into());
        k.fill(0);
        std::hint::black_box(&k);
        c
    }

    /// Whether `bytes` start like a sealed file.
    pub(crate) fn looks_sealed(bytes: &[u8]) -> bool {
        bytes.starts_with(&MAGIC)
    }

    /// A writer that seals everything written to it into `inner` as file `name`.
    pub(crate) fn writer<W: Write>(
        &self,
        name: &Path,
        mut inner: W,
    ) -> io::Result<SealingWriter<W>> {
        let header = Header::fresh()?;
        inner.write_all(&header.bytes)?;
        Ok(SealingWriter {
            inner,
            cipher: self.file_cipher(name),
            header,
            buf: Vec::with_capacity(header.chunk() + TAG),
            n: 0,
        })
    }

    /// `data` sealed as the whole content of file `name` (`meta.json`, `.managed.json`).
    pub(crate) fn seal_bytes(&self, name: &Path, data: &[u8]) -> io::Result<Vec<u8>> {
        let out = Vec::with_capacity(HEADER + data.len() + TAG * (1 + data.len() / 65536));
        let mut w = self.writer(name, out)?;
        w.write_all(data)?;
        w.finish()
    }

    /// The plaintext of a whole sealed file, every chunk checked.
    pub(crate) fn open_bytes(&self, name: &Path, bytes: &[u8]) -> io::Result<Vec<u8>> {
        let header = Header::parse(name, bytes)?;
        let (len, n) = header.layout(name, bytes.len())?;
        let cipher = self.file_cipher(name);
        let mut out = Vec::with_capacity(len);
        let sealed = header.chunk() + TAG;
        for (i, c) in bytes[HEADER..].chunks(sealed).enumerate() {
            let i = i as u64;
            let (ct, tag) = c.split_at(c.len() - TAG);
            let start = out.len();
            out.extend_from_slice(ct);
            cipher
                .decrypt_in_place_detached(
                    &header.nonce(i, i + 1 == n),
                    &header.bytes,
                    &mut out[start..],
                    Tag::from_slice(tag),
                )
                .map_err(|_| broken(name, format!("chunk {i} failed authentication")))?;
        }
        Ok(out)
    }

    /// A read handle decrypting `inner`, the sealed bytes of file `name`.
    pub(crate) fn handle(
        self: &Arc<Self>,
        name: &Path,
        inner: Arc<dyn FileHandle>,
    ) -> io::Result<SealedHandle> {
        let header = Header::parse(name, &inner.read_bytes(0..HEADER.min(inner.len()))?)?;
        let (len, n) = header.layout(name, inner.len())?;
        let id = {
            let mut f = self.ids.lock();
            let key = (key_name(name), header.salt());
            match f.ids.get(&key) {
                Some(&id) => id,
                None => {
                    f.last = f.last.wrapping_add(1);
                    let id = f.last;
                    f.ids.insert(key, id);
                    id
                }
            }
        };
        Ok(SealedHandle {
            inner,
            cipher: self.file_cipher(name),
            header,
            len,
            chunks: n,
            id,
            sealer: self.clone(),
            name: name.to_owned(),
        })
    }

    /// Forget the cache ids of a deleted file (its cached data ages out).
    pub(crate) fn forget(&self, name: &Path) {
        let name = key_name(name);
        self.ids.lock().ids.retain(|(n, _), _| *n != name);
    }

    /// (hits, misses, bytes held) of the decrypted-data cache.
    #[cfg(test)]
    pub(crate) fn cache_stats(&self) -> (u64, u64, usize) {
        self.cache.stats()
    }
}

/// Seals what is written to it, chunk by chunk, into `W`. The last chunk is
/// sealed by [`SealingWriter::finish`] or tantivy's `terminate`; a writer
/// dropped before leaves a file that does not authenticate.
pub(crate) struct SealingWriter<W> {
    inner: W,
    cipher: XChaCha20Poly1305,
    header: Header,
    /// Plaintext of the chunk being filled (sealed once it is known not to be the last).
    buf: Vec<u8>,
    n: u64,
}

impl<W: Write> SealingWriter<W> {
    fn emit(&mut self, last: bool) -> io::Result<()> {
        let tag = self
            .cipher
            .encrypt_in_place_detached(
                &self.header.nonce(self.n, last),
                &self.header.bytes,
                &mut self.buf,
            )
            .map_err(|_| io::Error::other("index chunk encryption failed"))?;
        // One write per chunk: the tag after the ciphertext.
        self.buf.extend_from_slice(&tag);
        self.inner.write_all(&self.buf)?;
        self.buf.clear();
        self.n += 1;
        Ok(())
    }

    /// Seal the last chunk and return the inner writer.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.emit(true)?;
        self.inner.flush()?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for SealingWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let chunk = self.header.chunk();
        let mut rest = data;
        while !rest.is_empty() {
            if self.buf.len() == chunk {
                // More follows: the full chunk is not the last one.
                self.emit(false)?;
            }
            let take = (chunk - self.buf.len()).min(rest.len());
            self.buf.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        // The chunk being filled can only be sealed once its end is known.
        self.inner.flush()
    }
}

impl<W: TerminatingWrite> TerminatingWrite for SealingWriter<W> {
    fn terminate_ref(&mut self, token: AntiCallToken) -> io::Result<()> {
        self.emit(true)?;
        self.inner.terminate_ref(token)
    }
}

/// A sealed file opened for reading: decrypts the chunks a read touches.
pub(crate) struct SealedHandle {
    inner: Arc<dyn FileHandle>,
    cipher: XChaCha20Poly1305,
    header: Header,
    len: usize,
    chunks: u64,
    id: u32,
    sealer: Arc<Sealer>,
    name: PathBuf,
}

impl std::fmt::Debug for SealedHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedHandle")
            .field("name", &self.name)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl SealedHandle {
    /// Chunk `n`, decrypted (from the cache, or decrypted and cached if `cache`).
    fn chunk(&self, n: u64, cache: bool) -> io::Result<Arc<[u8]>> {
        let key = Key::Chunk { id: self.id, n };
        if let Some(c) = self.sealer.cache.get(&key) {
            return Ok(c);
        }
        let sealed = self.header.chunk() + TAG;
        let start = HEADER + n as usize * sealed;
        let end = (start + sealed).min(self.inner.len());
        let ct = self.inner.read_bytes(start..end)?;
        let (body, tag) = ct.as_slice().split_at(ct.len().saturating_sub(TAG));
        let mut plain: Arc<[u8]> = Arc::from(body);
        let buf = Arc::get_mut(&mut plain)
            .ok_or_else(|| io::Error::other("a fresh chunk buffer is shared"))?;
        self.cipher
            .decrypt_in_place_detached(
                &self.header.nonce(n, n + 1 == self.chunks),
                &self.header.bytes,
                buf,
                Tag::from_slice(tag),
            )
            .map_err(|_| broken(&self.name, format!("chunk {n} failed authentication")))?;
        if cache {
            self.sealer.cache.insert(key, plain.clone());
        }
        Ok(plain)
    }

    fn read(&self, range: Range<usize>) -> io::Result<OwnedBytes> {
        if range.start >= range.end {
            return Ok(OwnedBytes::empty());
        }
        if range.end > self.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "read of {range:?} past the end ({}) of {}",
                    self.len,
                    self.name.display()
                ),
            ));
        }
        let log2 = self.header.chunk_log2;
        let (first, last) = (
            (range.start >> log2) as u64,
            ((range.end - 1) >> log2) as u64,
        );
        if first == last {
            let base = (first as usize) << log2;
            let c = self.chunk(first, true)?;
            return Ok(OwnedBytes::new(c).slice(range.start - base..range.end - base));
        }
        let key = Key::Range {
            id: self.id,
            start: range.start as u64,
            end: range.end as u64,
        };
        if let Some(r) = self.sealer.cache.get(&key) {
            return Ok(OwnedBytes::new(r));
        }
        let mut out: Arc<[u8]> = std::iter::repeat_n(0u8, range.len()).collect();
        let buf = Arc::get_mut(&mut out)
            .ok_or_else(|| io::Error::other("a fresh range buffer is shared"))?;
        for n in first..=last {
            let base = (n as usize) << log2;
            // The edge chunks are shared with neighbouring small reads: cache those.
            let c = self.chunk(n, n == first || n == last)?;
            let from = range.start.max(base);
            let to = range.end.min(base + c.len());
            buf[from - range.start..to - range.start].copy_from_slice(&c[from - base..to - base]);
        }
        self.sealer.cache.insert(key, out.clone());
        Ok(OwnedBytes::new(out))
    }
}

impl HasLen for SealedHandle {
    fn len(&self) -> usize {
        self.len
    }
}

impl FileHandle for SealedHandle {
    fn read_bytes(&self, range: Range<usize>) -> io::Result<OwnedBytes> {
        self.read(range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn hkdf_matches_rfc_5869_test_case_1() {
        let prk = hkdf_extract(&hex("000102030405060708090a0b0c"), &[0x0b; 22]);
        assert_eq!(
            prk.to_vec(),
            hex("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5")
        );
        let mut okm = [0u8; 42];
        hkdf_expand(&prk, &hex("f0f1f2f3f4f5f6f7f8f9"), &mut okm);
        assert_eq!(
            okm.to_vec(),
            hex(
                "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
            )
        );
    }

    fn sealer(b: u8, cache: usize) -> Arc<Sealer> {
        Arc::new(Sealer::new(&EncryptionKey::new([b; 32]), cache))
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn handle(s: &Arc<Sealer>, name: &str, sealed: Vec<u8>) -> io::Result<SealedHandle> {
        s.handle(Path::new(name), Arc::new(OwnedBytes::new(sealed)))
    }

    #[test]
    fn round_trips_at_every_chunk_boundary_and_reads_any_range() {
        let s = sealer(1, 1 << 20);
        let c = 1 << CHUNK_LOG2;
        for len in [0, 1, c - 1, c, c + 1, 2 * c, 3 * c + 17] {
            let plain = data(len);
            let sealed = s.seal_bytes(Path::new("f.idx"), &plain).unwrap();
            assert_eq!(sealed.len(), HEADER + len + TAG * len.div_ceil(c).max(1));
            assert_eq!(s.open_bytes(Path::new("f.idx"), &sealed).unwrap(), plain);
            let h = handle(&s, "f.idx", sealed).unwrap();
            assert_eq!(h.len(), len);
            for r in [0..len, 0..len / 2, len / 3..len, len.saturating_sub(5)..len] {
                // Twice: the second read comes from the cache.
                for _ in 0..2 {
                    assert_eq!(
                        h.read_bytes(r.clone()).unwrap().as_slice(),
                        &plain[r.clone()]
                    );
                }
            }
            if len >= c + 3 {
                let r = c - 3..c + 3;
                assert_eq!(h.read_bytes(r.clone()).unwrap().as_slice(), &plain[r]);
            }
            assert!(h.read_bytes(0..len + 1).is_err());
        }
        let (hits, misses, held) = s.cache_stats();
        assert!(hits > 0 && misses > 0 && held > 0);
    }

    #[test]
    fn streamed_writes_equal_one_shot_sealing() {
        let s = sealer(2, 0);
        let plain = data(200_000);
        let mut w = s.writer(Path::new("a.pos"), Vec::new()).unwrap();
        for piece in plain.chunks(777) {
            w.write_all(piece).unwrap();
            w.flush().unwrap();
        }
        let sealed = w.finish().unwrap();
        assert_eq!(s.open_bytes(Path::new("a.pos"), &sealed).unwrap(), plain);
        let h = handle(&s, "a.pos", sealed).unwrap();
        assert_eq!(
            h.read_bytes(123..190_000).unwrap().as_slice(),
            &plain[123..190_000]
        );
    }

    fn is_broken(e: &io::Error) -> bool {
        e.to_string().contains(INDEX_SEAL_BROKEN)
    }

    #[test]
    fn tampering_swapping_truncating_or_another_key_never_decrypts() {
        let s = sealer(3, 1 << 20);
        let c = 1 << CHUNK_LOG2;
        let plain = data(3 * c + 100);
        let sealed = s.seal_bytes(Path::new("x.idx"), &plain).unwrap();
        let chunk = c + TAG;
        let open = |b: &[u8], name: &str| s.open_bytes(Path::new(name), b);

        // Every byte of the header and of one chunk matters.
        for i in [0, 5, 8, 23, HEADER, HEADER + chunk + 9, sealed.len() - 1] {
            let mut t = sealed.clone();
            t[i] ^= 1;
            assert!(is_broken(&open(&t, "x.idx").unwrap_err()), "byte {i}");
        }
        // A lazy read touching only the tampered chunk fails; others still read.
        let mut t = sealed.clone();
        t[HEADER + chunk + 9] ^= 0x80;
        let h = handle(&s, "x.idx", t).unwrap();
        assert!(is_broken(&h.read_bytes(c + 1..c + 2).unwrap_err()));
        assert_eq!(h.read_bytes(0..10).unwrap().as_slice(), &plain[..10]);
        // Two chunks swapped.
        let mut t = sealed.clone();
        let (a, b) = (HEADER..HEADER + chunk, HEADER + chunk..HEADER + 2 * chunk);
        let first = t[a.clone()].to_vec();
        t.copy_within(b.clone(), a.start);
        t[b].copy_from_slice(&first);
        assert!(open(&t, "x.idx").is_err());
        // Cut at a chunk boundary, or extended by a chunk.
        assert!(open(&sealed[..HEADER + 2 * chunk], "x.idx").is_err());
        let mut longer = sealed.clone();
        longer.extend_from_slice(&sealed[HEADER..HEADER + chunk]);
        assert!(open(&longer, "x.idx").is_err());
        // Another file name, another key, a plaintext file.
        assert!(open(&sealed, "y.idx").is_err());
        assert!(
            sealer(4, 0)
                .open_bytes(Path::new("x.idx"), &sealed)
                .is_err()
        );
        assert!(is_broken(
            &open(b"{\"segments\":[]}", "meta.json").unwrap_err()
        ));
        // An older version of the same file (another salt) does not mix with a newer one.
        let again = s.seal_bytes(Path::new("x.idx"), &plain).unwrap();
        assert_ne!(again[8..HEADER], sealed[8..HEADER]);
        let mut mixed = again.clone();
        mixed[HEADER..HEADER + chunk].copy_from_slice(&sealed[HEADER..HEADER + chunk]);
        assert!(open(&mixed, "x.idx").is_err());
        // Nothing of the plaintext shows through.
        let word = b"DistinctiveWordXyzzy";
        let text: Vec<u8> = word.iter().cycle().take(5000).copied().collect();
        let sealed = s.seal_bytes(Path::new("t"), &text).unwrap();
        assert!(!sealed.windows(word.len()).any(|w| w == word));
    }
}
