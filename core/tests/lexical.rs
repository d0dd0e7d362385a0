//! Lexical ranking for conversational questions: English stemming, and the
//! question words / pronouns / auxiliaries of a search weighted down (not
//! dropped) so that a turn sharing the question's content words outranks a
//! turn sharing its function words.

use memstrata::{Memory, NewEpisode, SearchFilters};

/// Chit-chat as in any conversation: the function words of questions are everywhere.
const FILLER: &[&str] = &[
    "I did not sleep well, what a night.",
    "What should I cook tonight? I have no idea.",
    "Did you see the game? I did, what a finish.",
    "I am so tired of emails, what a week.",
    "Where did the time go? I was busy all day.",
    "It is what it is, I guess.",
    "Do you think I should call him? I did yesterday.",
    "The train was late again, I was not happy.",
];

fn store(turns: &[&str]) -> (tempfile::TempDir, Memory, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mem = Memory::open(dir.path().join("m")).unwrap();
    for f in FILLER {
        mem.episodic().record(NewEpisode::new(*f)).unwrap();
    }
    let ids = turns
        .iter()
        .map(|t| mem.episodic().record(NewEpisode::new(*t)).unwrap())
        .collect();
    (dir, mem, ids)
}

fn ranked(mem: &Memory, q: &str) -> Vec<String> {
    mem.episodic()
        .search(q, &SearchFilters::default(), 10)
        .unwrap()
        .into_iter()
        .map(|h| h.episode.id)
        .collect()
}

#[test]
fn content_words_outrank_question_words() {
    let (_dir, mem, ids) = store(&[
        "What did I name it? I did not know what I did.",
        "We adopted a rescue greyhound last weekend and named her Biscuit.",
        "Where did you go and what did you do?",
        "I think I did what I could.",
        "Lunch was a salad.",
    ]);
    let hits = ranked(&mem, "What did I name the dog I adopted?");
    assert_eq!(
        hits.first(),
        Some(&ids[1]),
        "the turn with both content words (name, adopt) comes first: {hits:?}"
    );
    assert_eq!(
        hits.get(1),
        Some(&ids[0]),
        "then the one with one: {hits:?}"
    );
    // Question words still count a little: a turn that shares only them is found.
    assert!(hits.contains(&ids[3]), "{hits:?}");
    assert!(!hits.contains(&ids[4]), "no shared word at all: {hits:?}");
}

#[test]
fn stemming_matches_other_forms() {
    let (_dir, mem, ids) = store(&[
        "She is running the Berlin half marathon.",
        "Our neighbours adopted two cats.",
    ]);
    assert_eq!(ranked(&mem, "runs").first(), Some(&ids[0]));
    assert_eq!(ranked(&mem, "adopting").first(), Some(&ids[1]));
}

#[test]
fn a_question_of_only_function_words_still_matches() {
    let (_dir, mem, ids) = store(&["Who knew? Who cares?", "Lunch was a salad."]);
    assert_eq!(ranked(&mem, "who").first(), Some(&ids[0]));
}
