//! Full-text search in SQL (`search_docs`): another instance's writes, every filter,
//! query text that looks like SQL, forgetting, long records.

use super::*;

fn memstrata_pgindex_dirs() -> usize {
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("memstrata-pgindex-")
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn search_sees_another_instances_write_with_no_local_index_or_catch_up() {
    let dir = pg_dir();
    let url = dir.path();
    let index_dirs_before = memstrata_pgindex_dirs();
    let a = separate_engine(&url);
    let b = separate_engine(&url);
    // No local index directory is made for a PostgreSQL store.
    assert_eq!(memstrata_pgindex_dirs(), index_dirs_before);
    let seq_before = a
        .admin()
        .status(false, true)
        .unwrap()
        .metrics
        .unwrap()
        .index;
    let id = b
        .episodic()
        .record(NewEpisode::new("the quokka escaped from the enclosure"))
        .unwrap();
    b.semantic()
        .store("quokka facts", json!("a small wallaby"))
        .unwrap();
    // `a` made no write and follows no index log: its search reads the rows
    // `b` committed, at once.
    let hits = a
        .episodic()
        .search("quokka", &SearchFilters::default(), 5)
        .unwrap();
    assert_eq!(ids(&hits), vec![id.clone()]);
    assert!(hits[0].score > 0.0);
    let k = a.semantic().query("wallaby", 5).unwrap();
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].key, "quokka facts");
    let seq_after = a
        .admin()
        .status(false, true)
        .unwrap()
        .metrics
        .unwrap()
        .index;
    assert_eq!(
        seq_after.applied_seq, seq_before.applied_seq,
        "the search applied no index-log entry"
    );
    assert_eq!(seq_after.documents, 2);
    // A forget on `b` is gone from `a`'s search as soon as it returns.
    assert!(b.episodic().forget(&id).unwrap());
    assert!(
        a.episodic()
            .search("quokka", &SearchFilters::default(), 5)
            .unwrap()
            .is_empty()
    );
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn every_search_filter_is_applied_in_sql() {
    use chrono::{TimeZone, Utc};
    let dir = pg_dir();
    let mem = Memory::open(dir.path()).unwrap();
    let ep = mem.episodic();
    let t = |h: u32| Utc.with_ymd_and_hms(2026, 3, 1, h, 0, 0).unwrap();
    let rec = |summary: &str, h: u32, tags: &[&str], who: &[&str], importance: u8| {
        ep.record(
            NewEpisode::new(summary)
                .timestamp(t(h))
                .tags(tags.iter().copied())
                .participants(who.iter().copied())
                .importance(importance),
        )
        .unwrap()
    };
    let e1 = rec("harbour crane inspection", 1, &["ops", "port"], &["ann"], 3);
    let e2 = rec("harbour crane repair", 2, &["ops"], &["bob"], 8);
    let e3 = rec("harbour crane audit", 3, &["port"], &["ann", "cy"], 6);
    let e4 = rec("lunch with the team", 4, &["ops", "port"], &["cy"], 9);
    // The same word in knowledge and in another context: never an episode hit here.
    mem.semantic()
        .store("harbour/crane/manual", json!("harbour crane manual"))
        .unwrap();
    mem.namespace("elsewhere")
        .unwrap()
        .episodic()
        .record(NewEpisode::new("harbour crane elsewhere"))
        .unwrap();

    let search = |text: &str, f: SearchFilters, limit: usize| {
        sorted(ids(&ep.search(text, &f, limit).unwrap()))
    };
    let all = || SearchFilters::default();
    assert_eq!(
        search("harbour", all(), 10),
        sorted(vec![e1.clone(), e2.clone(), e3.clone()])
    );
    for text in ["harbour", ""] {
        let with_text = |ids: Vec<&String>| -> Vec<String> {
            let ids: Vec<String> = ids.into_iter().cloned().collect();
            if text.is_empty() {
                sorted(ids)
            } else {
                sorted(ids.into_iter().filter(|i| *i != e4).collect())
            }
        };
        let tags = SearchFilters {
            tags: vec!["ops".into(), "port".into()],
            ..all()
        };
        assert_eq!(
            search(text, tags, 10),
            with_text(vec![&e1, &e4]),
            "tags are all-of"
        );
        let who = SearchFilters {
            participants: vec!["bob".into(), "cy".into()],
            ..all()
        };
        assert_eq!(
            search(text, who, 10),
            with_text(vec![&e2, &e3, &e4]),
            "participants are any-of"
        );
        let since = SearchFilters {
            since: Some(t(2)),
            ..all()
        };
        assert_eq!(
            search(text, since, 10),
            with_text(vec![&e2, &e3, &e4]),
            "since is inclusive"
        );
        let until = SearchFilters {
            until: Some(t(2)),
            ..all()
        };
        assert_eq!(
            search(text, until, 10),
            with_text(vec![&e1, &e2]),
            "until is inclusive"
        );
        let window = SearchFilters {
            since: Some(t(2)),
            until: Some(t(3)),
            ..all()
        };
        assert_eq!(search(text, window, 10), with_text(vec![&e2, &e3]));
        let important = SearchFilters {
            min_importance: Some(6),
            ..all()
        };
        assert_eq!(search(text, important, 10), with_text(vec![&e2, &e3, &e4]));
        let everything = SearchFilters {
            tags: vec!["port".into()],
            participants: vec!["ann".into()],
            since: Some(t(1)),
            until: Some(t(4)),
            min_importance: Some(4),
            ..all()
        };
        assert_eq!(search(text, everything, 10), with_text(vec![&e3]));
    }
    // Empty text: filters only, newest first; the limit holds.
    let newest = ids(&ep.search("", &all(), 10).unwrap());
    assert_eq!(newest, vec![e4.clone(), e3.clone(), e2.clone(), e1.clone()]);
    assert_eq!(
        ids(&ep.search("", &all(), 2).unwrap()),
        vec![e4.clone(), e3.clone()]
    );
    assert_eq!(ep.search("harbour", &all(), 2).unwrap().len(), 2);
    // Punctuation only, or stop words only: no lexeme, so filters only, newest first.
    for text in ["?!", "what is it"] {
        assert_eq!(
            ids(&ep.search(text, &all(), 10).unwrap()),
            newest,
            "{text:?}"
        );
    }
    // A summary match outranks a body match of the same word; equal scores
    // come newest first.
    let body = ep
        .record(
            NewEpisode::new("notes")
                .timestamp(t(5))
                .content(json!("a gantry and more words around it")),
        )
        .unwrap();
    let summary = ep
        .record(NewEpisode::new("gantry").timestamp(t(0)))
        .unwrap();
    assert_eq!(
        ids(&ep.search("gantry", &all(), 10).unwrap()),
        vec![summary, body]
    );
    let twin_old = ep
        .record(NewEpisode::new("twin words").timestamp(t(1)))
        .unwrap();
    let twin_new = ep
        .record(NewEpisode::new("twin words").timestamp(t(2)))
        .unwrap();
    let twins = ep.search("twin", &all(), 10).unwrap();
    assert_eq!(twins[0].score, twins[1].score);
    assert_eq!(ids(&twins), vec![twin_new, twin_old]);
    // Knowledge: its own kind, keys holding `/` come back whole.
    let k = mem.semantic().query("crane", 10).unwrap();
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].key, "harbour/crane/manual");
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn query_text_that_looks_like_sql_or_tsquery_is_searched_as_words() {
    let dir = pg_dir();
    let url = dir.path();
    let schema = common::schema_of(&url);
    let mem = Memory::open(&url).unwrap();
    let ep = mem.episodic();
    let robert = ep
        .record(NewEpisode::new("Robert enrolled the students"))
        .unwrap();
    let quoted = ep
        .record(
            NewEpisode::new("O'Brien's backslash\\path note").content(json!({
                "mail": "ops@example.com",
                "nul": "anchor\u{0}shoreline",
                // The parser keeps the quote in a URL path: a lexeme `/a'b`.
                "url": "http://ex.com/a'b",
            })),
        )
        .unwrap();
    for text in [
        "Robert'); DROP TABLE search_docs;--",
        "robert & !students | (x:*) <-> 'y'",
        "\"students\" OR robert AND NOT x",
        "robert\\' || '' ; SELECT 1",
        "robert:A* & students:!",
        "*) ( ! & | : ' \" \\",
    ] {
        let hits = ep.search(text, &SearchFilters::default(), 10).unwrap();
        if text.contains("robert") || text.contains("Robert") || text.contains("students") {
            assert_eq!(ids(&hits)[0], robert, "{text:?}");
        }
    }
    for text in [
        "O'Brien",
        "backslash\\path",
        "ops@example.com",
        "shoreline",
        "ex.com/a'b",
    ] {
        let hits = ep.search(text, &SearchFilters::default(), 10).unwrap();
        assert_eq!(ids(&hits), vec![quoted.clone()], "{text:?}");
    }
    // The table and both rows are still there.
    assert_eq!(search_docs_rows(&schema, "true"), 2);
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn forgetting_removes_the_search_row() {
    let dir = pg_dir();
    let url = dir.path();
    let schema = common::schema_of(&url);
    let mem = Memory::open(&url).unwrap();
    let id = mem
        .episodic()
        .record(NewEpisode::new("ephemeral marmot"))
        .unwrap();
    mem.semantic().store("marmot", json!("a rodent")).unwrap();
    let row = format!("uid = 'e/default/{id}'");
    assert_eq!(search_docs_rows(&schema, &row), 1);
    assert_eq!(search_docs_rows(&schema, "uid = 'k/default/marmot'"), 1);
    assert!(mem.episodic().forget(&id).unwrap());
    assert!(mem.semantic().forget("marmot").unwrap());
    assert_eq!(search_docs_rows(&schema, "true"), 0);
    assert!(
        mem.semantic().query("rodent", 5).unwrap().is_empty()
            && mem
                .episodic()
                .search("marmot", &SearchFilters::default(), 5)
                .unwrap()
                .is_empty()
    );
}

#[test]
#[ignore = "needs a PostgreSQL server: run by make test-pg"]
fn a_long_record_is_stored_and_its_first_words_are_searchable() {
    // ~1.3 MB of distinct words: its whole tsvector would pass PostgreSQL's
    // 1 MiB limit; the indexed prefix keeps it under.
    let dir = pg_dir();
    let mem = Memory::open(dir.path()).unwrap();
    let body: String = (0..150_000).map(|i| format!("w{i}x ")).collect();
    let id = mem
        .episodic()
        .record(NewEpisode::new("long").content(json!(body)))
        .unwrap();
    let f = SearchFilters::default();
    assert_eq!(ids(&mem.episodic().search("w5x", &f, 5).unwrap()), vec![id]);
    assert!(mem.episodic().search("w149999x", &f, 5).unwrap().is_empty());
}
