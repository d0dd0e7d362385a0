//! A compact, contiguous in-memory form of a `serde_json::Value`: the decoded
//! short-term cache's entries (see `decoded_cache`).
//!
//! A `Value` tree is ~10 separate heap blocks (a map node of ~640 bytes for up
//! to 11 entries, every key and string its own block); a cache of 10k of them
//! spreads ~12 MB over the heap, and cloning one out walks a dozen cache lines
//! in as many places. The tape holds the same value in one block of about the
//! size of its MessagePack encoding (~270 bytes for the benchmark's 4-field
//! value), read front to back when a `Value` is built from it. It is private
//! to the process (never stored): lengths and numbers are little-endian, in
//! pre-order:
//!
//! | tag | payload |
//! |---|---|
//! | 0 null, 1 false, 2 true | – |
//! | 3 u64, 4 i64, 5 f64 | 8 bytes |
//! | 6 string | u32 length, UTF-8 bytes |
//! | 7 array | u32 count, the elements |
//! | 8 object | u32 count, then per entry: u32 key length, key bytes, the value |

use serde_json::{Map, Number, Value};

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const U64: u8 = 3;
const I64: u8 = 4;
const F64: u8 = 5;
const STRING: u8 = 6;
const ARRAY: u8 = 7;
const OBJECT: u8 = 8;

/// Bytes [`encode`] appends for `v`.
pub(crate) fn encoded_len(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) => 1,
        Value::Number(_) => 9,
        Value::String(s) => 5 + s.len(),
        Value::Array(a) => 5 + a.iter().map(encoded_len).sum::<usize>(),
        Value::Object(m) => {
            5 + m
                .iter()
                .map(|(k, v)| 4 + k.len() + encoded_len(v))
                .sum::<usize>()
        }
    }
}

/// Append `v` to `out`; `None` (and `out` partly written) when a string,
/// array or object exceeds `u32::MAX` bytes or entries.
pub(crate) fn encode(v: &Value, out: &mut Vec<u8>) -> Option<()> {
    match v {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Number(n) => {
            let (tag, bits) = if let Some(u) = n.as_u64() {
                (U64, u.to_le_bytes())
            } else if let Some(i) = n.as_i64() {
                (I64, i.to_le_bytes())
            } else {
                (F64, n.as_f64()?.to_le_bytes())
            };
            out.push(tag);
            out.extend_from_slice(&bits);
        }
        Value::String(s) => {
            out.push(STRING);
            put_str(s, out)?;
        }
        Value::Array(a) => {
            out.push(ARRAY);
            put_len(a.len(), out)?;
            for x in a {
                encode(x, out)?;
            }
        }
        Value::Object(m) => {
            out.push(OBJECT);
            put_len(m.len(), out)?;
            for (k, x) in m {
                put_str(k, out)?;
                encode(x, out)?;
            }
        }
    }
    Some(())
}

fn put_len(n: usize, out: &mut Vec<u8>) -> Option<()> {
    out.extend_from_slice(&u32::try_from(n).ok()?.to_le_bytes());
    Some(())
}

fn put_str(s: &str, out: &mut Vec<u8>) -> Option<()> {
    put_len(s.len(), out)?;
    out.extend_from_slice(s.as_bytes());
    Some(())
}

/// The value at the start of `tape` (written by [`encode`]); `None` when the
/// bytes are not a tape (never for what `encode` wrote: callers treat it as a
/// cache miss).
pub(crate) fn decode(tape: &[u8]) -> Option<Value> {
    let mut r = Reader { b: tape };
    let v = r.value(0)?;
    r.b.is_empty().then_some(v)
}

/// Deeper than any value the engine accepts (`validate::value` bounds the depth);
/// a guard against unbounded recursion on a corrupted tape.
const MAX_DEPTH: usize = 1024;

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Some(head)
    }

    fn word(&mut self) -> Option<[u8; 8]> {
        self.take(8)?.try_into().ok()
    }

    fn len(&mut self) -> Option<usize> {
        let b: [u8; 4] = self.take(4)?.try_into().ok()?;
        usize::try_from(u32::from_le_bytes(b)).ok()
    }

    fn string(&mut self) -> Option<String> {
        let n = self.len()?;
        Some(std::str::from_utf8(self.take(n)?).ok()?.to_owned())
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let (&tag, rest) = self.b.split_first()?;
        self.b = rest;
        Some(match tag {
            NULL => Value::Null,
            FALSE => Value::Bool(false),
            TRUE => Value::Bool(true),
            U64 => Value::Number(u64::from_le_bytes(self.word()?).into()),
            I64 => Value::Number(i64::from_le_bytes(self.word()?).into()),
            F64 => Value::Number(Number::from_f64(f64::from_le_bytes(self.word()?))?),
            STRING => Value::String(self.string()?),
            ARRAY => {
                let n = self.len()?;
                // Each element takes at least one byte: a corrupted count cannot
                // reserve more than the tape's length.
                let mut a = Vec::with_capacity(n.min(self.b.len()));
                for _ in 0..n {
                    a.push(self.value(depth + 1)?);
                }
                Value::Array(a)
            }
            OBJECT => {
                let n = self.len()?;
                let mut m = Map::new();
                for _ in 0..n {
                    let k = self.string()?;
                    let v = self.value(depth + 1)?;
                    m.insert(k, v);
                }
                Value::Object(m)
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(v: &Value) {
        let mut out = Vec::new();
        encode(v, &mut out).expect("encodable");
        assert_eq!(out.len(), encoded_len(v), "{v}");
        assert_eq!(decode(&out).as_ref(), Some(v));
    }

    #[test]
    fn values_round_trip() {
        for v in [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-1),
            json!(1.5),
            json!(-0.0),
            json!(f64::MAX),
            json!(""),
            json!("héllo \u{1F600} \"quoted\"\n"),
            json!([]),
            json!({}),
            json!({"text": "a b c", "step": 42, "done": true, "refs": ["ep-1", "ep-2"]}),
            json!({"nested": {"deep": [[1, 2, {"x": null}], [], {}]}, "": "empty key"}),
        ] {
            round_trip(&v);
        }
    }

    #[test]
    fn numbers_keep_their_kind() {
        let mut out = Vec::new();
        encode(&json!([1, -1, 1.0]), &mut out).expect("encodable");
        let v = decode(&out).expect("decodes");
        assert!(v[0].is_u64() && v[1].is_i64() && v[2].is_f64(), "{v}");
    }

    #[test]
    fn malformed_tapes_are_refused() {
        let mut out = Vec::new();
        encode(&json!({"k": ["v", 1]}), &mut out).expect("encodable");
        for cut in 0..out.len() {
            assert_eq!(decode(&out[..cut]), None, "cut at {cut}");
        }
        let mut extra = out.clone();
        extra.push(NULL);
        assert_eq!(decode(&extra), None);
        assert_eq!(decode(&[99]), None);
        // A string that is not UTF-8.
        assert_eq!(decode(&[STRING, 1, 0, 0, 0, 0xff]), None);
        // A huge array count with nothing behind it.
        assert_eq!(decode(&[ARRAY, 0xff, 0xff, 0xff, 0xff]), None);
    }
}
