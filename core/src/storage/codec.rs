//! Record encoding: MessagePack (rmp-serde, named fields) with an lz4 envelope above a threshold,
//! sealed with XChaCha20-Poly1305 when the store is encrypted.
//!
//! Byte 0 of every stored record is a tag: `0` = plain MessagePack follows,
//! `1` = lz4_flex block (size-prepended) of MessagePack follows, `2` = sealed:
//! a 24-byte random nonce, then the XChaCha20-Poly1305 ciphertext (with its
//! 16-byte tag) of the inner record, which is itself a tag-`0`/`1` record (or
//! a session version record). Each engine holds one [`Codec`]: plaintext, or
//! sealing with the store's key. See `docs/security.md`.

use std::borrow::Cow;
use std::sync::Arc;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::{Serialize, de::DeserializeOwned};

use crate::config::EncryptionKey;
use crate::error::DepResult;
use crate::{Error, Result};

/// Records larger than this are lz4-compressed.
pub(crate) const COMPRESS_THRESHOLD: usize = 512;

/// Largest decompressed record accepted (values are limited to 16 MiB; records
/// add little). A larger claim in an lz4 header is damage, not a huge allocation.
pub(crate) const MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

const TAG_PLAIN: u8 = 0;
const TAG_LZ4: u8 = 1;
const TAG_SEALED: u8 = 2;

const NONCE_BYTES: usize = 24;
/// Associated data of every sealed record: binds ciphertexts to this format.
const AAD: &[u8] = b"memstrata record v1";

/// How an engine turns records into stored bytes: plaintext, or sealed with the store's key.
#[derive(Clone, Default)]
pub(crate) struct Codec {
    cipher: Option<Arc<XChaCha20Poly1305>>,
    /// Seed of the hashes stored as keys (duplicate detection): 0 in a
    /// plaintext store, derived from the key in an encrypted one.
    hash_seed: u64,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("sealed", &self.cipher.is_some())
            .finish()
    }
}

impl Codec {
    /// A codec for `key` (`None`: plaintext).
    pub(crate) fn new(key: Option<&EncryptionKey>) -> Self {
        let cipher = key.map(|k| Arc::new(XChaCha20Poly1305::new(k.bytes().into())));
        // A keyed pseudo-random value: the cipher's output for a fixed nonce and
        // message (never stored; only the hashes it seeds are).
        let hash_seed = cipher.as_ref().map_or(0, |c| {
            c.encrypt(
                XNonce::from_slice(&[0u8; NONCE_BYTES]),
                b"memstrata hash seed v1".as_slice(),
            )
            .ok()
            .and_then(|ct| ct.get(..8).and_then(|b| b.try_into().ok()))
            .map_or(1, u64::from_le_bytes)
        });
        Codec { cipher, hash_seed }
    }

    /// The seed of hashes kept in keys (0 unless the store is encrypted).
    pub(crate) fn hash_seed(&self) -> u64 {
        self.hash_seed
    }

    /// Whether records are sealed.
    pub(crate) fn is_sealed(&self) -> bool {
        self.cipher.is_some()
    }

    /// Encode a record (and seal it when the store is encrypted).
    pub(crate) fn encode<T: Serialize + ?Sized>(&self, v: &T) -> Result<Vec<u8>> {
        self.seal(encode(v)?)
    }

    /// Like [`Codec::encode`], with structs as MessagePack arrays (fields in
    /// declaration order, no names: see [`encode_compact`]).
    pub(crate) fn encode_compact<T: Serialize + ?Sized>(&self, v: &T) -> Result<Vec<u8>> {
        self.seal(encode_compact(v)?)
    }

    /// Decode a record written by [`Codec::encode`].
    pub(crate) fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T> {
        decode(&self.open(bytes)?)
    }

    /// Seal already-encoded record bytes (identity for a plaintext store).
    pub(crate) fn seal(&self, inner: Vec<u8>) -> Result<Vec<u8>> {
        let Some(cipher) = &self.cipher else {
            return Ok(inner);
        };
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce).map_err(|e| Error::Storage {
            message: format!("no operating-system randomness for an encryption nonce: {e}"),
            source: None,
        })?;
        let ct = cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &inner,
                    aad: AAD,
                },
            )
            .map_err(|_| Error::Storage {
                message: "record encryption failed".into(),
                source: None,
            })?;
        let mut out = Vec::with_capacity(1 + NONCE_BYTES + ct.len());
        out.push(TAG_SEALED);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        Ok(out)
    }

    /// The inner record of stored bytes: checks and removes the seal of an
    /// encrypted store; refuses sealed bytes in a plaintext store and plaintext
    /// bytes in an encrypted one.
    pub(crate) fn open<'a>(&self, bytes: &'a [u8]) -> Result<Cow<'a, [u8]>> {
        match (&self.cipher, bytes.split_first()) {
            (Some(cipher), Some((&TAG_SEALED, rest))) => {
                if rest.len() < NONCE_BYTES + 16 {
                    return Err(Error::corrupted(format!(
                        "sealed record of {} bytes is shorter than its nonce and tag",
                        bytes.len()
                    )));
                }
                let (nonce, ct) = rest.split_at(NONCE_BYTES);
                cipher
                    .decrypt(XNonce::from_slice(nonce), Payload { msg: ct, aad: AAD })
                    .map(Cow::Owned)
                    .map_err(|_| {
                        Error::corrupted(
                            "a sealed record failed authentication: it was altered or written with another encryption key",
                        )
                    })
            }
            (Some(_), Some(_)) => Err(Error::corrupted(
                "unencrypted record in an encrypted store (records of an encrypted store are all sealed)",
            )),
            (None, Some((&TAG_SEALED, _))) => Err(Error::invalid(
                "encryption_key",
                "this record is encrypted: open the store with its encryption key",
            )),
            (_, _) => Ok(Cow::Borrowed(bytes)),
        }
    }

    /// The MessagePack bytes of a stored record: seal checked and removed,
    /// tag read, lz4 undone (for records whose layout depends on the first
    /// MessagePack byte, see [`is_msgpack_map`]).
    pub(crate) fn inner<'a>(&self, bytes: &'a [u8]) -> Result<Cow<'a, [u8]>> {
        match self.open(bytes)? {
            Cow::Borrowed(b) => untag(b),
            Cow::Owned(b) => Ok(Cow::Owned(untag(&b)?.into_owned())),
        }
    }

    /// [`Codec::open`] for a stored `IVec`, without copying in a plaintext store.
    pub(crate) fn open_ivec(&self, raw: crate::storage::Bytes) -> Result<crate::storage::Bytes> {
        if self.cipher.is_none() {
            self.open(&raw)?;
            return Ok(raw);
        }
        Ok(crate::storage::Bytes::from(self.open(&raw)?.into_owned()))
    }
}

pub(crate) fn encode<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>> {
    envelope(rmp_serde::to_vec_named(v).dep()?)
}

/// [`encode`] with structs as MessagePack arrays: the fields in declaration
/// order without their names (format version 2, episode records). [`decode`]
/// reads a struct from either form, so a type written this way must only
/// ever append fields, each new one `#[serde(default)]`.
pub(crate) fn encode_compact<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>> {
    envelope(rmp_serde::to_vec(v).dep()?)
}

/// The tag byte, and lz4 above [`COMPRESS_THRESHOLD`].
fn envelope(raw: Vec<u8>) -> Result<Vec<u8>> {
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
    from_msgpack(&untag(bytes)?)
}

/// Decode bare MessagePack (what [`Codec::inner`] returns).
pub(crate) fn from_msgpack<T: DeserializeOwned>(raw: &[u8]) -> Result<T> {
    rmp_serde::from_slice(raw).dep()
}

/// Whether `first`, the first byte of a MessagePack value, starts a map.
pub(crate) fn is_msgpack_map(first: u8) -> bool {
    matches!(first, 0x80..=0x8f | 0xde | 0xdf)
}

/// The MessagePack bytes of an unsealed record (tag removed, lz4 undone).
fn untag(bytes: &[u8]) -> Result<Cow<'_, [u8]>> {
    match bytes.split_first() {
        Some((&TAG_PLAIN, rest)) => Ok(Cow::Borrowed(rest)),
        Some((&TAG_LZ4, rest)) => Ok(Cow::Owned(unlz4(rest, MAX_RECORD_BYTES, "record")?)),
        Some((&TAG_SEALED, _)) => Err(Error::invalid(
            "encryption_key",
            "this record is encrypted: open the store with its encryption key",
        )),
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

/// A storage key built on the stack when it fits (see [`ctx_key_inline`]).
pub(crate) type InlineKey = smallvec::SmallVec<[u8; 64]>;

/// [`ctx_key`] without a heap allocation for keys of up to 64 bytes with
/// their context: for read paths that only look the key up.
pub(crate) fn ctx_key_inline(ctx: &str, key: &str) -> InlineKey {
    let mut k = InlineKey::with_capacity(ctx.len() + key.len() + 1);
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

/// How the keys of a tree are stored in an encrypted sled store (sealed keys,
/// `storage::keys`). Every key kind a tree holds must fit its shape: a new
/// tree names its shape here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyShape {
    /// Kept as is: the keys hold no user text (sequence numbers).
    Plain,
    /// `texts` leading text parts separated by `0x00` (context, key, name,
    /// id), each replaced by a 16-byte keyed hash of the key up to its end, so
    /// a scan of every key under the first parts stays a prefix scan. With
    /// `suffix`, the last text part may be followed by `0x00` and binary
    /// (big-endian numbers: versions, sequence numbers), kept as is so that
    /// it stays ordered; without, the last text part runs to the end of the key.
    /// With `uuid_ids`, a last text part that is a canonical UUID (an id the
    /// engine generated: no user text) is kept as written, behind a `0x00`
    /// (a key of one text part is then kept whole, as written), so records
    /// written in id order stay in order on disk.
    Hashed {
        texts: u8,
        suffix: bool,
        uuid_ids: bool,
    },
    /// `dedup` (duplicate detection keys, `search::dedup`): `ctx 0x00 kind
    /// sub [band] hash id`. The context is hashed as a text part, the binary
    /// middle ([`dedup_middle_len`] bytes: kind, sub, band, hash) is kept so
    /// that a lookup by hash stays a prefix scan, and the record id after it
    /// (a knowledge key is user text) is replaced by the keyed hash of the
    /// whole key (the original sits sealed in the value, as for every shape).
    Dedup,
    /// `meta`: the engine's own keys (no `0x00`: `format_version`, ...) stay
    /// as they are; `name 0x00 context...` keys are hashed as two text parts
    /// behind a `0x00` byte (no engine key starts with one).
    Mixed,
}

/// The key shape of `tree` (see [`KeyShape`]).
pub(crate) fn key_shape(tree: super::Tree) -> KeyShape {
    use super::Tree as T;
    let h = |texts, suffix| KeyShape::Hashed {
        texts,
        suffix,
        uuid_ids: false,
    };
    let ids = |texts, suffix| KeyShape::Hashed {
        texts,
        suffix,
        uuid_ids: true,
    };
    match tree {
        T::Meta => KeyShape::Mixed,
        T::IndexLog => KeyShape::Plain,
        // `ctx`
        T::Contexts => h(1, false),
        // `ctx 0x00 key` (ctx_key)
        T::ShortTerm | T::Working | T::Semantic | T::Procedures => h(2, false),
        // `ctx 0x00 uuidv7` (an imported id may be any key: hashed then)
        T::Episodes => ids(2, false),
        // `ctx 0x00 key 0x00 version`
        T::SemanticHistory => h(2, true),
        // `id` or `id 0x00 seq` (runs and their traces, session versions)
        T::Runs | T::Sessions | T::SessionVersions | T::Tasks => ids(1, true),
        // `ctx 0x00 kind sub hash... id` (written on PostgreSQL only)
        T::Dedup => KeyShape::Dedup,
    }
}

/// Bytes of the binary middle of a `dedup` key after its `ctx 0x00` (see
/// [`KeyShape::Dedup`]): kind, sub `x`, 8-byte hash (exact keys); kind, sub
/// `b`, band, 8-byte hash (band keys); anything else is all middle.
pub(crate) fn dedup_middle_len(rest: &[u8]) -> usize {
    match rest.get(1) {
        Some(b'x') => 10,
        Some(b'b') => 11,
        _ => rest.len(),
    }
    .min(rest.len())
}

/// Decompress a size-prepended lz4 block, refusing a claimed size above `max_len`.
pub(crate) fn unlz4(bytes: &[u8], max_len: usize, what: &str) -> Result<Vec<u8>> {
    let (claimed, _) = lz4_flex::block::uncompressed_size(bytes)
        .map_err(|e| Error::corrupted_by(format!("{what}: lz4 header: {e}"), e))?;
    // lz4 cannot expand more than ~255:1, so a larger claim is damage (and would be a huge allocation).
    if claimed > max_len || claimed > bytes.len().saturating_mul(255).saturating_add(64) {
        return Err(Error::corrupted(format!(
            "{what}: lz4 block claims {claimed} bytes, more than the {max_len} expected or its size allows"
        )));
    }
    lz4_flex::decompress_size_prepended(bytes)
        .map_err(|e| Error::corrupted_by(format!("{what}: lz4: {e}"), e))
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

    #[test]
    fn sealed_records_round_trip_and_refuse_tampering_and_mixing() {
        let key = EncryptionKey::new([7; 32]);
        let sealed = Codec::new(Some(&key));
        let plain = Codec::new(None);
        for v in [
            serde_json::json!({"a": 1}),
            serde_json::json!({"t": "y".repeat(5000)}),
        ] {
            let enc = sealed.encode(&v).unwrap();
            assert_eq!(enc[0], TAG_SEALED);
            assert_eq!(sealed.decode::<serde_json::Value>(&enc).unwrap(), v);
            // Fresh nonce each time.
            assert_ne!(enc, sealed.encode(&v).unwrap());
            // Any flipped bit fails authentication.
            let mut bad = enc.clone();
            *bad.last_mut().unwrap() ^= 1;
            assert!(matches!(
                sealed.decode::<serde_json::Value>(&bad),
                Err(Error::Corrupted { .. })
            ));
            // Another key cannot open it; a plaintext codec says a key is needed.
            let other = Codec::new(Some(&EncryptionKey::new([8; 32])));
            assert!(other.decode::<serde_json::Value>(&enc).is_err());
            assert!(matches!(
                plain.decode::<serde_json::Value>(&enc),
                Err(Error::InvalidInput { ref field, .. }) if field == "encryption_key"
            ));
            // A plaintext record in an encrypted store is refused.
            let p = plain.encode(&v).unwrap();
            assert!(sealed.decode::<serde_json::Value>(&p).is_err());
        }
        assert!(
            sealed
                .decode::<serde_json::Value>(&[TAG_SEALED, 1, 2])
                .is_err()
        );
    }
}
