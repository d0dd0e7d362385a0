//! The index's `en_stem` analyzer, with a memo in front of the stemmer.
//!
//! tantivy's own `en_stem` (simple tokenizer, tokens over 40 bytes dropped,
//! lowercased, English Snowball stemmer) runs the stemmer on every token of
//! every document. A profile of a batch ingest of short episodes put a
//! quarter of the indexing thread's CPU in it (`docs/benchmarks/footprint.md`,
//! "Eighth pass"). The words of a store repeat (natural text follows a Zipf
//! law), so each analyzer keeps the stems of the words it has seen: the same
//! tokens, each word stemmed once per memo. The memo is bounded
//! ([`MEMO_WORDS`]; emptied when full) and belongs to one analyzer (one
//! segment writer, or one clone), so it needs no lock.
//!
//! Registered under tantivy's name (`en_stem`) on every index the engine
//! opens or creates ([`register`]); the schema names the analyzer, not its
//! code, so the index on disk is what tantivy's analyzer makes.

use std::mem;

use rustc_hash::FxHashMap;
use tantivy::Index;
use tantivy::tokenizer::{
    Language, LowerCaser, RawTokenizer, RemoveLongFilter, SimpleTokenizer, Stemmer, TextAnalyzer,
    Token, TokenFilter, TokenStream, Tokenizer,
};

/// Words whose stems one analyzer keeps (about 100 bytes each: at most
/// ~200 KiB per analyzer; a segment writer has one per text field, four).
const MEMO_WORDS: usize = 2048;

/// Longer words are stemmed every time (rare; they would crowd the memo).
const MEMO_MAX_BYTES: usize = 24;

/// The analyzer: tantivy's `en_stem`, with [`MemoStemmer`] for its stemmer.
pub(super) fn en_stem() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(MemoStemmer)
        .build()
}

/// Use [`en_stem`] for the fields that name `en_stem` (before any writer or
/// reader of `index` tokenises).
pub(super) fn register(index: &Index) {
    index.tokenizers().register("en_stem", en_stem());
}

/// tantivy's English [`Stemmer`] behind a memo of the words it has stemmed.
#[derive(Clone, Copy, Debug)]
pub(super) struct MemoStemmer;

impl TokenFilter for MemoStemmer {
    type Tokenizer<T: Tokenizer> = MemoStemmerFilter<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> MemoStemmerFilter<T> {
        MemoStemmerFilter {
            inner: tokenizer,
            memo: Memo::default(),
        }
    }
}

/// The stems seen, and the stemmer that makes them (tantivy's, on one word).
struct Memo {
    stems: FxHashMap<Box<str>, Box<str>>,
    stemmer: TextAnalyzer,
}

impl Default for Memo {
    fn default() -> Self {
        Memo {
            stems: FxHashMap::default(),
            stemmer: TextAnalyzer::builder(RawTokenizer::default())
                .filter(Stemmer::new(Language::English))
                .build(),
        }
    }
}

impl Clone for Memo {
    /// A clone starts empty (a clone is a new analyzer: its memo is its own).
    fn clone(&self) -> Self {
        Memo::default()
    }
}

impl Memo {
    /// Replace `text` (a lowercased word) by its stem.
    fn stem(&mut self, text: &mut String) {
        if let Some(s) = self.stems.get(text.as_str()) {
            text.clear();
            text.push_str(s);
            return;
        }
        let stem = {
            let mut stream = self.stemmer.token_stream(text);
            // The raw tokenizer gives the whole word as one token (an empty
            // word gives none: it stays as it is, as tantivy's stemmer leaves it).
            if !stream.advance() {
                return;
            }
            mem::take(&mut stream.token_mut().text)
        };
        // Tokens with a digit (numbers, ids) rarely come back: not kept.
        if text.len() <= MEMO_MAX_BYTES && !text.bytes().any(|b| b.is_ascii_digit()) {
            if self.stems.len() >= MEMO_WORDS {
                self.stems.clear();
            }
            self.stems
                .insert(text.as_str().into(), stem.as_str().into());
        }
        *text = stem;
    }
}

#[derive(Clone)]
pub(super) struct MemoStemmerFilter<T> {
    inner: T,
    memo: Memo,
}

impl<T: Tokenizer> Tokenizer for MemoStemmerFilter<T> {
    type TokenStream<'a> = MemoStemmerStream<'a, T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        MemoStemmerStream {
            tail: self.inner.token_stream(text),
            memo: &mut self.memo,
        }
    }
}

pub(super) struct MemoStemmerStream<'a, T> {
    tail: T,
    memo: &'a mut Memo,
}

impl<T: TokenStream> TokenStream for MemoStemmerStream<'_, T> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        self.memo.stem(&mut self.tail.token_mut().text);
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(a: &mut TextAnalyzer, text: &str) -> Vec<(String, usize, usize, usize)> {
        let mut out = Vec::new();
        let mut s = a.token_stream(text);
        while s.advance() {
            let t = s.token();
            out.push((t.text.clone(), t.position, t.offset_from, t.offset_to));
        }
        out
    }

    /// tantivy's own `en_stem`, as `TokenizerManager::default` registers it.
    fn tantivy_en_stem() -> TextAnalyzer {
        TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(40))
            .filter(LowerCaser)
            .filter(Stemmer::new(Language::English))
            .build()
    }

    #[test]
    fn the_same_tokens_as_tantivys_en_stem_memo_hit_or_miss() {
        let texts = [
            "The agents were Running the DEPLOYMENTS; deployment failed, retrying retries.",
            "Caching cached caches: generously, generalisations, überprüfung naïve café",
            "x1 42 a_b runs running runner ran — supercalifragilisticexpialidocious-ness",
            "",
            "   ",
            "antidisestablishmentarianisms internationalizations internationalization",
        ];
        let mut ours = en_stem();
        let mut theirs = tantivy_en_stem();
        // Twice: the second round reads every word from the memo.
        for _ in 0..2 {
            for t in texts {
                assert_eq!(tokens(&mut ours, t), tokens(&mut theirs, t), "{t:?}");
            }
        }
    }

    /// A distinct all-letter suffix for `i`.
    fn word_of(mut i: usize) -> String {
        let mut w = String::new();
        loop {
            w.push(char::from(b'a' + (i % 26) as u8));
            i /= 26;
            if i == 0 {
                return w;
            }
        }
    }

    #[test]
    fn a_full_memo_starts_over_and_stems_the_same() {
        let mut ours = en_stem();
        let mut theirs = tantivy_en_stem();
        // More distinct words than the memo holds, then the first ones again.
        let words: Vec<String> = (0..MEMO_WORDS + 100)
            .map(|i| format!("running{}", word_of(i)))
            .collect();
        let text = words.join(" ");
        assert_eq!(tokens(&mut ours, &text), tokens(&mut theirs, &text));
        let again = words[..200].join(" ");
        assert_eq!(tokens(&mut ours, &again), tokens(&mut theirs, &again));
    }
}
