//! The in-memory dedup index of a store no other process writes (sled): band
//! keys to the records holding them, derived from the records.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::{Fingerprint, MAX_CANDIDATES, MIN_EQUAL_MINIMA, MINHASH_BANDS, MINHASH_ROWS, splitmix};

/// Minima of a MinHash signature.
const MINIMA: usize = MINHASH_BANDS * MINHASH_ROWS;

/// The in-memory dedup index of one context and kind (stores without other
/// writers: sled): band keys to the records holding them, derived from the
/// records, so a write adds no stored row. Ids are interned in slots.
///
/// Its maps hash with `FxHasher` rather than SipHash: the bucket keys are
/// already the output of a seeded 64-bit mix (one multiplication is enough to
/// spread them), and the ids are the store's own (UUIDs).
#[derive(Debug, Default)]
pub(crate) struct MemIndex {
    /// Band key (the band's hash mixed with its number; the exact hash for a
    /// record without bands) to the slots holding it, oldest first.
    buckets: Buckets,
    /// Slot to its record id, keys and MinHash signature (`None`: free).
    slots: Vec<Option<Slot>>,
    /// Slot to the low byte of each of its minima (all zero for a free slot
    /// or one without minima; see [`LowBytes`]): read for every candidate
    /// before its slot, 24 bytes beside the other slots' rather than 144 in
    /// its slot. A minimum equal to the probe's has an equal low byte, so
    /// fewer than [`MIN_EQUAL_MINIMA`] equal bytes mean fewer equal minima.
    low_bytes: Vec<LowBytes>,
    /// Record id to its slot (the id shared with the slot: one allocation).
    slot_of: FxHashMap<Arc<str>, u32>,
    free: Vec<u32>,
    /// Shingles held by the slots' cached sets (at most [`SHINGLE_CACHE`]).
    cached: usize,
    /// The slot the next eviction starts at (see [`MemIndex::evict`]).
    sweep: u32,
}

/// Bucket keys to the slots holding them, oldest first. Most buckets hold
/// one slot: it is the map's value itself (16 bytes an entry, where a list
/// per key took 32 and an allocation); a bucket of more holds
/// [`Buckets::MANY`] and the place of its list in `lists`.
#[derive(Debug, Default)]
struct Buckets {
    map: FxHashMap<u64, u32>,
    /// Lists of two slots or more (a free one is empty, its place in `free`).
    lists: Vec<Vec<u32>>,
    free: Vec<u32>,
}

impl Buckets {
    /// The high bit of a map value: the rest is the place of a list.
    const MANY: u32 = 1 << 31;

    /// The slots of `key` (none when absent).
    fn get(&self, key: u64) -> &[u32] {
        match self.map.get(&key) {
            None => &[],
            Some(v) if v & Self::MANY == 0 => std::slice::from_ref(v),
            Some(v) => &self.lists[(v & !Self::MANY) as usize],
        }
    }

    /// Append `slot` to the slots of `key` (a slot below [`Buckets::MANY`]).
    fn push(&mut self, key: u64, slot: u32) {
        debug_assert!(slot < Self::MANY);
        let v = match self.map.entry(key) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(slot);
                return;
            }
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        };
        if *v & Self::MANY != 0 {
            self.lists[(*v & !Self::MANY) as usize].push(slot);
            return;
        }
        let list = match self.free.pop() {
            Some(i) => i,
            None => {
                self.lists.push(Vec::new());
                (self.lists.len() - 1) as u32
            }
        };
        self.lists[list as usize].extend([*v, slot]);
        *v = Self::MANY | list;
    }

    /// Take every `slot` out of the slots of `key`.
    fn remove(&mut self, key: u64, slot: u32) {
        let Some(v) = self.map.get_mut(&key) else {
            return;
        };
        if *v & Self::MANY == 0 {
            if *v == slot {
                self.map.remove(&key);
            }
            return;
        }
        let i = (*v & !Self::MANY) as usize;
        let list = &mut self.lists[i];
        list.retain(|s| *s != slot);
        match list[..] {
            [] => {
                self.map.remove(&key);
            }
            [one] => *v = one,
            _ => return,
        }
        // Kept, empty, for the next bucket of two.
        list.clear();
        self.free.push(i as u32);
    }
}

/// Shingles an in-memory index keeps of its records (the low 16 bits of
/// each, 2 bytes: 2 MiB per context and kind at most), enough to rule out
/// most candidates without reading them ([`may_reach`](super::may_reach)):
/// a text like many others is a candidate again and again, and its set need
/// not be computed each time. A record's set is kept when it is indexed,
/// while there is room (its fingerprint holds it already, where computing it
/// again would read, normalise and hash the stored record), and when a
/// verification computes it.
pub(crate) const SHINGLE_CACHE: usize = 1 << 20;

/// One record of a [`MemIndex`] (one allocation: its id).
#[derive(Debug)]
struct Slot {
    id: Arc<str>,
    /// Its bucket keys (`n_keys` of them).
    keys: [u64; MINHASH_BANDS],
    n_keys: u8,
    /// The MinHash signature, in the slot itself (read for every candidate
    /// whose low bytes pass: one pointer less to follow); `has_mins` false
    /// for a record without one.
    mins: [u64; MINIMA],
    has_mins: bool,
    /// The hash of the exact text, and the number of shingles: what a
    /// candidate can still be, before it is read back (see [`MemHit`]).
    exact: Option<u64>,
    shingles: u32,
    /// The low 16 bits of the record's shingles (in any order), if kept
    /// (see [`SHINGLE_CACHE`]).
    set: Option<Arc<[u16]>>,
    /// Offered as a candidate since the last eviction's sweep passed it.
    used: bool,
}

/// A record of a [`MemIndex`] that shares keys with a probe.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MemHit {
    /// Keys shared with the probe.
    pub shared: usize,
    /// The record's id.
    pub id: Arc<str>,
    /// The record's exact-text hash when indexed (a different hash: not an exact duplicate).
    pub exact: Option<u64>,
    /// The size of the record's shingle set when indexed (with the probe's, a
    /// bound on their Jaccard similarity: [`jaccard_bound`](super::jaccard_bound)).
    pub shingles: usize,
    /// The low 16 bits of the record's shingles, if cached.
    pub set: Option<Arc<[u16]>>,
}

/// The in-memory keys of a fingerprint (as [`keys`](super::keys): bands, else
/// the exact hash), and how many there are.
fn mem_keys(fp: &Fingerprint) -> ([u64; MINHASH_BANDS], usize) {
    let mut out = [0; MINHASH_BANDS];
    if fp.bands.is_empty() {
        return match fp.exact {
            Some(h) => {
                out[0] = splitmix(h ^ 0xE8AC_7000);
                (out, 1)
            }
            None => (out, 0),
        };
    }
    for (b, (o, h)) in out.iter_mut().zip(&fp.bands).enumerate() {
        *o = splitmix(h ^ (b as u64 + 1));
    }
    (out, fp.bands.len().min(MINHASH_BANDS))
}

/// The low bytes of a signature's minima, eight to a word (zero past the
/// signature's end, and in the last word's six spare bytes).
type LowBytes = [u64; MINIMA.div_ceil(8)];

/// The low byte of each minimum, packed (see [`LowBytes`]).
fn low_bytes(mins: &[u64]) -> LowBytes {
    let mut out = [0; MINIMA.div_ceil(8)];
    for (i, m) in mins.iter().take(MINIMA).enumerate() {
        out[i / 8] |= u64::from(*m as u8) << (8 * (i % 8));
    }
    out
}

/// How many of the [`MINIMA`] packed low bytes of `a` and `b` are equal:
/// a word at a time, the bytes of `a ^ b` that are not zero counted with
/// their high bits (the spare bytes are zero in both, so never counted).
fn equal_low_bytes(a: &LowBytes, b: &LowBytes) -> usize {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let differ: u32 = a
        .iter()
        .zip(b)
        .map(|(a, b)| {
            let x = a ^ b;
            // A byte's high bit: set when the byte is not zero.
            (((x & LOW7) + LOW7) | x) & !LOW7
        })
        .map(u64::count_ones)
        .sum();
    MINIMA - differ as usize
}

/// How many of `a` and `b` are equal, position by position.
fn equal_count<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x == y).count()
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
        let (keys, n_keys) = mem_keys(fp);
        if n_keys == 0 {
            return;
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.low_bytes.push(LowBytes::default());
                (self.slots.len() - 1) as u32
            }
        };
        for k in &keys[..n_keys] {
            self.buckets.push(*k, slot);
        }
        let id: Arc<str> = id.into();
        self.low_bytes[slot as usize] = low_bytes(&fp.mins);
        // Its set, while it fits without dropping others' (the sets of
        // verified candidates, kept by `cache_shingles`, are the ones asked for).
        let n = fp.shingles.len();
        let set = (self.cached + n <= SHINGLE_CACHE).then(|| {
            self.cached += n;
            fp.shingles.as_slice().iter().map(|h| *h as u16).collect()
        });
        self.slots[slot as usize] = Some(Slot {
            id: Arc::clone(&id),
            keys,
            n_keys: n_keys as u8,
            mins: std::array::from_fn(|i| fp.mins.get(i).copied().unwrap_or(0)),
            has_mins: !fp.mins.is_empty(),
            exact: fp.exact,
            shingles: u32::try_from(n).unwrap_or(u32::MAX),
            set,
            used: false,
        });
        self.slot_of.insert(id, slot);
    }

    /// Forget record `id`.
    pub(crate) fn remove(&mut self, id: &str) {
        let Some(slot) = self.slot_of.remove(id) else {
            return;
        };
        if let Some(Slot {
            keys, n_keys, set, ..
        }) = self.slots[slot as usize].take()
        {
            self.cached -= set.map_or(0, |s| s.len());
            for k in &keys[..usize::from(n_keys)] {
                self.buckets.remove(*k, slot);
            }
        }
        self.low_bytes[slot as usize] = LowBytes::default();
        self.free.push(slot);
    }

    /// The records sharing a key with `fp` (at most [`MAX_CANDIDATES`] per
    /// key, the oldest), with how many keys each shares, but those with fewer
    /// than [`MIN_EQUAL_MINIMA`] minima equal to `fp`'s.
    /// Each one is marked used (its cached set is kept by the next eviction:
    /// see [`MemIndex::evict`]).
    pub(crate) fn candidates(&mut self, fp: &Fingerprint) -> Vec<MemHit> {
        // At most 6 keys of 16 slots: sorted, each slot's run is its count.
        let mut all: SmallVec<[u32; MINHASH_BANDS * MAX_CANDIDATES]> = SmallVec::new();
        let (keys, n_keys) = mem_keys(fp);
        for k in &keys[..n_keys] {
            let slots = self.buckets.get(*k);
            all.extend_from_slice(&slots[..slots.len().min(MAX_CANDIDATES)]);
        }
        all.sort_unstable();
        let probe_low = low_bytes(&fp.mins);
        let mut out = Vec::new();
        for run in all.chunk_by(|a, b| a == b) {
            let (s, n) = (run[0] as usize, run.len());
            // Too few equal low bytes: too few equal minima (the slot is not read).
            if !fp.mins.is_empty()
                && equal_low_bytes(&probe_low, &self.low_bytes[s]) < MIN_EQUAL_MINIMA
            {
                continue;
            }
            let Some(slot) = self.slots[s].as_mut() else {
                continue;
            };
            let equal = if slot.has_mins {
                equal_count(&fp.mins, &slot.mins)
            } else {
                0
            };
            if fp.mins.is_empty() || equal >= MIN_EQUAL_MINIMA {
                slot.used = true;
                out.push(MemHit {
                    shared: n,
                    id: Arc::clone(&slot.id),
                    exact: slot.exact,
                    shingles: slot.shingles as usize,
                    set: slot.set.clone(),
                });
            }
        }
        out
    }

    /// Drop every cached set (a test's way to a cache that missed).
    #[cfg(test)]
    pub(crate) fn drop_cached(&mut self) {
        for s in self.slots.iter_mut().flatten() {
            s.set = None;
        }
        self.cached = 0;
    }

    /// Drop cached sets until `room` more shingles fit in half the cache
    /// (all of them if need be), kept by use: a sweep around the slots (from
    /// the one after the last dropped) that drops the sets of records not
    /// offered as candidates since it last passed them, and gives the others
    /// a second chance (their mark cleared), so the half of the cache that
    /// stays is the sets asked for (a record indexed but never a candidate
    /// goes first). At most two turns: the second drops what the first marked.
    fn evict(&mut self, room: usize) {
        let n = self.slots.len();
        for _ in 0..2 * n {
            if self.cached + room <= SHINGLE_CACHE / 2 {
                return;
            }
            let i = self.sweep as usize % n;
            self.sweep = ((i + 1) % n) as u32;
            let Some(slot) = self.slots[i].as_mut() else {
                continue;
            };
            if std::mem::take(&mut slot.used) {
                continue;
            }
            if let Some(old) = slot.set.take() {
                self.cached -= old.len();
            }
        }
    }

    /// Keep `set`, the low 16 bits of the shingles of record `id` as stored
    /// now (marked used: it was a candidate), for its next
    /// verifications (the record's next [`insert`](Self::insert) or
    /// [`remove`](Self::remove) drops it). Over [`SHINGLE_CACHE`] shingles in
    /// all, cached sets are dropped first until it fits in half
    /// ([`evict`](Self::evict)).
    pub(crate) fn cache_shingles(&mut self, id: &str, set: Arc<[u16]>) {
        if set.len() > SHINGLE_CACHE {
            return;
        }
        let Some(&slot) = self.slot_of.get(id) else {
            return;
        };
        if self.cached + set.len() > SHINGLE_CACHE {
            self.evict(set.len());
        }
        if let Some(s) = self.slots[slot as usize].as_mut() {
            s.used = true;
            self.cached += set.len();
            self.cached -= s.set.replace(set).map_or(0, |old| old.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shingle_cache_keeps_within_its_bound_and_half_when_full() {
        let fp = Fingerprint::of(0, "x", "The user prefers dark mode in every editor", true);
        let mut m = MemIndex::default();
        let n = 40;
        for i in 0..n {
            m.insert(&i.to_string(), &fp);
        }
        let held = |m: &MemIndex| -> usize {
            m.slots
                .iter()
                .flatten()
                .filter_map(|s| s.set.as_ref())
                .map(|s| s.len())
                .sum()
        };
        let size = SHINGLE_CACHE / 16 + 1;
        for round in 0..3 {
            for i in 0..n {
                let set: Arc<[u16]> = vec![round as u16; size].into();
                m.cache_shingles(&i.to_string(), set);
                assert_eq!(m.cached, held(&m));
                assert!(m.cached <= SHINGLE_CACHE);
                // The set just given is held.
                let slot = m.slot_of[&*i.to_string()] as usize;
                assert!(m.slots[slot].as_ref().unwrap().set.is_some());
            }
            // An eviction kept half the cache, not nothing.
            assert!(m.cached > SHINGLE_CACHE / 2 - size, "{}", m.cached);
        }
        // A set larger than half the cache empties it first.
        m.cache_shingles("0", vec![7; SHINGLE_CACHE].into());
        assert_eq!((m.cached, held(&m)), (SHINGLE_CACHE, SHINGLE_CACHE));
        m.remove("0");
        assert_eq!((m.cached, held(&m)), (0, 0));
    }

    #[test]
    fn an_eviction_keeps_the_sets_of_candidates() {
        // The sets of 20 `a` records, then of `b` records until the cache is
        // full (kept when indexed); the `a` ones offered as candidates, then
        // a set to keep: the eviction drops `b` ones (never asked for), not
        // the candidates'.
        let a = Fingerprint::of(0, "a", "The user prefers dark mode in every editor", true);
        let b = Fingerprint::of(0, "b", "Quarterly revenue grew by eleven percent", true);
        let mut m = MemIndex::default();
        for i in 0..20 {
            m.insert(&format!("a{i}"), &a);
        }
        let nb = SHINGLE_CACHE / b.shingles.len() + 10;
        for i in 0..nb {
            m.insert(&format!("b{i}"), &b);
        }
        assert!(m.cached + b.shingles.len() > SHINGLE_CACHE);
        // The first `MAX_CANDIDATES` holders of each key: a0 to a15.
        assert_eq!(m.candidates(&a).len(), MAX_CANDIDATES);
        m.cache_shingles(&format!("b{}", nb - 1), b.shingles.low16().into());
        assert!(m.cached <= SHINGLE_CACHE / 2 + b.shingles.len());
        let kept = |m: &MemIndex, id: &str| {
            m.slots[m.slot_of[id] as usize]
                .as_ref()
                .unwrap()
                .set
                .is_some()
        };
        for i in 0..MAX_CANDIDATES {
            assert!(kept(&m, &format!("a{i}")), "a{i}");
        }
        // A second eviction, with nothing asked for since: the marks were
        // cleared, so the candidates' sets may go too.
        m.cache_shingles("b0", vec![1; SHINGLE_CACHE].into());
        assert!((0..MAX_CANDIDATES).all(|i| !kept(&m, &format!("a{i}"))));
        assert_eq!(m.cached, SHINGLE_CACHE);
    }

    #[test]
    fn buckets_are_lists_per_key() {
        // Against a map of plain lists, pushes and removes at random (a slot
        // may be pushed twice to a key: two bands with the same key).
        let mut b = Buckets::default();
        let mut plain: std::collections::HashMap<u64, Vec<u32>> = Default::default();
        let mut z = 7u64;
        for _ in 0..20_000 {
            z = splitmix(z);
            let (key, slot) = (z % 13, ((z >> 8) % 9) as u32);
            if (z >> 20).is_multiple_of(3) {
                b.remove(key, slot);
                if let Some(v) = plain.get_mut(&key) {
                    v.retain(|s| *s != slot);
                    if v.is_empty() {
                        plain.remove(&key);
                    }
                }
            } else {
                b.push(key, slot);
                plain.entry(key).or_default().push(slot);
            }
            for k in 0..13 {
                assert_eq!(b.get(k), plain.get(&k).map_or(&[][..], |v| &v[..]));
            }
        }
        assert_eq!(b.map.len(), plain.len());
    }

    #[test]
    fn packed_low_bytes_count_as_bytes() {
        let mut z = 1u64;
        for _ in 0..2000 {
            let mut sig = || -> Vec<u64> {
                (0..MINIMA)
                    .map(|_| {
                        z = splitmix(z);
                        // Equal often (low bytes 0 too), else any byte.
                        if z & 1 == 0 { (z >> 8) % 3 } else { z >> 1 }
                    })
                    .collect()
            };
            let (a, b) = (sig(), sig());
            let plain = equal_count(
                &a.iter().map(|m| *m as u8).collect::<Vec<_>>(),
                &b.iter().map(|m| *m as u8).collect::<Vec<_>>(),
            );
            assert_eq!(equal_low_bytes(&low_bytes(&a), &low_bytes(&b)), plain);
            assert!(plain >= equal_count(&a, &b));
        }
    }

    #[test]
    fn candidates_are_the_plain_definition() {
        // Texts of few words (many shared bands), indexed, removed and
        // re-indexed at random; after each step every probe's candidates
        // must be what the definition gives: for each of its keys, the first
        // `MAX_CANDIDATES` records holding it in the order they were (last)
        // indexed; each record with the number of keys it shares, kept when
        // at least `MIN_EQUAL_MINIMA` of its minima equal the probe's.
        let words = [
            "deploy", "billing", "staging", "invoice", "review", "dark", "mode",
        ];
        let mut z = 11u64;
        let mut next = |n: usize| {
            z = splitmix(z);
            (z % n as u64) as usize
        };
        let texts: Vec<String> = (0..160)
            .map(|i| {
                let n = 3 + next(6);
                let mut t: Vec<&str> = (0..n).map(|_| words[next(words.len())]).collect();
                if i % 9 == 0 {
                    t = vec!["..."]; // no bands: keyed by the exact hash
                }
                t.join(" ")
            })
            .collect();
        let fps: Vec<Fingerprint> = texts
            .iter()
            .map(|t| Fingerprint::of(0, &t[..t.len() / 2], t, true))
            .collect();
        let mut m = MemIndex::default();
        // The definition's state: the records in the order they were indexed.
        let mut order: Vec<usize> = Vec::new();
        for step in 0..400 {
            let i = next(texts.len());
            if step % 5 == 4 {
                m.remove(&i.to_string());
                order.retain(|&r| r != i);
            } else {
                m.insert(&i.to_string(), &fps[i]);
                order.retain(|&r| r != i);
                order.push(i);
            }
            let p = &fps[next(texts.len())];
            let (pk, pn) = mem_keys(p);
            let mut want: Vec<(String, usize)> = Vec::new();
            for k in &pk[..pn] {
                let holders = order.iter().filter(|&&r| {
                    let (rk, rn) = mem_keys(&fps[r]);
                    rk[..rn].contains(k)
                });
                for &r in holders.take(MAX_CANDIDATES) {
                    match want.iter_mut().find(|w| w.0 == r.to_string()) {
                        Some(w) => w.1 += 1,
                        None => want.push((r.to_string(), 1)),
                    }
                }
            }
            want.retain(|(r, _)| {
                let r = &fps[r.parse::<usize>().unwrap()];
                p.mins.is_empty() || equal_count(&p.mins, &r.mins) >= MIN_EQUAL_MINIMA
            });
            want.sort();
            let mut got: Vec<(String, usize)> = m
                .candidates(p)
                .into_iter()
                .map(|h| (h.id.to_string(), h.shared))
                .collect();
            got.sort();
            assert_eq!(got, want, "step {step}");
        }
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
        assert_eq!(c[0].set.as_deref(), Some(&a.shingles.low16()[..]));
        assert_eq!(&*c[0].id, "a");
        assert_eq!(c[0].exact, a.exact);
        assert_eq!(c[0].shingles, a.shingles.len());
        assert_eq!(&*m.candidates(&empty)[0].id, "e");
        m.remove("a");
        assert!(m.candidates(&b).is_empty());
        // A record's set is kept when it is indexed.
        m.insert("b", &b);
        assert_eq!(
            m.candidates(&a)[0].set.as_deref(),
            Some(&b.shingles.low16()[..])
        );
        assert_eq!(m.cached, b.shingles.len());
        m.cache_shingles("b", vec![1, 2, 3].into());
        assert_eq!(m.cached, 3);
        // Re-indexing a record replaces its cached set with its fingerprint's.
        m.insert("b", &b);
        assert_eq!(m.cached, b.shingles.len());
        assert_eq!(
            m.candidates(&a)[0].set.as_deref(),
            Some(&b.shingles.low16()[..])
        );
        m.cache_shingles("gone", vec![1, 2, 3].into());
        assert_eq!(m.cached, b.shingles.len());
        assert_eq!(m.len(), 2);
        // A full cache keeps no set of a record indexed (it drops none for it).
        m.drop_cached();
        m.cache_shingles("e", vec![9; SHINGLE_CACHE].into());
        m.insert("c", &a);
        assert_eq!(m.cached, SHINGLE_CACHE);
        let c = m.candidates(&b);
        assert!(c.iter().all(|h| h.set.is_none()), "{c:?}");
        m.remove("c");
        let c = m.candidates(&a);
        assert_eq!((c[0].shared, &*c[0].id), (MINHASH_BANDS, "b"));
    }
}
