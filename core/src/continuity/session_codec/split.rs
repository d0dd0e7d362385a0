//! Level 2: stream split — a JSON value as a tag stream with interned strings, which lz4 and Huffman compress better than its text.

#[allow(unused_imports)]
use super::*;

pub(super) const T_NULL: u8 = 0;

pub(super) const T_FALSE: u8 = 1;

pub(super) const T_TRUE: u8 = 2;

pub(super) const T_UINT: u8 = 3;

pub(super) const T_NEGINT: u8 = 4;

pub(super) const T_F64: u8 = 5;

pub(super) const T_STR: u8 = 6;

pub(super) const T_STR_REF: u8 = 7;

pub(super) const T_ARRAY: u8 = 8;

pub(super) const T_OBJECT: u8 = 9;

pub(super) const T_NUM_TEXT: u8 = 10;

/// Strings up to this many bytes are interned (later occurrences become references).
pub(super) const INTERN_MAX: usize = 64;

#[derive(Default)]
pub(super) struct SplitEnc<'a> {
    shape: Vec<u8>,
    keys: Vec<u8>,
    nums: Vec<u8>,
    strs: Vec<u8>,
    key_ids: HashMap<&'a str, u64>,
    str_ids: HashMap<&'a str, u64>,
}

impl<'a> SplitEnc<'a> {
    pub(super) fn value(&mut self, v: &'a Value) {
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

    pub(super) fn number(&mut self, n: &Number) {
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

    pub(super) fn string(&mut self, s: &'a str) {
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

pub(super) struct SplitDec<'a> {
    shape: Reader<'a>,
    keys: Reader<'a>,
    nums: Reader<'a>,
    strs: Reader<'a>,
    key_table: Vec<String>,
    str_table: Vec<String>,
    max_depth: usize,
}

impl SplitDec<'_> {
    pub(super) fn bad(why: impl Into<String>) -> Error {
        Error::corrupted(format!("session level-2 payload: {}", why.into()))
    }

    pub(super) fn text(r: &mut Reader<'_>, n: usize) -> Result<String> {
        let b = r.bytes(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| Self::bad("non-UTF-8 text"))
    }

    pub(super) fn value(&mut self, depth: usize) -> Result<Value> {
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
