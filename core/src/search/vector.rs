//! The in-memory vector index and stored embeddings.
//!
//! sled is the source of truth: an embedding is stored inside its episode or
//! knowledge record as half floats scaled by a power of two (a MessagePack
//! `bin`, so a 384-dimension vector costs 768 bytes plus 6 bytes of headers;
//! see [`VecBytes`]; records written before that hold raw `f32` and still read). The vector index
//! is derived: one contiguous int8 matrix per (layer, context), built from the
//! store the first time that context is searched with an embedding (by the
//! engine, which owns the store) and kept in step
//! with every indexed write afterwards (the same ordered write path as the
//! text index, under the index writer lock). Nothing about it is written to
//! disk, so a crash never leaves it stale: the next process rebuilds it from
//! sled. Search is exact (a scan of the matrix), which makes filters trivial
//! and is fast at agent-memory sizes; see `docs/internals.md`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use super::fusion::Fusion;
use crate::search::index::{self, IndexDoc, IndexOp, Kind};
pub(crate) use crate::storage::docs::RowFilter;
use crate::{Error, Result};

mod scan;

#[cfg(test)]
use scan::{SCAN_BLOCK, dot_i8};

/// Largest accepted embedding dimension.
pub const MAX_EMBEDDING_DIM: usize = 4096;

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

/// What the vector path filters on (episodes; knowledge rows carry defaults).
#[derive(Debug, Clone)]
pub(crate) struct RowMeta {
    pub ts_ms: i64,
    pub importance: u64,
    pub tags: Box<[String]>,
    pub participants: Box<[String]>,
}

impl RowFilter<'_> {
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
pub(crate) struct VectorSet {
    dim: usize,
    keys: Vec<String>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    meta: Vec<RowMeta>,
    pos: HashMap<String, usize>,
    /// Changes on every upsert and removal: two read guards that see the same
    /// generation see the same rows in the same places.
    generation: u64,
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

impl VectorSet {
    pub(crate) fn upsert(&mut self, key: &str, v: &[f32], meta: RowMeta) {
        self.remove(key);
        self.generation += 1;
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
        self.generation += 1;
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

    /// Bytes of int8 codes held (what a scan reads).
    pub(crate) fn code_bytes(&self) -> usize {
        self.codes.len()
    }

    /// The `depth` best rows by cosine among those `filter` accepts, best first.
    pub(crate) fn search(
        &self,
        q: &[f32],
        filter: &RowFilter<'_>,
        depth: usize,
    ) -> Vec<(String, f32)> {
        self.scan_with(q, filter, depth, |m| self.keyed(m.top(depth)))
            .unwrap_or_default()
    }

    /// `f` over this set's matrix scored for `q` under `filter`; `None` when
    /// there is nothing to scan (no rows, another dimension, depth 0).
    fn scan_with<T>(
        &self,
        q: &[f32],
        filter: &RowFilter<'_>,
        depth: usize,
        f: impl FnOnce(&scan::Matrix<'_>) -> T,
    ) -> Option<T> {
        if self.keys.is_empty() || q.len() != self.dim || depth == 0 {
            return None;
        }
        let (qc, qs) = quantize(q);
        let accept = |i: usize| filter.accepts(&self.meta[i]);
        let m = scan::Matrix {
            codes: &self.codes,
            scales: &self.scales,
            dim: self.dim,
            qc: &qc,
            qs,
            accept: (!filter.is_empty()).then_some(&accept as &(dyn Fn(usize) -> bool + Sync)),
        };
        Some(f(&m))
    }

    fn keyed(&self, top: Vec<(usize, f32)>) -> Vec<(String, f32)> {
        top.into_iter()
            .map(|(i, s)| (self.keys[i].clone(), s.clamp(-1.0, 1.0)))
            .collect()
    }

    fn row_hits(&self, top: Vec<(usize, f32)>) -> Vec<RowHit> {
        top.into_iter()
            .map(|(i, s)| RowHit(i, s, self.keys[i].clone()))
            .collect()
    }

    /// [`VectorSet::search`] as the lead of a scan that a second thread can
    /// join with [`VectorSet::join_search`] while this one runs: the rows
    /// this call scored best, for [`merge_shared`]. Uses one thread fewer
    /// than a scan alone would (the joining thread is the one left).
    pub(crate) fn lead_search(
        &self,
        q: &[f32],
        filter: &RowFilter<'_>,
        depth: usize,
        share: &ScanShare,
    ) -> Vec<RowHit> {
        self.scan_with(q, filter, depth, |m| {
            share.generation.store(self.generation, Ordering::Release);
            self.row_hits(m.top_from(depth, &share.next, m.threads().saturating_sub(1).max(1)))
        })
        .unwrap_or_default()
    }

    /// Take part in the scan [`VectorSet::lead_search`] runs on another
    /// thread with the same arguments, if it runs on these very rows (the
    /// same generation; the caller holds a read guard, so they stay): the
    /// blocks it has not taken yet, scored here. `None` when the lead has not
    /// started or the set changed since.
    pub(crate) fn join_search(
        &self,
        q: &[f32],
        filter: &RowFilter<'_>,
        depth: usize,
        share: &ScanShare,
    ) -> Option<Vec<RowHit>> {
        if share.generation.load(Ordering::Acquire) != self.generation {
            return None;
        }
        self.scan_with(q, filter, depth, |m| {
            self.row_hits(m.top_from(depth, &share.next, 1))
        })
    }
}

/// A row a shared scan kept: its place in the matrix, its score and its key
/// (read under the scanning thread's guard).
#[derive(Debug)]
pub(crate) struct RowHit(usize, f32, String);

/// The result of a shared scan: the `depth` best of the lead's rows and the
/// joiner's, best first (ties: the lower row, as one thread's scan). Both
/// scanned the same generation of the set, so their rows are comparable.
pub(crate) fn merge_shared(
    lead: Vec<RowHit>,
    joined: Option<Vec<RowHit>>,
    depth: usize,
) -> Vec<(String, f32)> {
    let mut all: Vec<RowHit> = lead
        .into_iter()
        .chain(joined.into_iter().flatten())
        .collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    all.truncate(depth);
    all.into_iter()
        .map(|RowHit(_, s, key)| (key, s.clamp(-1.0, 1.0)))
        .collect()
}

/// What the threads of one shared scan have in common: the next block to
/// take, and the generation of the rows the lead scans (0 until it starts;
/// a set's generation is never 0 once it holds a row).
#[derive(Debug, Default)]
pub(crate) struct ScanShare {
    next: AtomicUsize,
    generation: AtomicU64,
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

    /// The set of (kind, ctx): the loaded one, else one `build` fills, called
    /// with what `lock` returns held (the index writer lock: no indexed write
    /// runs during the scan, so the ops applied later line up).
    pub(crate) fn loaded<G>(
        &self,
        kind: Kind,
        ctx: &str,
        lock: impl FnOnce() -> G,
        build: impl FnOnce(&mut VectorSet) -> Result<()>,
    ) -> Result<Arc<RwLock<VectorSet>>> {
        let sc = scope(kind, ctx);
        if let Some(s) = self.sets.read().get(&sc) {
            return Ok(Arc::clone(s));
        }
        let _writer = lock();
        if let Some(s) = self.sets.read().get(&sc) {
            return Ok(Arc::clone(s));
        }
        let mut set = VectorSet::default();
        build(&mut set)?;
        let set = Arc::new(RwLock::new(set));
        self.sets.write().insert(sc, Arc::clone(&set));
        Ok(set)
    }

    /// Rows and bytes held (for status and benchmarks).
    #[allow(dead_code)]
    pub(crate) fn rows(&self) -> usize {
        self.sets.read().values().map(|s| s.read().keys.len()).sum()
    }
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
    fn a_joined_scan_runs_on_the_rows_the_lead_started_on_only() {
        let meta = || RowMeta {
            ts_ms: 0,
            importance: 5,
            tags: Box::new([]),
            participants: Box::new([]),
        };
        let mut s = VectorSet::default();
        let dim = 8;
        let n = SCAN_BLOCK * 3 + 5;
        for i in 0..n {
            let v: Vec<f32> = (0..dim)
                .map(|j| ((i * 31 + j * 7) % 13) as f32 - 6.0)
                .collect();
            s.upsert(&format!("r{i}"), &v, meta());
        }
        let q: Vec<f32> = (0..dim).map(|j| j as f32 - 3.5).collect();
        let alone = s.search(&q, &RowFilter::NONE, 40);
        // Not started: nothing to join.
        let share = ScanShare::default();
        assert!(s.join_search(&q, &RowFilter::NONE, 40, &share).is_none());
        // A joiner that comes first takes every block, the lead none: together
        // they give the result of one scan.
        share.generation.store(s.generation, Ordering::Release);
        let joined = s.join_search(&q, &RowFilter::NONE, 40, &share);
        let share2 = ScanShare::default();
        let lead = s.lead_search(&q, &RowFilter::NONE, 40, &share);
        assert!(lead.is_empty(), "the joiner took every block");
        assert_eq!(merge_shared(lead, joined, 40), alone);
        let lead = s.lead_search(&q, &RowFilter::NONE, 40, &share2);
        assert_eq!(merge_shared(lead, None, 40), alone);
        // After a change the rows may have moved: the joiner stays out.
        s.remove("r0");
        assert!(s.join_search(&q, &RowFilter::NONE, 40, &share2).is_none());
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
