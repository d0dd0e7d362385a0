//! The search index of an encrypted store is sealed: no word written through
//! episodes or knowledge can be found in any file under `<store>/index`
//! (the same scan finds them without a key); searches answer exactly as
//! without a key; a tampered chunk is `CORRUPTED` or makes the index rebuild,
//! never a panic or a wrong answer; merges, reopening and rebuilds keep the
//! index sealed. Real sled stores and a real tantivy index in temp dirs.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use memstrata::semantic::NewKnowledge;
use memstrata::{EncryptionKey, Error, Memory, NewEpisode, SearchFilters, admin::OptimizeLevel};
use serde_json::json;

/// Lower-case and stem-stable (the index keeps lower-cased, stemmed terms).
const SUMMARY_WORD: &str = "qvzsummaryword";
const CONTENT_WORD: &str = "jxkcontentword";
const PARTICIPANT_WORD: &str = "wqfparticipantword";
const TAG_WORD: &str = "zpgtagword";
const KNOWLEDGE_KEY_WORD: &str = "vkqknowledgekeyword";
const KNOWLEDGE_VALUE_WORD: &str = "ybqknowledgevalueword";
const CONTEXT_WORD: &str = "xjqcontextword";
const WORDS: [&str; 7] = [
    SUMMARY_WORD,
    CONTENT_WORD,
    PARTICIPANT_WORD,
    TAG_WORD,
    KNOWLEDGE_KEY_WORD,
    KNOWLEDGE_VALUE_WORD,
    CONTEXT_WORD,
];

/// Sealed file layout (`core/src/search/index/crypt.rs`): header, then chunks of 64 KiB + tag.
const HEADER: usize = 24;
const SEALED_CHUNK: usize = 65536 + 16;

fn key() -> EncryptionKey {
    EncryptionKey::new([0x42; 32])
}

fn open(path: &Path, keyed: bool) -> Memory {
    let mut b = Memory::builder().path(path);
    if keyed {
        b = b.encryption_key(key());
    }
    b.open().unwrap()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The words found in some file under `<store>/index`, with the file.
fn words_in_index(store: &Path) -> BTreeMap<&'static str, PathBuf> {
    let mut found = BTreeMap::new();
    for f in files_under(&store.join("index")) {
        let bytes = std::fs::read(&f).unwrap();
        for w in WORDS {
            if contains(&bytes, w.as_bytes()) {
                found.entry(w).or_insert_with(|| f.clone());
            }
        }
    }
    found
}

/// The distinctive words through every indexed field, in the default context
/// and in a context named by a word.
fn write_words(mem: &Memory) {
    for m in [mem.clone(), mem.namespace(CONTEXT_WORD).unwrap()] {
        m.episodic()
            .record(
                NewEpisode::new(format!("meeting about {SUMMARY_WORD} plans"))
                    .content(json!({"notes": {"deep": [format!("said {CONTENT_WORD} twice")]}}))
                    .participants([PARTICIPANT_WORD, "bob"])
                    .tags([TAG_WORD, "work"]),
            )
            .unwrap();
        m.semantic()
            .store(
                KNOWLEDGE_KEY_WORD,
                json!({"fact": format!("the {KNOWLEDGE_VALUE_WORD} is blue")}),
            )
            .unwrap();
    }
}

fn check_words_found(mem: &Memory) {
    for m in [mem.clone(), mem.namespace(CONTEXT_WORD).unwrap()] {
        for w in [SUMMARY_WORD, CONTENT_WORD, PARTICIPANT_WORD, TAG_WORD] {
            let hits = m
                .episodic()
                .search(w, &SearchFilters::default(), 10)
                .unwrap();
            assert_eq!(hits.len(), 1, "search {w}");
        }
        let f = SearchFilters {
            tags: vec![TAG_WORD.into()],
            participants: vec![PARTICIPANT_WORD.into()],
            ..Default::default()
        };
        assert_eq!(m.episodic().search("", &f, 10).unwrap().len(), 1);
        let k = m.semantic().query(KNOWLEDGE_VALUE_WORD, 10).unwrap();
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].key, KNOWLEDGE_KEY_WORD);
    }
}

/// Every 12-byte window (not a run of one byte) of the tantivy segment files under `<store>/index`.
fn segment_windows(store: &Path) -> HashSet<[u8; 12]> {
    let mut out = HashSet::new();
    for f in files_under(&store.join("index")) {
        if f.extension().is_none_or(|e| e == "json" || e == "lock") {
            continue;
        }
        for w in std::fs::read(&f).unwrap().windows(12) {
            if w.iter().any(|b| *b != w[0]) {
                out.insert(w.try_into().unwrap());
            }
        }
    }
    out
}

fn shared_windows(a: &HashSet<[u8; 12]>, b: &HashSet<[u8; 12]>) -> usize {
    a.intersection(b).count()
}

#[test]
fn index_files_hold_no_word_of_an_encrypted_store() {
    let dir = tempfile::tempdir().unwrap();
    // Control: the same writes without a key. tantivy's term dictionary
    // encodes terms (a byte scan does not see them), but context names and
    // knowledge keys are verbatim in the uid column, and two plaintext
    // indexes of the same writes share most of their bytes.
    let mut plain = Vec::new();
    for name in ["plain1", "plain2"] {
        let p = dir.path().join(name);
        let mem = open(&p, false);
        write_words(&mem);
        check_words_found(&mem);
        drop(mem);
        plain.push(p);
    }
    let found = words_in_index(&plain[0]);
    for w in [KNOWLEDGE_KEY_WORD, CONTEXT_WORD] {
        assert!(
            found.contains_key(w),
            "control: {w} verbatim in a plaintext index"
        );
    }
    let plain_windows = segment_windows(&plain[0]);
    assert!(
        shared_windows(&plain_windows, &segment_windows(&plain[1])) > 200,
        "control: two plaintext indexes of the same writes share their term bytes"
    );

    let sealed = dir.path().join("sealed");
    let mem = open(&sealed, true);
    write_words(&mem);
    check_words_found(&mem);
    mem.admin()
        .optimize(OptimizeLevel::Aggressive, None)
        .unwrap();
    drop(mem);
    let found = words_in_index(&sealed);
    assert!(
        found.is_empty(),
        "words found in the sealed index: {found:?}"
    );
    assert_eq!(
        shared_windows(&plain_windows, &segment_windows(&sealed)),
        0,
        "bytes of a plaintext index found in the sealed one"
    );
    let meta = std::fs::read(sealed.join("index").join("meta.json")).unwrap();
    assert!(meta.starts_with(b"MSIX") && !contains(&meta, b"segments"));
    for f in files_under(&sealed.join("index")) {
        let b = std::fs::read(&f).unwrap();
        assert!(!contains(&b, &[0x42; 32]), "key bytes in {}", f.display());
    }
    // And it reads back after reopening.
    let mem = open(&sealed, true);
    check_words_found(&mem);
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn vocab(i: u64) -> String {
    format!("wrd{i}x")
}

/// `n` episodes of 12 summary and 12 content words from a vocabulary of
/// `v`, recorded in batches; returns which episodes (by number) hold each word.
fn write_corpus(mem: &Memory, n: usize, v: u64) -> BTreeMap<String, BTreeSet<usize>> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut holds: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    let mut batch = Vec::new();
    for i in 0..n {
        let mut words = |k: usize| {
            (0..k)
                .map(|_| vocab(rng.next() % v))
                .collect::<Vec<String>>()
        };
        let (s, c) = (words(12), words(12));
        for w in s.iter().chain(&c) {
            holds.entry(w.clone()).or_default().insert(i);
        }
        batch.push(
            NewEpisode::new(format!("entry{i} {}", s.join(" ")))
                .content(json!({"text": c.join(" ")}))
                .tags([format!("t{}", i % 5)])
                .importance((i % 10) as u8 + 1),
        );
        if batch.len() == 500 {
            mem.episodic()
                .record_many(std::mem::take(&mut batch))
                .unwrap();
        }
    }
    mem.episodic().record_many(batch).unwrap();
    holds
}

fn entry_of(summary: &str) -> usize {
    summary
        .split(' ')
        .next()
        .and_then(|s| s.strip_prefix("entry"))
        .and_then(|s| s.parse().ok())
        .unwrap()
}

#[test]
fn searches_answer_the_same_with_and_without_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut answers = Vec::new();
    for keyed in [false, true] {
        let path = dir.path().join(if keyed { "sealed" } else { "plain" });
        let mem = open(&path, keyed);
        write_corpus(&mem, 800, 300);
        let knowledge = (0..200)
            .map(|i| NewKnowledge::new(format!("k{i}"), json!({"v": vocab(i % 300)})))
            .collect();
        mem.semantic().store_many(knowledge).unwrap();
        drop(mem);
        let mem = open(&path, keyed);
        let mut out: Vec<Vec<(usize, f32)>> = Vec::new();
        let filters = [
            SearchFilters::default(),
            SearchFilters {
                tags: vec!["t3".into()],
                ..Default::default()
            },
            SearchFilters {
                min_importance: Some(6),
                ..Default::default()
            },
        ];
        for q in (0..300).step_by(7) {
            let text = format!("{} {}", vocab(q), vocab((q * 13 + 5) % 300));
            for f in &filters {
                let mut hits: Vec<(usize, f32)> = mem
                    .episodic()
                    .search(&text, f, 50)
                    .unwrap()
                    .into_iter()
                    .map(|h| (entry_of(&h.episode.summary), h.score))
                    .collect();
                hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                out.push(above_the_cut(hits, 50));
            }
            let mut k: Vec<(usize, f32)> = mem
                .semantic()
                .query(&vocab(q), 50)
                .unwrap()
                .into_iter()
                .map(|h| (h.key[1..].parse().unwrap(), h.score))
                .collect();
            k.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            out.push(above_the_cut(k, 50));
        }
        assert!(out.iter().filter(|h| !h.is_empty()).count() > 50);
        answers.push(out);
    }
    assert_eq!(answers[0].len(), answers[1].len());
    for (p, s) in answers[0].iter().zip(&answers[1]) {
        assert_eq!(p.len(), s.len());
        for (a, b) in p.iter().zip(s) {
            assert_eq!(a.0, b.0, "same hits in the same order");
            assert!(
                (a.1 - b.1).abs() <= 1e-5 * a.1.abs().max(1.0),
                "{a:?} vs {b:?}"
            );
        }
    }
}

/// A full page of hits (`limit` of them, best first) without those tied with
/// its last score: which of several equally scored hits make the cut depends
/// on where the index put them (commit and merge timing), in either store.
fn above_the_cut(mut hits: Vec<(usize, f32)>, limit: usize) -> Vec<(usize, f32)> {
    if hits.len() == limit
        && let Some(&(_, last)) = hits.last()
    {
        hits.retain(|h| h.1 > last);
    }
    hits
}

/// Every answer for `words` must be exactly the episodes that hold them; a
/// `Corrupted` answer is counted, and the same search right after must answer.
fn verify(mem: &Memory, holds: &BTreeMap<String, BTreeSet<usize>>, words: &[String]) -> usize {
    let mut corrupted = 0;
    for w in words {
        let expected = &holds[w];
        let mut attempt = 0;
        let hits = loop {
            match mem.episodic().search(w, &SearchFilters::default(), 1000) {
                Ok(h) => break h,
                Err(Error::Corrupted { message, .. }) if attempt == 0 => {
                    assert!(message.contains("authentication"), "{message}");
                    corrupted += 1;
                    attempt += 1;
                }
                Err(e) => panic!("search {w}: {e}"),
            }
        };
        let got: BTreeSet<usize> = hits.iter().map(|h| entry_of(&h.episode.summary)).collect();
        assert_eq!(&got, expected, "wrong answer for {w}");
    }
    corrupted
}

#[test]
fn a_tampered_chunk_is_corrupted_or_rebuilt_never_a_wrong_answer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mem = open(&path, true);
    let holds = write_corpus(&mem, 4000, 1500);
    mem.admin()
        .optimize(OptimizeLevel::Aggressive, None)
        .unwrap();
    drop(mem);
    let words: Vec<String> = holds
        .keys()
        .filter(|w| holds[*w].len() < 1000)
        .step_by(9)
        .cloned()
        .collect();
    let (mut corrupted, mut rebuilt_at_open, mut rounds) = (0, 0, 0);
    // Postings and term dictionaries are read by searches, chunk by chunk.
    for ext in ["idx", "term"] {
        for chunk in 0..3 {
            let Some(f) = files_under(&path.join("index")).into_iter().find(|f| {
                f.extension().is_some_and(|e| e == ext)
                    && std::fs::metadata(f).unwrap().len() as usize
                        > HEADER + (chunk + 1) * SEALED_CHUNK
            }) else {
                continue;
            };
            let mut bytes = std::fs::read(&f).unwrap();
            bytes[HEADER + chunk * SEALED_CHUNK + 1000] ^= 0x55;
            std::fs::write(&f, &bytes).unwrap();
            rounds += 1;
            let r = std::panic::catch_unwind(|| {
                let mem = open(&path, true);
                let rebuilt = !f.exists();
                (verify(&mem, &holds, &words), rebuilt)
            });
            let (c, rebuilt) =
                r.unwrap_or_else(|_| panic!("panic after tampering {}", f.display()));
            corrupted += c;
            rebuilt_at_open += usize::from(rebuilt);
        }
    }
    eprintln!(
        "{rounds} chunks tampered: {corrupted} searches answered CORRUPTED, {rebuilt_at_open} rebuilt at open"
    );
    assert!(
        rounds >= 2,
        "the corpus should give multi-chunk index files"
    );
    assert!(
        corrupted >= 1,
        "a tampered postings or dictionary chunk should be reported ({rounds} rounds, {rebuilt_at_open} rebuilt at open)"
    );
    // The last chunk of every file (footers) is read when the index opens: the index is rebuilt.
    let f = files_under(&path.join("index"))
        .into_iter()
        .find(|f| f.extension().is_some_and(|e| e == "idx"))
        .unwrap();
    let mut bytes = std::fs::read(&f).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 1;
    std::fs::write(&f, &bytes).unwrap();
    let mem = open(&path, true);
    assert!(
        !f.exists(),
        "a segment failing authentication at open is rebuilt"
    );
    assert_eq!(verify(&mem, &holds, &words), 0);
}

#[test]
fn merges_reopen_and_rebuilds_stay_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mem = open(&path, true);
    write_words(&mem);
    // Many small commits: many segments, merged in the background and by optimize.
    let mut holds = BTreeMap::new();
    for round in 0..10 {
        let ids = mem
            .episodic()
            .record_many(
                (0..50)
                    .map(|i| {
                        NewEpisode::new(format!(
                            "entry{} round{round} {}",
                            round * 50 + i,
                            vocab(i % 7)
                        ))
                    })
                    .collect(),
            )
            .unwrap();
        assert_eq!(ids.len(), 50);
        for i in 0..50u64 {
            holds
                .entry(vocab(i % 7))
                .or_insert_with(BTreeSet::new)
                .insert(round as usize * 50 + i as usize);
        }
        mem.flush().unwrap();
    }
    let words: Vec<String> = holds.keys().cloned().collect();
    assert_eq!(verify(&mem, &holds, &words), 0);
    mem.admin()
        .optimize(OptimizeLevel::Aggressive, None)
        .unwrap();
    assert_eq!(verify(&mem, &holds, &words), 0);
    check_words_found(&mem);
    drop(mem);
    assert!(words_in_index(&path).is_empty());

    let mem = open(&path, true);
    assert_eq!(verify(&mem, &holds, &words), 0);
    check_words_found(&mem);
    drop(mem);

    // Rebuild from sled (the index directory lost): sealed again.
    std::fs::remove_dir_all(path.join("index")).unwrap();
    let mem = open(&path, true);
    assert_eq!(verify(&mem, &holds, &words), 0);
    check_words_found(&mem);
    drop(mem);
    assert!(words_in_index(&path).is_empty());
    let meta = std::fs::read(path.join("index").join("meta.json")).unwrap();
    assert!(meta.starts_with(b"MSIX"));
}

#[test]
fn a_plaintext_index_in_an_encrypted_store_is_rebuilt_sealed() {
    // An encrypted store written before the index was sealed has a plaintext
    // index: made here by putting a plaintext store's index (same documents,
    // same schema) in place of the sealed one.
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    let sealed = dir.path().join("sealed");
    for (p, keyed) in [(&plain, false), (&sealed, true)] {
        let mem = open(p, keyed);
        write_words(&mem);
        drop(mem);
    }
    std::fs::remove_dir_all(sealed.join("index")).unwrap();
    std::fs::create_dir(sealed.join("index")).unwrap();
    for f in files_under(&plain.join("index")) {
        std::fs::copy(&f, sealed.join("index").join(f.file_name().unwrap())).unwrap();
    }
    let plain_windows = segment_windows(&plain);
    assert!(shared_windows(&plain_windows, &segment_windows(&sealed)) > 200);
    let mem = open(&sealed, true);
    check_words_found(&mem);
    drop(mem);
    let found = words_in_index(&sealed);
    assert!(
        found.is_empty(),
        "plaintext left after opening with the key: {found:?}"
    );
    assert_eq!(shared_windows(&plain_windows, &segment_windows(&sealed)), 0);
    let meta = std::fs::read(sealed.join("index").join("meta.json")).unwrap();
    assert!(meta.starts_with(b"MSIX"));
}

#[test]
fn index_cache_budget_is_checked_and_zero_still_searches() {
    let dir = tempfile::tempdir().unwrap();
    match Memory::builder()
        .path(dir.path().join("a"))
        .encryption_key(key())
        .index_cache_bytes((1 << 30) + 1)
        .open()
    {
        Err(Error::InvalidInput { field, reason }) => {
            assert_eq!(field, "index_cache_bytes");
            assert!(reason.contains("at most"), "{reason}");
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    let path = dir.path().join("b");
    for _ in 0..2 {
        let mem = Memory::builder()
            .path(&path)
            .encryption_key(key())
            .index_cache_bytes(0)
            .open()
            .unwrap();
        if mem.episodic().recent(1).unwrap().is_empty() {
            write_words(&mem);
        }
        check_words_found(&mem);
    }
}
