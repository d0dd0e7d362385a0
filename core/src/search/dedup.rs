//! Duplicate detection on write: the fingerprints of a text and the keys of
//! the `dedup` tree that find earlier records with the same fingerprints.
//!
//! - **Exact**: a 64-bit hash of the record's exact text (episodes: the
//!   trimmed summary and the content's JSON; knowledge: the value's JSON).
//!   A hash match is a candidate only: the caller compares the texts.
//! - **Near**: MinHash over the set of character 5-grams ("shingles") of the
//!   normalised text (lower case, every run of non-alphanumeric characters one
//!   space). [`MINHASH_BANDS`] bands of [`MINHASH_ROWS`] minima each are
//!   hashed into band keys (LSH): two texts whose shingle sets have Jaccard
//!   similarity J share a band key with probability `1 − (1 − J^3)^6`
//!   (0.98 at J = 0.8, 0.92 at 0.7, 0.55 at 0.5, 0.15 at 0.3). A candidate is then
//!   verified with the exact Jaccard similarity of the two shingle sets,
//!   against [`NEAR_JACCARD`] (0.7: measured precision and recall at 0.6,
//!   0.7 and 0.8 in docs/memory-hygiene.md).
//!
//! The hash is FNV-1a 64 with a splitmix64 finaliser, seeded: stable across
//! versions and platforms (the keys are stored). An encrypted store seeds it
//! from its key, so the stored keys are not plain hashes of user text.

use std::collections::HashSet;

/// Characters per shingle.
pub const SHINGLE_CHARS: usize = 5;
/// MinHash bands (LSH): one `dedup` key per band and record.
pub const MINHASH_BANDS: usize = 6;
/// Minima per band.
pub const MINHASH_ROWS: usize = 3;
/// Jaccard similarity of two shingle sets at or above which two texts are near-duplicates.
pub const NEAR_JACCARD: f32 = 0.7;
/// Cosine similarity of two embeddings at or above which two records are near-duplicates.
pub const NEAR_COSINE: f32 = 0.95;
/// Knowledge values whose normalised text is shorter than this are compared
/// with other keys' values only when identical, never as near-duplicates.
pub const MIN_NEAR_CHARS: usize = 16;
/// Candidates read per band (and per exact hash) at most.
pub(crate) const MAX_CANDIDATES: usize = 16;

/// What a record is, in the dedup tree (one byte of the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DupKind {
    Episode,
    Knowledge,
}

impl DupKind {
    fn byte(self) -> u8 {
        match self {
            DupKind::Episode => b'e',
            DupKind::Knowledge => b'k',
        }
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seeded 64-bit hash of `bytes` (FNV-1a, then splitmix64).
pub(crate) fn hash64(seed: u64, bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    splitmix(h)
}

/// Lower case, every run of characters that are not letters or digits one space, trimmed.
pub(crate) fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.extend(c.to_lowercase());
        } else {
            space = true;
        }
    }
    out
}

/// The hashed character shingles of a normalised text (one shingle for a text
/// shorter than [`SHINGLE_CHARS`], none for an empty one).
pub(crate) fn shingles(seed: u64, norm: &str) -> HashSet<u64> {
    let chars: Vec<(usize, char)> = norm.char_indices().collect();
    let mut out = HashSet::new();
    if chars.is_empty() {
        return out;
    }
    if chars.len() <= SHINGLE_CHARS {
        out.insert(hash64(seed, norm.as_bytes()));
        return out;
    }
    for i in 0..=chars.len() - SHINGLE_CHARS {
        let start = chars[i].0;
        let end = chars.get(i + SHINGLE_CHARS).map_or(norm.len(), |(p, _)| *p);
        out.insert(hash64(seed, &norm.as_bytes()[start..end]));
    }
    out
}

/// Jaccard similarity of two shingle sets (0 when both are empty).
pub(crate) fn jaccard(a: &HashSet<u64>, b: &HashSet<u64>) -> f32 {
    if a.is_empty() && b.is_empty() {
        return 0.0;
    }
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let inter = small.iter().filter(|h| large.contains(h)).count();
    let union = a.len() + b.len() - inter;
    inter as f32 / union as f32
}

/// The MinHash signature of a shingle set: its minimum under each of
/// `MINHASH_BANDS * MINHASH_ROWS` hash functions (empty set: none).
pub(crate) fn minima(seed: u64, shingles: &HashSet<u64>) -> Vec<u64> {
    if shingles.is_empty() {
        return Vec::new();
    }
    let n = MINHASH_BANDS * MINHASH_ROWS;
    let rows: Vec<u64> = (0..n).map(|i| splitmix(seed ^ (i as u64 + 1))).collect();
    let mut mins = vec![u64::MAX; n];
    for s in shingles {
        for (m, r) in mins.iter_mut().zip(&rows) {
            // One cheap permutation per row: the shingle's hash mixed with the row's seed.
            let h = splitmix(s ^ r);
            if h < *m {
                *m = h;
            }
        }
    }
    mins
}

/// The band hashes of a MinHash signature.
fn bands_of(seed: u64, mins: &[u64]) -> Vec<u64> {
    mins.chunks(MINHASH_ROWS)
        .enumerate()
        .map(|(b, rows)| {
            let mut bytes = Vec::with_capacity(8 * (MINHASH_ROWS + 1));
            bytes.extend_from_slice(&(b as u64).to_be_bytes());
            for r in rows {
                bytes.extend_from_slice(&r.to_be_bytes());
            }
            hash64(seed, &bytes)
        })
        .collect()
}

/// A candidate of the in-memory index is read back only when at least this
/// many of its MinHash minima equal the new text's (an estimated Jaccard
/// similarity of 7/18 = 0.39): a pair at J = 0.7 has fewer with probability
/// 0.14 %, at J = 0.8 0.002 %.
pub(crate) const MIN_EQUAL_MINIMA: usize = 7;

/// The fingerprints of one record's text.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fingerprint {
    /// Hash of the exact text (`None`: not checked for exact duplicates).
    pub exact: Option<u64>,
    /// The shingle set of the normalised text.
    pub shingles: HashSet<u64>,
    /// MinHash band hashes (empty: not checked for near-duplicates).
    pub bands: Vec<u64>,
    /// The MinHash signature the bands are cut from (empty with the bands).
    pub mins: Vec<u64>,
}

impl Fingerprint {
    /// Fingerprints of a record whose exact text is `exact` and whose searchable text is `text`.
    pub(crate) fn of(seed: u64, exact: &str, text: &str, near: bool) -> Self {
        let norm = normalise(text);
        let shingles = shingles(seed, &norm);
        let mins = if near {
            minima(seed, &shingles)
        } else {
            Vec::new()
        };
        Fingerprint {
            exact: Some(hash64(seed, exact.as_bytes())),
            bands: bands_of(seed, &mins),
            shingles,
            mins,
        }
    }
}

fn prefix(ctx: &str, kind: DupKind, sub: u8) -> Vec<u8> {
    let mut k = Vec::with_capacity(ctx.len() + 24);
    k.extend_from_slice(ctx.as_bytes());
    k.push(0);
    k.push(kind.byte());
    k.push(sub);
    k
}

/// Prefix of every dedup key of (`ctx`, `kind`).
pub(crate) fn kind_prefix(ctx: &str, kind: DupKind) -> Vec<u8> {
    let mut k = Vec::with_capacity(ctx.len() + 2);
    k.extend_from_slice(ctx.as_bytes());
    k.push(0);
    k.push(kind.byte());
    k
}

/// Prefix of the exact-hash keys of `hash`.
pub(crate) fn exact_prefix(ctx: &str, kind: DupKind, hash: u64) -> Vec<u8> {
    let mut k = prefix(ctx, kind, b'x');
    k.extend_from_slice(&hash.to_be_bytes());
    k
}

/// Prefix of the keys of band `band` with hash `hash`.
pub(crate) fn band_prefix(ctx: &str, kind: DupKind, band: usize, hash: u64) -> Vec<u8> {
    let mut k = prefix(ctx, kind, b'b');
    k.push(band as u8);
    k.extend_from_slice(&hash.to_be_bytes());
    k
}

/// The record id at the end of a dedup key whose prefix is `prefix_len` bytes long.
pub(crate) fn id_of(key: &[u8], prefix_len: usize) -> Option<String> {
    key.get(prefix_len..)
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(str::to_owned)
}

/// Every dedup key of a record `id` with fingerprint `fp`: its band keys, or
/// its exact-hash key when it has no bands (an empty normalised text). An
/// exact copy shares every band, so the bands find it too (and candidates are
/// ranked by the bands they share: exact copies first).
pub(crate) fn keys(ctx: &str, kind: DupKind, id: &str, fp: &Fingerprint) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(fp.bands.len().max(1));
    if let Some(h) = fp.exact
        && fp.bands.is_empty()
    {
        let mut k = exact_prefix(ctx, kind, h);
        k.extend_from_slice(id.as_bytes());
        out.push(k);
    }
    for (b, h) in fp.bands.iter().enumerate() {
        let mut k = band_prefix(ctx, kind, b, *h);
        k.extend_from_slice(id.as_bytes());
        out.push(k);
    }
    out
}

/// The in-memory dedup index of one context and kind (stores without other
/// writers: sled): band keys to the records holding them, derived from the
/// records, so a write adds no stored row. Ids are interned in slots.
#[derive(Debug, Default)]
pub(crate) struct MemIndex {
    /// Band key (the band's hash mixed with its number; the exact hash for a
    /// record without bands) to the slots holding it, oldest first.
    buckets: std::collections::HashMap<u64, Vec<u32>>,
    /// Slot to its record id, keys and MinHash signature (`None`: free).
    slots: Vec<Option<Slot>>,
    slot_of: std::collections::HashMap<Box<str>, u32>,
    free: Vec<u32>,
}

/// One record of a [`MemIndex`].
#[derive(Debug)]
struct Slot {
    id: Box<str>,
    keys: Box<[u64]>,
    mins: Box<[u64]>,
}

/// The in-memory keys of a fingerprint (as [`keys`]: bands, else the exact hash).
fn mem_keys(fp: &Fingerprint) -> Vec<u64> {
    if fp.bands.is_empty() {
        return fp
            .exact
            .map(|h| splitmix(h ^ 0xE8AC_7000))
            .into_iter()
            .collect();
    }
    fp.bands
        .iter()
        .enumerate()
        .map(|(b, h)| splitmix(h ^ (b as u64 + 1)))
        .collect()
}

impl MemIndex {
    /// Records held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slot_of.len()
    }

    /// Index record `id` with fingerprint `fp` (replacing its earlier keys).
    pub(crate) fn insert(&mut self, id: &str, fp: &Fingerprint) {
        self.remove(id);
        let keys = mem_keys(fp);
        if keys.is_empty() {
            return;
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        for k in &keys {
            self.buckets.entry(*k).or_default().push(slot);
        }
        self.slots[slot as usize] = Some(Slot {
            id: id.into(),
            keys: keys.into_boxed_slice(),
            mins: fp.mins.clone().into_boxed_slice(),
        });
        self.slot_of.insert(id.into(), slot);
    }

    /// Forget record `id`.
    pub(crate) fn remove(&mut self, id: &str) {
        let Some(slot) = self.slot_of.remove(id) else {
            return;
        };
        if let Some(Slot { keys, .. }) = self.slots[slot as usize].take() {
            for k in keys.iter() {
                if let Some(v) = self.buckets.get_mut(k) {
                    v.retain(|s| *s != slot);
                    if v.is_empty() {
                        self.buckets.remove(k);
                    }
                }
            }
        }
        self.free.push(slot);
    }

    /// The records sharing a key with `fp` (at most [`MAX_CANDIDATES`] per
    /// key, the oldest), with how many keys each shares, but those with fewer
    /// than [`MIN_EQUAL_MINIMA`] minima equal to `fp`'s.
    pub(crate) fn candidates(&self, fp: &Fingerprint) -> Vec<(usize, String)> {
        let mut hits: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        for k in mem_keys(fp) {
            for s in self
                .buckets
                .get(&k)
                .into_iter()
                .flatten()
                .take(MAX_CANDIDATES)
            {
                *hits.entry(*s).or_insert(0) += 1;
            }
        }
        hits.into_iter()
            .filter_map(|(s, n)| {
                let slot = self.slots[s as usize].as_ref()?;
                let equal = fp
                    .mins
                    .iter()
                    .zip(slot.mins.iter())
                    .filter(|(a, b)| a == b)
                    .count();
                (fp.mins.is_empty() || equal >= MIN_EQUAL_MINIMA).then(|| (n, slot.id.to_string()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_folds_case_and_punctuation() {
        assert_eq!(normalise("  Hello,   World!! 42 "), "hello world 42");
        assert_eq!(normalise("¡Ünïcode—ok?"), "ünïcode ok");
        assert_eq!(normalise("..."), "");
    }

    #[test]
    fn near_texts_share_a_band_and_far_texts_do_not() {
        let a = Fingerprint::of(
            0,
            "a",
            "The user prefers dark mode in every editor they use",
            true,
        );
        let b = Fingerprint::of(
            0,
            "b",
            "the user prefers dark mode in every editor they use.",
            true,
        );
        let c = Fingerprint::of(
            0,
            "c",
            "Quarterly revenue grew by eleven percent in Europe",
            true,
        );
        assert!(jaccard(&a.shingles, &b.shingles) > 0.99);
        assert!(a.bands.iter().zip(&b.bands).any(|(x, y)| x == y));
        assert!(jaccard(&a.shingles, &c.shingles) < 0.1);
        assert!(!a.bands.iter().zip(&c.bands).any(|(x, y)| x == y));
        assert_eq!(a.bands.len(), MINHASH_BANDS);
    }

    #[test]
    fn seeds_change_every_hash() {
        let a = Fingerprint::of(0, "same text", "same text here", true);
        let b = Fingerprint::of(7, "same text", "same text here", true);
        assert_ne!(a.exact, b.exact);
        assert!(a.bands.iter().zip(&b.bands).all(|(x, y)| x != y));
    }

    #[test]
    fn mem_index_finds_removes_and_reuses_slots() {
        let a = Fingerprint::of(
            0,
            "a",
            "The user prefers dark mode in every editor they use",
            true,
        );
        let b = Fingerprint::of(
            0,
            "b",
            "the user prefers dark mode in every editor they use.",
            true,
        );
        let empty = Fingerprint::of(0, "x", "...", true);
        let mut m = MemIndex::default();
        m.insert("a", &a);
        m.insert("e", &empty);
        assert_eq!(m.len(), 2);
        let c = m.candidates(&b);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].1, "a");
        assert_eq!(m.candidates(&empty)[0].1, "e");
        m.remove("a");
        assert!(m.candidates(&b).is_empty());
        m.insert("b", &b);
        m.insert("b", &b);
        assert_eq!(m.len(), 2);
        assert_eq!(m.candidates(&a)[0], (MINHASH_BANDS, "b".to_owned()));
    }

    #[test]
    fn short_and_empty_texts() {
        assert_eq!(shingles(0, "hi").len(), 1);
        assert!(shingles(0, "").is_empty());
        assert!(minima(0, &HashSet::new()).is_empty());
        assert!(bands_of(0, &[]).is_empty());
        assert_eq!(jaccard(&HashSet::new(), &HashSet::new()), 0.0);
    }
}
