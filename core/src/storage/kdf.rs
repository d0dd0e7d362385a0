//! HMAC-SHA256 and HKDF (RFC 5869): the key derivations of encryption at rest
//! (record keys here, index files in `search::index::crypt`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// HMAC-SHA256.
pub(crate) type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA256 of the concatenation of `parts` under `key`.
pub(crate) fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = keyed(key);
    for p in parts {
        m.update(p);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(&m.finalize().into_bytes());
    out
}

/// An HMAC-SHA256 state keyed with `key`, to clone for each message.
pub(crate) fn keyed(key: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length: `new_from_slice` cannot fail.
    <HmacSha256 as hmac::KeyInit>::new_from_slice(key).unwrap_or_else(|_| unreachable!())
}

/// HKDF-Extract (RFC 5869) with HMAC-SHA256.
pub(crate) fn hkdf_extract(salt: &[u8], ikm: &[u8]) -> [u8; 32] {
    hmac(salt, &[ikm])
}

/// HKDF-Expand (RFC 5869) with HMAC-SHA256 into `out` (at most 255 × 32 bytes).
pub(crate) fn hkdf_expand(prk: &[u8; 32], info: &[u8], out: &mut [u8]) {
    let mut prev: Option<[u8; 32]> = None;
    for (i, block) in out.chunks_mut(32).enumerate() {
        let counter = [u8::try_from(i + 1).unwrap_or(u8::MAX)];
        let t = match &prev {
            Some(p) => hmac(prk, &[p, info, &counter]),
            None => hmac(prk, &[info, &counter]),
        };
        block.copy_from_slice(&t[..block.len()]);
        prev = Some(t);
    }
}
