//! Sealed record keys. In an encrypted store (sled or PostgreSQL), the keys that name user
//! data (context names, short-term and knowledge keys, procedure names, ids)
//! are stored as keyed hashes, and the original key is kept sealed at the head
//! of the value, so that scans give it back.
//!
//! - **Stored key**: each text part of the key (see [`KeyShape`]) becomes the
//!   first 16 bytes of HMAC-SHA256 of the tree's name and the key up to the end
//!   of that part, so `ctx 0x00 key` becomes `H(ctx) H(ctx 0x00 key)` and every
//!   key of a context still shares one prefix; binary suffixes (versions,
//!   sequence numbers) stay as they are, in order.
//! - **Stored value**: `0xE7`, the length (u32 LE) of the sealed original key,
//!   the sealed original key (XChaCha20-Poly1305, nonce HMAC-derived from the
//!   stored key, the stored key as associated data: a key moved to another
//!   entry does not authenticate), then the value as the layers wrote it
//!   (itself a sealed record).
//! - **Scans** return the original keys in their order: the entries under the
//!   hashed prefix are read, their keys opened, filtered by the original
//!   prefix (a prefix that ends inside a text part, such as a short-term key
//!   prefix, scans the whole context) and sorted.
//!
//! The hash and sealing keys are HKDF-SHA256 of the store key (salt
//! `memstrata keys v1`). A store without a key never goes through this module:
//! its keys are byte for byte what the layers build.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::Mac;

use super::codec::{KeyShape, dedup_middle_len, key_shape};
use super::kdf::{self, HmacSha256};
use super::{Batch, Bytes, CasMismatch, KvTree, Tree, TxResult, TxTree};
use crate::config::EncryptionKey;
use crate::{Error, Result};

const KDF_SALT: &[u8] = b"memstrata keys v1";
/// First byte of a value whose key is sealed.
const ENVELOPE: u8 = 0xE7;
/// Bytes of each hashed text part.
const HASH: usize = 16;
/// Values a scan keeps in memory before it reads the rest again by key.
const SCAN_VALUE_BUDGET: usize = 8 << 20;
/// Entries rewritten per atomic batch when a store's plaintext keys are sealed.
const MIGRATE_CHUNK: usize = 256;

/// The keys that seal record keys (derived from the store key).
pub(crate) struct KeySeal {
    hash: HmacSha256,
    nonce: HmacSha256,
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for KeySeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeySeal(..)")
    }
}

/// Where the text parts of a key (or prefix) end.
struct Parts {
    /// End offset of each complete text part.
    ends: Vec<usize>,
    /// Start of the binary suffix, when every text part was followed by `0x00`.
    rest: Option<usize>,
}

/// Split `b` into its text parts (`whole`: a whole key, whose last part ends
/// at its end; otherwise a prefix, whose unterminated last part is partial and
/// not counted).
fn parts(b: &[u8], texts: u8, suffix: bool, whole: bool) -> Parts {
    let mut ends = Vec::with_capacity(usize::from(texts));
    let mut start = 0;
    for i in 0..texts {
        let zero = if i + 1 == texts && !suffix {
            None
        } else {
            b[start..].iter().position(|&c| c == 0)
        };
        match zero {
            Some(p) => {
                ends.push(start + p);
                start += p + 1;
            }
            None => {
                if whole {
                    ends.push(b.len());
                }
                return Parts { ends, rest: None };
            }
        }
    }
    Parts {
        ends,
        rest: Some(start),
    }
}

impl KeySeal {
    /// The key sealing of a store with `key`.
    pub(crate) fn new(key: &EncryptionKey) -> Self {
        let prk = kdf::hkdf_extract(KDF_SALT, key.bytes());
        let mut k = [0u8; 96];
        kdf::hkdf_expand(&prk, b"record keys", &mut k);
        KeySeal {
            hash: kdf::keyed(&k[..32]),
            nonce: kdf::keyed(&k[32..64]),
            cipher: XChaCha20Poly1305::new(k[64..].into()),
        }
    }

    fn hash(&self, tree: Tree, text: &[u8]) -> [u8; HASH] {
        let mut m = self.hash.clone();
        m.update(tree.name().as_bytes());
        m.update(&[0xff]);
        m.update(text);
        let full = m.finalize().into_bytes();
        let mut out = [0u8; HASH];
        out.copy_from_slice(&full[..HASH]);
        out
    }

    /// The hashed parts of `b`, then its binary suffix (`uuid_ids`: a last
    /// text part that is a UUID kept, see [`KeyShape::Hashed`]).
    fn hashed(
        &self,
        tree: Tree,
        b: &[u8],
        texts: u8,
        suffix: bool,
        uuid_ids: bool,
        whole: bool,
    ) -> Vec<u8> {
        let p = parts(b, texts, suffix, whole);
        let mut out = Vec::with_capacity(p.ends.len() * HASH + 1 + b.len());
        let mut start = 0;
        for (i, &e) in p.ends.iter().enumerate() {
            if uuid_ids && i + 1 == usize::from(texts) && is_uuid(&b[start..e]) {
                out.push(0);
                out.extend_from_slice(&b[start..e]);
            } else {
                out.extend_from_slice(&self.hash(tree, &b[..e]));
            }
            start = e + 1;
        }
        if let Some(r) = p.rest {
            out.push(0);
            out.extend_from_slice(&b[r..]);
        }
        out
    }

    /// How `key` is stored in `tree` (`None`: as it is).
    pub(crate) fn stored_key(&self, tree: Tree, key: &[u8]) -> Option<Vec<u8>> {
        match key_shape(tree) {
            KeyShape::Plain => None,
            KeyShape::Mixed if !key.contains(&0) => None,
            KeyShape::Mixed => {
                let mut out = vec![0];
                out.extend_from_slice(&self.hashed(tree, key, 2, false, false, true));
                Some(out)
            }
            KeyShape::Dedup => Some(match key.iter().position(|&c| c == 0) {
                None => self.hash(tree, key).to_vec(),
                Some(p) => {
                    let rest = &key[p + 1..];
                    let mid = dedup_middle_len(rest);
                    let mut out = self.hash(tree, &key[..p]).to_vec();
                    out.push(0);
                    out.extend_from_slice(&rest[..mid]);
                    if mid < rest.len() {
                        out.extend_from_slice(&self.hash(tree, key));
                    }
                    out
                }
            }),
            KeyShape::Hashed {
                texts: 1,
                uuid_ids: true,
                ..
            } if is_uuid(first_part(key)) => None,
            KeyShape::Hashed {
                texts,
                suffix,
                uuid_ids,
            } => Some(self.hashed(tree, key, texts, suffix, uuid_ids, true)),
        }
    }

    /// The stored prefix under which every key starting with `prefix` is.
    fn stored_prefix(&self, tree: Tree, prefix: &[u8]) -> Vec<u8> {
        match key_shape(tree) {
            KeyShape::Plain => prefix.to_vec(),
            KeyShape::Mixed => Vec::new(),
            KeyShape::Dedup => match prefix.iter().position(|&c| c == 0) {
                None => Vec::new(),
                Some(p) => {
                    let rest = &prefix[p + 1..];
                    let mut out = self.hash(tree, &prefix[..p]).to_vec();
                    out.push(0);
                    out.extend_from_slice(&rest[..dedup_middle_len(rest)]);
                    out
                }
            },
            // One text part, ids kept: a whole UUID is its own prefix; a part
            // of one may be a kept id or a hashed key (scan everything).
            KeyShape::Hashed {
                texts: 1,
                uuid_ids: true,
                suffix,
            } => match parts(prefix, 1, suffix, false).ends.first() {
                Some(&e) if is_uuid(&prefix[..e]) => prefix.to_vec(),
                Some(_) => self.hashed(tree, prefix, 1, suffix, false, false),
                None => Vec::new(),
            },
            KeyShape::Hashed {
                texts,
                suffix,
                uuid_ids,
            } => self.hashed(tree, prefix, texts, suffix, uuid_ids, false),
        }
    }

    fn nonce(&self, stored_key: &[u8]) -> XNonce {
        let mut m = self.nonce.clone();
        m.update(stored_key);
        let full = m.finalize().into_bytes();
        *XNonce::from_slice(&full[..24])
    }

    /// The stored value of `value` under the stored key `raw` of `orig`.
    pub(crate) fn wrap(&self, raw: &[u8], orig: &[u8], value: &[u8]) -> Result<Vec<u8>> {
        let ct = self
            .cipher
            .encrypt(
                &self.nonce(raw),
                Payload {
                    msg: orig,
                    aad: raw,
                },
            )
            .map_err(|_| Error::storage("record key encryption failed"))?;
        let len = u32::try_from(ct.len())
            .map_err(|_| Error::invalid("key", "longer than 4 GiB"))?
            .to_le_bytes();
        let mut out = Vec::with_capacity(5 + ct.len() + value.len());
        out.push(ENVELOPE);
        out.extend_from_slice(&len);
        out.extend_from_slice(&ct);
        out.extend_from_slice(value);
        Ok(out)
    }

    /// Where the value starts in a stored value, and its sealed key.
    fn split(stored: &[u8]) -> Result<(&[u8], usize)> {
        let bad = || {
            Error::corrupted(
                "a record of an encrypted store lacks its sealed key (altered, or written without sealed keys)",
            )
        };
        let Some((&ENVELOPE, body)) = stored.split_first() else {
            return Err(bad());
        };
        let len = body
            .get(..4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_le_bytes)
            .ok_or_else(bad)? as usize;
        let ct = body.get(4..4 + len).ok_or_else(bad)?;
        Ok((ct, 5 + len))
    }

    /// The original key of the entry `raw` and where its value starts.
    pub(crate) fn unwrap(&self, raw: &[u8], stored: &[u8]) -> Result<(Vec<u8>, usize)> {
        let (ct, off) = Self::split(stored)?;
        let orig = self
            .cipher
            .decrypt(&self.nonce(raw), Payload { msg: ct, aad: raw })
            .map_err(|_| {
                Error::corrupted(
                    "a sealed record key failed authentication: it was altered, moved or written with another encryption key",
                )
            })?;
        Ok((orig, off))
    }
}

/// The key up to its first `0x00`.
fn first_part(key: &[u8]) -> &[u8] {
    key.iter().position(|&c| c == 0).map_or(key, |p| &key[..p])
}

/// Whether `b` is a canonical UUID (`8-4-4-4-12` lowercase hexadecimal, as
/// the engine writes its generated ids).
fn is_uuid(b: &[u8]) -> bool {
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
        })
}

/// The value part of a stored value.
fn strip(stored: Bytes) -> Result<Bytes> {
    let (_, off) = KeySeal::split(&stored)?;
    Ok(stored.subslice(off, stored.len() - off))
}

/// A tree of an encrypted store whose keys are sealed: the backend's own
/// tree (sled or PostgreSQL, keys as stored) behind the sealing.
#[derive(Clone)]
pub(crate) struct SealedTree {
    pub(super) tree: Box<KvTree>,
    seal: Arc<KeySeal>,
    name: Tree,
}

impl std::fmt::Debug for SealedTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealedTree({})", self.name.name())
    }
}

impl SealedTree {
    /// `tree` (named `name`) with keys sealed by `seal`; `None` for a tree
    /// whose keys stay plain.
    pub(crate) fn new(tree: KvTree, seal: &Arc<KeySeal>, name: Tree) -> Option<Self> {
        (key_shape(name) != KeyShape::Plain).then(|| SealedTree {
            tree: Box::new(tree),
            seal: Arc::clone(seal),
            name,
        })
    }

    fn key(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.seal.stored_key(self.name, key)
    }

    pub(super) fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        match self.key(key) {
            None => self.tree.get(key),
            Some(raw) => self.tree.get(raw)?.map(strip).transpose(),
        }
    }

    pub(super) fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        match self.key(key) {
            None => self.tree.insert(key, value),
            Some(raw) => {
                let v = self.seal.wrap(&raw, key, value)?;
                self.tree.insert(raw, v)
            }
        }
    }

    pub(super) fn remove(&self, key: &[u8]) -> Result<Option<Bytes>> {
        match self.key(key) {
            None => self.tree.remove(key),
            Some(raw) => self.tree.remove(raw)?.map(strip).transpose(),
        }
    }

    pub(super) fn contains_key(&self, key: &[u8]) -> Result<bool> {
        match self.key(key) {
            None => self.tree.contains_key(key),
            Some(raw) => self.tree.contains_key(raw),
        }
    }

    /// `compare_and_swap` on the value part: the stored value it compared is
    /// the one swapped.
    pub(super) fn compare_and_swap(
        &self,
        key: &[u8],
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<std::result::Result<(), CasMismatch>> {
        let Some(raw) = self.key(key) else {
            return self.tree.compare_and_swap(key, old, new);
        };
        let current = self.tree.get(&raw)?;
        let value = current.clone().map(strip).transpose()?;
        if value.as_deref() != old {
            return Ok(Err(CasMismatch));
        }
        let new = new.map(|n| self.seal.wrap(&raw, key, n)).transpose()?;
        self.tree
            .compare_and_swap(raw, current.as_deref(), new.as_deref())
    }

    /// Whether any key starts with `prefix`. A prefix that ends at a part
    /// boundary (a context's `ctx 0x00`) reads one stored entry; any other is
    /// a scan.
    pub(super) fn has_prefix(&self, prefix: &[u8]) -> Result<bool> {
        let exact = matches!(key_shape(self.name), KeyShape::Hashed { .. })
            && (prefix.is_empty() || prefix.last() == Some(&0));
        if !exact {
            return self
                .scan_prefix(prefix)
                .next_front()
                .transpose()
                .map(|e| e.is_some());
        }
        let stored = self.seal.stored_prefix(self.name, prefix);
        Ok(self.tree.scan_prefix(stored).next().transpose()?.is_some())
    }

    pub(super) fn scan_prefix(&self, prefix: &[u8]) -> SealedIter {
        let stored = self.seal.stored_prefix(self.name, prefix);
        self.collect(&stored, |k| k.starts_with(prefix))
    }

    pub(super) fn range(&self, range: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> SealedIter {
        self.collect(&[], |k| {
            let above = match &range.0 {
                Bound::Included(s) => k >= s.as_slice(),
                Bound::Excluded(s) => k > s.as_slice(),
                Bound::Unbounded => true,
            };
            let below = match &range.1 {
                Bound::Included(e) => k <= e.as_slice(),
                Bound::Excluded(e) => k < e.as_slice(),
                Bound::Unbounded => true,
            };
            above && below
        })
    }

    pub(super) fn len(&self) -> Result<usize> {
        self.tree.len()
    }

    pub(super) fn apply_batch(&self, ops: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> Result<()> {
        let mut b = Batch::default();
        for (k, v) in ops {
            match (self.key(&k), v) {
                (None, Some(v)) => b.insert(k, v),
                (None, None) => b.remove(k),
                (Some(raw), Some(v)) => {
                    let v = self.seal.wrap(&raw, &k, &v)?;
                    b.insert(raw, v)
                }
                (Some(raw), None) => b.remove(raw),
            }
        }
        self.tree.apply_batch(b)
    }

    pub(super) fn tx_get(&self, t: &TxTree<'_>, key: &[u8]) -> TxResult<Option<Bytes>> {
        Ok(match self.key(key) {
            None => t.get(key)?,
            Some(raw) => t.get(raw)?.map(strip).transpose()?,
        })
    }

    pub(super) fn tx_insert(&self, t: &TxTree<'_>, key: &[u8], value: &[u8]) -> TxResult<()> {
        match self.key(key) {
            None => t.insert(key, value)?,
            Some(raw) => {
                let v = self.seal.wrap(&raw, key, value)?;
                t.insert(raw, v)?
            }
        };
        Ok(())
    }

    pub(super) fn tx_remove(&self, t: &TxTree<'_>, key: &[u8]) -> TxResult<Option<Bytes>> {
        Ok(match self.key(key) {
            None => t.remove(key)?,
            Some(raw) => t.remove(raw)?.map(strip).transpose()?,
        })
    }

    /// Whether the stored key `raw` keeps its key as stored (plain or plain
    /// by shape), or is a sealed key whose sealed original hashes back to it.
    fn is_stored_form(&self, raw: &[u8], stored: &[u8]) -> bool {
        if self.is_plain_entry(raw) {
            return true;
        }
        self.seal
            .unwrap(raw, stored)
            .is_ok_and(|(orig, _)| self.key(&orig).as_deref() == Some(raw))
    }

    /// Whether the stored key `raw` is a key kept as written (the engine's own
    /// `meta` records, generated ids): such a key is stored as itself, while
    /// a sealed key (hashes) never reads as one.
    fn is_plain_entry(&self, raw: &[u8]) -> bool {
        match key_shape(self.name) {
            KeyShape::Mixed => raw.first() != Some(&0) && !raw.contains(&0),
            _ => self.key(raw).is_none(),
        }
    }

    /// The original key and value of a stored entry.
    fn decode(&self, raw: Bytes, stored: Bytes) -> Result<(Bytes, Bytes)> {
        if self.is_plain_entry(&raw) {
            return Ok((raw, stored));
        }
        let (orig, off) = self.seal.unwrap(&raw, &stored)?;
        Ok((Bytes::from(orig), stored.subslice(off, stored.len() - off)))
    }

    /// The entries under the stored prefix `stored` whose original key passes
    /// `keep`, in original key order.
    fn collect(&self, stored: &[u8], keep: impl Fn(&[u8]) -> bool) -> SealedIter {
        let mut items = Vec::new();
        let mut budget = SCAN_VALUE_BUDGET;
        for r in self.tree.scan_prefix(stored) {
            let entry = r.and_then(|(raw, v)| Ok((raw.clone(), self.decode(raw, v)?)));
            let (raw, (orig, value)) = match entry {
                Ok(e) => e,
                Err(e) => return SealedIter::failed((*self.tree).clone(), e),
            };
            if !keep(&orig) {
                continue;
            }
            let value = (value.len() <= budget).then(|| {
                budget -= value.len();
                value
            });
            items.push(Item { orig, raw, value });
        }
        items.sort_by(|a, b| a.orig.cmp(&b.orig));
        SealedIter {
            tree: (*self.tree).clone(),
            items: items.into(),
            error: None,
        }
    }
}

struct Item {
    orig: Bytes,
    raw: Bytes,
    /// `None`: read again by key (over the scan's memory budget).
    value: Option<Bytes>,
}

/// A scan of a [`SealedTree`]: original keys in order.
pub(crate) struct SealedIter {
    tree: KvTree,
    items: VecDeque<Item>,
    error: Option<Error>,
}

impl SealedIter {
    fn failed(tree: KvTree, e: Error) -> Self {
        SealedIter {
            tree,
            items: VecDeque::new(),
            error: Some(e),
        }
    }

    fn resolve(&self, it: Item) -> Option<Result<(Bytes, Bytes)>> {
        match it.value {
            Some(v) => Some(Ok((it.orig, v))),
            None => match self.tree.get(&it.raw) {
                Ok(Some(v)) => Some(strip(v).map(|v| (it.orig, v))),
                // Removed since the scan began.
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            },
        }
    }

    pub(super) fn next_front(&mut self) -> Option<Result<(Bytes, Bytes)>> {
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        while let Some(it) = self.items.pop_front() {
            if let Some(r) = self.resolve(it) {
                return Some(r);
            }
        }
        None
    }

    pub(super) fn next_back(&mut self) -> Option<Result<(Bytes, Bytes)>> {
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        while let Some(it) = self.items.pop_back() {
            if let Some(r) = self.resolve(it) {
                return Some(r);
            }
        }
        None
    }
}

#[path = "keys_rewrite.rs"]
mod rewrite;
pub(crate) use rewrite::{reseal_tree, seal_plaintext_keys, unseal_keys};

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
