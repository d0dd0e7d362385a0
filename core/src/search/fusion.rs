//! Fusion of the BM25 list and the vector list of a hybrid search: the
//! methods (adaptive, linear, reciprocal rank) and their tuning constants.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

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

/// Adaptive fusion: the vector list's weight is the store's estimate `s` (see
/// [`FusionMethod::Adaptive`]) to this power, BM25's the rest. Chosen once
/// across every evaluation set and both embedders (1.5, 1.75, 2 and 2.5
/// measured: docs/benchmarks-retrieval.md).
pub const ADAPTIVE_SHARE_POWER: f32 = 2.0;

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
    /// σ_tail)` (σ of the whole padded list when the tail is flat), a hit
    /// absent from a list adding 0 for it. Score: `2 · bm25_weight · (1 − s^p) ·
    /// z_bm25 + 2 · vector_weight · s^p · z_vector` (`p` =
    /// [`ADAPTIVE_SHARE_POWER`]), where `s` is the store's
    /// estimate of how often its vector list finds what the words find: the
    /// share of earlier hybrid searches whose BM25 best hit held most of the
    /// question's content words and whose vector best hit was that same memory
    /// (`(agreed + 1) / (such searches + 2)`, per store and record kind,
    /// saved with the store; one half in a new store). A strong embedder agrees with the
    /// lexically certain searches most of the time and gets most of the
    /// weight; a weak one, on text whose questions share words with the
    /// answers, rarely does and defers to BM25. The BM25 side is scored on the
    /// hits that matched a content word of the question (a hit that shares
    /// only stop and question words with it adds 0 for BM25; the background
    /// is still the whole list's). The list with the larger weight
    /// keeps its top `limit − round(limit · w)` among the results (those of
    /// them with z > 0), `w` the weaker list's share of the weight: the
    /// weaker list may take at most its share of the stronger one's places.
    /// Nothing is tuned to a data set or an embedder: the store's own searches
    /// carry the evidence.
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
        }
    }

    fn apply(&self, s: f32) -> f32 {
        if self.sigma > 0.0 && self.sigma.is_finite() {
            ((s - self.mu) / self.sigma).max(0.0)
        } else {
            // Every slot equal: no hit stands out of the list.
            0.0
        }
    }
}

/// Fuse a BM25 list and a vector list (each best first) into at most `limit`
/// entries; `vector_share` is the store's estimate of how often the vector
/// list finds what the words find (`search::evidence::Evidence`), used by
/// [`FusionMethod::Adaptive`].
#[cfg(test)]
pub(crate) fn fuse(
    bm25: &[(String, f32)],
    vector: &[(String, f32)],
    vector_share: f32,
    fusion: &Fusion,
    limit: usize,
) -> Vec<Fused> {
    fuse_matched(bm25, None, vector, vector_share, fusion, limit)
}

/// [`fuse`], with `content[i]` telling whether BM25 hit `i` matched a content
/// word of the query (not only stop and question words); `None`: every hit
/// did. [`FusionMethod::Adaptive`] adds BM25's z only for the hits that did
/// (the background stays that of the whole list); the stronger-list guard
/// still keeps BM25's own top places.
pub(crate) fn fuse_matched(
    bm25: &[(String, f32)],
    content: Option<&[bool]>,
    vector: &[(String, f32)],
    vector_share: f32,
    fusion: &Fusion,
    limit: usize,
) -> Vec<Fused> {
    let max_bm25 = bm25.iter().map(|(_, s)| *s).fold(0f32, f32::max);
    // Keys of the BM25 hits that matched only stop words, when known.
    let stop_only: Option<std::collections::HashSet<&str>> = content
        .filter(|_| fusion.method == FusionMethod::Adaptive)
        .map(|flags| {
            bm25.iter()
                .zip(flags)
                .filter(|(_, m)| !**m)
                .map(|((k, _), _)| k.as_str())
                .collect()
        });
    let (bm25_norm, vector_norm) = match fusion.method {
        FusionMethod::Adaptive => (
            TailZ::of(bm25, ADAPTIVE_TAIL_FROM, ADAPTIVE_PEAK_DEPTH),
            TailZ::of(vector, ADAPTIVE_TAIL_FROM, ADAPTIVE_PEAK_DEPTH),
        ),
        _ => (TailZ::default(), TailZ::default()),
    };
    // Adaptive: the vector list gets its estimated share of the weight to the
    // power ADAPTIVE_SHARE_POWER, BM25 the rest (times 2, so that the default
    // weights 0.5 / 0.5 leave them as they are).
    let (bm25_scale, vector_scale) = if fusion.method == FusionMethod::Adaptive {
        let v = vector_share.clamp(0.0, 1.0).powf(ADAPTIVE_SHARE_POWER);
        (2.0 * (1.0 - v), 2.0 * v)
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
                    let bs = b
                        .filter(|_| stop_only.as_ref().is_none_or(|keys| !keys.contains(k)))
                        .map_or(0.0, |(_, s)| bm25_norm.apply(s));
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
    if fusion.method == FusionMethod::Adaptive {
        let bm25_w = fusion.bm25_weight * bm25_scale;
        let vector_w = fusion.vector_weight * vector_scale;
        let (strong, norm, weak) = if vector_w > bm25_w {
            (vector, &vector_norm, bm25)
        } else {
            (bm25, &bm25_norm, vector)
        };
        // Only the hits the stronger list puts above its own near misses hold
        // places (z > 0: a prefix of the list); a flat list, all ties, holds none.
        let standing = strong
            .iter()
            .position(|(_, s)| norm.apply(*s) <= 0.0)
            .unwrap_or(strong.len());
        let weak_share = if bm25_w + vector_w > 0.0 {
            bm25_w.min(vector_w) / (bm25_w + vector_w)
        } else {
            0.0
        };
        let lists = Places {
            standing: &strong[..standing],
            strong,
            weak,
        };
        keep_places(&mut out, &lists, weak_share, limit);
    }
    out.truncate(limit);
    out
}

/// The lists [`keep_places`] reads: the stronger list's hits that stand above
/// its background (`standing`, a prefix of `strong`), and both whole lists.
struct Places<'a> {
    standing: &'a [(String, f32)],
    strong: &'a [(String, f32)],
    weak: &'a [(String, f32)],
}

/// Adaptive fusion's guard for the stronger list (the one with the larger
/// weight): of the `limit` results, the weaker list may take at most its
/// share of the weight, `round(limit · weak_share)`, of the places the
/// stronger list's own top `limit` would hold. The stronger list's top
/// `limit − that` standing hits stay in the results; the other places go to
/// the best of the rest by fused score; the results keep the fused order.
/// Memories the weaker list found with the very same score as one already
/// given such a place, and the same score (or absence) in the stronger list,
/// are copies of one text as far as both lists can tell: they take no second
/// place (they would spend the weaker list's share on one piece of
/// evidence). `out` is sorted best first.
fn keep_places(out: &mut Vec<Fused>, lists: &Places<'_>, weak_share: f32, limit: usize) {
    use std::collections::{HashMap, HashSet};
    let room = (limit as f32 * weak_share.clamp(0.0, 0.5)).round() as usize;
    let kept: HashSet<&str> = lists
        .standing
        .iter()
        .take(limit.saturating_sub(room))
        .map(|(k, _)| k.as_str())
        .collect();
    fn score_of(list: &[(String, f32)]) -> HashMap<&str, u32> {
        list.iter()
            .map(|(k, s)| (k.as_str(), s.to_bits()))
            .collect()
    }
    let (strong, weak) = (score_of(lists.strong), score_of(lists.weak));
    let mut placed: HashSet<(u32, Option<u32>)> = HashSet::new();
    let mut others = limit.saturating_sub(kept.len());
    out.retain(|f| {
        let key = f.key.as_str();
        if kept.contains(key) {
            return true;
        }
        if others == 0 {
            return false;
        }
        if let Some(&w) = weak.get(key)
            && !placed.insert((w, strong.get(key).copied()))
        {
            return false;
        }
        others -= 1;
        true
    });
}

/// Depth each list is fetched at before fusion.
pub(crate) fn depth(limit: usize) -> usize {
    limit
        .saturating_mul(FUSION_DEPTH_FACTOR)
        .max(FUSION_MIN_DEPTH)
}

/// The fusion to validate even when no embedding is given (bad weights are refused early).
pub(crate) fn validate_fusion(f: &Fusion) -> Result<()> {
    f.validate()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    /// A fused list of `keys` in this order (scores 100, 99, ...; no ranks).
    fn fused_in_order(keys: &[String]) -> Vec<Fused> {
        keys.iter()
            .enumerate()
            .map(|(i, k)| Fused {
                key: k.clone(),
                score: 100.0 - i as f32,
                bm25_rank: None,
                vector_rank: None,
            })
            .collect()
    }

    #[test]
    fn the_weaker_list_takes_at_most_its_share_of_the_stronger_lists_places() {
        // Fused order: five memories only the weaker list found, then the
        // stronger list's ten (a..j), then three more of the weaker list's.
        let strong: Vec<(String, f32)> = (b'a'..=b'j')
            .map(|c| (char::from(c).to_string(), 10.0 - f32::from(c - b'a')))
            .collect();
        let fused_order: Vec<String> = (1..=5)
            .map(|i| format!("v{i}"))
            .chain(strong.iter().map(|(k, _)| k.clone()))
            .chain((6..=8).map(|i| format!("v{i}")))
            .collect();
        let out = |share: f32, limit: usize, strong: &[(String, f32)]| -> Vec<String> {
            let mut out = fused_in_order(&fused_order);
            let lists = Places {
                standing: strong,
                strong,
                weak: &[],
            };
            keep_places(&mut out, &lists, share, limit);
            out.truncate(limit);
            out.into_iter().map(|f| f.key).collect()
        };
        // Weight share 0.13 of 10 places: one; the stronger list keeps its top 9.
        assert_eq!(
            out(0.13, 10, &strong),
            ["v1", "a", "b", "c", "d", "e", "f", "g", "h", "i"]
        );
        // Equal weights: half the places, in fused order.
        assert_eq!(
            out(0.5, 10, &strong),
            ["v1", "v2", "v3", "v4", "v5", "a", "b", "c", "d", "e"]
        );
        // No weight: the stronger list's top 10, in fused order.
        assert_eq!(
            out(0.0, 10, &strong),
            ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
        );
        // A stronger list shorter than the results: the rest by fused score.
        assert_eq!(out(0.13, 5, &strong[..2]), ["v1", "v2", "v3", "a", "b"]);
    }

    #[test]
    fn copies_in_the_weaker_list_take_one_of_its_places() {
        // The weaker list found d1, d2 and d3 with the very same score (one
        // text recorded three times) and x with another; the stronger list
        // holds a..j. Fused order: d1 d2 d3 x, then a..j.
        let strong: Vec<(String, f32)> = (b'a'..=b'j')
            .map(|c| (char::from(c).to_string(), 10.0 - f32::from(c - b'a')))
            .collect();
        let weak: Vec<(String, f32)> = ["d1", "d2", "d3"]
            .iter()
            .map(|k| ((*k).to_owned(), 0.9))
            .chain([("x".to_owned(), 0.8)])
            .collect();
        let fused_order: Vec<String> = weak
            .iter()
            .chain(strong.iter())
            .map(|(k, _)| k.clone())
            .collect();
        let run = |strong_list: &[(String, f32)]| -> Vec<String> {
            let mut out = fused_in_order(&fused_order);
            let lists = Places {
                standing: &strong,
                strong: strong_list,
                weak: &weak,
            };
            // Share 0.3 of 10 places: three for the weaker list.
            keep_places(&mut out, &lists, 0.3, 10);
            out.truncate(10);
            out.into_iter().map(|f| f.key).collect()
        };
        // d2 and d3 are copies of d1: the weaker list's three places go to d1,
        // x and the best of the rest (h, the stronger list's 8th).
        assert_eq!(
            run(&strong),
            ["d1", "x", "a", "b", "c", "d", "e", "f", "g", "h"]
        );
        // The stronger list tells d2 apart from d1 (a different score there):
        // not a copy, it keeps its place.
        let mut told_apart = strong.clone();
        told_apart.push(("d2".to_owned(), 0.5));
        assert_eq!(
            run(&told_apart),
            ["d1", "d2", "x", "a", "b", "c", "d", "e", "f", "g"]
        );
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
    fn adaptive_fusion_weighs_the_vectors_by_the_stores_evidence() {
        let n = ADAPTIVE_PEAK_DEPTH + 10;
        let adaptive = Fusion::default();
        assert_eq!(adaptive.method, FusionMethod::Adaptive);

        // A rare word matched one memory (BM25 10 against ~1); the vectors are
        // flat noise (their favourite only just above the rest): BM25 leads
        // even in a store whose vectors usually agree with the words.
        let (keys, bm25, vector) = scenario(n, 10.0, 0.415);
        let top = fuse(&bm25, &vector, 0.9, &adaptive, 3);
        assert_eq!(top[0].key, "k00", "{top:?}");
        assert_eq!(top[0].bm25_rank, Some(1));
        assert_eq!(top[0].vector_rank, Some(2));

        // Only question words matched (BM25 almost flat: 1.005 against ~1, its
        // top ~3 σ above its near misses); the vectors single out their
        // favourite (0.9 against ~0.4, ~46 σ). In a store whose vector list
        // usually finds what the words find (share 0.9), the favourite leads;
        // where it seldom does (0.2), BM25's order stands.
        let (_, flat, vector) = scenario(n, 1.005, 0.9);
        let trusted = fuse(&flat, &vector, 0.9, &adaptive, 3);
        assert_eq!(trusted[0].key, keys[n - 1], "{trusted:?}");
        assert_eq!(trusted[0].bm25_rank, None);
        // Its score is the vector side alone (absent from the BM25 list: 0).
        let vz = TailZ::of(&vector, ADAPTIVE_TAIL_FROM, ADAPTIVE_PEAK_DEPTH);
        let weight = 0.9f32.powf(ADAPTIVE_SHARE_POWER);
        assert!((trusted[0].score - 2.0 * 0.5 * weight * vz.apply(0.9)).abs() < 1e-3);
        let doubted = fuse(&flat, &vector, 0.2, &adaptive, 3);
        assert_eq!(doubted[0].key, "k00", "{doubted:?}");
        // The max-normalised linear blend ignores the evidence and cannot tell
        // a flat BM25 list from a peaked one: its top gets the full BM25 weight.
        let linear = Fusion {
            method: FusionMethod::Linear,
            ..Fusion::default()
        };
        assert_eq!(fuse(&flat, &vector, 0.9, &linear, 1)[0].key, "k00");

        // Both stand out: the memory both rank high (k00: BM25 first, vectors
        // second) leads.
        let (_, bm25, vector) = scenario(n, 10.0, 0.5);
        let top = fuse(&bm25, &vector, 0.5, &adaptive, 2);
        assert_eq!(top[0].key, "k00", "{top:?}");

        // A rare word shared equally by a dozen memories the vectors rank low
        // is still a lexical signal: a short list stands out of the zeros
        // below it. Against flat vectors all twelve make the top 14.
        let (_, _, vector) = scenario(n, 1.0, 0.415);
        let tied: Vec<(String, f32)> = keys[40..52].iter().map(|k| (k.clone(), 3.0)).collect();
        let top = fuse(&tied, &vector, 0.5, &adaptive, 14);
        let lexical = top.iter().filter(|f| f.bm25_rank.is_some()).count();
        assert_eq!(lexical, 12, "{top:?}");
    }

    #[test]
    fn bm25_hits_that_matched_only_stop_words_add_nothing_to_the_fused_score() {
        // BM25: s0 and s1 matched only "what did I" (scores 2.0, 1.9), c2..c5
        // matched a content word (1.5 down to 1.2); the vectors favour c4.
        let bm = list(&[
            ("s0", 2.0),
            ("s1", 1.9),
            ("c2", 1.5),
            ("c3", 1.4),
            ("c4", 1.3),
            ("c5", 1.2),
        ]);
        let content = [false, false, true, true, true, true];
        let vector = list(&[("c4", 0.8), ("x", 0.5), ("c2", 0.45), ("y", 0.4)]);
        let adaptive = Fusion::default();
        // The vectors are the stronger list (share 0.9): s0, s1 have no BM25
        // score and no vector score, so they come last.
        let strong_vectors = fuse_matched(&bm, Some(&content), &vector, 0.9, &adaptive, 10);
        let keys: Vec<&str> = strong_vectors.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys[0], "c4", "{keys:?}");
        assert!(keys.iter().position(|k| *k == "s0") > keys.iter().position(|k| *k == "y"));
        let s0 = strong_vectors.iter().find(|f| f.key == "s0").unwrap();
        assert_eq!(s0.score, 0.0);
        assert_eq!(s0.bm25_rank, Some(1));
        // Without the flags s0 leads BM25's side and scores.
        let plain = fuse(&bm, &vector, 0.9, &adaptive, 10);
        assert!(plain.iter().find(|f| f.key == "s0").unwrap().score > 0.0);
        // BM25 the stronger list (share 0.2: weights 0.91 / 0.09): of 3
        // places the vectors may take round(3 · 0.09) = 0, so BM25's own top 3
        // stay, the stop-word matches among them, in fused order.
        let strong_bm25 = fuse_matched(&bm, Some(&content), &vector, 0.2, &adaptive, 3);
        let mut keys: Vec<&str> = strong_bm25.iter().map(|f| f.key.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["c2", "s0", "s1"]);
        // Linear and RRF ignore the flags.
        let rrf = Fusion {
            method: FusionMethod::Rrf,
            ..Fusion::default()
        };
        assert_eq!(
            fuse_matched(&bm, Some(&content), &vector, 0.9, &rrf, 10),
            fuse(&bm, &vector, 0.9, &rrf, 10)
        );
    }

    #[test]
    fn adaptive_fusion_with_one_list_keeps_its_order() {
        let bm = list(&[("a", 3.0), ("b", 2.0), ("c", 1.0)]);
        let keys: Vec<String> = fuse(&bm, &[], 0.5, &Fusion::default(), 10)
            .into_iter()
            .map(|f| f.key)
            .collect();
        assert_eq!(keys, ["a", "b", "c"]);
        let vec = list(&[("x", 0.9), ("y", -0.2)]);
        let keys: Vec<String> = fuse(&[], &vec, 0.5, &Fusion::default(), 10)
            .into_iter()
            .map(|f| f.key)
            .collect();
        assert_eq!(keys, ["x", "y"]);
    }
}
