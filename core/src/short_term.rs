//! Short-term memory: JSON values with an optional TTL, per context.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::millis_to_dt;
use crate::engine::Engine;
use crate::{Error, Memory, Result, codec, validate};

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct StRecord {
    pub value: Value,
    pub stored_at: i64,
    pub expires_at: Option<i64>,
}

/// A short-term entry with its timestamps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShortTermEntry {
    /// The key.
    pub key: String,
    /// The stored JSON value.
    pub value: Value,
    /// When it was stored.
    pub stored_at: DateTime<Utc>,
    /// When it expires, if it has a TTL.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Handle on the short-term layer of one context. Get it from [`Memory::short_term`].
#[derive(Debug, Clone)]
pub struct ShortTerm {
    pub(crate) mem: Memory,
}

impl ShortTerm {
    /// Store `value` under `key`, replacing any previous value; `ttl` makes it expire.
    pub fn store(&self, key: &str, value: Value, ttl: Option<Duration>) -> Result<ShortTermEntry> {
        let e = &self.mem.engine;
        e.timed("short_term.store", || {
            store_in(e, &self.mem.active_ctx(), key, value, ttl)
        })
    }

    /// The value under `key`, or `None` when absent or expired.
    pub fn retrieve(&self, key: &str) -> Result<Option<Value>> {
        let e = &self.mem.engine;
        e.timed("short_term.retrieve", || {
            retrieve_in(e, &self.mem.active_ctx(), key)
        })
    }

    /// The entry under `key` with its timestamps, or `None` when absent or expired.
    pub fn entry(&self, key: &str) -> Result<Option<ShortTermEntry>> {
        let e = &self.mem.engine;
        e.timed("short_term.retrieve", || {
            entry_in(e, &self.mem.active_ctx(), key)
        })
    }

    /// Remove `key`; `true` when something (unexpired) was removed.
    pub fn forget(&self, key: &str) -> Result<bool> {
        let e = &self.mem.engine;
        e.timed("short_term.forget", || {
            validate::key(&e.opts.limits, "key", key)?;
            let old =
                e.t.short_term
                    .remove(codec::ctx_key(&self.mem.active_ctx(), key))?;
            e.after_write()?;
            let now = e.opts.clock.now().timestamp_millis();
            Ok(match old {
                Some(v) => decode_record(e, &v)
                    .map(|r| !expired(&r, now))
                    .unwrap_or(true),
                None => false,
            })
        })
    }

    /// Unexpired keys starting with `prefix` (empty: all), sorted.
    pub fn keys(&self, prefix: &str) -> Result<Vec<String>> {
        let e = &self.mem.engine;
        e.timed("short_term.keys", || {
            let ctx = self.mem.active_ctx();
            let now = e.opts.clock.now().timestamp_millis();
            let mut out = Vec::new();
            for item in e.t.short_term.scan_prefix(codec::ctx_key(&ctx, prefix)) {
                let (k, v) = item?;
                let rec = decode_record(e, &v)?;
                if !expired(&rec, now) {
                    out.push(codec::split_ctx_key(&k)?.1);
                }
            }
            Ok(out)
        })
    }
}

/// Decode a stored short-term record (as written by [`store_in`]; sealed ones opened first):
/// [`codec::MpReader`] for the shape this layer writes — a map of `value`, `stored_at`,
/// `expires_at` — and the serde path for anything else, which accepts or refuses it
/// exactly as before.
pub(crate) fn decode_record(e: &Engine, bytes: &[u8]) -> Result<StRecord> {
    decode_record_with(&e.codec, bytes)
}

/// [`decode_record`] with a codec of its own (fuzzing, tests).
pub(crate) fn decode_record_with(c: &codec::Codec, bytes: &[u8]) -> Result<StRecord> {
    let inner = c.open(bytes)?;
    if let Some(body) = codec::plain_body(&inner)?
        && let Some(rec) = fast_record(&body)
    {
        return Ok(rec);
    }
    codec::decode(&inner)
}

/// The usual record shape read without serde; `None` hands the bytes to the serde path
/// (unknown or repeated fields, other types, trailing bytes, damage).
fn fast_record(body: &[u8]) -> Option<StRecord> {
    let mut r = codec::MpReader::new(body);
    let (mut value, mut stored_at, mut expires_at) = (None, None, None);
    for _ in 0..r.map_len()? {
        match r.str()? {
            "value" if value.is_none() => value = Some(r.value(0)?),
            "stored_at" if stored_at.is_none() => stored_at = Some(r.i64()?),
            "expires_at" if expires_at.is_none() => expires_at = Some(r.opt_i64()?),
            _ => return None,
        }
    }
    if !r.at_end() {
        return None;
    }
    Some(StRecord {
        value: value?,
        stored_at: stored_at?,
        expires_at: expires_at.flatten(),
    })
}

fn expired(r: &StRecord, now_ms: i64) -> bool {
    r.expires_at.is_some_and(|t| t <= now_ms)
}

pub(crate) fn store_in(
    e: &Engine,
    ctx: &str,
    key: &str,
    value: Value,
    ttl: Option<Duration>,
) -> Result<ShortTermEntry> {
    validate::key(&e.opts.limits, "key", key)?;
    validate::value(&e.opts.limits, "value", &value)?;
    if ttl.is_some_and(|t| t.is_zero()) {
        return Err(Error::invalid("ttl", "TTL must be > 0 seconds"));
    }
    let now = e.opts.clock.now();
    let stored_at = now.timestamp_millis();
    let expires_at = match ttl {
        Some(t) => Some(
            stored_at
                .checked_add(
                    i64::try_from(t.as_millis())
                        .map_err(|_| Error::invalid("ttl", "TTL too large"))?,
                )
                .ok_or_else(|| Error::invalid("ttl", "TTL too large"))?,
        ),
        None => None,
    };
    let rec = StRecord {
        value,
        stored_at,
        expires_at,
    };
    let enc = e.codec.encode(&rec)?;
    e.touch_context(ctx)?;
    e.t.short_term.insert(codec::ctx_key(ctx, key), enc)?;
    e.after_write()?;
    Ok(ShortTermEntry {
        key: key.to_owned(),
        value: rec.value,
        stored_at: millis_to_dt(stored_at),
        expires_at: expires_at.map(millis_to_dt),
    })
}

/// Hot path of `retrieve`: no entry struct, the clock only read for items with a TTL.
pub(crate) fn retrieve_in(e: &Engine, ctx: &str, key: &str) -> Result<Option<Value>> {
    validate::key(&e.opts.limits, "key", key)?;
    let Some(v) = codec::with_ctx_key(ctx, key, |k| e.t.short_term.get(k))? else {
        return Ok(None);
    };
    let rec = decode_record(e, &v)?;
    if rec.expires_at.is_some() && expired(&rec, e.opts.clock.now().timestamp_millis()) {
        return Ok(None);
    }
    Ok(Some(rec.value))
}

pub(crate) fn entry_in(e: &Engine, ctx: &str, key: &str) -> Result<Option<ShortTermEntry>> {
    validate::key(&e.opts.limits, "key", key)?;
    let Some(v) = codec::with_ctx_key(ctx, key, |k| e.t.short_term.get(k))? else {
        return Ok(None);
    };
    let rec = decode_record(e, &v)?;
    if expired(&rec, e.opts.clock.now().timestamp_millis()) {
        return Ok(None);
    }
    Ok(Some(ShortTermEntry {
        key: key.to_owned(),
        value: rec.value,
        stored_at: millis_to_dt(rec.stored_at),
        expires_at: rec.expires_at.map(millis_to_dt),
    }))
}

/// Remove every expired item (all contexts). Returns how many were removed.
pub(crate) fn sweep_expired(e: &Engine) -> Result<usize> {
    let now = e.opts.clock.now().timestamp_millis();
    let mut n = 0;
    for item in e.t.short_term.iter() {
        let (k, v) = item?;
        let expired_now = match decode_record(e, &v) {
            Ok(r) => expired(&r, now),
            Err(_) => false,
        };
        if expired_now {
            // Only remove if unchanged since we read it.
            if e.t
                .short_term
                .compare_and_swap(&k, Some(&v), None as Option<&[u8]>)?
                .is_ok()
            {
                n += 1;
            }
        }
    }
    if n > 0 {
        e.after_write()?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EncryptionKey;
    use serde_json::json;

    fn serde_path(c: &codec::Codec, bytes: &[u8]) -> Result<StRecord> {
        codec::decode(&c.open(bytes)?)
    }

    fn same(a: &Result<StRecord>, b: &Result<StRecord>) -> bool {
        match (a, b) {
            (Ok(x), Ok(y)) => {
                x.value == y.value && x.stored_at == y.stored_at && x.expires_at == y.expires_at
            }
            (Err(x), Err(y)) => x.to_string() == y.to_string(),
            _ => false,
        }
    }

    fn values() -> Vec<Value> {
        vec![
            json!(null),
            json!(true),
            json!(0),
            json!(-1),
            json!(-33),
            json!(127),
            json!(128),
            json!(255),
            json!(256),
            json!(65_536),
            json!(-129),
            json!(-40_000),
            json!(-3_000_000_000i64),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1.5),
            json!(-0.25),
            json!(1e300),
            json!(""),
            json!("é ✓ 日本"),
            json!("x".repeat(40)),
            json!("y".repeat(300)),
            json!("z".repeat(70_000)),
            json!([]),
            json!({}),
            json!({"text": "lorem ipsum ".repeat(100), "n": [1, 2, 3], "done": false}),
            json!({"b": 1, "a": {"c": [null, [], {}], "d": {"e": {"f": -7}}}}),
            Value::Array((0..20).map(|i| json!(i)).collect()),
            Value::Array((0..70_000).map(|i| json!(i % 7)).collect()),
            Value::Object((0..40).map(|i| (format!("k{i}"), json!(i))).collect()),
        ]
    }

    /// Every value and TTL shape written by `store_in` reads back the same through the fast
    /// reader as through serde, plaintext (plain and lz4 records) and sealed.
    #[test]
    fn fast_reader_agrees_with_serde() {
        let key = EncryptionKey::new([3; 32]);
        for c in [codec::Codec::new(None), codec::Codec::new(Some(&key))] {
            for value in values() {
                for expires_at in [None, Some(1_700_000_000_123), Some(-5)] {
                    let rec = StRecord {
                        value: value.clone(),
                        stored_at: 1_700_000_000_000,
                        expires_at,
                    };
                    let bytes = c.encode(&rec).unwrap();
                    let inner = c.open(&bytes).unwrap();
                    let body = codec::plain_body(&inner).unwrap().unwrap();
                    let fast =
                        fast_record(&body).expect("the fast reader takes what store_in writes");
                    assert_eq!(fast.value, value);
                    assert_eq!(fast.expires_at, expires_at);
                    assert!(same(&Ok(fast), &serde_path(&c, &bytes)));
                    assert!(same(
                        &decode_record_with(&c, &bytes),
                        &serde_path(&c, &bytes)
                    ));
                }
            }
        }
    }

    /// Shapes the fast reader does not take go to serde, which decides as before: older or
    /// foreign encodings are still read, damage is still refused with the same error.
    #[test]
    fn other_shapes_fall_back_to_serde() {
        let c = codec::Codec::new(None);
        #[derive(Serialize)]
        struct Extra<'a> {
            value: &'a Value,
            stored_at: i64,
            expires_at: Option<i64>,
            note: &'a str,
        }
        #[derive(Serialize)]
        struct NoExpiry {
            stored_at: i64,
            value: Value,
        }
        let v = json!({"a": [1, 2]});
        let tagged = |raw: Vec<u8>| [vec![0u8], raw].concat();
        let cases: Vec<Vec<u8>> = vec![
            // Positional (array) form, as `rmp_serde::to_vec` writes a struct.
            tagged(
                rmp_serde::to_vec(&StRecord {
                    value: v.clone(),
                    stored_at: 5,
                    expires_at: None,
                })
                .unwrap(),
            ),
            // An unknown field, fields in another order, a missing optional field.
            tagged(
                rmp_serde::to_vec_named(&Extra {
                    value: &v,
                    stored_at: 5,
                    expires_at: Some(9),
                    note: "n",
                })
                .unwrap(),
            ),
            tagged(
                rmp_serde::to_vec_named(&NoExpiry {
                    stored_at: 5,
                    value: v.clone(),
                })
                .unwrap(),
            ),
            // A binary string inside the value, a missing field, trailing bytes, truncation.
            tagged(vec![
                0x83, 0xa5, b'v', b'a', b'l', b'u', b'e', 0xc4, 1, 7, 0xa9, b's', b't', b'o', b'r',
                b'e', b'd', b'_', b'a', b't', 1, 0xaa, b'e', b'x', b'p', b'i', b'r', b'e', b's',
                b'_', b'a', b't', 0xc0,
            ]),
            tagged(vec![0x81, 0xa5, b'v', b'a', b'l', b'u', b'e', 1]),
            [
                c.encode(&StRecord {
                    value: v.clone(),
                    stored_at: 1,
                    expires_at: None,
                })
                .unwrap(),
                vec![0xc0],
            ]
            .concat(),
            c.encode(&StRecord {
                value: json!("x".repeat(50)),
                stored_at: 1,
                expires_at: None,
            })
            .unwrap()[..20]
                .to_vec(),
            vec![],
            vec![9, 1, 2],
        ];
        for bytes in cases {
            let via = decode_record_with(&c, &bytes);
            assert!(
                same(&via, &serde_path(&c, &bytes)),
                "{bytes:?}: {:?}",
                via.map(|r| r.value)
            );
        }
        // The positional and reordered forms are records, and read as such.
        let pos = tagged(
            rmp_serde::to_vec(&StRecord {
                value: v.clone(),
                stored_at: 5,
                expires_at: None,
            })
            .unwrap(),
        );
        assert_eq!(decode_record_with(&c, &pos).unwrap().value, v);
        let reordered = tagged(
            rmp_serde::to_vec_named(&NoExpiry {
                stored_at: 5,
                value: v.clone(),
            })
            .unwrap(),
        );
        let r = decode_record_with(&c, &reordered).unwrap();
        assert_eq!((r.value, r.stored_at, r.expires_at), (v, 5, None));
    }

    /// Nesting deeper than the fast reader follows is read by serde.
    #[test]
    fn deep_values_fall_back_to_serde() {
        let c = codec::Codec::new(None);
        let mut v = json!(1);
        for _ in 0..300 {
            v = json!([v]);
        }
        let bytes = c
            .encode(&StRecord {
                value: v.clone(),
                stored_at: 1,
                expires_at: None,
            })
            .unwrap();
        let inner = c.open(&bytes).unwrap();
        assert!(fast_record(&codec::plain_body(&inner).unwrap().unwrap()).is_none());
        assert!(same(
            &decode_record_with(&c, &bytes),
            &serde_path(&c, &bytes)
        ));
    }
}
