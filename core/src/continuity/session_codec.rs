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

pub(crate) use crate::storage::codec::unlz4;
use crate::{Error, Result};

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
    Ok(rmp_serde::to_vec(&Canon(v))?)
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

// ---------------------------------------------------------------------------
// entropy stage (levels 2 and 3): canonical Huffman over the lz4 output

/// Longest Huffman code; the decoder uses a table of `1 << HUFF_MAX_BITS` entries.
const HUFF_MAX_BITS: u32 = 12;
const PACK_LZ4: u8 = 0;
const PACK_LZ4_HUFFMAN: u8 = 1;

/// Huffman code lengths (0 = unused symbol) for byte frequencies, at most `HUFF_MAX_BITS`.
fn code_lengths(freq: &[u64; 256]) -> [u8; 256] {
    let mut f = *freq;
    loop {
        let lens = huffman_lengths(&f);
        if lens.iter().all(|&l| u32::from(l) <= HUFF_MAX_BITS) {
            return lens;
        }
        // Flatten the distribution and retry; converges (all-ones gives depth <= 8).
        for x in f.iter_mut().filter(|x| **x > 0) {
            *x = (*x >> 1).max(1);
        }
    }
}

fn huffman_lengths(f: &[u64; 256]) -> [u8; 256] {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut lens = [0u8; 256];
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = (0..256)
        .filter(|&s| f[s] > 0)
        .map(|s| Reverse((f[s], s)))
        .collect();
    match heap.len() {
        0 => return lens,
        1 => {
            if let Some(Reverse((_, s))) = heap.peek() {
                lens[*s] = 1;
            }
            return lens;
        }
        _ => {}
    }
    let mut parent = vec![usize::MAX; 512];
    let mut next = 256usize;
    while heap.len() > 1 {
        let (Some(Reverse((wa, a))), Some(Reverse((wb, b)))) = (heap.pop(), heap.pop()) else {
            break;
        };
        parent[a] = next;
        parent[b] = next;
        heap.push(Reverse((wa + wb, next)));
        next += 1;
    }
    for s in 0..256 {
        if f[s] > 0 {
            let mut d = 0u8;
            let mut n = s;
            while parent[n] != usize::MAX {
                n = parent[n];
                d = d.saturating_add(1);
            }
            lens[s] = d;
        }
    }
    lens
}

/// Canonical codes for `lens`, bit-reversed for an LSB-first bit stream.
fn canonical_codes(lens: &[u8; 256]) -> [u32; 256] {
    let mut order: Vec<usize> = (0..256).filter(|&s| lens[s] > 0).collect();
    order.sort_by_key(|&s| (lens[s], s));
    let mut codes = [0u32; 256];
    let mut code = 0u32;
    let mut prev = 0u8;
    for s in order {
        code <<= lens[s] - prev;
        prev = lens[s];
        codes[s] = code.reverse_bits() >> (32 - u32::from(lens[s]));
        code += 1;
    }
    codes
}

/// `varint(n) | 128 bytes of 4-bit code lengths | LSB-first bit stream`.
fn huffman_encode(input: &[u8]) -> Vec<u8> {
    let mut freq = [0u64; 256];
    for &b in input {
        freq[b as usize] += 1;
    }
    let lens = code_lengths(&freq);
    let codes = canonical_codes(&lens);
    let mut out = Vec::with_capacity(input.len() / 2 + 160);
    put_varint(&mut out, input.len() as u64);
    for pair in lens.chunks_exact(2) {
        out.push(pair[0] | (pair[1] << 4));
    }
    let mut acc: u64 = 0;
    let mut nbits: u32 = 0;
    for &b in input {
        acc |= u64::from(codes[b as usize]) << nbits;
        nbits += u32::from(lens[b as usize]);
        while nbits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            nbits -= 8;
        }
    }
    if nbits > 0 {
        out.push(acc as u8);
    }
    out
}

fn huffman_decode(input: &[u8], max_len: usize) -> Result<Vec<u8>> {
    let bad = |why: &str| Error::corrupted(format!("session payload (huffman): {why}"));
    let mut r = Reader::new(input, "session payload (huffman)");
    let n = r.len()?;
    if n > max_len {
        return Err(bad("declared length too large"));
    }
    let packed = r.bytes(128)?;
    let mut lens = [0u8; 256];
    for (i, b) in packed.iter().enumerate() {
        lens[2 * i] = b & 0x0f;
        lens[2 * i + 1] = b >> 4;
    }
    if lens.iter().any(|&l| u32::from(l) > HUFF_MAX_BITS) {
        return Err(bad("code length above the maximum"));
    }
    let size = 1usize << HUFF_MAX_BITS;
    let kraft: usize = lens.iter().filter(|&&l| l > 0).map(|&l| size >> l).sum();
    if kraft > size {
        return Err(bad("code lengths do not form a prefix code"));
    }
    let codes = canonical_codes(&lens);
    // (symbol, length); length 0 marks an unused bit pattern.
    let mut table = vec![(0u8, 0u8); size];
    for s in 0..256 {
        let l = lens[s];
        if l == 0 {
            continue;
        }
        let step = 1usize << l;
        let mut i = codes[s] as usize;
        while i < size {
            table[i] = (s as u8, l);
            i += step;
        }
    }
    let bits = r.rest();
    let total_bits = bits.len() as u64 * 8;
    if n as u64 > total_bits {
        return Err(bad("declared length exceeds the bit stream"));
    }
    let mut used: u64 = 0;
    let mut out = Vec::with_capacity(n);
    let mut acc: u64 = 0;
    let mut nbits: u32 = 0;
    let mut pos = 0usize;
    let mask = (size - 1) as u64;
    while out.len() < n {
        while nbits <= 56 && pos < bits.len() {
            acc |= u64::from(bits[pos]) << nbits;
            nbits += 8;
            pos += 1;
        }
        let (sym, l) = table[(acc & mask) as usize];
        if l == 0 {
            return Err(bad("invalid code"));
        }
        used += u64::from(l);
        if used > total_bits {
            return Err(bad("truncated bit stream"));
        }
        out.push(sym);
        acc >>= l;
        nbits = nbits.saturating_sub(u32::from(l));
    }
    Ok(out)
}

/// lz4, then a Huffman stage over the lz4 output when that makes it smaller.
pub(crate) fn pack(bytes: &[u8]) -> Vec<u8> {
    let l = lz4(bytes);
    let h = huffman_encode(&l);
    let mut out = Vec::with_capacity(l.len().min(h.len()) + 1);
    if h.len() < l.len() {
        out.push(PACK_LZ4_HUFFMAN);
        out.extend_from_slice(&h);
    } else {
        out.push(PACK_LZ4);
        out.extend_from_slice(&l);
    }
    out
}

/// Inverse of [`pack`], refusing more than `max_len` bytes of output.
pub(crate) fn unpack(payload: &[u8], max_len: usize, what: &str) -> Result<Vec<u8>> {
    match payload.split_first() {
        Some((&PACK_LZ4, rest)) => unlz4(rest, max_len, what),
        Some((&PACK_LZ4_HUFFMAN, rest)) => {
            let lz_bound = max_len.saturating_add(max_len / 255).saturating_add(64);
            let l = huffman_decode(rest, lz_bound)?;
            unlz4(&l, max_len, what)
        }
        Some((m, _)) => Err(Error::corrupted(format!("{what}: unknown packing {m}"))),
        None => Err(Error::corrupted(format!("{what}: empty payload"))),
    }
}

// ---------------------------------------------------------------------------
// level 2: stream split

const T_NULL: u8 = 0;
const T_FALSE: u8 = 1;
const T_TRUE: u8 = 2;
const T_UINT: u8 = 3;
const T_NEGINT: u8 = 4;
const T_F64: u8 = 5;
const T_STR: u8 = 6;
const T_STR_REF: u8 = 7;
const T_ARRAY: u8 = 8;
const T_OBJECT: u8 = 9;
const T_NUM_TEXT: u8 = 10;

/// Strings up to this many bytes are interned (later occurrences become references).
const INTERN_MAX: usize = 64;

#[derive(Default)]
struct SplitEnc<'a> {
    shape: Vec<u8>,
    keys: Vec<u8>,
    nums: Vec<u8>,
    strs: Vec<u8>,
    key_ids: HashMap<&'a str, u64>,
    str_ids: HashMap<&'a str, u64>,
}

impl<'a> SplitEnc<'a> {
    fn value(&mut self, v: &'a Value) {
        match v {
            Value::Null => self.shape.push(T_NULL),
            Value::Bool(false) => self.shape.push(T_FALSE),
            Value::Bool(true) => self.shape.push(T_TRUE),
            Value::Number(n) => self.number(n),
            Value::String(s) => self.string(s),
            Value::Array(a) => {
                self.shape.push(T_ARRAY);
                put_varint(&mut self.shape, a.len() as u64);
                for x in a {
                    self.value(x);
                }
            }
            Value::Object(m) => {
                self.shape.push(T_OBJECT);
                put_varint(&mut self.shape, m.len() as u64);
                let mut entries: Vec<(&'a String, &'a Value)> = m.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (k, x) in entries {
                    match self.key_ids.get(k.as_str()) {
                        Some(id) => put_varint(&mut self.shape, id + 1),
                        None => {
                            let id = self.key_ids.len() as u64;
                            self.key_ids.insert(k.as_str(), id);
                            put_varint(&mut self.shape, 0);
                            put_varint(&mut self.shape, k.len() as u64);
                            self.keys.extend_from_slice(k.as_bytes());
                        }
                    }
                    self.value(x);
                }
            }
        }
    }

    fn number(&mut self, n: &Number) {
        if let Some(u) = n.as_u64() {
            self.shape.push(T_UINT);
            put_varint(&mut self.nums, u);
        } else if let Some(i) = n.as_i64() {
            // Negative: store -(i + 1) as an unsigned varint.
            self.shape.push(T_NEGINT);
            put_varint(&mut self.nums, !(i as u64));
        } else if let Some(f) = n
            .as_f64()
            .filter(|f| Number::from_f64(*f).as_ref() == Some(n))
        {
            self.shape.push(T_F64);
            self.nums.extend_from_slice(&f.to_le_bytes());
        } else {
            // Only reachable with serde_json's arbitrary_precision: keep the exact text.
            let t = n.to_string();
            self.shape.push(T_NUM_TEXT);
            put_varint(&mut self.shape, t.len() as u64);
            self.strs.extend_from_slice(t.as_bytes());
        }
    }

    fn string(&mut self, s: &'a str) {
        if s.len() <= INTERN_MAX {
            if let Some(id) = self.str_ids.get(s) {
                self.shape.push(T_STR_REF);
                put_varint(&mut self.shape, *id);
                return;
            }
            let id = self.str_ids.len() as u64;
            self.str_ids.insert(s, id);
        }
        self.shape.push(T_STR);
        put_varint(&mut self.shape, s.len() as u64);
        self.strs.extend_from_slice(s.as_bytes());
    }
}

/// Level 2 payload: stream-split transform, then [`pack`] (lz4 + Huffman).
pub(crate) fn split_encode(v: &Value) -> Vec<u8> {
    let mut enc = SplitEnc::default();
    enc.value(v);
    let mut joined =
        Vec::with_capacity(enc.shape.len() + enc.keys.len() + enc.nums.len() + enc.strs.len() + 16);
    put_varint(&mut joined, enc.shape.len() as u64);
    put_varint(&mut joined, enc.keys.len() as u64);
    put_varint(&mut joined, enc.nums.len() as u64);
    joined.extend_from_slice(&enc.shape);
    joined.extend_from_slice(&enc.keys);
    joined.extend_from_slice(&enc.nums);
    joined.extend_from_slice(&enc.strs);
    pack(&joined)
}

struct SplitDec<'a> {
    shape: Reader<'a>,
    keys: Reader<'a>,
    nums: Reader<'a>,
    strs: Reader<'a>,
    key_table: Vec<String>,
    str_table: Vec<String>,
    max_depth: usize,
}

impl SplitDec<'_> {
    fn bad(why: impl Into<String>) -> Error {
        Error::corrupted(format!("session level-2 payload: {}", why.into()))
    }

    fn text(r: &mut Reader<'_>, n: usize) -> Result<String> {
        let b = r.bytes(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| Self::bad("non-UTF-8 text"))
    }

    fn value(&mut self, depth: usize) -> Result<Value> {
        if depth > self.max_depth {
            return Err(Self::bad("nesting too deep"));
        }
        Ok(match self.shape.u8()? {
            T_NULL => Value::Null,
            T_FALSE => Value::Bool(false),
            T_TRUE => Value::Bool(true),
            T_UINT => Value::from(self.nums.varint()?),
            T_NEGINT => Value::from(!self.nums.varint()? as i64),
            T_F64 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(self.nums.bytes(8)?);
                let f = f64::from_le_bytes(b);
                Value::Number(Number::from_f64(f).ok_or_else(|| Self::bad("non-finite float"))?)
            }
            T_NUM_TEXT => {
                let n = self.shape.len()?;
                let t = Self::text(&mut self.strs, n)?;
                let num: Number = t.parse().map_err(|_| Self::bad("bad number text"))?;
                Value::Number(num)
            }
            T_STR => {
                let n = self.shape.len()?;
                let s = Self::text(&mut self.strs, n)?;
                if s.len() <= INTERN_MAX {
                    self.str_table.push(s.clone());
                }
                Value::String(s)
            }
            T_STR_REF => {
                let id = self.shape.len()?;
                Value::String(
                    self.str_table
                        .get(id)
                        .ok_or_else(|| Self::bad("string reference out of range"))?
                        .clone(),
                )
            }
            T_ARRAY => {
                let n = self.shape.len()?;
                // Every element needs at least one shape byte: bound the allocation.
                let mut a = Vec::with_capacity(n.min(self.shape.buf.len()));
                for _ in 0..n {
                    a.push(self.value(depth + 1)?);
                }
                Value::Array(a)
            }
            T_OBJECT => {
                let n = self.shape.len()?;
                let mut m = Map::new();
                for _ in 0..n {
                    let k = match self.shape.varint()? {
                        0 => {
                            let len = self.shape.len()?;
                            let k = Self::text(&mut self.keys, len)?;
                            self.key_table.push(k.clone());
                            k
                        }
                        id => {
                            let idx = usize::try_from(id - 1)
                                .map_err(|_| Self::bad("key reference out of range"))?;
                            self.key_table
                                .get(idx)
                                .ok_or_else(|| Self::bad("key reference out of range"))?
                                .clone()
                        }
                    };
                    let x = self.value(depth + 1)?;
                    m.insert(k, x);
                }
                Value::Object(m)
            }
            t => return Err(Self::bad(format!("unknown tag {t}"))),
        })
    }
}

/// Inverse of [`split_encode`].
pub(crate) fn split_decode(payload: &[u8], max_len: usize, max_depth: usize) -> Result<Value> {
    let joined = unpack(payload, max_len, "session level-2 payload")?;
    let mut hdr = Reader::new(&joined, "session level-2 header");
    let shape_len = hdr.len()?;
    let keys_len = hdr.len()?;
    let nums_len = hdr.len()?;
    let shape = hdr.bytes(shape_len)?;
    let keys = hdr.bytes(keys_len)?;
    let nums = hdr.bytes(nums_len)?;
    let strs = hdr.rest();
    let mut dec = SplitDec {
        shape: Reader::new(shape, "session level-2 structure"),
        keys: Reader::new(keys, "session level-2 keys"),
        nums: Reader::new(nums, "session level-2 numbers"),
        strs: Reader::new(strs, "session level-2 strings"),
        key_table: Vec::new(),
        str_table: Vec::new(),
        max_depth,
    };
    let v = dec.value(1)?;
    if !(dec.shape.is_empty() && dec.keys.is_empty() && dec.nums.is_empty() && dec.strs.is_empty())
    {
        return Err(SplitDec::bad("trailing bytes"));
    }
    Ok(v)
}

// ---------------------------------------------------------------------------
// level 3: copy/insert delta

/// Block size of the base index: every match of at least `2 * BLOCK - 1` bytes is found.
const BLOCK: usize = 16;

fn block_hash(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    let mut y = [0u8; 8];
    x.copy_from_slice(&b[..8]);
    y.copy_from_slice(&b[8..16]);
    let h = u64::from_le_bytes(x).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ u64::from_le_bytes(y).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    h ^ (h >> 31)
}

fn emit(out: &mut Vec<u8>, literal: &[u8], copy: Option<(usize, usize)>) {
    put_varint(out, literal.len() as u64);
    out.extend_from_slice(literal);
    match copy {
        Some((offset, len)) => {
            put_varint(out, len as u64);
            put_varint(out, offset as u64);
        }
        None => put_varint(out, 0),
    }
}

/// Delta that rebuilds `target` from `base`: `varint(target_len)` then repeated
/// `varint(insert_len) insert_bytes varint(copy_len) [varint(base_offset)]`.
pub(crate) fn delta_encode(base: &[u8], target: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(target.len() / 8 + 16);
    put_varint(&mut out, target.len() as u64);
    if base.len() < BLOCK || target.len() < BLOCK || base.len() >= u32::MAX as usize {
        if !target.is_empty() {
            emit(&mut out, target, None);
        }
        return out;
    }
    let blocks = base.len() / BLOCK;
    let bits = (blocks * 2).next_power_of_two().max(1024).trailing_zeros();
    let mask = (1usize << bits) - 1;
    let mut table = vec![0u32; mask + 1];
    for b in 0..blocks {
        let i = b * BLOCK;
        let slot = (block_hash(&base[i..i + BLOCK]) as usize) & mask;
        table[slot] = (i + 1) as u32;
    }
    let mut lit = 0usize;
    let mut j = 0usize;
    while j + BLOCK <= target.len() {
        let cand = table[(block_hash(&target[j..j + BLOCK]) as usize) & mask];
        if cand != 0 {
            let i = (cand - 1) as usize;
            if base[i..i + BLOCK] == target[j..j + BLOCK] {
                let (mut st, mut sb) = (j, i);
                while st > lit && sb > 0 && target[st - 1] == base[sb - 1] {
                    st -= 1;
                    sb -= 1;
                }
                let (mut et, mut eb) = (j + BLOCK, i + BLOCK);
                while et < target.len() && eb < base.len() && target[et] == base[eb] {
                    et += 1;
                    eb += 1;
                }
                emit(&mut out, &target[lit..st], Some((sb, et - st)));
                lit = et;
                j = et;
                continue;
            }
        }
        j += 1;
    }
    if lit < target.len() {
        emit(&mut out, &target[lit..], None);
    }
    out
}

/// Apply a delta from [`delta_encode`] to `base`.
pub(crate) fn delta_apply(base: &[u8], delta: &[u8], max_len: usize) -> Result<Vec<u8>> {
    let mut r = Reader::new(delta, "session delta");
    let total = r.len()?;
    if total > max_len {
        return Err(Error::corrupted(format!(
            "session delta: target of {total} bytes exceeds {max_len}"
        )));
    }
    // Grow as needed: `total` comes from stored bytes, do not trust it for one big allocation.
    let mut out =
        Vec::with_capacity(total.min(base.len().saturating_add(delta.len()).saturating_mul(2)));
    while out.len() < total {
        let n = r.len()?;
        out.extend_from_slice(r.bytes(n)?);
        let c = r.len()?;
        if c > 0 {
            let off = r.len()?;
            let end = off
                .checked_add(c)
                .filter(|e| *e <= base.len())
                .ok_or_else(|| Error::corrupted("session delta: copy outside its base"))?;
            out.extend_from_slice(&base[off..end]);
        }
        if out.len() > total {
            return Err(Error::corrupted(
                "session delta: output longer than declared",
            ));
        }
        if n == 0 && c == 0 && out.len() < total {
            return Err(Error::corrupted("session delta: empty operation"));
        }
    }
    if !r.is_empty() {
        return Err(Error::corrupted("session delta: trailing bytes"));
    }
    Ok(out)
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
