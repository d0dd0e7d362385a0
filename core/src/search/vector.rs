//! Host-supplied embeddings: validation, storage encoding, the derived in-memory
//! vector index, fusion with the BM25 list, and the embedder hook.
//!
//! sled is the source of truth: an embedding is stored inside its episode or
//! knowledge record as half floats scaled by a power of two (a MessagePack
//! `bin`, so a 384-dimension vector costs 768 bytes plus 6 bytes of headers;
//! see [`VecBytes`]; records written before that hold raw `f32` and still read). The vector index
//! is derived: one contiguous int8 matrix per (layer, context), built from sled
//! the first time that context is searched with an embedding and kept in step
//! with every indexed write afterwards (the same ordered write path as the
//! text index, under the index writer lock). Nothing about it is written to
//! disk, so a crash never leaves it stale: the next process rebuilds it from
//! sled. Search is exact (a scan of the matrix), which makes filters trivial
//! and is fast at agent-memory sizes; see `docs/architecture.md`.

use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::search::index::{self, IndexDoc, IndexOp, Kind};
use crate::{Error, Result, storage::codec};

/// Largest accepted embedding dimension.
pub const MAX_EMBEDDING_DIM: usize = 4096;

/// Default reciprocal-rank-fusion constant `k`.
pub const DEFAULT_RRF_K: f32 = 60.0;

/// Adaptive fusion: each list's background is its ranks `ADAPTIVE_TAIL_FROM + 1`
/// to `ADAPTIVE_PEAK_DEPTH` (see [`FusionMethod::Adaptive`]), slots past the end
/// of a shorter list counting 0; the [`FUSION_MIN_DEPTH`] a list is fetched at.
pub const ADAPTIVE_PEAK_DEPTH: usize = 50;

/// Adaptive fusion: the background starts after this many hits (the result
/// window of a default search), so the hits competing for the top 10 are
/// measured against the near misses below them.
pub const ADAPTIVE_TAIL_FROM: usize = 10;

/// Default weight of the BM25 list in fusion.
pub const DEFAULT_BM25_WEIGHT: f32 = 0.5;

/// Default weight of the vector list in fusion.
pub const DEFAULT_VECTOR_WEIGHT: f32 = 0.5;

/// Each list is fetched at depth `max(limit * FUSION_DEPTH_FACTOR, FUSION_MIN_DEPTH)` before fusion.
pub const FUSION_DEPTH_FACTOR: usize = 5;

/// See [`FUSION_DEPTH_FACTOR`].
pub const FUSION_MIN_DEPTH: usize = 50;

/// How the BM25 list and the vector list are combined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FusionMethod {
    /// The default. Each list's scores are calibrated against that list's own
    /// background, the near misses at ranks `ADAPTIVE_TAIL_FROM + 1 ..=
    /// ADAPTIVE_PEAK_DEPTH` (slots past the end of a shorter list count 0, the
    /// score of a memory that matched no word): `z = max(0, (score - μ_tail) /
    /// σ_tail)` (σ of the whole padded list when the tail is flat). Score:
    /// `bm25_weight * z_bm25 + vector_weight * z_vector`, a hit absent from a
    /// list adding 0 for it, where each list's z is first reduced by the z its
    /// best hit reaches by chance among its candidates (√(2 ln n) is about the
    /// largest of n unrelated normal scores): `√(2 ln(N / ADAPTIVE_PEAK_DEPTH))`
    /// for the vector list, the top of the context's N vectors (0 when N ≤ the
    /// depth), `√(2 ln(1 + n / ADAPTIVE_TAIL_FROM))` for a BM25 list of n ≤
    /// `ADAPTIVE_PEAK_DEPTH` hits measured against its ranks past
    /// `ADAPTIVE_TAIL_FROM`; z below the allowance counts 0. Last, the list
    /// whose best hit has the lower z is scaled by the ratio of the two best z
    /// (the more confident list keeps its full weight). A list whose best hits stand far above its own
    /// near misses (a rare word, a close paraphrase) gets large z and leads; a
    /// list that is flat, as a weak embedder's or a question-words-only BM25
    /// list is, gives every hit a small z and defers to the other. Nothing is
    /// tuned to a data set or an embedder: each query's two lists carry the
    /// evidence.
    #[default]
    Adaptive,
    /// `bm25_weight * bm25 / max_bm25 + vector_weight * max(cosine, 0)`; a hit
    /// absent from a list contributes 0 for that list.
    Linear,
    /// Reciprocal rank fusion: `bm25_weight / (k + rank_bm25) + vector_weight / (k + rank_vector)`.
    Rrf,
}

impl FusionMethod {
    /// Parse `"adaptive"`, `"linear"` or `"rrf"` (what bindings and MCP receive),
    /// naming `field` in the error.
    pub fn parse(field: &str, s: &str) -> Result<FusionMethod> {
        match s {
            "adaptive" => Ok(FusionMethod::Adaptive),
            "linear" => Ok(FusionMethod::Linear),
            "rrf" => Ok(FusionMethod::Rrf),
            other => Err(Error::invalid(
                field,
                format!("must be \"adaptive\", \"linear\" or \"rrf\", got {other:?}"),
            )),
        }
    }
}

/// Fusion settings. The default is [`FusionMethod::Adaptive`] with weights 0.5/0.5 (and `k` = 60 for RRF).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fusion {
    /// The method.
    pub method: FusionMethod,
    /// Weight of the BM25 list (finite, ≥ 0).
    pub bm25_weight: f32,
    /// Weight of the vector list (finite, ≥ 0).
    pub vector_weight: f32,
    /// RRF constant `k` (finite, > 0).
    pub rrf_k: f32,
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion {
            method: FusionMethod::Adaptive,
            bm25_weight: DEFAULT_BM25_WEIGHT,
            vector_weight: DEFAULT_VECTOR_WEIGHT,
            rrf_k: DEFAULT_RRF_K,
        }
    }
}

impl Fusion {
    fn validate(&self) -> Result<()> {
        for (field, w) in [
            ("bm25_weight", self.bm25_weight),
            ("vector_weight", self.vector_weight),
        ] {
            if !w.is_finite() || w < 0.0 {
                return Err(Error::invalid(
                    field,
                    format!("must be a finite number >= 0, got {w}"),
                ));
            }
        }
        if !self.rrf_k.is_finite() || self.rrf_k <= 0.0 {
            return Err(Error::invalid(
                "rrf_k",
                format!("must be a finite number > 0, got {}", self.rrf_k),
            ));
        }
        Ok(())
    }
}

/// The vector side of a search: an optional query embedding and how to fuse.
///
/// No embedding (and no embedder, or an empty query) → BM25 only, as before;
/// an embedding with an empty query → pure vector search (score = cosine);
/// both → fusion of the two lists, every filter applied to both before fusing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VectorQuery {
    /// The query embedding (same dimension as the context's stored vectors).
    pub embedding: Option<Vec<f32>>,
    /// Fusion settings.
    pub fusion: Fusion,
}

impl VectorQuery {
    /// A query with this embedding and the default fusion.
    pub fn embedding(embedding: Vec<f32>) -> Self {
        VectorQuery {
            embedding: Some(embedding),
            fusion: Fusion::default(),
        }
    }
    /// Set the fusion.
    #[must_use]
    pub fn fusion(mut self, fusion: Fusion) -> Self {
        self.fusion = fusion;
        self
    }
}

/// Computes embeddings for texts on behalf of the engine (see [`crate::Memory::set_embedder`]).
///
/// Returns one vector per text, in order. An error (or a panic) is reported to
/// the caller of the operation as `InvalidInput` on field `embedder`.
pub trait Embedder: Send + Sync {
    /// Embed `texts`.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

impl<F> Embedder for F
where
    F: Fn(&[&str]) -> Result<Vec<Vec<f32>>> + Send + Sync,
{
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self(texts)
    }
}

/// Call the embedder on one text, turning every failure (error, panic, wrong
/// count, bad vector) into `InvalidInput { field: "embedder" }`.
pub(crate) fn embed_one(embedder: &dyn Embedder, text: &str) -> Result<Vec<f32>> {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| embedder.embed(&[text])))
        .unwrap_or_else(|_| Err(Error::invalid("embedder", "the embedder panicked")));
    let mut out = match r {
        Ok(v) => v,
        Err(Error::InvalidInput { field, reason }) if field == "embedder" => {
            return Err(Error::invalid("embedder", reason));
        }
        Err(e) => return Err(Error::invalid("embedder", format!("embedder failed: {e}"))),
    };
    if out.len() != 1 {
        return Err(Error::invalid(
            "embedder",
            format!("returned {} vectors for 1 text", out.len()),
        ));
    }
    let v = out.pop().unwrap_or_default();
    check("embedder", &v)?;
    Ok(v)
}

/// Check an embedding: 1..=[`MAX_EMBEDDING_DIM`] finite numbers, not all zero.
pub(crate) fn check(field: &str, v: &[f32]) -> Result<()> {
    if v.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if v.len() > MAX_EMBEDDING_DIM {
        return Err(Error::limit(
            field,
            "embedding dimensions",
            MAX_EMBEDDING_DIM as u64,
            v.len() as u64,
        ));
    }
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(Error::invalid(
            field,
            format!("must hold finite numbers; element {i} is {}", v[i]),
        ));
    }
    if v.iter().all(|x| *x == 0.0) {
        return Err(Error::invalid(
            field,
            "must not be all zeros (cosine is undefined)",
        ));
    }
    Ok(())
}

/// Convert an `f64` embedding (what JSON and most bindings carry) to `f32`,
/// refusing values that do not fit.
pub fn embedding_from_f64(field: &str, v: &[f64]) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(v.len());
    for (i, x) in v.iter().enumerate() {
        let f = *x as f32;
        if !f.is_finite() {
            return Err(Error::invalid(
                field,
                format!("must hold finite numbers; element {i} is {x}"),
            ));
        }
        out.push(f);
    }
    Ok(out)
}

/// An embedding as stored, serialised as a MessagePack `bin`. Two layouts, told
/// apart by the length's parity:
///
/// - **format 1** (written now; odd length `3 + 2·dim`): `[1, k, 0]` then one
///   little-endian IEEE half float per dimension holding `v[i] / 2^k`, where
///   `k` (an `i8`) is the smallest exponent with `max |v[i]| <= 2^k`. Scaling by
///   a power of two is exact, so the only loss is rounding each scaled value
///   to 11 significant bits (relative error ≤ 2⁻¹¹ of the vector's largest
///   component, far below what the int8 index already drops), and any
///   magnitude an `f32` can hold fits. Decoding gives the same `f32`s every
///   time, so export → import → export is byte-identical.
/// - **format 0** (stores written before format 1; even length `4·dim`): raw
///   little-endian `f32`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VecBytes(pub Vec<u8>);

/// Tag of the half-float layout (the first byte of an odd-length [`VecBytes`]).
const FORMAT_F16: u8 = 1;

impl VecBytes {
    pub(crate) fn from_f32(v: &[f32]) -> Self {
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        let k: i32 = if max > 0.0 && max.is_finite() {
            (max.log2().ceil() as i32).clamp(-126, 126)
        } else {
            0
        };
        let down = pow2(-k);
        let mut b = Vec::with_capacity(3 + v.len() * 2);
        b.extend_from_slice(&[FORMAT_F16, (k as i8) as u8, 0]);
        for x in v {
            b.extend_from_slice(&half::f16::from_f32(x * down).to_le_bytes());
        }
        VecBytes(b)
    }

    pub(crate) fn to_f32(&self) -> Result<Vec<f32>> {
        let b = &self.0;
        if b.len() % 2 == 1 {
            if b.len() < 3 || b[0] != FORMAT_F16 {
                return Err(Error::corrupted(format!(
                    "stored embedding has an unknown layout (tag {}, {} bytes)",
                    b.first().copied().unwrap_or(0),
                    b.len()
                )));
            }
            let k = i32::from(b[1] as i8);
            if !(-126..=126).contains(&k) {
                return Err(Error::corrupted(format!(
                    "stored embedding has scale exponent {k}, outside -126..=126"
                )));
            }
            let up = pow2(k);
            return Ok(b[3..]
                .chunks_exact(2)
                // (Rounding up at the very top of the f32 range could overflow.)
                .map(|c| {
                    (half::f16::from_le_bytes([c[0], c[1]]).to_f32() * up)
                        .clamp(-f32::MAX, f32::MAX)
                })
                .collect());
        }
        if !b.len().is_multiple_of(4) {
            return Err(Error::corrupted(format!(
                "stored embedding has {} bytes, not a multiple of 4",
                b.len()
            )));
        }
        Ok(b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

/// `2^k` for `k` in -126..=127, exactly (the vector exponents stay in -126..=126).
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

impl Serialize for VecBytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for VecBytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = VecBytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("embedding bytes")
            }
            fn visit_bytes<E: serde::de::Error>(
                self,
                v: &[u8],
            ) -> std::result::Result<VecBytes, E> {
                Ok(VecBytes(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(
                self,
                v: Vec<u8>,
            ) -> std::result::Result<VecBytes, E> {
                Ok(VecBytes(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<VecBytes, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = a.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(VecBytes(out))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// Decode a stored embedding for the index (a damaged one is left out, never a panic).
pub(crate) fn stored_to_index(b: Option<&VecBytes>) -> Option<Arc<[f32]>> {
    b.and_then(|b| b.to_f32().ok()).map(Arc::from)
}

fn dim_key(ctx: &str) -> Vec<u8> {
    let mut k = b"vector_dim\0".to_vec();
    k.extend_from_slice(ctx.as_bytes());
    k
}

/// The embedding dimension fixed for `ctx`, if any vector was ever stored there.
pub(crate) fn dim_of(e: &Engine, ctx: &str) -> Result<Option<usize>> {
    Ok(match e.t.meta.get(dim_key(ctx))? {
        Some(v) => {
            let b: [u8; 4] = v
                .as_ref()
                .try_into()
                .map_err(|_| Error::corrupted("vector_dim record is not 4 bytes"))?;
            Some(u32::from_be_bytes(b) as usize)
        }
        None => None,
    })
}

pub(crate) fn mismatch(field: &str, ctx: &str, got: usize, fixed: usize) -> Error {
    Error::invalid(
        field,
        format!("embedding has {got} dimensions, context '{ctx}' uses {fixed}"),
    )
}

/// Check `dim` against the context's fixed dimension. Call under the index
/// writer lock (every dimension write holds it). `Ok(Some(meta_key))` means the
/// context has none yet: the caller's transaction stores it under that key.
pub(crate) fn claim_dim(e: &Engine, field: &str, ctx: &str, dim: usize) -> Result<Option<Vec<u8>>> {
    match dim_of(e, ctx)? {
        Some(fixed) if fixed == dim => Ok(None),
        Some(fixed) => Err(mismatch(field, ctx, dim, fixed)),
        None => Ok(Some(dim_key(ctx))),
    }
}

/// The value stored under a dimension key.
pub(crate) fn dim_value(dim: usize) -> [u8; 4] {
    (dim as u32).to_be_bytes()
}

/// What the vector path filters on (episodes; knowledge rows carry defaults).
#[derive(Debug, Clone)]
struct RowMeta {
    ts_ms: i64,
    importance: u64,
    tags: Box<[String]>,
    participants: Box<[String]>,
}

/// Filters of the vector list (same semantics as the text index's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowFilter<'a> {
    pub tags_all: &'a [String],
    pub participants_any: &'a [String],
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub min_importance: Option<u64>,
}

impl RowFilter<'_> {
    pub(crate) const NONE: RowFilter<'static> = RowFilter {
        tags_all: &[],
        participants_any: &[],
        since_ms: None,
        until_ms: None,
        min_importance: None,
    };

    fn is_empty(&self) -> bool {
        self.tags_all.is_empty()
            && self.participants_any.is_empty()
            && self.since_ms.is_none()
            && self.until_ms.is_none()
            && self.min_importance.is_none()
    }

    fn accepts(&self, m: &RowMeta) -> bool {
        self.since_ms.is_none_or(|s| m.ts_ms >= s)
            && self.until_ms.is_none_or(|u| m.ts_ms <= u)
            && self.min_importance.is_none_or(|i| m.importance >= i)
            && self.tags_all.iter().all(|t| m.tags.contains(t))
            && (self.participants_any.is_empty()
                || self
                    .participants_any
                    .iter()
                    .any(|p| m.participants.contains(p)))
    }
}

/// One (layer, context)'s vectors: L2-normalised, int8-quantised rows in one
/// contiguous matrix with a per-row scale.
#[derive(Debug, Default)]
struct VectorSet {
    dim: usize,
    keys: Vec<String>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    meta: Vec<RowMeta>,
    pos: HashMap<String, usize>,
}

/// Normalise `v` and quantise it to int8; returns the codes and the scale
/// (`v_normalised[i] ≈ codes[i] * scale`).
fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    // In f64: squares of large finite f32 values would overflow.
    let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let max = v.iter().fold(0f64, |m, x| m.max(f64::from(x.abs()))) / norm;
    if !norm.is_finite() || !max.is_finite() || norm <= 0.0 || max <= 0.0 {
        return (vec![0; v.len()], 0.0);
    }
    let scale = max / 127.0;
    let codes = v
        .iter()
        .map(|x| {
            ((f64::from(*x) / norm) / scale)
                .round()
                .clamp(-127.0, 127.0) as i8
        })
        .collect();
    (codes, scale as f32)
}

#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Codes are in -127..=127, so each product fits an i16: 16-bit multiplies
    // (pmullw, baseline SSE2) widened into 16 i32 lanes vectorise well, where
    // 32-bit multiplies would need SSE4.1.
    let mut acc = [0i32; 16];
    let mut ca = a.chunks_exact(16);
    let mut cb = b.chunks_exact(16);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..16 {
            acc[i] += i32::from(i16::from(x[i]) * i16::from(y[i]));
        }
    }
    let mut s: i32 = acc.iter().sum();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        s += i32::from(i16::from(*x) * i16::from(*y));
    }
    s
}

/// The same dot product written as a plain widening sum: built with AVX-512BW
/// it compiles to sign-extending loads and `vpmaddwd` on 512-bit registers
/// (pairs of 16-bit products summed into 32-bit lanes), 1.6× the throughput
/// of [`dot_i8`]'s AVX2 build on the benchmark VM; on SSE2 this form is
/// slower than [`dot_i8`], on AVX2 and SSE4.1 the two are even, so only the
/// AVX-512 build uses it. Integer arithmetic: both give the same sum.
#[inline(always)]
fn dot_i8_wide(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum()
}

/// Rows scored per [`dot_rows`] call (its output stays in L1/L2).
const SCAN_BLOCK: usize = 1024;

/// `out[j] = q · row j` for each `dim`-long row of `codes` (`out` is cleared first).
///
/// Compiled for x86-64 with AVX-512BW, with AVX2 and with SSE4.1 (and AArch64
/// NEON) besides the baseline, the version picked at run time by
/// `multiversion`: the x86-64 baseline (SSE2) has no sign-extending byte
/// loads, which made this loop 3–5× slower than the AVX2 build of the same
/// code on the benchmark VM, and the AVX-512BW build of [`dot_i8_wide`] is
/// 1.6× faster again than the AVX2 build of [`dot_i8`] there.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512bw",
    "x86_64+avx2",
    "x86_64+sse4.1",
    "aarch64+neon"
))]
fn dot_rows(q: &[i8], codes: &[i8], dim: usize, out: &mut Vec<i32>) {
    out.clear();
    multiversion::target::match_target! {
        "x86_64+avx512bw" => out.extend(codes.chunks_exact(dim).map(|row| dot_i8_wide(q, row))),
        _ => out.extend(codes.chunks_exact(dim).map(|row| dot_i8(q, row))),
    }
}

#[derive(Debug, PartialEq)]
struct Scored(f32, usize);
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scored {
    // Reversed: the heap's top is the worst kept hit.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.0.total_cmp(&self.0).then_with(|| self.1.cmp(&o.1))
    }
}

impl VectorSet {
    fn upsert(&mut self, key: &str, v: &[f32], meta: RowMeta) {
        self.remove(key);
        if self.keys.is_empty() {
            self.dim = v.len();
        }
        if v.len() != self.dim {
            // Cannot happen (the dimension is fixed per context); never index a bad row.
            return;
        }
        let (codes, scale) = quantize(v);
        self.pos.insert(key.to_owned(), self.keys.len());
        self.keys.push(key.to_owned());
        self.codes.extend_from_slice(&codes);
        self.scales.push(scale);
        self.meta.push(meta);
    }

    fn remove(&mut self, key: &str) {
        let Some(i) = self.pos.remove(key) else {
            return;
        };
        let last = self.keys.len() - 1;
        let d = self.dim;
        if i != last {
            self.codes.copy_within(last * d..(last + 1) * d, i * d);
            self.pos.insert(self.keys[last].clone(), i);
        }
        self.codes.truncate(last * d);
        self.keys.swap_remove(i);
        self.scales.swap_remove(i);
        self.meta.swap_remove(i);
    }

    /// The `depth` best rows by cosine among those `filter` accepts, best first.
    fn search(&self, q: &[f32], filter: &RowFilter<'_>, depth: usize) -> Vec<(String, f32)> {
        if self.keys.is_empty() || q.len() != self.dim || depth == 0 {
            return Vec::new();
        }
        let (qc, qs) = quantize(q);
        let unfiltered = filter.is_empty();
        let mut heap: BinaryHeap<Scored> = BinaryHeap::with_capacity(depth + 1);
        let mut dots = Vec::with_capacity(SCAN_BLOCK);
        for (b, block) in self.codes.chunks(SCAN_BLOCK * self.dim).enumerate() {
            dot_rows(&qc, block, self.dim, &mut dots);
            for (j, d) in dots.iter().enumerate() {
                let i = b * SCAN_BLOCK + j;
                if !unfiltered && !filter.accepts(&self.meta[i]) {
                    continue;
                }
                let s = *d as f32 * qs * self.scales[i];
                if heap.len() < depth {
                    heap.push(Scored(s, i));
                } else if heap.peek().is_some_and(|w| s > w.0) {
                    heap.pop();
                    heap.push(Scored(s, i));
                }
            }
        }
        let mut v = heap.into_vec();
        v.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        v.into_iter()
            .map(|Scored(s, i)| (self.keys[i].clone(), s.clamp(-1.0, 1.0)))
            .collect()
    }
}

/// What building a set needs of an episode record (`episodic::EpisodeRecord`;
/// the same field names, the others skipped by the decoder). Row metadata as
/// `episodic::index_doc` makes it.
#[derive(Deserialize)]
struct EpisodeVectorView {
    timestamp: i64,
    participants: Vec<String>,
    tags: Vec<String>,
    importance: u8,
    #[serde(default)]
    embedding: Option<VecBytes>,
}

/// What building a set needs of a knowledge record (`semantic::KnowledgeRecord`),
/// with the row metadata `semantic::index_doc` gives it.
#[derive(Deserialize)]
struct KnowledgeVectorView {
    updated_at: i64,
    #[serde(default)]
    embedding: Option<VecBytes>,
}

/// The derived vector index: loaded (layer, context) sets, keyed by the uid scope `kind\0ctx`.
#[derive(Debug, Default)]
pub(crate) struct VectorIndex {
    sets: RwLock<HashMap<String, Arc<RwLock<VectorSet>>>>,
}

fn scope(kind: Kind, ctx: &str) -> String {
    // `uid(kind, ctx, "")` is `tag\0ctx\0`.
    index::uid(kind, ctx, "")
}

fn row_meta(d: &IndexDoc) -> RowMeta {
    RowMeta {
        ts_ms: d.ts_ms,
        importance: d.importance,
        tags: d.tags.clone().into_boxed_slice(),
        participants: d.participants.clone().into_boxed_slice(),
    }
}

impl VectorIndex {
    /// Apply committed index ops to the loaded sets (call under the index writer lock,
    /// in sequence order, whether or not the text index accepted them).
    pub(crate) fn apply(&self, ops: &[IndexOp]) {
        let sets = self.sets.read();
        if sets.is_empty() {
            return;
        }
        for op in ops {
            let Ok((kind, ctx, key)) = index::parse_uid(op.uid()) else {
                continue;
            };
            let Some(set) = sets.get(&scope(kind, &ctx)) else {
                continue;
            };
            let mut set = set.write();
            match op {
                IndexOp::Upsert(d) => match &d.embedding {
                    Some(v) => set.upsert(&key, v, row_meta(d)),
                    None => set.remove(&key),
                },
                IndexOp::Delete(_) => set.remove(&key),
            }
        }
    }

    /// Whether no set is loaded (nothing to keep up to date).
    pub(crate) fn is_empty(&self) -> bool {
        self.sets.read().is_empty()
    }

    /// Whether the set of `uid`'s (kind, context) is loaded, i.e. whether
    /// [`VectorIndex::apply`] would use an op on `uid`.
    pub(crate) fn follows(&self, uid: &str) -> bool {
        // The scope is the uid up to and including its second NUL.
        let Some(end) = uid.match_indices('\0').nth(1).map(|(i, _)| i + 1) else {
            return false;
        };
        self.sets.read().contains_key(&uid[..end])
    }

    /// The set of (kind, ctx), built from sled on first use.
    fn loaded(&self, e: &Engine, kind: Kind, ctx: &str) -> Result<Arc<RwLock<VectorSet>>> {
        let sc = scope(kind, ctx);
        if let Some(s) = self.sets.read().get(&sc) {
            return Ok(Arc::clone(s));
        }
        // Under the writer lock no indexed write runs: the scan and the ops applied later line up.
        let _writer = e.index_lock();
        if let Some(s) = self.sets.read().get(&sc) {
            return Ok(Arc::clone(s));
        }
        let mut set = VectorSet::default();
        let tree = match kind {
            Kind::Episode => &e.t.episodes,
            Kind::Knowledge => &e.t.semantic,
        };
        for item in tree.scan_prefix(codec::ctx_prefix(ctx)) {
            let (k, v) = item?;
            let (_, key) = codec::split_ctx_key(&k)?;
            // Only the fields the set needs are decoded: the summary, content and
            // knowledge value are skipped, not built (and their text not extracted).
            let (emb, meta) = match kind {
                Kind::Episode => {
                    let r: EpisodeVectorView = e.codec.decode(&v)?;
                    let meta = RowMeta {
                        ts_ms: r.timestamp,
                        importance: u64::from(r.importance),
                        tags: r.tags.into_boxed_slice(),
                        participants: r.participants.into_boxed_slice(),
                    };
                    (r.embedding, meta)
                }
                Kind::Knowledge => {
                    let r: KnowledgeVectorView = e.codec.decode(&v)?;
                    let meta = RowMeta {
                        ts_ms: r.updated_at,
                        importance: 0,
                        tags: Box::new([]),
                        participants: Box::new([]),
                    };
                    (r.embedding, meta)
                }
            };
            if let Some(emb) = stored_to_index(emb.as_ref()) {
                set.upsert(&key, &emb, meta);
            }
        }
        let set = Arc::new(RwLock::new(set));
        self.sets.write().insert(sc, Arc::clone(&set));
        Ok(set)
    }

    /// The `depth` nearest keys of (kind, ctx) to `q` (already checked against the
    /// context's dimension) among rows `filter` accepts, with their cosine, best first.
    pub(crate) fn search(
        &self,
        e: &Engine,
        kind: Kind,
        ctx: &str,
        q: &[f32],
        filter: &RowFilter<'_>,
        depth: usize,
    ) -> Result<Vec<(String, f32)>> {
        // PostgreSQL with pgvector: the same exact search, in SQL over `<schema>.vectors`.
        #[cfg(feature = "postgres")]
        if let crate::storage::Store::Postgres(p) = &e.store
            && let Some(hits) = p.vector_search(kind, ctx, q, filter, depth)?
        {
            return Ok(hits);
        }
        let set = self.loaded(e, kind, ctx)?;
        let set = set.read();
        Ok(set.search(q, filter, depth))
    }

    /// Vectors held for (kind, ctx).
    pub(crate) fn rows_in(&self, e: &Engine, kind: Kind, ctx: &str) -> Result<usize> {
        Ok(self.loaded(e, kind, ctx)?.read().keys.len())
    }

    /// Rows and bytes held (for status and benchmarks).
    #[allow(dead_code)]
    pub(crate) fn rows(&self) -> usize {
        self.sets.read().values().map(|s| s.read().keys.len()).sum()
    }
}

/// One entry of a fused list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fused {
    pub key: String,
    pub score: f32,
    pub bm25_rank: Option<u32>,
    pub vector_rank: Option<u32>,
}

/// A list's background for [`FusionMethod::Adaptive`]: mean and population σ
/// of its scores at 0-based ranks `from..slots`, slots past the end counting 0;
/// when those are all equal, σ of the whole padded list (`slots` entries).
#[derive(Debug, Clone, Copy, Default)]
struct TailZ {
    mu: f32,
    sigma: f32,
    allowance: f32,
}

impl TailZ {
    fn of(list: &[(String, f32)], from: usize, slots: usize) -> Self {
        let at = |i: usize| list.get(i).map_or(0.0, |(_, s)| f64::from(*s));
        let stats = |r: std::ops::Range<usize>| {
            let n = r.len().max(1) as f64;
            let mean = r.clone().map(at).sum::<f64>() / n;
            let var = r.map(|i| (at(i) - mean).powi(2)).sum::<f64>() / n;
            (mean, var.sqrt())
        };
        let slots = slots.max(from + 1);
        let (mu, mut sigma) = stats(from..slots);
        if sigma.is_nan() || sigma <= 1e-9 {
            sigma = stats(0..slots).1;
        }
        TailZ {
            mu: mu as f32,
            sigma: sigma as f32,
            allowance: 0.0,
        }
    }

    fn apply(&self, s: f32) -> f32 {
        if self.sigma > 0.0 && self.sigma.is_finite() {
            ((s - self.mu) / self.sigma - self.allowance).max(0.0)
        } else {
            // Every slot equal: no hit stands out of the list.
            0.0
        }
    }

    /// The same, less `allowance` (see [`chance_z`]).
    fn less(self, allowance: f32) -> Self {
        TailZ { allowance, ..self }
    }
}

/// Scales for two lists whose best hits have z `b` and `v`: the list that
/// stands out more keeps its weight, the other is scaled by `min / max`.
fn relative_confidence(b: f32, v: f32) -> (f32, f32) {
    if b >= v && b > 0.0 {
        (1.0, v / b)
    } else if v > b {
        (b / v, 1.0)
    } else {
        (1.0, 1.0)
    }
}

/// About the largest z that the best of `n` unrelated candidates reaches by
/// chance: `√(2 ln n)`, 0 for `n ≤ 1`.
fn chance_z(n: f64) -> f32 {
    if n > 1.0 {
        (2.0 * n.ln()).sqrt() as f32
    } else {
        0.0
    }
}

/// Fuse a BM25 list and a vector list (each best first) into at most `limit`
/// entries; `vector_rows` is how many vectors the vector list was drawn from.
pub(crate) fn fuse(
    bm25: &[(String, f32)],
    vector: &[(String, f32)],
    vector_rows: usize,
    fusion: &Fusion,
    limit: usize,
) -> Vec<Fused> {
    let max_bm25 = bm25.iter().map(|(_, s)| *s).fold(0f32, f32::max);
    let (bm25_norm, vector_norm) = match fusion.method {
        FusionMethod::Adaptive => {
            let (depth, tail) = (ADAPTIVE_PEAK_DEPTH as f64, ADAPTIVE_TAIL_FROM as f64);
            let n_bm25 = bm25.len().min(ADAPTIVE_PEAK_DEPTH) as f64;
            let rows = vector_rows.max(vector.len()) as f64;
            (
                TailZ::of(bm25, ADAPTIVE_TAIL_FROM, ADAPTIVE_PEAK_DEPTH)
                    .less(chance_z(1.0 + n_bm25 / tail)),
                TailZ::of(vector, ADAPTIVE_TAIL_FROM, ADAPTIVE_PEAK_DEPTH)
                    .less(chance_z(rows / depth)),
            )
        }
        _ => (TailZ::default(), TailZ::default()),
    };
    // Adaptive: the list whose best hit stands out less is scaled by the ratio
    // of the two best z (each list's best hit has its largest z).
    let (bm25_scale, vector_scale) = if fusion.method == FusionMethod::Adaptive {
        let top = |l: &[(String, f32)], n: &TailZ| l.first().map_or(0.0, |(_, s)| n.apply(*s));
        relative_confidence(top(bm25, &bm25_norm), top(vector, &vector_norm))
    } else {
        (1.0, 1.0)
    };
    // Per key: (rank, score) in the BM25 list and in the vector list.
    type Ranked = Option<(u32, f32)>;
    let mut all: HashMap<&str, (Ranked, Ranked)> = HashMap::new();
    for (i, (k, s)) in bm25.iter().enumerate() {
        all.entry(k.as_str())
            .or_default()
            .0
            .get_or_insert((i as u32 + 1, *s));
    }
    for (i, (k, s)) in vector.iter().enumerate() {
        all.entry(k.as_str())
            .or_default()
            .1
            .get_or_insert((i as u32 + 1, *s));
    }
    let mut out: Vec<Fused> = all
        .into_iter()
        .map(|(k, (b, v))| {
            let score = match fusion.method {
                FusionMethod::Linear => {
                    let bs = b.map_or(
                        0.0,
                        |(_, s)| if max_bm25 > 0.0 { s / max_bm25 } else { 0.0 },
                    );
                    let vs = v.map_or(0.0, |(_, s)| s.max(0.0));
                    fusion.bm25_weight * bm25_scale * bs + fusion.vector_weight * vector_scale * vs
                }
                FusionMethod::Adaptive => {
                    let bs = b.map_or(0.0, |(_, s)| bm25_norm.apply(s));
                    let vs = v.map_or(0.0, |(_, s)| vector_norm.apply(s));
                    fusion.bm25_weight * bm25_scale * bs + fusion.vector_weight * vector_scale * vs
                }
                FusionMethod::Rrf => {
                    let r = |x: Option<(u32, f32)>, w: f32| {
                        x.map_or(0.0, |(rank, _)| w / (fusion.rrf_k + rank as f32))
                    };
                    r(b, fusion.bm25_weight) + r(v, fusion.vector_weight)
                }
            };
            Fused {
                key: k.to_owned(),
                score,
                bm25_rank: b.map(|x| x.0),
                vector_rank: v.map(|x| x.0),
            }
        })
        .collect();
    let best = |f: &Fused| {
        f.bm25_rank
            .unwrap_or(u32::MAX)
            .min(f.vector_rank.unwrap_or(u32::MAX))
    };
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| best(a).cmp(&best(b)))
            .then_with(|| a.key.cmp(&b.key))
    });
    out.truncate(limit);
    out
}

/// Depth each list is fetched at before fusion.
pub(crate) fn depth(limit: usize) -> usize {
    limit
        .saturating_mul(FUSION_DEPTH_FACTOR)
        .max(FUSION_MIN_DEPTH)
}

/// Validate a query embedding and fusion; `Ok(None)` when the context holds no vectors yet.
pub(crate) fn prepare_query(
    e: &Engine,
    ctx: &str,
    vq: &VectorQuery,
    q: &[f32],
) -> Result<Option<usize>> {
    vq.fusion.validate()?;
    check("embedding", q)?;
    match dim_of(e, ctx)? {
        Some(d) if d == q.len() => Ok(Some(d)),
        Some(d) => Err(mismatch("embedding", ctx, q.len(), d)),
        None => Ok(None),
    }
}

/// The fusion to validate even when no embedding is given (bad weights are refused early).
pub(crate) fn validate_fusion(f: &Fusion) -> Result<()> {
    f.validate()
}

/// The hit list of one search of `kind` in `ctx`, shared by episodes and knowledge.
///
/// Without a query embedding (given in `vq` or made by `embedder` from a
/// non-empty `query`): the BM25 list of `text_list(limit)`. With one and an
/// empty query: the vector list alone. With both: the BM25 list (hits that
/// matched a word) and the vector list, each `depth(limit)` deep and each
/// filtered (`text_list` by the index query, the vectors by `filter`), fused.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fused_hits(
    e: &Engine,
    kind: Kind,
    ctx: &str,
    query: &str,
    vq: &VectorQuery,
    embedder: Option<&dyn Embedder>,
    limit: usize,
    filter: &RowFilter<'_>,
    text_list: impl Fn(usize) -> Result<Vec<(String, f32)>>,
) -> Result<Vec<Fused>> {
    validate_fusion(&vq.fusion)?;
    let has_text = !query.trim().is_empty();
    let embedded;
    let embedding = match (&vq.embedding, embedder) {
        (Some(v), _) => Some(v.as_slice()),
        (None, Some(f)) if has_text => {
            embedded = embed_one(f, query)?;
            Some(embedded.as_slice())
        }
        (None, _) => None,
    };
    let ranked = |list: Vec<(String, f32)>, text: bool| -> Vec<Fused> {
        list.into_iter()
            .take(limit)
            .enumerate()
            .map(|(i, (key, score))| Fused {
                key,
                score,
                bm25_rank: (text && has_text).then_some(i as u32 + 1),
                vector_rank: (!text).then_some(i as u32 + 1),
            })
            .collect()
    };
    let Some(qv) = embedding else {
        return Ok(ranked(text_list(limit)?, true));
    };
    let depth = depth(limit);
    // The in-process sets follow other instances' writes through the index log;
    // pgvector's table holds every committed write already.
    if !e.vectors_in_sql() {
        e.sync_shared()?;
    }
    let vector_list = match prepare_query(e, ctx, vq, qv)? {
        Some(_) => e.vectors.search(e, kind, ctx, qv, filter, depth)?,
        None => Vec::new(),
    };
    if !has_text {
        return Ok(ranked(vector_list, false));
    }
    // Hits with no matching word (score 0, by recency) are not a text match.
    let mut bm25 = text_list(depth)?;
    bm25.retain(|(_, s)| *s > 0.0);
    // How many vectors the list was drawn from (the context's, filters aside);
    // pgvector's list does not say, so its own length stands in.
    let rows = if e.vectors_in_sql() {
        vector_list.len()
    } else {
        e.vectors.rows_in(e, kind, ctx)?
    };
    Ok(fuse(&bm25, &vector_list, rows, &vq.fusion, limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantized_cosine_is_close() {
        let a: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let b: Vec<f32> = (0..384)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 5.0)
            .collect();
        let exact = {
            let d: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
            let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
            d / na / nb
        };
        let (ca, sa) = quantize(&a);
        let (cb, sb) = quantize(&b);
        let approx = dot_i8(&ca, &cb) as f32 * sa * sb;
        assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
    }

    #[test]
    fn every_build_of_the_scan_gives_the_plain_integer_dot_product() {
        // The run-time pick of `dot_rows` (AVX-512BW, AVX2, SSE4.1 or baseline
        // here) against a scalar sum, codes at both ends of the range, for
        // dimensions with and without a remainder past the 16/32/64-byte chunks.
        let mut state = 0x2545_f491_u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            ((state % 255) as i32 - 127) as i8
        };
        for dim in [1, 15, 16, 17, 31, 33, 63, 64, 65, 384, 385] {
            let rows = 40;
            let mut codes: Vec<i8> = (0..rows * dim).map(|_| next()).collect();
            let mut q: Vec<i8> = (0..dim).map(|_| next()).collect();
            // Extremes: a row and the query at ±127.
            codes[..dim].fill(127);
            codes[dim..2 * dim].fill(-127);
            q[0] = -127;
            let mut out = Vec::new();
            dot_rows(&q, &codes, dim, &mut out);
            let want: Vec<i32> = codes
                .chunks_exact(dim)
                .map(|r| {
                    r.iter()
                        .zip(&q)
                        .map(|(a, b)| i32::from(*a) * i32::from(*b))
                        .sum()
                })
                .collect();
            assert_eq!(out, want, "dim {dim}");
            for (row, w) in codes.chunks_exact(dim).zip(&want) {
                assert_eq!(dot_i8(&q, row), *w, "dim {dim}");
                assert_eq!(dot_i8_wide(&q, row), *w, "dim {dim}");
            }
        }
    }

    #[test]
    fn scan_over_several_blocks_matches_exact_cosine() {
        // More rows than one scan block, a dimension that is not a multiple of 16.
        let dim = 37;
        let n = SCAN_BLOCK * 2 + 123;
        let mut state = 0x9e37_79b9_u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % 2001) as f32 / 1000.0 - 1.0
        };
        let mut s = VectorSet::default();
        let rows: Vec<Vec<f32>> = (0..n).map(|_| (0..dim).map(|_| next()).collect()).collect();
        for (i, v) in rows.iter().enumerate() {
            s.upsert(
                &format!("r{i}"),
                v,
                RowMeta {
                    ts_ms: i as i64,
                    importance: 5,
                    tags: Box::new([]),
                    participants: Box::new([]),
                },
            );
        }
        let q: Vec<f32> = (0..dim).map(|_| next()).collect();
        let cos = |v: &[f32]| {
            let d: f32 = v.iter().zip(&q).map(|(a, b)| a * b).sum();
            let nv = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            let nq = q.iter().map(|x| x * x).sum::<f32>().sqrt();
            d / nv / nq
        };
        let hits = s.search(&q, &RowFilter::NONE, 20);
        assert_eq!(hits.len(), 20);
        for (key, score) in &hits {
            let i: usize = key[1..].parse().unwrap();
            assert!(
                (score - cos(&rows[i])).abs() < 0.02,
                "{key}: {score} vs {}",
                cos(&rows[i])
            );
        }
        // The exact best row is found (int8 error is far below the gap to the runner-up here,
        // or the runner-up is within that error).
        let mut exact: Vec<(usize, f32)> = rows.iter().map(|v| cos(v)).enumerate().collect();
        exact.sort_by(|a, b| b.1.total_cmp(&a.1));
        let best: usize = hits[0].0[1..].parse().unwrap();
        assert!(exact[0].1 - cos(&rows[best]) < 0.02);
        // A filter on rows past the first block keeps only those.
        let f = RowFilter {
            since_ms: Some(SCAN_BLOCK as i64 + 10),
            ..RowFilter::NONE
        };
        let hits = s.search(&q, &f, 50);
        assert_eq!(hits.len(), 50);
        assert!(
            hits.iter()
                .all(|(k, _)| k[1..].parse::<usize>().unwrap() >= SCAN_BLOCK + 10)
        );
    }

    #[test]
    fn remove_keeps_the_matrix_consistent() {
        let mut s = VectorSet::default();
        let meta = || RowMeta {
            ts_ms: 0,
            importance: 5,
            tags: Box::new([]),
            participants: Box::new([]),
        };
        s.upsert("a", &[1.0, 0.0], meta());
        s.upsert("b", &[0.0, 1.0], meta());
        s.upsert("c", &[1.0, 1.0], meta());
        s.remove("a");
        let hits = s.search(&[0.0, 1.0], &RowFilter::NONE, 10);
        assert_eq!(hits[0].0, "b");
        assert_eq!(hits.len(), 2);
        assert_eq!(s.codes.len(), 4);
        s.upsert("b", &[1.0, 0.0], meta());
        let hits = s.search(&[1.0, 0.0], &RowFilter::NONE, 1);
        assert_eq!(hits[0].0, "b");
    }

    fn list(v: &[(&str, f32)]) -> Vec<(String, f32)> {
        v.iter().map(|(k, s)| ((*k).to_owned(), *s)).collect()
    }

    #[test]
    fn tail_z_follows_its_formula() {
        // Tail = ranks 1..4 of [4, 2, 2, (0)]: mean 4/3, σ = sqrt(8/9).
        let l = list(&[("a", 4.0), ("b", 2.0), ("c", 2.0)]);
        let z = TailZ::of(&l, 1, 4);
        let sd = (8.0f32 / 9.0).sqrt();
        assert!((z.apply(4.0) - (4.0 - 4.0 / 3.0) / sd).abs() < 1e-5);
        assert!((z.apply(2.0) - (2.0 - 4.0 / 3.0) / sd).abs() < 1e-5);
        // Below the tail's mean: floored at 0, like a hit absent from the list.
        assert_eq!(z.apply(0.5), 0.0);
        // A flat tail [1, 1]: σ of the whole list [3, 1, 1] (mean 5/3, σ sqrt(8/9)).
        let flat = TailZ::of(&list(&[("a", 3.0), ("b", 1.0), ("c", 1.0)]), 1, 3);
        assert!((flat.apply(3.0) - (3.0 - 1.0) / sd).abs() < 1e-5);
        // Every slot equal: nothing stands out.
        assert_eq!(
            TailZ::of(&list(&[("a", 3.0), ("b", 3.0)]), 0, 2).apply(3.0),
            0.0
        );
        assert_eq!(TailZ::of(&[], 10, 50).apply(1.0), 0.0);
        // The chance allowance is subtracted, and a z below it counts 0.
        assert!((z.less(1.0).apply(4.0) - ((4.0 - 4.0 / 3.0) / sd - 1.0)).abs() < 1e-5);
        assert_eq!(z.less(10.0).apply(4.0), 0.0);
        assert!((chance_z(100.0) - (2.0 * 100f64.ln()).sqrt() as f32).abs() < 1e-6);
        assert_eq!(chance_z(1.0), 0.0);
        assert_eq!(chance_z(0.5), 0.0);
        assert_eq!(relative_confidence(4.0, 2.0), (1.0, 0.5));
        assert_eq!(relative_confidence(2.0, 8.0), (0.25, 1.0));
        assert_eq!(relative_confidence(0.0, 0.0), (1.0, 1.0));
    }

    #[test]
    fn a_larger_context_asks_more_of_the_vector_list() {
        // The same vector list counts for less when it is the top 50 of
        // 100,000 vectors than of 60: its head is likelier to be chance.
        let (_, bm25, vector) = scenario(ADAPTIVE_PEAK_DEPTH + 10, 1.2, 0.5);
        let small = fuse(&bm25, &vector, 60, &Fusion::default(), 60);
        let large = fuse(&bm25, &vector, 100_000, &Fusion::default(), 60);
        let score = |l: &[Fused], k: &str| l.iter().find(|f| f.key == k).map_or(0.0, |f| f.score);
        assert!(score(&large, "k59") < score(&small, "k59"), "{large:?}");
    }

    type ScoredList = Vec<(String, f32)>;

    /// `n` keys; a BM25 list over all but the last, a vector list over all.
    fn scenario(n: usize, bm25_top: f32, vec_top: f32) -> (Vec<String>, ScoredList, ScoredList) {
        let keys: Vec<String> = (0..n).map(|i| format!("k{i:02}")).collect();
        let fav = keys[n - 1].clone();
        // The vectors' first choice is the last key (no word in common with
        // the query); k00 is their second; the rest decline slowly.
        let mut vector: Vec<(String, f32)> = vec![(fav, vec_top), (keys[0].clone(), 0.41)];
        for (i, k) in keys.iter().enumerate().take(n - 1).skip(1) {
            vector.push((k.clone(), 0.40 - i as f32 * 0.001));
        }
        // BM25 ranks k00 first; every other key matched only question words.
        let bm25 = keys
            .iter()
            .take(n - 1)
            .enumerate()
            .map(|(i, k)| {
                (
                    k.clone(),
                    if i == 0 {
                        bm25_top
                    } else {
                        1.0 - i as f32 * 0.001
                    },
                )
            })
            .collect();
        (keys, bm25, vector)
    }

    #[test]
    fn adaptive_fusion_follows_the_list_whose_best_hit_stands_out() {
        let n = ADAPTIVE_PEAK_DEPTH + 10;
        let adaptive = Fusion::default();
        assert_eq!(adaptive.method, FusionMethod::Adaptive);

        // A rare word matched one memory (BM25 10 against ~1); the vectors are
        // flat noise (their favourite only just above the rest): BM25 leads.
        let (keys, bm25, vector) = scenario(n, 10.0, 0.415);
        let top = fuse(&bm25, &vector, vector.len(), &adaptive, 3);
        assert_eq!(top[0].key, "k00", "{top:?}");
        assert_eq!(top[0].bm25_rank, Some(1));
        assert_eq!(top[0].vector_rank, Some(2));

        // Only question words matched (BM25 flat: 1.005 against ~1); the
        // vectors single out their favourite (0.9 against ~0.4): it leads.
        let (_, flat, vector) = scenario(n, 1.005, 0.9);
        let top = fuse(&flat, &vector, vector.len(), &adaptive, 3);
        assert_eq!(top[0].key, keys[n - 1], "{top:?}");
        assert_eq!(top[0].bm25_rank, None);
        // Its score is the vector side alone (absent from the BM25 list: 0).
        let vz = TailZ::of(&vector, ADAPTIVE_TAIL_FROM, ADAPTIVE_PEAK_DEPTH)
            .less(chance_z(n as f64 / ADAPTIVE_PEAK_DEPTH as f64));
        assert!((top[0].score - 0.5 * vz.apply(0.9)).abs() < 1e-4);
        // The max-normalised linear blend cannot tell a flat BM25 list from a
        // peaked one: its top still gets the full BM25 weight.
        let linear = Fusion {
            method: FusionMethod::Linear,
            ..Fusion::default()
        };
        assert_eq!(fuse(&flat, &vector, vector.len(), &linear, 1)[0].key, "k00");

        // Both stand out, BM25 far more (its top is ~780 σ above its tail, the
        // vectors' ~11 σ): the memory both rank high (k00: BM25 first, vectors
        // second) leads, and the vectors, scaled by the ratio, only break ties:
        // BM25's order follows.
        let (_, bm25, vector) = scenario(n, 10.0, 0.5);
        let top = fuse(&bm25, &vector, vector.len(), &adaptive, 2);
        assert_eq!(top[0].key, "k00", "{top:?}");
        assert_eq!(top[1].key, "k01", "{top:?}");

        // A rare word shared equally by a dozen memories the vectors rank low
        // is still a lexical signal: a short list stands out of the zeros
        // below it. Against flat vectors all twelve make the top 14.
        let (_, _, vector) = scenario(n, 1.0, 0.415);
        let tied: Vec<(String, f32)> = keys[40..52].iter().map(|k| (k.clone(), 3.0)).collect();
        let top = fuse(&tied, &vector, vector.len(), &adaptive, 14);
        let lexical = top.iter().filter(|f| f.bm25_rank.is_some()).count();
        assert_eq!(lexical, 12, "{top:?}");
    }

    #[test]
    fn adaptive_fusion_with_one_list_keeps_its_order() {
        let bm = list(&[("a", 3.0), ("b", 2.0), ("c", 1.0)]);
        let keys: Vec<String> = fuse(&bm, &[], 0, &Fusion::default(), 10)
            .into_iter()
            .map(|f| f.key)
            .collect();
        assert_eq!(keys, ["a", "b", "c"]);
        let vec = list(&[("x", 0.9), ("y", -0.2)]);
        let keys: Vec<String> = fuse(&[], &vec, vec.len(), &Fusion::default(), 10)
            .into_iter()
            .map(|f| f.key)
            .collect();
        assert_eq!(keys, ["x", "y"]);
    }

    #[test]
    fn vec_bytes_roundtrip_is_a_msgpack_bin() {
        // Exactly representable after scaling by 2^-7: decodes to the same values.
        let v: Vec<f32> = (0..384).map(|i| i as f32 * 0.25).collect();
        let enc = rmp_serde::to_vec_named(&VecBytes::from_f32(&v)).unwrap();
        // bin16 header (3) + layout header (3) + 384 half floats.
        assert_eq!(enc.len(), 3 + 3 + 768);
        let back: VecBytes = rmp_serde::from_slice(&enc).unwrap();
        assert_eq!(back.0[..3], [FORMAT_F16, 7, 0]);
        assert_eq!(back.to_f32().unwrap(), v);
    }

    #[test]
    fn half_float_storage_keeps_11_significant_bits_at_any_magnitude() {
        for magnitude in [1e-30f32, 1e-3, 1.0, 3.7, 1e4, 1e30, f32::MAX] {
            let v: Vec<f32> = (0..100)
                .map(|i| magnitude * (((i * 37 % 101) as f32 - 50.0) / 50.0))
                .collect();
            let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
            let back = VecBytes::from_f32(&v).to_f32().unwrap();
            assert_eq!(back.len(), v.len());
            for (a, b) in v.iter().zip(&back) {
                assert!(b.is_finite(), "{magnitude}: {b}");
                assert!(
                    (a - b).abs() <= max * 2f32.powi(-11),
                    "{magnitude}: {a} stored as {b}"
                );
            }
            // Decoding and re-encoding is exact: a second export equals the first.
            assert_eq!(VecBytes::from_f32(&back).to_f32().unwrap(), back);
        }
    }

    #[test]
    fn raw_f32_records_of_older_stores_still_read() {
        let v = [0.1f32, -2.5, 1e-7, 3.0];
        let legacy: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(VecBytes(legacy).to_f32().unwrap(), v);
        // Damaged bytes are an error, never a panic.
        assert!(VecBytes(vec![1, 2, 3, 4, 5, 6]).to_f32().is_err());
        assert!(VecBytes(vec![9, 0, 0, 1, 2]).to_f32().is_err());
        assert!(VecBytes(vec![FORMAT_F16, 127, 0, 1, 2]).to_f32().is_err());
        assert!(VecBytes(vec![7]).to_f32().is_err());
    }
}
