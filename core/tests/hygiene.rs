//! Memory hygiene: duplicates caught on write (`on_duplicate`: keep, skip,
//! merge, link; per call and per context), exact, near (shingles) and by
//! cosine, for episodes and knowledge, across restarts, forget, export/import
//! and stores written before detection existed. A backend conformance suite.

mod common;

use memstrata::episodic::{OnDuplicate, Recorded};
use memstrata::semantic::StoreOptions;
use memstrata::{Memory, NewEpisode};
use serde_json::json;

fn rec(mem: &Memory, ep: NewEpisode) -> Recorded {
    mem.episodic().record_detailed(ep).unwrap()
}

fn count(mem: &Memory) -> usize {
    mem.episodic().recent(1000).unwrap().len()
}

const TEXT: &str = "Deployed version 2.4 of the billing service to staging";

#[test]
fn exact_duplicates_under_each_policy() {
    let mem = common::temporary().unwrap();
    let first = rec(&mem, NewEpisode::new(TEXT).tags(["deploy"]).importance(4));
    assert!(first.created);
    assert_eq!(first.duplicate_of, None);
    assert_eq!(first.on_duplicate, OnDuplicate::Keep);

    // keep (the default) in a context that never asked for another policy:
    // stored again, no detection run (and no dedup key written).
    let kept = rec(&mem, NewEpisode::new(TEXT));
    assert!(kept.created);
    assert_ne!(kept.id, first.id);
    assert_eq!(kept.duplicate_of, None);
    assert_eq!(count(&mem), 2);
    mem.episodic().forget(&kept.id).unwrap();

    // skip: nothing stored, the existing id returned.
    let skipped = rec(&mem, NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Skip));
    assert!(!skipped.created);
    assert_eq!(skipped.id, first.id);
    assert_eq!(skipped.duplicate_of.as_deref(), Some(first.id.as_str()));
    assert_eq!(count(&mem), 1);

    // merge: one episode, tags and participants united, importance the higher, counted.
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let merged = rec(
        &mem,
        NewEpisode::new(TEXT)
            .tags(["deploy", "staging"])
            .participants(["ana"])
            .importance(8)
            .timestamp(later)
            .on_duplicate(OnDuplicate::Merge),
    );
    assert!(!merged.created);
    assert_eq!(merged.id, first.id);
    assert_eq!(count(&mem), 1);
    let ep = mem.episodic().get(&first.id).unwrap().unwrap();
    assert_eq!(ep.tags, vec!["deploy", "staging"]);
    assert_eq!(ep.participants, vec!["ana"]);
    assert_eq!(ep.importance, 8);
    assert_eq!(ep.seen_count, 2);
    assert_eq!(
        ep.last_seen.map(|t| t.timestamp_millis()),
        Some(later.timestamp_millis())
    );
    // The merged tags are searchable at once.
    let hits = mem
        .episodic()
        .search(
            "billing",
            &memstrata::SearchFilters {
                tags: vec!["staging".into()],
                ..Default::default()
            },
            10,
        )
        .unwrap();
    assert_eq!(hits.len(), 1);

    // link: stored, and the link kept on the episode.
    let linked = rec(&mem, NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Link));
    assert!(linked.created);
    let ep = mem.episodic().get(&linked.id).unwrap().unwrap();
    assert_eq!(ep.duplicate_of.as_deref(), Some(first.id.as_str()));
    assert_eq!(ep.seen_count, 1);
    assert_eq!(
        mem.episodic().get(&first.id).unwrap().unwrap().duplicate_of,
        None
    );

    // keep, now that the context has a dedup index: stored, the duplicate named.
    let kept = rec(&mem, NewEpisode::new(TEXT));
    assert!(kept.created);
    assert_eq!(kept.duplicate_of.as_deref(), Some(first.id.as_str()));
    assert_eq!(kept.similarity, Some(1.0));
}

#[test]
fn near_duplicates_by_shingles_and_not_unrelated_text() {
    let mem = common::temporary().unwrap();
    let first = rec(
        &mem,
        NewEpisode::new("The user prefers dark mode in every editor they use")
            .content(json!({"source": "settings page"})),
    );
    // Case, punctuation and one word differ: not exact, near.
    let near = rec(
        &mem,
        NewEpisode::new("the user really prefers dark-mode in every editor they use!")
            .content(json!({"source": "settings page"}))
            .on_duplicate(OnDuplicate::Skip),
    );
    assert_eq!(near.id, first.id);
    let sim = near.similarity.unwrap();
    assert!((0.8..1.0).contains(&sim), "similarity {sim}");
    // A different fact sharing words is not a duplicate.
    let other = rec(
        &mem,
        NewEpisode::new("The user prefers light mode in the terminal only")
            .content(json!({"source": "settings page"}))
            .on_duplicate(OnDuplicate::Skip),
    );
    assert!(other.created);
    assert_eq!(other.duplicate_of, None);
    assert_eq!(count(&mem), 2);
}

#[test]
fn near_duplicates_by_cosine() {
    let mem = common::temporary().unwrap();
    let first = rec(
        &mem,
        NewEpisode::new("Ana booked flights to Lisbon for May").embedding(vec![0.9, 0.1, 0.2]),
    );
    // Other words, nearly the same vector (cosine > 0.95).
    let same = rec(
        &mem,
        NewEpisode::new("Tickets to Portugal reserved by Ana")
            .embedding(vec![0.88, 0.12, 0.21])
            .on_duplicate(OnDuplicate::Skip),
    );
    assert_eq!(same.id, first.id);
    assert!(same.similarity.unwrap() >= memstrata::search::NEAR_COSINE);
    // A distant vector is not.
    let far = rec(
        &mem,
        NewEpisode::new("Quarterly report filed")
            .embedding(vec![0.0, 1.0, 0.0])
            .on_duplicate(OnDuplicate::Skip),
    );
    assert!(far.created);
}

#[test]
fn context_default_policy_persists_and_is_per_context() {
    let dir = common::tempdir();
    {
        let mem = Memory::open(dir.path()).unwrap();
        assert_eq!(
            mem.contexts().on_duplicate(None).unwrap(),
            OnDuplicate::Keep
        );
        mem.contexts()
            .set_on_duplicate(OnDuplicate::Skip, Some("work"))
            .unwrap();
        let work = mem.namespace("work").unwrap();
        let a = rec(&work, NewEpisode::new(TEXT));
        let b = rec(&work, NewEpisode::new(TEXT));
        assert_eq!(b.on_duplicate, OnDuplicate::Skip);
        assert_eq!(a.id, b.id);
        // The default context keeps its own default, and nothing of "work" is its duplicate.
        let d = rec(&mem, NewEpisode::new(TEXT));
        assert!(d.created);
        assert_eq!(d.duplicate_of, None);
        // A call's policy overrides the context's.
        let c = rec(&work, NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Keep));
        assert!(c.created);
        let err = mem
            .contexts()
            .set_on_duplicate(OnDuplicate::Merge, Some("bad/name"))
            .unwrap_err();
        assert_eq!(err.code(), "INVALID_INPUT");
    }
    let mem = Memory::open(dir.path()).unwrap();
    assert_eq!(
        mem.contexts().on_duplicate(Some("work")).unwrap(),
        OnDuplicate::Skip
    );
    let work = mem.namespace("work").unwrap();
    let again = rec(&work, NewEpisode::new(TEXT));
    assert!(!again.created, "the keys and the policy survive a restart");
}

#[test]
fn forgotten_episodes_are_no_longer_duplicates() {
    let mem = common::temporary().unwrap();
    let a = rec(&mem, NewEpisode::new(TEXT));
    assert!(mem.episodic().forget(&a.id).unwrap());
    let b = rec(&mem, NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Skip));
    assert!(b.created);
    assert_eq!(b.duplicate_of, None);
}

#[test]
fn knowledge_duplicates_under_each_policy() {
    let mem = common::temporary().unwrap();
    let s = mem.semantic();
    let v = json!({"fact": "The customer prefers invoices by email every month"});
    let a = s.store("billing.invoices", v.clone()).unwrap();
    assert_eq!(a.duplicate_of, None);
    // keep: stored, duplicate named, not linked.
    // keep, before any other policy: no detection.
    let b = s.store("customer.invoice_pref", v.clone()).unwrap();
    assert_eq!(b.duplicate_of, None);
    assert!(s.forget("customer.invoice_pref").unwrap());
    // keep once the context has a dedup index (built by a first `skip`).
    let c = s
        .store_with(
            "billing.invoices",
            v.clone(),
            StoreOptions::default().on_duplicate(OnDuplicate::Skip),
        )
        .unwrap();
    assert_eq!(c.duplicate_of.as_deref(), Some("billing.invoices"));
    assert_eq!(c.version, 1);
    let b = s.store("customer.invoice_pref", v.clone()).unwrap();
    assert_eq!(b.duplicate_of.as_deref(), Some("billing.invoices"));
    assert_eq!(
        s.get("customer.invoice_pref")
            .unwrap()
            .unwrap()
            .duplicate_of,
        None
    );
    assert!(s.forget("customer.invoice_pref").unwrap());
    // skip: the existing entry returned, nothing stored.
    let skipped = s
        .store_with(
            "customer.invoice_pref",
            json!({"fact": "the customer prefers invoices by email, every month."}),
            StoreOptions::default().on_duplicate(OnDuplicate::Skip),
        )
        .unwrap();
    assert_eq!(skipped.key, "billing.invoices");
    assert_eq!(skipped.version, 1);
    assert_eq!(s.get("customer.invoice_pref").unwrap(), None);
    // merge: the value applied as a merge patch to the existing entry.
    let merged = s
        .store_with(
            "customer.invoice_pref",
            json!({"fact": "The customer prefers invoices by email every month", "v": 2}),
            StoreOptions::default().on_duplicate(OnDuplicate::Merge),
        )
        .unwrap();
    assert_eq!(merged.key, "billing.invoices");
    assert_eq!(merged.version, 2);
    assert_eq!(merged.knowledge["v"], 2);
    assert_eq!(s.keys("").unwrap(), vec!["billing.invoices"]);
    // link: stored with its link.
    let linked = s
        .store_with(
            "crm.invoices",
            v.clone(),
            StoreOptions::default().on_duplicate(OnDuplicate::Link),
        )
        .unwrap();
    assert_eq!(linked.duplicate_of.as_deref(), Some("billing.invoices"));
    assert_eq!(
        s.get("crm.invoices")
            .unwrap()
            .unwrap()
            .duplicate_of
            .as_deref(),
        Some("billing.invoices")
    );
    // A merge-patch update keeps the link.
    let upd = s.update("crm.invoices", json!({"note": "x"})).unwrap();
    assert_eq!(upd.duplicate_of.as_deref(), Some("billing.invoices"));
}

#[test]
fn knowledge_same_key_same_value_and_short_values() {
    let mem = common::temporary().unwrap();
    let s = mem.semantic();
    s.store("theme", json!("dark")).unwrap();
    // The same value again under the same key: skip writes no new version.
    let again = s
        .store_with(
            "theme",
            json!("dark"),
            StoreOptions::default().on_duplicate(OnDuplicate::Skip),
        )
        .unwrap();
    assert_eq!(again.version, 1);
    assert_eq!(again.duplicate_of.as_deref(), Some("theme"));
    // Short values are not duplicates of other keys.
    let other = s
        .store_with(
            "editor.theme",
            json!("dark"),
            StoreOptions::default().on_duplicate(OnDuplicate::Skip),
        )
        .unwrap();
    assert_eq!(other.key, "editor.theme");
    assert_eq!(other.duplicate_of, None);
    // A changed value is a new version whatever the policy.
    let changed = s
        .store_with(
            "theme",
            json!("light"),
            StoreOptions::default().on_duplicate(OnDuplicate::Skip),
        )
        .unwrap();
    assert_eq!(changed.version, 2);
}

#[test]
fn knowledge_forget_and_overwrite_drop_old_keys() {
    let mem = common::temporary().unwrap();
    let s = mem.semantic();
    let v = json!("Meetings with the design team happen on Tuesdays");
    s.store("a", v.clone()).unwrap();
    // Overwriting `a` with another value: `a` no longer duplicates `v`.
    s.store("a", json!("Lunch orders close at eleven in the morning"))
        .unwrap();
    let b = s.store("b", v.clone()).unwrap();
    assert_eq!(b.duplicate_of, None);
    assert!(s.forget("b").unwrap());
    let c = s.store("c", v).unwrap();
    assert_eq!(c.duplicate_of, None);
}

#[test]
fn export_import_keeps_counts_and_links() {
    let mem = common::temporary().unwrap();
    let a = rec(&mem, NewEpisode::new(TEXT));
    rec(&mem, NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Merge));
    let l = rec(&mem, NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Link));
    let mut out = Vec::new();
    mem.admin().export(&mut out).unwrap();
    let other = common::temporary().unwrap();
    other.admin().import(&mut out.as_slice()).unwrap();
    let ea = other.episodic().get(&a.id).unwrap().unwrap();
    assert_eq!(ea.seen_count, 2);
    assert!(ea.last_seen.is_some());
    let el = other.episodic().get(&l.id).unwrap().unwrap();
    assert_eq!(el.duplicate_of.as_deref(), Some(a.id.as_str()));
    // Imported episodes are found as duplicates.
    let again = rec(
        &other,
        NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Skip),
    );
    assert!(!again.created);
}

#[test]
fn on_duplicate_names_parse() {
    for p in OnDuplicate::ALL {
        assert_eq!(p.as_str().parse::<OnDuplicate>().unwrap(), p);
    }
    let err = OnDuplicate::parse("on_duplicate", "drop").unwrap_err();
    assert_eq!(err.code(), "INVALID_INPUT");
    assert!(err.to_string().contains("on_duplicate"), "{err}");
}

/// A store written before duplicate detection existed (no `dedup` keys, no
/// markers): its records are found once the context is next written to.
#[test]
fn records_written_before_detection_are_found() {
    if common::backend_is_postgres() {
        return; // The sled files are edited directly below.
    }
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let mem = Memory::open(dir.path()).unwrap();
        let id = rec(&mem, NewEpisode::new(TEXT)).id;
        mem.semantic()
            .store("k", json!("A knowledge value long enough to be compared"))
            .unwrap();
        id
    };
    {
        let db = sled::open(dir.path().join("db")).unwrap();
        db.drop_tree("dedup").unwrap();
        let meta = db.open_tree("meta").unwrap();
        for k in meta.scan_prefix(b"dedup_ready").keys() {
            meta.remove(k.unwrap()).unwrap();
        }
        db.flush().unwrap();
    }
    let mem = Memory::open(dir.path()).unwrap();
    let again = rec(&mem, NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Skip));
    assert_eq!(again.id, id);
    let k = mem
        .semantic()
        .store_with(
            "k2",
            json!("A knowledge value long enough to be compared"),
            StoreOptions::default().on_duplicate(OnDuplicate::Skip),
        )
        .unwrap();
    assert_eq!(k.key, "k");
}

#[test]
fn the_dedup_index_is_built_on_the_first_policy_other_than_keep() {
    let dir = common::tempdir();
    let (a, b);
    {
        let mem = Memory::open(dir.path()).unwrap();
        // Written with keep only: no detection.
        a = rec(&mem, NewEpisode::new(TEXT)).id;
        assert_eq!(rec(&mem, NewEpisode::new(TEXT)).duplicate_of, None);
        b = rec(&mem, NewEpisode::new("An unrelated note about lunch plans")).id;
        // The context's default becomes skip: the next write builds the index
        // from the stored episodes and finds the first copy.
        mem.contexts()
            .set_on_duplicate(OnDuplicate::Skip, None)
            .unwrap();
        let r = rec(&mem, NewEpisode::new(TEXT));
        assert!(!r.created);
        assert!(r.duplicate_of.is_some());
        assert_eq!(count(&mem), 3);
    }
    // Across a restart and a search-index rebuild (sled: the index directory
    // removed; a PostgreSQL store rebuilds its local copy on every open), the
    // dedup index is kept up to date, and forgotten episodes are never found.
    if !common::backend_is_postgres() {
        std::fs::remove_dir_all(dir.fs().join("index")).unwrap();
    }
    let mem = Memory::open(dir.path()).unwrap();
    let ids: Vec<String> = mem
        .episodic()
        .recent(10)
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .filter(|id| *id != b)
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&a));
    for id in &ids {
        assert!(mem.episodic().forget(id).unwrap());
    }
    let r = rec(&mem, NewEpisode::new(TEXT));
    assert!(r.created);
    assert_eq!(r.duplicate_of, None);
    let again = rec(
        &mem,
        NewEpisode::new("an unrelated note about lunch plans!"),
    );
    assert_eq!(again.id, b);
    assert!(!again.created);
    // A per-call policy builds the index of another context too.
    let notes = mem.namespace("notes").unwrap();
    let n = notes
        .episodic()
        .record_detailed(NewEpisode::new(TEXT))
        .unwrap();
    let m = notes
        .episodic()
        .record_detailed(NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Merge))
        .unwrap();
    assert_eq!(m.id, n.id);
    assert_eq!(notes.episodic().get(&n.id).unwrap().unwrap().seen_count, 2);
}

#[test]
fn a_batch_with_internal_duplicates_under_skip_stores_one() {
    let mem = common::temporary().unwrap();
    let other = "Quarterly revenue grew by eleven percent in Europe";
    let got = mem
        .episodic()
        .record_many_detailed(vec![
            NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Skip),
            NewEpisode::new(other).on_duplicate(OnDuplicate::Skip),
            NewEpisode::new(TEXT).on_duplicate(OnDuplicate::Skip),
            NewEpisode::new(format!("{TEXT}!")).on_duplicate(OnDuplicate::Skip),
        ])
        .unwrap();
    assert_eq!(count(&mem), 2);
    assert!(got[0].created && got[1].created);
    assert_eq!(got[0].duplicate_of, None);
    for r in &got[2..] {
        assert!(!r.created);
        assert_eq!(r.id, got[0].id);
        assert_eq!(r.duplicate_of.as_deref(), Some(got[0].id.as_str()));
    }
    // Against the stored episodes too, and merge within a batch folds into one.
    let ids = mem
        .episodic()
        .record_many(vec![
            NewEpisode::new(other)
                .tags(["q3"])
                .on_duplicate(OnDuplicate::Merge),
            NewEpisode::new("A brand new fact about the deployment pipeline")
                .tags(["a"])
                .on_duplicate(OnDuplicate::Merge),
            NewEpisode::new("a brand new fact about the deployment pipeline.")
                .tags(["b"])
                .importance(9)
                .on_duplicate(OnDuplicate::Merge),
        ])
        .unwrap();
    assert_eq!(ids[0], got[1].id);
    assert_eq!(ids[1], ids[2]);
    assert_eq!(count(&mem), 3);
    let ep = mem.episodic().get(&ids[1]).unwrap().unwrap();
    assert_eq!(ep.tags, vec!["a", "b"]);
    assert_eq!((ep.importance, ep.seen_count), (9, 2));
    assert_eq!(
        mem.episodic().get(&got[1].id).unwrap().unwrap().tags,
        vec!["q3"]
    );
}

#[test]
fn store_many_detects_duplicates_within_the_batch() {
    use memstrata::semantic::NewKnowledge;
    let mem = common::temporary().unwrap();
    let s = mem.semantic();
    let v = json!({"fact": "The customer prefers invoices by email every month"});
    let got = s
        .store_many(vec![
            NewKnowledge::new("a", v.clone()).on_duplicate(OnDuplicate::Skip),
            NewKnowledge::new("b", v.clone()).on_duplicate(OnDuplicate::Skip),
            NewKnowledge::new(
                "c",
                json!({"fact": "the customer prefers invoices by email every month!"}),
            )
            .on_duplicate(OnDuplicate::Link),
            NewKnowledge::new(
                "d",
                json!({"fact": "The customer prefers invoices by email every month", "n": 1}),
            )
            .on_duplicate(OnDuplicate::Merge),
        ])
        .unwrap();
    assert_eq!(got[0].key, "a");
    assert_eq!(got[0].duplicate_of, None);
    assert_eq!(
        (got[1].key.as_str(), got[1].duplicate_of.as_deref()),
        ("a", Some("a"))
    );
    assert_eq!(got[2].key, "c");
    assert_eq!(got[2].duplicate_of.as_deref(), Some("a"));
    assert_eq!(got[3].key, "a");
    assert_eq!(got[3].version, 2);
    assert_eq!(got[3].knowledge["n"], 1);
    assert_eq!(s.keys("").unwrap(), vec!["a", "c"]);
    assert_eq!(
        s.get("c").unwrap().unwrap().duplicate_of.as_deref(),
        Some("a")
    );
}
