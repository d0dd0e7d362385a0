//! `layers::dedup::find` with the in-memory index's shortcuts (candidates not
//! read back, cached shingle sets) against reading every candidate. It lives
//! with the episodic layer, which writes the records it searches (the
//! episodic layer depends on `layers::dedup`, never the other way).

use crate::engine::Engine;
use crate::layers::dedup::{Candidate, OnDuplicate, Want, find, mem_drop_cached};
use crate::layers::episodic::{embed_text, exact_text, fingerprint, get_in, record_detailed_in};
use crate::search::dedup::DupKind;
use crate::{NewEpisode, Result};

#[test]
fn find_answers_as_if_it_read_every_candidate() {
    // A temporary engine with every layer (no `Memory`: a layer's tests
    // stay below the crate root, like its code).
    let engine = Engine::open(crate::config::Options::default(), &crate::layers::REGISTRY).unwrap();
    let e: &Engine = &engine;
    let words = [
        "deploy", "billing", "staging", "invoice", "review", "dark", "mode", "Lisbon",
    ];
    let mut z = 5u64;
    let mut next = |n: usize| {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((x ^ (x >> 31)) % n as u64) as usize
    };
    let mut texts: Vec<String> = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    for i in 0..150 {
        // Originals, exact copies and copies with a word changed.
        let text = match (i % 5, texts.len()) {
            (3, n) if n > 0 => texts[next(n)].clone(),
            (4, n) if n > 0 => format!("{} {}", texts[next(n)], words[next(words.len())]),
            _ => (0..4 + next(8))
                .map(|_| words[next(words.len())])
                .collect::<Vec<_>>()
                .join(" "),
        };
        // `link` stores every one (duplicates too) and keeps the index.
        let r = record_detailed_in(
            e,
            "default",
            NewEpisode::new(text.clone()).on_duplicate(OnDuplicate::Link),
        )
        .unwrap();
        texts.push(text);
        ids.push(r.id);
    }
    let seed = e.codec.hash_seed();
    for round in 0..3 {
        // Round 0 with every record's set kept since it was indexed; rounds 1
        // and 2 after they are all dropped (computed from the records, then
        // kept again).
        if round == 1 {
            mem_drop_cached(e, "default", DupKind::Episode);
        }
        // Some records reported gone by the loader (a key left behind).
        let gone: Vec<&String> = ids.iter().filter(|_| next(5) == 0).collect();
        for p in 0..60 {
            let text = match p % 3 {
                0 => texts[next(texts.len())].clone(),
                1 => format!("{} {}", texts[next(texts.len())], words[next(words.len())]),
                _ => format!("{} review", words[next(words.len())]),
            };
            let content = serde_json::Value::Null;
            let (fp, exact) = (
                fingerprint(seed, &text, &content),
                exact_text(&text, &content),
            );
            let mut reads = [0usize; 2];
            let run = |as_indexed: bool, reads: &mut usize| {
                let mut load = |id: &str, want: Want| -> Result<Option<Candidate>> {
                    *reads += 1;
                    if gone.iter().any(|g| g.as_str() == id) {
                        return Ok(None);
                    }
                    let ep = get_in(e, "default", id)?.expect("stored");
                    Ok(Some(Candidate {
                        exact: want.exact.then(|| exact_text(&ep.summary, &ep.content)),
                        text: want.text.then(|| embed_text(&ep.summary, &ep.content)),
                    }))
                };
                find(
                    e,
                    "default",
                    DupKind::Episode,
                    &fp,
                    &exact,
                    None,
                    None,
                    as_indexed,
                    &mut load,
                )
                .unwrap()
            };
            let (fast, plain) = (run(true, &mut reads[0]), run(false, &mut reads[1]));
            assert_eq!(fast, plain, "round {round}, probe {text:?}");
            assert!(reads[0] <= reads[1], "{reads:?}");
        }
    }
}
