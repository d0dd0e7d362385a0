//! Search rows without plaintext: the `search_docs` row of a PostgreSQL store
//! with a key (docs/security.md, *PostgreSQL*).
//!
//! The engine's analyzer ([`Lexer`]) splits each field into terms, and each
//! term becomes a keyed hash (HMAC-SHA256, cut to [`LEXEME_BYTES`], written in
//! base32: a valid `tsvector` lexeme that needs no quoting). The row's
//! `tsv` is written from a parameter with the positions and weights that
//! `setweight(to_tsvector(...))` concatenated field by field gives a plaintext
//! row (summary A, tags B, body C, participants C; each field's positions
//! after the highest one before it), so `ts_rank` scores a keyed row as it
//! scores the plaintext one. A query is split and hashed the same way into an
//! OR `tsquery`. Tags, participants and the context are hashed too (a filter
//! compares hashes), and the row's uid is a hash, with the original uid sealed
//! (XChaCha20-Poly1305) beside it for the search results. The hash of a term
//! does not depend on its field, so a word in the summary and the body is one
//! lexeme, as in a plaintext row. Keys: HKDF-SHA256 of the store key, salt
//! `memstrata search v1`, one sub-key per purpose.

use std::collections::BTreeMap;
use std::sync::Arc;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::Mac;

use super::search::{TSV_BODY_CHARS, TSV_LIST_CHARS, TSV_SUMMARY_CHARS};
use crate::config::EncryptionKey;
use crate::storage::docs::{IndexDoc, Lexer};
use crate::storage::kdf::{self, HmacSha256};
use crate::{Error, Result};

const KDF_SALT: &[u8] = b"memstrata search v1";
/// Bytes of a lexeme's hash (16 base32 characters).
const LEXEME_BYTES: usize = 10;
/// Bytes of a hashed tag, participant or context (24 base32 characters).
const FILTER_BYTES: usize = 15;
/// Bytes of a hashed row uid (32 base32 characters).
const ROW_BYTES: usize = 20;
/// PostgreSQL's highest `tsvector` position (`MAXENTRYPOS - 1`): higher ones are clamped to it.
const MAX_POS: u32 = 16_383;
/// Positions PostgreSQL keeps per lexeme (`MAXNUMPOS`).
const MAX_POSITIONS: usize = 256;

/// The keys and analyzer of a keyed store's search rows.
pub(crate) struct SealedSearch {
    lexer: Arc<dyn Lexer>,
    lexeme: HmacSha256,
    filter: HmacSha256,
    row: HmacSha256,
    nonce: HmacSha256,
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for SealedSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealedSearch(..)")
    }
}

/// RFC 4648 base32, lower case, no padding.
fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((acc >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((acc << (5 - bits)) & 31) as usize]));
    }
    out
}

/// The first `chars` characters of `s` (SQL's `left`).
fn left(s: &str, chars: u32) -> &str {
    match s.char_indices().nth(chars as usize) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

impl SealedSearch {
    /// The search-row keys of a store with `key`, terms split by `lexer`.
    pub(crate) fn new(key: &EncryptionKey, lexer: Arc<dyn Lexer>) -> Self {
        let prk = kdf::hkdf_extract(KDF_SALT, key.bytes());
        let mut k = [0u8; 160];
        kdf::hkdf_expand(&prk, b"search rows", &mut k);
        SealedSearch {
            lexer,
            lexeme: kdf::keyed(&k[..32]),
            filter: kdf::keyed(&k[32..64]),
            row: kdf::keyed(&k[64..96]),
            nonce: kdf::keyed(&k[96..128]),
            cipher: XChaCha20Poly1305::new(k[128..].into()),
        }
    }

    fn mac(m: &HmacSha256, domain: &str, text: &str, n: usize) -> String {
        let mut m = m.clone();
        m.update(domain.as_bytes());
        m.update(&[0]);
        m.update(text.as_bytes());
        base32(&m.finalize().into_bytes()[..n])
    }

    /// The lexeme of a term.
    pub(super) fn lexeme(&self, term: &str) -> String {
        Self::mac(&self.lexeme, "", term, LEXEME_BYTES)
    }

    /// A tag or participant (`field`), or the context (`ctx`), as stored.
    pub(super) fn filter_value(&self, field: &str, value: &str) -> String {
        Self::mac(&self.filter, field, value, FILTER_BYTES)
    }

    pub(super) fn filter_list(&self, field: &str, values: &[String]) -> Vec<String> {
        values.iter().map(|v| self.filter_value(field, v)).collect()
    }

    /// The stored uid of the index uid `uid`.
    pub(super) fn row_uid(&self, uid: &str) -> String {
        Self::mac(&self.row, "", uid, ROW_BYTES)
    }

    fn nonce(&self, row: &str) -> XNonce {
        let mut m = self.nonce.clone();
        m.update(row.as_bytes());
        *XNonce::from_slice(&m.finalize().into_bytes()[..24])
    }

    /// `uid` sealed under its stored uid `row` (the nonce is derived from
    /// `row`, which is unique per uid; `row` is the associated data, so a
    /// sealed uid copied to another row does not open).
    pub(super) fn seal_uid(&self, row: &str, uid: &str) -> Result<Vec<u8>> {
        self.cipher
            .encrypt(
                &self.nonce(row),
                Payload {
                    msg: uid.as_bytes(),
                    aad: row.as_bytes(),
                },
            )
            .map_err(|_| Error::storage("search row uid encryption failed"))
    }

    /// The index uid sealed in the row `row`.
    pub(super) fn open_uid(&self, row: &str, sealed: &[u8]) -> Result<String> {
        let plain = self
            .cipher
            .decrypt(
                &self.nonce(row),
                Payload {
                    msg: sealed,
                    aad: row.as_bytes(),
                },
            )
            .map_err(|_| {
                Error::corrupted(
                    "a search row's sealed uid failed authentication: it was altered, moved or written with another encryption key",
                )
            })?;
        String::from_utf8(plain).map_err(|_| Error::corrupted("a search row's uid is not UTF-8"))
    }

    /// The `tsvector` (text form) of `d`: what the plaintext row's generated
    /// column holds, with every lexeme hashed.
    pub(super) fn tsvector(&self, d: &IndexDoc) -> String {
        let tags = d.tags.join(" ");
        let participants = d.participants.join(" ");
        let fields = [
            (d.summary.as_str(), TSV_SUMMARY_CHARS, 'A'),
            (tags.as_str(), TSV_LIST_CHARS, 'B'),
            (d.body.as_str(), TSV_BODY_CHARS, 'C'),
            (participants.as_str(), TSV_LIST_CHARS, 'C'),
        ];
        let mut all: BTreeMap<String, Vec<(u32, char)>> = BTreeMap::new();
        // The highest position so far: `a || b` moves b's positions past a's.
        let mut offset = 0u32;
        for (text, chars, weight) in fields {
            let mut field: BTreeMap<String, Vec<u32>> = BTreeMap::new();
            self.lexer.terms(left(text, chars), &mut |t, p| {
                field.entry(t.to_owned()).or_default().push(p.min(MAX_POS));
            });
            let mut top = offset;
            for (term, mut ps) in field {
                ps.sort_unstable();
                ps.dedup();
                let entry = all.entry(self.lexeme(&term)).or_default();
                for p in ps {
                    if entry.len() == MAX_POSITIONS {
                        break;
                    }
                    let p = (p + offset).min(MAX_POS);
                    top = top.max(p);
                    if entry.last().is_none_or(|(q, _)| *q < p) {
                        entry.push((p, weight));
                    }
                }
            }
            offset = top;
        }
        let mut out = String::with_capacity(all.len() * 24);
        for (lexeme, ps) in all {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push('\'');
            out.push_str(&lexeme);
            out.push_str("':");
            for (i, (p, w)) in ps.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&p.to_string());
                out.push(*w);
            }
        }
        out
    }

    /// The OR `tsquery` (text form) of the terms of a search text; `None`
    /// when it has none (empty, punctuation, stop words only).
    pub(super) fn tsquery(&self, text: &str) -> Option<String> {
        let mut terms: Vec<String> = Vec::new();
        self.lexer.terms(text, &mut |t, _| {
            if !terms.iter().any(|x| x == t) {
                terms.push(t.to_owned());
            }
        });
        if terms.is_empty() {
            return None;
        }
        let hashed: Vec<String> = terms
            .iter()
            .map(|t| format!("'{}'", self.lexeme(t)))
            .collect();
        Some(hashed.join(" | "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Words;

    impl Lexer for Words {
        fn terms(&self, text: &str, out: &mut dyn FnMut(&str, u32)) {
            for (i, w) in text.split_whitespace().enumerate() {
                if w != "the" {
                    out(&w.to_lowercase(), u32::try_from(i).unwrap() + 1);
                }
            }
        }
    }

    fn seal() -> SealedSearch {
        SealedSearch::new(&EncryptionKey::new([7; 32]), Arc::new(Words))
    }

    #[test]
    fn base32_is_rfc4648_lower_case() {
        assert_eq!(base32(b""), "");
        assert_eq!(base32(b"f"), "my");
        assert_eq!(base32(b"foobar"), "mzxw6ytboi");
    }

    #[test]
    fn positions_follow_the_fields_as_concatenated_tsvectors_do() {
        let s = seal();
        let d = IndexDoc {
            uid: "e\0c\0x".into(),
            kind: crate::storage::docs::Kind::Episode,
            ctx: "c".into(),
            summary: "the cat sat".into(),
            body: "cat".into(),
            participants: vec!["Ann".into()],
            tags: vec!["pet".into()],
            ts_ms: 0,
            importance: 0,
            embedding: None,
            fresh: false,
        };
        let tsv = s.tsvector(&d);
        // summary: cat 2, sat 3 (max 3); tags: pet 1+3; body: cat 1+4; participants: ann 1+5.
        let want = [
            (s.lexeme("cat"), "2A,5C"),
            (s.lexeme("sat"), "3A"),
            (s.lexeme("pet"), "4B"),
            (s.lexeme("ann"), "6C"),
        ];
        for (lex, ps) in want {
            assert!(
                tsv.contains(&format!("'{lex}':{ps}")),
                "{lex}:{ps} in {tsv}"
            );
        }
        assert!(!tsv.contains("cat") && !tsv.contains("Ann"), "{tsv}");
        assert_eq!(s.lexeme("cat").len(), 16);
        let q = s.tsquery("the cat cat sat").unwrap();
        assert_eq!(q, format!("'{}' | '{}'", s.lexeme("cat"), s.lexeme("sat")));
        assert!(s.tsquery("the").is_none());
    }

    #[test]
    fn a_sealed_uid_opens_only_in_its_own_row() {
        let s = seal();
        let (a, b) = (s.row_uid("e\0c\0one"), s.row_uid("e\0c\0two"));
        assert_ne!(a, b);
        let sealed = s.seal_uid(&a, "e\0c\0one").unwrap();
        assert_eq!(s.open_uid(&a, &sealed).unwrap(), "e\0c\0one");
        assert!(s.open_uid(&b, &sealed).is_err());
        let other = SealedSearch::new(&EncryptionKey::new([8; 32]), Arc::new(Words));
        assert_ne!(other.lexeme("cat"), s.lexeme("cat"));
    }
}
