//! The terms of a PostgreSQL store's search rows when the store has a key:
//! the engine computes them (PostgreSQL never sees the text) and the store
//! writes each one as a keyed hash (`storage::pg::sealed`).
//!
//! The analyzer is the text index's own (`en_stem`: tantivy's simple
//! tokenizer, tokens over 40 bytes dropped, lower-cased, English Snowball
//! stemmer) with the stop words of PostgreSQL's `english` configuration
//! removed before stemming, as `to_tsvector('english', ...)` removes them on a
//! store without a key: so a keyed and a plaintext PostgreSQL store index the
//! same words of ordinary text and rank them alike. A dropped stop word keeps
//! its position, as in PostgreSQL (`the cat` puts `cat` at position 2).

use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    TokenStream,
};

use crate::storage::docs::Lexer;

/// The stop words of PostgreSQL's `english` text search configuration
/// (`tsearch_data/english.stop`, Snowball's English list).
#[rustfmt::skip]
pub(crate) const PG_ENGLISH_STOP_WORDS: &[&str] = &[
    "i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "your", "yours",
    "yourself", "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself",
    "it", "its", "itself", "they", "them", "their", "theirs", "themselves", "what", "which",
    "who", "whom", "this", "that", "these", "those", "am", "is", "are", "was", "were", "be",
    "been", "being", "have", "has", "had", "having", "do", "does", "did", "doing", "a", "an",
    "the", "and", "but", "if", "or", "because", "as", "until", "while", "of", "at", "by", "for",
    "with", "about", "against", "between", "into", "through", "during", "before", "after",
    "above", "below", "to", "from", "up", "down", "in", "out", "on", "off", "over", "under",
    "again", "further", "then", "once", "here", "there", "when", "where", "why", "how", "all",
    "any", "both", "each", "few", "more", "most", "other", "some", "such", "no", "nor", "not",
    "only", "own", "same", "so", "than", "too", "very", "s", "t", "can", "will", "just", "don",
    "should", "now",
];

/// The analyzer of keyed PostgreSQL search rows (see the module docs).
pub(crate) struct SqlLexer {
    analyzer: TextAnalyzer,
}

impl std::fmt::Debug for SqlLexer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqlLexer")
    }
}

impl Default for SqlLexer {
    fn default() -> Self {
        SqlLexer {
            analyzer: TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(RemoveLongFilter::limit(40))
                .filter(LowerCaser)
                .filter(StopWordFilter::remove(
                    PG_ENGLISH_STOP_WORDS.iter().map(|w| (*w).to_owned()),
                ))
                .filter(Stemmer::new(Language::English))
                .build(),
        }
    }
}

impl Lexer for SqlLexer {
    fn terms(&self, text: &str, out: &mut dyn FnMut(&str, u32)) {
        // A clone per call: the analyzer's stream borrows it mutably.
        let mut analyzer = self.analyzer.clone();
        let mut stream = analyzer.token_stream(text);
        while stream.advance() {
            let t = stream.token();
            let pos = u32::try_from(t.position)
                .unwrap_or(u32::MAX)
                .saturating_add(1);
            out(&t.text, pos);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        SqlLexer::default().terms(text, &mut |t, p| out.push((t.to_owned(), p)));
        out
    }

    #[test]
    fn stop_words_go_but_keep_their_positions_and_words_are_stemmed() {
        assert_eq!(
            terms("The cats were running to Paris"),
            vec![
                ("cat".to_owned(), 2),
                ("run".to_owned(), 4),
                ("pari".to_owned(), 6)
            ]
        );
        assert!(terms("the and of").is_empty());
        assert!(terms("").is_empty());
    }
}
