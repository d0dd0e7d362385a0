//! The in-memory dedup index of a store no other process writes (sled): band
//! keys to the records holding them, derived from the records.

use std::sync::Arc;

use super::{Fingerprint, MAX_CANDIDATES, MIN_EQUAL_MINIMA, MINHASH_BANDS, MINHASH_ROWS, splitmix};

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
    /// Shingles held by the slots' cached sets (at most [`SHINGLE_CACHE`]).
    cached: usize,
}

/// Shingles (8 bytes each) an in-memory index keeps of the candidates it
/// verified (2 MiB per context and kind at most): a text like many others is
/// a candidate again and again, and its set need not be computed each time.
pub(crate) const SHINGLE_CACHE: usize = 1 << 18;

/// One record of a [`MemIndex`].
#[derive(Debug)]
struct Slot {
    id: Box<str>,
    keys: Box<[u64]>,
    /// The MinHash signature, in the slot itself (read for every candidate:
    /// one pointer less to follow); `has_mins` false for a record without one.
    mins: [u64; MINHASH_BANDS * MINHASH_ROWS],
    has_mins: bool,
    /// The hash of the exact text, and the number of shingles: what a
    /// candidate can still be, before it is read back (see [`MemHit`]).
    exact: Option<u64>,
    shingles: u32,
    /// The record's shingle set, once a verification computed it (see
    /// [`MemIndex::cache_shingles`]).
    set: Option<Arc<[u64]>>,
}

/// A record of a [`MemIndex`] that shares keys with a probe.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MemHit {
    /// Keys shared with the probe.
    pub shared: usize,
    /// The record's id.
    pub id: String,
    /// The record's exact-text hash when indexed (a different hash: not an exact duplicate).
    pub exact: Option<u64>,
    /// The size of the record's shingle set when indexed (with the probe's, a
    /// bound on their Jaccard similarity: [`jaccard_bound`](super::jaccard_bound)).
    pub shingles: usize,
    /// The record's shingle set, if cached.
    pub set: Option<Arc<[u64]>>,
}

/// The in-memory keys of a fingerprint (as [`keys`](super::keys): bands, else the exact hash).
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
            mins: std::array::from_fn(|i| fp.mins.get(i).copied().unwrap_or(0)),
            has_mins: !fp.mins.is_empty(),
            exact: fp.exact,
            shingles: u32::try_from(fp.shingles.len()).unwrap_or(u32::MAX),
            set: None,
        });
        self.slot_of.insert(id.into(), slot);
    }

    /// Forget record `id`.
    pub(crate) fn remove(&mut self, id: &str) {
        let Some(slot) = self.slot_of.remove(id) else {
            return;
        };
        if let Some(Slot { keys, set, .. }) = self.slots[slot as usize].take() {
            self.cached -= set.map_or(0, |s| s.len());
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
    pub(crate) fn candidates(&self, fp: &Fingerprint) -> Vec<MemHit> {
        // At most 6 keys of 16 slots: sorted, each slot's run is its count.
        let mut all: Vec<u32> = Vec::with_capacity(MINHASH_BANDS * MAX_CANDIDATES);
        for k in mem_keys(fp) {
            all.extend(
                self.buckets
                    .get(&k)
                    .into_iter()
                    .flatten()
                    .take(MAX_CANDIDATES),
            );
        }
        all.sort_unstable();
        all.chunk_by(|a, b| a == b)
            .map(|run| (run[0], run.len()))
            .filter_map(|(s, n)| {
                let slot = self.slots[s as usize].as_ref()?;
                let equal = if slot.has_mins {
                    fp.mins
                        .iter()
                        .zip(slot.mins.iter())
                        .filter(|(a, b)| a == b)
                        .count()
                } else {
                    0
                };
                (fp.mins.is_empty() || equal >= MIN_EQUAL_MINIMA).then(|| MemHit {
                    shared: n,
                    id: slot.id.to_string(),
                    exact: slot.exact,
                    shingles: slot.shingles as usize,
                    set: slot.set.clone(),
                })
            })
            .collect()
    }

    /// Keep `set`, the shingle set of record `id` as stored now, for its next
    /// verifications (the record's next [`insert`](Self::insert) or
    /// [`remove`](Self::remove) drops it). Over [`SHINGLE_CACHE`] shingles in
    /// all, every cached set is dropped first.
    pub(crate) fn cache_shingles(&mut self, id: &str, set: Arc<[u64]>) {
        if set.len() > SHINGLE_CACHE {
            return;
        }
        let Some(&slot) = self.slot_of.get(id) else {
            return;
        };
        if self.cached + set.len() > SHINGLE_CACHE {
            for s in self.slots.iter_mut().flatten() {
                s.set = None;
            }
            self.cached = 0;
        }
        if let Some(s) = self.slots[slot as usize].as_mut() {
            self.cached += set.len();
            self.cached -= s.set.replace(set).map_or(0, |old| old.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(c[0].id, "a");
        assert_eq!(c[0].exact, a.exact);
        assert_eq!(c[0].shingles, a.shingles.len());
        assert_eq!(m.candidates(&empty)[0].id, "e");
        m.remove("a");
        assert!(m.candidates(&b).is_empty());
        m.insert("b", &b);
        m.cache_shingles("b", b.shingles.clone().into());
        assert_eq!(m.candidates(&a)[0].set.as_deref(), Some(&b.shingles[..]));
        assert_eq!(m.cached, b.shingles.len());
        // Re-indexing a record drops its cached set.
        m.insert("b", &b);
        assert_eq!(m.cached, 0);
        assert!(m.candidates(&a)[0].set.is_none());
        m.cache_shingles("gone", b.shingles.clone().into());
        assert_eq!(m.cached, 0);
        assert_eq!(m.len(), 2);
        let c = m.candidates(&a);
        assert_eq!((c[0].shared, c[0].id.as_str()), (MINHASH_BANDS, "b"));
    }
}
