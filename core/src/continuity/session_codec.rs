//! Pure encoders behind the four session compression levels (see `docs/sessions.md`).
//!
//! * canonical MessagePack: the JSON value with object keys sorted, so the bytes
//!   do not depend on serde_json's map implementation (`preserve_order` or not);
//! * level 1: lz4_flex block over the canonical MessagePack;
//! * level 2: a *stream-split* transform (structure, object keys, numbers and
//!   string text in four separate streams, with repeated keys and short strings
//!   interned) compressed as one lz4_flex block. Grouping like with like gives
//!   lz4's greedy matcher longer, nearer matches than interleaved MessagePack;
//! * level 3: a copy/insert delta of the canonical MessagePack against the
//!   previous version's canonical MessagePack, lz4-compressed.
//!
//! Every decoder bounds-checks its input and fails with `Error::Corrupted`,
//! never a panic.

use std::collections::HashMap;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Number, Value};

use crate::error::DepResult;
pub(crate) use crate::storage::codec::unlz4;
use crate::{Error, Result};

mod delta;
#[allow(unused_imports)]
pub(crate) use delta::*;

mod split;
#[allow(unused_imports)]
pub(crate) use split::*;

mod huffman;
#[allow(unused_imports)]
pub(crate) use huffman::*;

// ---------------------------------------------------------------------------
// canonical MessagePack

/// Serializes a JSON value with object keys in sorted order.
struct Canon<'a>(&'a Value);

impl Serialize for Canon<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(m) => {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, &Canon(v))?;
                }
                map.end()
            }
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&Canon(v))?;
                }
                seq.end()
            }
            other => other.serialize(s),
        }
    }
}

/// Canonical MessagePack of a JSON value (level 0's payload, and the delta domain).
pub(crate) fn canonical(v: &Value) -> Result<Vec<u8>> {
    rmp_serde::to_vec(&Canon(v)).dep()
}

/// Decode canonical MessagePack.
pub(crate) fn from_canonical(bytes: &[u8]) -> Result<Value> {
    rmp_serde::from_slice(bytes)
        .map_err(|e| Error::corrupted_by(format!("session content: {e}"), e))
}

/// 64-bit checksum of canonical bytes (detects a wrong delta base or damaged data; not cryptographic).
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = 0xCBF2_9CE4_8422_2325 ^ (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    for &b in chunks.remainder() {
        h = (h.rotate_left(11) ^ u64::from(b)).wrapping_mul(K);
    }
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^ (h >> 32)
}

// ---------------------------------------------------------------------------
// varints and lz4 helpers

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A bounds-checked reader over a byte slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    fn bad(&self, why: &str) -> Error {
        Error::corrupted(format!("{}: {why} at byte {}", self.what, self.pos))
    }

    pub(crate) fn varint(&mut self) -> Result<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| self.bad("truncated varint"))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.bad("varint too long"))
    }

    pub(crate) fn len(&mut self) -> Result<usize> {
        let v = self.varint()?;
        usize::try_from(v).map_err(|_| self.bad("length out of range"))
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| self.bad("truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or_else(|| self.bad("length overflow"))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or_else(|| self.bad("truncated"))?;
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos.min(self.buf.len())..];
        self.pos = self.buf.len();
        s
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

/// lz4_flex block with the uncompressed size prepended.
pub(crate) fn lz4(bytes: &[u8]) -> Vec<u8> {
    lz4_flex::compress_prepend_size(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({
            "messages": [
                {"role": "user", "content": "hello there", "n": 1, "score": -0.25},
                {"role": "assistant", "content": "hi! how can I help?", "n": 2, "neg": -7},
                {"role": "user", "content": "hello there", "n": 3, "big": u64::MAX, "min": i64::MIN}
            ],
            "state": {"": null, "flags": [true, false], "émoji": "🦀", "long": "x".repeat(200)},
        })
    }

    #[test]
    fn split_roundtrip() {
        let v = sample();
        let enc = split_encode(&v);
        assert_eq!(split_decode(&enc, 1 << 20, 128).unwrap(), v);
        for scalar in [json!(null), json!(1.5), json!(""), json!([]), json!({})] {
            assert_eq!(
                split_decode(&split_encode(&scalar), 1 << 20, 128).unwrap(),
                scalar
            );
        }
    }

    #[test]
    fn canonical_is_order_independent_and_roundtrips() {
        let v = sample();
        let c = canonical(&v).unwrap();
        assert_eq!(from_canonical(&c).unwrap(), v);
        let reordered: Value = serde_json::from_str(r#"{"b": 1, "a": {"z": 1, "y": 2}}"#).unwrap();
        let sorted: Value = serde_json::from_str(r#"{"a": {"y": 2, "z": 1}, "b": 1}"#).unwrap();
        assert_eq!(canonical(&reordered).unwrap(), canonical(&sorted).unwrap());
    }

    #[test]
    fn delta_roundtrip_and_small() {
        let mut x: u64 = 42;
        let base: Vec<u8> = (0..80_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        let mut target = base.clone();
        target.splice(5000..5010, b"changed bytes here".iter().copied());
        target.extend_from_slice(b"appended tail");
        let d = delta_encode(&base, &target);
        assert!(d.len() < 100, "delta of a small edit is small: {}", d.len());
        assert_eq!(delta_apply(&base, &d, 1 << 20).unwrap(), target);
        // Degenerate inputs.
        for (b, t) in [
            (&b""[..], &b""[..]),
            (b"short", b"other"),
            (b"", b"0123456789abcdefghij"),
        ] {
            assert_eq!(delta_apply(b, &delta_encode(b, t), 1 << 20).unwrap(), t);
        }
    }

    #[test]
    fn pack_roundtrip() {
        let mut x: u64 = 7;
        let text: Vec<u8> = (0..50_000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                b"etaoin shrdlu"[(x >> 60) as usize % 13]
            })
            .collect();
        let random: Vec<u8> = (0..5000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                (x >> 56) as u8
            })
            .collect();
        for input in [
            &b""[..],
            b"a",
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            &text,
            &random,
        ] {
            let p = pack(input);
            assert_eq!(unpack(&p, input.len(), "t").unwrap(), input);
            assert!(unpack(&p, input.len().saturating_sub(1), "t").is_err() || input.is_empty());
        }
        assert_eq!(
            pack(&text)[0],
            PACK_LZ4_HUFFMAN,
            "text gets the entropy stage"
        );
        assert!(pack(&text).len() < lz4(&text).len() * 3 / 4);
        // Every single-symbol alphabet and a skewed one with long codes.
        let skewed: Vec<u8> = (0..=255u8)
            .flat_map(|b| std::iter::repeat_n(b, 1 + (b as usize % 40) * (b as usize % 40)))
            .collect();
        assert_eq!(
            huffman_decode(&huffman_encode(&skewed), skewed.len()).unwrap(),
            skewed
        );
        let fib: Vec<u8> = {
            let (mut a, mut b) = (1usize, 1usize);
            (0..20u8)
                .flat_map(|s| {
                    let n = a;
                    (a, b) = (b, a + b);
                    std::iter::repeat_n(s, n)
                })
                .collect()
        };
        let enc = huffman_encode(&fib);
        assert_eq!(huffman_decode(&enc, fib.len()).unwrap(), fib);
    }

    #[test]
    fn damaged_payloads_never_panic() {
        let v = sample();
        let split = split_encode(&v);
        let canon = canonical(&v).unwrap();
        let mut changed = v.clone();
        changed["state"]["long"] = json!("y".repeat(150));
        let target = canonical(&changed).unwrap();
        let delta = pack(&delta_encode(&canon, &target));
        let mut x: u64 = 99;
        for round in 0..3000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (src, which) = match round % 3 {
                0 => (&split, 0),
                1 => (&delta, 1),
                _ => (&canon, 2),
            };
            let mut bad = src.clone();
            let pos = (x >> 33) as usize % bad.len();
            bad[pos] ^= 1 << ((x >> 20) % 8);
            if round % 7 == 0 {
                bad.truncate(pos);
            }
            match which {
                0 => {
                    let _ = split_decode(&bad, 1 << 20, 128);
                }
                1 => {
                    if let Ok(d) = unpack(&bad, 1 << 20, "t") {
                        let _ = delta_apply(&canon, &d, 1 << 20);
                    }
                }
                _ => {
                    let _ = from_canonical(&bad);
                }
            }
        }
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(unpack(&[1, 5], 100, "t").is_err());
        assert!(unpack(&[7, 5], 100, "t").is_err());
        let mut h = huffman_encode(b"hello hello hello");
        h.truncate(h.len() - 2);
        assert!(huffman_decode(&h, 100).is_err());
        let mut bad_lens = vec![4u8];
        bad_lens.extend(std::iter::repeat_n(0x11, 128)); // 256 codes of length 1
        bad_lens.push(0);
        assert!(huffman_decode(&bad_lens, 100).is_err());
        assert!(split_decode(&[1, 2, 3], 1 << 20, 128).is_err());
        assert!(split_decode(&pack(&[0, 0, 0]), 1 << 20, 128).is_err());
        assert!(
            split_decode(
                &pack(&[1, 0, 0, T_ARRAY, 0xff, 0xff, 0xff, 0xff, 0x0f]),
                1 << 20,
                128
            )
            .is_err()
        );
        assert!(delta_apply(b"abc", &[5, 0, 5, 0], 1 << 20).is_err());
        assert!(delta_apply(b"abc", &[200, 1], 100).is_err());
        assert!(unlz4(&[0xff, 0xff, 0xff, 0x7f], 10, "x").is_err());
    }
}
