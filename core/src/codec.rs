//! Record encoding: MessagePack (rmp-serde, named fields) with an lz4 envelope above a threshold.
//!
//! Byte 0 of every stored record is a tag: `0` = plain MessagePack follows,
//! `1` = lz4_flex block (size-prepended) of MessagePack follows.

use serde::{Serialize, de::DeserializeOwned};

use crate::{Error, Result};

/// Records larger than this are lz4-compressed.
pub(crate) const COMPRESS_THRESHOLD: usize = 512;

/// Largest decompressed record accepted (values are limited to 16 MiB; records
/// add little). A larger claim in an lz4 header is damage, not a huge allocation.
pub(crate) const MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

const TAG_PLAIN: u8 = 0;
const TAG_LZ4: u8 = 1;

pub(crate) fn encode<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>> {
    let raw = rmp_serde::to_vec_named(v)?;
    if raw.len() > COMPRESS_THRESHOLD {
        let mut out = Vec::with_capacity(raw.len() / 2 + 8);
        out.push(TAG_LZ4);
        out.extend_from_slice(&lz4_flex::compress_prepend_size(&raw));
        Ok(out)
    } else {
        let mut out = Vec::with_capacity(raw.len() + 1);
        out.push(TAG_PLAIN);
        out.extend_from_slice(&raw);
        Ok(out)
    }
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    match bytes.split_first() {
        Some((&TAG_PLAIN, rest)) => Ok(rmp_serde::from_slice(rest)?),
        Some((&TAG_LZ4, rest)) => {
            let raw = crate::session_codec::unlz4(rest, MAX_RECORD_BYTES, "record")?;
            Ok(rmp_serde::from_slice(&raw)?)
        }
        Some((tag, _)) => Err(Error::corrupted(format!("unknown record tag {tag}"))),
        None => Err(Error::corrupted("empty record")),
    }
}

/// Key of an item in a context: `ctx 0x00 key`.
pub(crate) fn ctx_key(ctx: &str, key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(ctx.len() + key.len() + 1);
    k.extend_from_slice(ctx.as_bytes());
    k.push(0);
    k.extend_from_slice(key.as_bytes());
    k
}

/// Prefix of all keys of a context: `ctx 0x00`.
pub(crate) fn ctx_prefix(ctx: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(ctx.len() + 1);
    k.extend_from_slice(ctx.as_bytes());
    k.push(0);
    k
}

/// Split `ctx 0x00 key` back into its parts.
pub(crate) fn split_ctx_key(k: &[u8]) -> Result<(String, String)> {
    let pos = k
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| Error::corrupted("key without context separator"))?;
    let ctx = std::str::from_utf8(&k[..pos]).map_err(|_| Error::corrupted("non-utf8 context"))?;
    let key = std::str::from_utf8(&k[pos + 1..]).map_err(|_| Error::corrupted("non-utf8 key"))?;
    Ok((ctx.to_owned(), key.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_small_and_large() {
        let small = serde_json::json!({"a": 1});
        let enc = encode(&small).unwrap();
        assert_eq!(enc[0], TAG_PLAIN);
        assert_eq!(decode::<serde_json::Value>(&enc).unwrap(), small);
        let large = serde_json::json!({"text": "x".repeat(10_000)});
        let enc = encode(&large).unwrap();
        assert_eq!(enc[0], TAG_LZ4);
        assert!(enc.len() < 1000);
        assert_eq!(decode::<serde_json::Value>(&enc).unwrap(), large);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode::<serde_json::Value>(&[]).is_err());
        assert!(decode::<serde_json::Value>(&[9, 1, 2]).is_err());
        assert!(decode::<serde_json::Value>(&[1, 0xff, 0xff, 0xff, 0x7f, 1]).is_err());
        assert!(decode::<serde_json::Value>(&[0, 0xc1]).is_err());
        // Found by `cargo fuzz run decode_record`: an lz4 header claiming ~3.4 GB.
        assert!(decode::<serde_json::Value>(&[1, 0, 0, 0x9a, 0xcb]).is_err());
    }
}
