//! How far the vector list can be trusted in this store, learned from the
//! searches themselves, without labels.
//!
//! A hybrid search whose BM25 best hit holds most of the question's content
//! words ([`covers_most`]) is one where the lexical list is very likely right
//! (on the retrieval harness's sets the best hit of such a search held the
//! answer 2–6 times as often as that of any other search). Those searches are
//! a free test of the vector list: did its own best hit agree? [`Evidence`]
//! counts them per store and kind, and the share of agreements (with a
//! uniform prior, so a new store starts at one half) estimates how often the
//! embedder finds what the words find, for this embedder on these memories.
//! The adaptive fusion gives the vector list that share, squared, of the
//! weight (see `FusionMethod::Adaptive`).
//!
//! The counts live in memory with the engine and are saved with the store
//! (16 bytes per kind in `meta`, at every flush, maintenance sweep and close),
//! so a process that opens the store again goes on from what earlier ones
//! learned instead of starting from the prior: an agent that opens its store
//! for a few searches at a time still converges.

use std::sync::atomic::{AtomicU64, Ordering};

use tantivy::tokenizer::TextAnalyzer;

use super::index::query::query_analyzer;
use crate::storage::docs::IndexDoc;

/// Searches in which the BM25 best hit covered most of the question's content
/// words, and how many of them had the vector list's best hit agree.
#[derive(Debug, Default)]
pub(crate) struct Evidence {
    confident: AtomicU64,
    agreed: AtomicU64,
    /// `confident` when last saved (or loaded): nothing to save while equal.
    saved: AtomicU64,
}

impl Evidence {
    /// The counts saved from [`Evidence::to_save`]; a record of another length
    /// (never written by this version) starts from the prior again, since the
    /// estimate is advisory and rebuilt by the next searches.
    pub(crate) fn from_bytes(v: &[u8]) -> Evidence {
        let e = Evidence::default();
        let Ok(b) = <[u8; 16]>::try_from(v) else {
            return e;
        };
        let (c, a) = (le_u64(&b, 0), le_u64(&b, 8));
        if a <= c {
            e.confident.store(c, Ordering::Relaxed);
            e.agreed.store(a, Ordering::Relaxed);
            e.saved.store(c, Ordering::Relaxed);
        }
        e
    }

    /// The counts to save (`confident`, `agreed`, little-endian), or `None`
    /// when no search was counted since the last save; call
    /// [`Evidence::mark_saved`] with the same bytes once written.
    pub(crate) fn to_save(&self) -> Option<[u8; 16]> {
        let c = self.confident.load(Ordering::Relaxed);
        if c == self.saved.load(Ordering::Relaxed) {
            return None;
        }
        let a = self.agreed.load(Ordering::Relaxed).min(c);
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&c.to_le_bytes());
        out[8..].copy_from_slice(&a.to_le_bytes());
        Some(out)
    }

    /// Note that the counts in `bytes` (from [`Evidence::to_save`]) are stored.
    pub(crate) fn mark_saved(&self, bytes: &[u8; 16]) {
        self.saved.store(le_u64(bytes, 0), Ordering::Relaxed);
    }

    /// The estimated share of lexically certain searches in which the vector
    /// list's best hit is the same memory: `(agreed + 1) / (confident + 2)`.
    pub(crate) fn vector_share(&self) -> f32 {
        let confident = self.confident.load(Ordering::Relaxed) as f64;
        let agreed = self.agreed.load(Ordering::Relaxed) as f64;
        ((agreed + 1.0) / (confident + 2.0)) as f32
    }

    /// How many searches have been counted (tests).
    #[cfg(test)]
    pub(crate) fn counted(&self) -> u64 {
        self.confident.load(Ordering::Relaxed)
    }

    /// Count one search whose BM25 best hit covered most of its question's
    /// content words; `agreed`: the vector list's best hit was the same memory.
    pub(crate) fn record(&self, agreed: bool) {
        self.confident.fetch_add(1, Ordering::Relaxed);
        if agreed {
            self.agreed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The little-endian `u64` at `at` (0 or 8) of a saved record.
fn le_u64(b: &[u8; 16], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Whether `doc` (its summary, body, participants and tags) holds more than
/// half of `asked`, a query's distinct content words from [`content_terms`]
/// (its terms after the stop words and question words of
/// [`super::index::query::QUERY_STOP_WORDS`] are dropped and the rest
/// stemmed, as the index stems them). `None` when there are none.
pub(crate) fn covers_most(asked: &[String], doc: &IndexDoc) -> Option<bool> {
    if asked.is_empty() {
        return None;
    }
    let held = doc_terms(doc);
    let found = asked.iter().filter(|t| held.contains(t)).count();
    Some(2 * found > asked.len())
}

/// The distinct content terms of a search text: its terms after the stop
/// words and question words are dropped, stemmed as the index stems them.
pub(crate) fn content_terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    terms(&mut analyzer(), text, &mut out);
    out
}

/// Whether `doc` (summary, body, participants or tags) holds any of `asked`
/// (from [`content_terms`]).
pub(crate) fn holds_any(asked: &[String], doc: &IndexDoc) -> bool {
    let mut analyzer = analyzer();
    text_fields(doc).any(|text| {
        let mut stream = analyzer.token_stream(text);
        while stream.advance() {
            if asked.contains(&stream.token().text) {
                return true;
            }
        }
        false
    })
}

/// A document's text fields: summary, body, participants, tags.
fn text_fields(doc: &IndexDoc) -> impl Iterator<Item = &String> {
    [&doc.summary, &doc.body]
        .into_iter()
        .chain(doc.participants.iter())
        .chain(doc.tags.iter())
}

/// The distinct content terms of a document's text fields.
fn doc_terms(doc: &IndexDoc) -> Vec<String> {
    let mut analyzer = analyzer();
    let mut held = Vec::new();
    for text in text_fields(doc) {
        terms(&mut analyzer, text, &mut held);
    }
    held
}

/// Append the distinct terms `analyzer` makes of `text` to `out`.
fn terms(analyzer: &mut TextAnalyzer, text: &str, out: &mut Vec<String>) {
    let mut stream = analyzer.token_stream(text);
    while stream.advance() {
        let t = &stream.token().text;
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
}

/// The content-word analyzer, built once (a clone per call).
fn analyzer() -> TextAnalyzer {
    static ANALYZER: std::sync::OnceLock<TextAnalyzer> = std::sync::OnceLock::new();
    ANALYZER.get_or_init(query_analyzer).clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::docs::Kind;

    fn doc(summary: &str, participants: &[&str]) -> IndexDoc {
        IndexDoc {
            uid: String::new(),
            kind: Kind::Episode,
            ctx: String::new(),
            summary: summary.to_owned(),
            body: String::new(),
            participants: participants.iter().map(|p| (*p).to_owned()).collect(),
            tags: Vec::new(),
            ts_ms: 0,
            importance: 0,
            embedding: None,
            fresh: false,
        }
    }

    #[test]
    fn holds_any_needs_one_content_word_stemmed() {
        let asked = content_terms("What did I say about the dogs?");
        assert_eq!(asked, ["say", "dog"]);
        // Only question words and stop words in common: not a content match.
        assert!(!holds_any(&asked, &doc("what did I do with it", &[])));
        // One content word, in another form ("dog" for "dogs"), is enough.
        assert!(holds_any(&asked, &doc("walked the dog", &[])));
        // In any text field: here a participant's name.
        let asked = content_terms("What did Ross say?");
        assert!(holds_any(&asked, &doc("I was at the museum", &["Ross"])));
        assert!(content_terms("what did I do").is_empty());
    }

    #[test]
    fn covers_most_counts_content_words_only_stemmed() {
        // Content words of the question: ross, ask, rachel (3).
        let q = "What did Ross ask Rachel?";
        assert_eq!(
            covers_most(
                &content_terms(q),
                &doc("Rachel, he asked you out", &["Ross"])
            ),
            Some(true)
        );
        assert_eq!(
            covers_most(&content_terms(q), &doc("Rachel, come here", &["Monica"])),
            Some(false)
        );
        // Exactly half is not most: ross and ask, two of the four content
        // words ross, ask, rachel, out.
        let q4 = "Where did Ross ask Rachel out?";
        assert_eq!(
            covers_most(&content_terms(q4), &doc("asking", &["Ross"])),
            Some(false)
        );
        // Only question words: no content word to cover.
        assert_eq!(
            covers_most(&content_terms("what did I do?"), &doc("anything", &[])),
            None
        );
    }

    #[test]
    fn the_counts_round_trip_and_a_foreign_record_starts_over() {
        let e = Evidence::default();
        assert_eq!(e.to_save(), None);
        for agreed in [true, false, true] {
            e.record(agreed);
        }
        let bytes = e.to_save().unwrap();
        e.mark_saved(&bytes);
        assert_eq!(e.to_save(), None);
        let back = Evidence::from_bytes(&bytes);
        assert_eq!(back.counted(), 3);
        assert!((back.vector_share() - e.vector_share()).abs() < 1e-6);
        assert_eq!(back.to_save(), None);
        // Wrong length, or more agreements than searches: the prior.
        for bad in [&bytes[..15], &[[1u8; 8], [2u8; 8]].concat()[..]] {
            let e = Evidence::from_bytes(bad);
            assert_eq!(e.counted(), 0);
            assert!((e.vector_share() - 0.5).abs() < 1e-6);
        }
    }

    #[test]
    fn the_share_starts_at_one_half_and_follows_the_agreements() {
        let e = Evidence::default();
        assert!((e.vector_share() - 0.5).abs() < 1e-6);
        for _ in 0..8 {
            e.record(true);
        }
        e.record(false);
        e.record(false);
        // (8 + 1) / (10 + 2)
        assert!((e.vector_share() - 0.75).abs() < 1e-6);
    }
}
