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

mod mem_index;
pub(crate) use mem_index::MemIndex;

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

#[inline(always)] // in `row_minima`'s builds for each target
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
    if text.is_ascii() {
        return normalise_ascii(text.as_bytes());
    }
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        // ASCII characters without the Unicode tables: the same answers.
        let alnum = if c.is_ascii() {
            c.is_ascii_alphanumeric()
        } else {
            c.is_alphanumeric()
        };
        if alnum {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            if c.is_ascii() {
                out.push(c.to_ascii_lowercase());
            } else {
                out.extend(c.to_lowercase());
            }
        } else {
            space = true;
        }
    }
    out
}

/// Each ASCII byte's normalised form: a letter in lower case, a digit, or 0
/// for any other byte (a separator).
const FOLD: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() {
            t[b] = c.to_ascii_lowercase();
        }
        b += 1;
    }
    t
};

/// [`normalise`] of an ASCII text (most text), byte by byte without a
/// branch per byte: each letter or digit is written in its folded form, and
/// a space before it when a run of separators ends there (not at the start).
fn normalise_ascii(text: &[u8]) -> String {
    let mut out = vec![0u8; text.len() + 1];
    let (mut w, mut after_sep) = (0usize, false);
    for &b in text {
        let c = FOLD[usize::from(b & 0x7f)];
        let alnum = c != 0;
        out[w] = b' ';
        w += usize::from(alnum & after_sep & (w != 0));
        out[w] = c;
        w += usize::from(alnum);
        after_sep = !alnum;
    }
    out.truncate(w);
    // Only ASCII letters, digits and spaces were kept.
    String::from_utf8(out).unwrap_or_default()
}

/// The shingle set of a normalised text (one shingle for a text shorter than
/// [`SHINGLE_CHARS`], none for an empty one): its hashed character shingles
/// without repeats, in the order first seen (see [`Shingles`]).
pub(crate) fn shingles(seed: u64, norm: &str) -> Shingles {
    let hashes: Vec<u64> = if norm.is_ascii() {
        // One byte per character: the windows are the bytes'.
        let b = norm.as_bytes();
        if b.len() <= SHINGLE_CHARS {
            return if b.is_empty() {
                Shingles::default()
            } else {
                Shingles::of_hashes(vec![hash64(seed, b)])
            };
        }
        window_hashes(seed, b)
    } else {
        let chars: Vec<usize> = norm.char_indices().map(|(p, _)| p).collect();
        if chars.len() <= SHINGLE_CHARS {
            return Shingles::of_hashes(vec![hash64(seed, norm.as_bytes())]);
        }
        (0..=chars.len() - SHINGLE_CHARS)
            .map(|i| {
                let end = chars.get(i + SHINGLE_CHARS).copied().unwrap_or(norm.len());
                hash64(seed, &norm.as_bytes()[chars[i]..end])
            })
            .collect()
    };
    Shingles::of_hashes(hashes)
}

/// A shingle set: the distinct shingle hashes of a text, in the order first
/// seen, with the bitmap of their low bits ([`LowBits`]). Its size is known
/// without sorting the hashes: a hash whose low bits are new is new, and
/// only one whose bit is set already (a repeat, or about one in a hundred
/// others for a sentence) is looked for among those kept. A sorted list (the
/// earlier form) cost a sort of every new text's ~100 hashes, the largest
/// part of its fingerprint; the sets are the same sets. Looking a hash up
/// ([`jaccard`], only for a candidate read back) takes a sorted copy, made
/// on the first look.
#[derive(Debug, Clone, Default)]
pub(crate) struct Shingles {
    /// The distinct hashes, in the order first seen.
    list: Vec<u64>,
    /// The low bits of `list`.
    bits: LowBits,
    /// `list` sorted, once a look-up asked for it.
    sorted: std::sync::OnceLock<Box<[u64]>>,
}

impl Shingles {
    /// The set of `hashes` (repeats dropped, the first of each kept in place).
    fn of_hashes(mut hashes: Vec<u64>) -> Self {
        let mut bits = LowBits::default();
        let mut kept = 0;
        for i in 0..hashes.len() {
            let h = hashes[i];
            if !bits.set(h) || !hashes[..kept].contains(&h) {
                hashes[kept] = h;
                kept += 1;
            }
        }
        hashes.truncate(kept);
        Shingles {
            list: hashes,
            bits,
            sorted: std::sync::OnceLock::new(),
        }
    }

    /// Whether `h` is in the set.
    fn contains(&self, h: u64) -> bool {
        self.bits.has(h as u16) == 1
            && self
                .sorted
                .get_or_init(|| {
                    let mut v = self.list.clone().into_boxed_slice();
                    v.sort_unstable();
                    v
                })
                .binary_search(&h)
                .is_ok()
    }

    /// The bitmap of the shingles' low bits.
    pub(crate) fn low_bits(&self) -> &LowBits {
        &self.bits
    }

    /// The low 16 bits of each shingle (the form an in-memory index keeps a
    /// record's set in: see [`may_reach`]).
    pub(crate) fn low16(&self) -> Vec<u16> {
        self.list.iter().map(|h| *h as u16).collect()
    }

    /// The number of shingles.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The shingles, in the order first seen.
    pub(crate) fn as_slice(&self) -> &[u64] {
        &self.list
    }
}

/// The [`hash64`] of every window of `bytes` (element `i`: of
/// `&bytes[i..i + SHINGLE_CHARS]`; `bytes` holds at least one window). One
/// byte position at a time over all the windows, as plain loops the compiler
/// vectorises (as [`row_minima`]): the same integers as hashing each window
/// alone.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512dq+avx512vl",
    "x86_64+avx2",
    "aarch64+neon"
))]
fn window_hashes(seed: u64, bytes: &[u8]) -> Vec<u64> {
    let n = bytes.len() + 1 - SHINGLE_CHARS;
    let mut out = vec![0xcbf2_9ce4_8422_2325 ^ seed; n];
    for k in 0..SHINGLE_CHARS {
        for (h, b) in out.iter_mut().zip(&bytes[k..k + n]) {
            *h = (*h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    for h in out.iter_mut() {
        *h = splitmix(*h);
    }
    out
}

/// Jaccard similarity of the shingle set `a` and the shingles `b` (distinct,
/// in any order: a set's [`Shingles::as_slice`]); 0 when both are empty.
pub(crate) fn jaccard(a: &Shingles, b: &[u64]) -> f32 {
    if a.len() == 0 && b.is_empty() {
        return 0.0;
    }
    let inter = b.iter().filter(|h| a.contains(**h)).count();
    let union = a.len() + b.len() - inter;
    inter as f32 / union as f32
}

/// [`jaccard`] of `a` and `b` when it is at least `t`, else `None`, looking
/// up only as much of `b` as can still reach `t`: it stops once the
/// intersection so far plus what is left of `b` is below the least
/// intersection that gives `t` (the same `f32` division as [`jaccard`], so
/// the answer is the same whichever way it is computed). Candidates below the
/// threshold, most of them, are decided after a fraction of their shingles.
pub(crate) fn jaccard_at_least(a: &Shingles, b: &[u64], t: f32) -> Option<f32> {
    let n = a.len() + b.len();
    let need = least_intersection(a.len(), b.len(), t)?;
    let mut inter = 0usize;
    for (i, h) in b.iter().enumerate() {
        if inter + (b.len() - i) < need {
            return None;
        }
        inter += usize::from(a.contains(*h));
    }
    (inter >= need).then(|| inter as f32 / (n - inter) as f32)
}

/// The least intersection of two sets of `a` and `b` elements whose Jaccard
/// similarity (in `f32`, as [`jaccard`] divides) is at least `t`; `None`
/// when none is (an intersection is at most the smaller set).
fn least_intersection(a: usize, b: usize, t: f32) -> Option<usize> {
    let n = a + b;
    // `reaches(k)`: an intersection of k gives at least `t` (monotone in k).
    let reaches = |k: usize| n > k && (k as f32 / (n - k) as f32) >= t;
    let mut need = ((f64::from(t) * n as f64) / (1.0 + f64::from(t))).floor() as usize;
    need = need.min(n);
    while need < n && !reaches(need) {
        need += 1;
    }
    while need > 0 && reaches(need - 1) {
        need -= 1;
    }
    (reaches(need) && need <= a.min(b)).then_some(need)
}

/// Bits of a shingle's hash a [`LowBits`] map is indexed by.
const LOW_BITS: u32 = 13;

/// The low [`LOW_BITS`] bits of a set's shingles, as a bitmap (2¹³ bits, 1
/// KiB, read from the first-level cache): what [`may_reach`] looks a
/// candidate's shingles up in, made with the set ([`Shingles`]).
#[derive(Debug, Clone)]
pub(crate) struct LowBits(Box<[u64; (1 << LOW_BITS) / 64]>);

impl Default for LowBits {
    fn default() -> Self {
        LowBits(Box::new([0; (1 << LOW_BITS) / 64]))
    }
}

impl LowBits {
    /// Set the bit of `h`'s low bits; whether it was set already.
    #[inline]
    fn set(&mut self, h: u64) -> bool {
        let low = h as usize & ((1 << LOW_BITS) - 1);
        let (word, bit) = (&mut self.0[low >> 6], 1u64 << (low & 63));
        let was = *word & bit != 0;
        *word |= bit;
        was
    }

    /// 1 when a shingle of the set has the low bits of `low`, else 0.
    #[inline]
    fn has(&self, low: u16) -> usize {
        let low = usize::from(low) & ((1 << LOW_BITS) - 1);
        ((self.0[low >> 6] >> (low & 63)) & 1) as usize
    }
}

/// Whether the Jaccard similarity of a set of `a_len` shingles, whose low
/// bits are `a`, and a set of `b.len()` shingles, whose low 16 bits are `b`,
/// may be at least `t`: `false` only when it is not. The shingles of `b`
/// whose low bits are those of one of `a`'s are at least the two sets'
/// intersection (a shingle in both has the same low bits in both), and the
/// similarity grows with the intersection, so their count is a bound;
/// different shingles with the same low bits only loosen it (of a
/// candidate's shingles not in the set, about `a_len` in 8,192 are
/// counted: one in a hundred for a sentence). An in-memory index keeps its records' sets in this form, a
/// quarter of the memory of the hashes: a candidate that may reach `t` is
/// verified from its text, exactly.
pub(crate) fn may_reach(a_len: usize, a: &LowBits, b: &[u16], t: f32) -> bool {
    let Some(need) = least_intersection(a_len, b.len(), t) else {
        return false;
    };
    let mut inter = 0usize;
    let mut left = b.len();
    // Sixteen at a time, without a branch per shingle.
    for chunk in b.chunks(16) {
        if inter >= need {
            return true;
        }
        if inter + left < need {
            return false;
        }
        inter += chunk.iter().map(|l| a.has(*l)).sum::<usize>();
        left -= chunk.len();
    }
    inter >= need
}

/// An upper bound of the Jaccard similarity of two sets of `a` and `b`
/// elements (the smaller over the larger; 0 when both are empty): a
/// candidate whose bound is below [`NEAR_JACCARD`] cannot be a near-duplicate,
/// whatever its shingles. Never below [`jaccard`] of two such sets, in `f32`
/// too (the intersection is at most the smaller, the union at least the
/// larger, and rounded division is monotone).
pub(crate) fn jaccard_bound(a: usize, b: usize) -> f32 {
    let (small, large) = if a <= b { (a, b) } else { (b, a) };
    if large == 0 {
        return 0.0;
    }
    small as f32 / large as f32
}

/// The MinHash signature of a shingle set: its minimum under each of
/// `MINHASH_BANDS * MINHASH_ROWS` hash functions (empty set: none).
pub(crate) fn minima(seed: u64, shingles: &[u64]) -> Vec<u64> {
    if shingles.is_empty() {
        return Vec::new();
    }
    let rows: [u64; MINHASH_BANDS * MINHASH_ROWS] =
        std::array::from_fn(|i| splitmix(seed ^ (i as u64 + 1)));
    let mut mins = vec![u64::MAX; rows.len()];
    row_minima(shingles, &rows, &mut mins);
    mins
}

/// `mins[i]` = the minimum over `shingles` of `splitmix(shingle ^ rows[i])`
/// (one cheap permutation per row: the shingle's hash mixed with the row's
/// seed). The bulk of a fingerprint's cost: 18 mixes per shingle. One row at
/// a time, as plain loops, so the compiler vectorises it over the shingles;
/// compiled for AVX-512 (64-bit multiply and unsigned minimum in one
/// instruction each) and AVX2 besides the baseline, the version picked at run
/// time. Integer arithmetic: every build gives the same minima (the band
/// keys are stored, on PostgreSQL). Measured on the benchmark VM, 96
/// shingles: 3.1 µs (baseline), 1.05 µs (AVX2), 0.40 µs (AVX-512).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512dq+avx512vl",
    "x86_64+avx2",
    "aarch64+neon"
))]
fn row_minima(shingles: &[u64], rows: &[u64], mins: &mut [u64]) {
    for (m, &r) in mins.iter_mut().zip(rows) {
        let mut least = u64::MAX;
        for &s in shingles {
            least = least.min(splitmix(s ^ r));
        }
        *m = least;
    }
}

/// The band hashes of a MinHash signature: [`hash64`] of each band's number
/// and minima, big-endian. The bands' hashes are computed side by side, a
/// byte of each in turn (independent multiplications the processor overlaps,
/// where one hash alone waits on each), to the same integers.
fn bands_of(seed: u64, mins: &[u64]) -> Vec<u64> {
    const BYTES: usize = 8 * (MINHASH_ROWS + 1);
    if mins.len() != MINHASH_BANDS * MINHASH_ROWS {
        return mins
            .chunks(MINHASH_ROWS)
            .enumerate()
            .map(|(b, rows)| {
                let mut bytes = (b as u64).to_be_bytes().to_vec();
                for r in rows {
                    bytes.extend_from_slice(&r.to_be_bytes());
                }
                hash64(seed, &bytes)
            })
            .collect();
    }
    let mut bytes = [[0u8; BYTES]; MINHASH_BANDS];
    for (b, (band, rows)) in bytes.iter_mut().zip(mins.chunks(MINHASH_ROWS)).enumerate() {
        band[..8].copy_from_slice(&(b as u64).to_be_bytes());
        for (chunk, r) in band[8..].chunks_exact_mut(8).zip(rows) {
            chunk.copy_from_slice(&r.to_be_bytes());
        }
    }
    let mut h = [0xcbf2_9ce4_8422_2325 ^ seed; MINHASH_BANDS];
    for k in 0..BYTES {
        for (h, band) in h.iter_mut().zip(&bytes) {
            *h = (*h ^ u64::from(band[k])).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h.iter().map(|h| splitmix(*h)).collect()
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
    pub shingles: Shingles,
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
            minima(seed, shingles.as_slice())
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

#[cfg(test)]
mod fingerprint_tests;
