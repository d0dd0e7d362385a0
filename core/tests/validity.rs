//! Facts with validity and as-of reads: knowledge versions carry `valid_from`
//! / `valid_until`, a new version closes the one it supersedes (kept in
//! history), reads and queries `as_of` a time return what held then,
//! `query` leaves expired entries out unless asked, and episodes read
//! `as_of` a time are those recorded by then. Across reopen and
//! export/import (format 2, and format 1 files migrated). A backend
//! conformance suite.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use memstrata::episodic::OnDuplicate;
use memstrata::semantic::{NewKnowledge, ReadOptions, StoreOptions, UpdateOptions};
use memstrata::{Durability, Error, ManualClock, Memory, NewEpisode, SearchFilters, VectorQuery};
use serde_json::{Value, json};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 5, 1, 12, 0, 0).unwrap()
}

fn secs(n: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::seconds(n)
}

fn open(path: &Path, clock: &Arc<ManualClock>) -> Memory {
    Memory::builder()
        .path(path)
        .durability(Durability::Manual)
        .clock(clock.clone())
        .open()
        .unwrap()
}

fn at(t: DateTime<Utc>) -> ReadOptions {
    ReadOptions::default().as_of(t)
}

fn value_as_of(mem: &Memory, key: &str, t: DateTime<Utc>) -> Option<Value> {
    mem.semantic()
        .get_with(key, &at(t))
        .unwrap()
        .map(|k| k.knowledge)
}

fn query_keys(mem: &Memory, text: &str, opts: &ReadOptions) -> Vec<(String, Value)> {
    mem.semantic()
        .query_with(text, 10, &VectorQuery::default(), opts)
        .unwrap()
        .into_iter()
        .map(|h| (h.key, h.knowledge))
        .collect()
}

fn field_of<T: std::fmt::Debug>(r: memstrata::Result<T>) -> String {
    match r {
        Err(Error::InvalidInput { field, .. }) => field,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn supersession_keeps_the_old_value_with_its_validity_closed() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::new(t0()));
    let mem = open(&dir.path(), &clock);
    let s = mem.semantic();
    let k1 = s.store("ceo", json!({"name": "Ada"})).unwrap();
    assert_eq!(k1.valid_from, t0());
    assert_eq!(k1.valid_until, None);

    clock.advance(Duration::from_secs(60));
    let k2 = s.store("ceo", json!({"name": "Grace"})).unwrap();
    assert_eq!(k2.version, 2);
    assert_eq!(k2.valid_from, secs(60));

    clock.advance(Duration::from_secs(60));
    let k3 = s.update("ceo", json!({"since": 2026})).unwrap();
    assert_eq!(k3.knowledge, json!({"name": "Grace", "since": 2026}));
    assert_eq!(k3.valid_from, secs(120));

    let h = s.history("ceo").unwrap();
    assert_eq!(h.len(), 3);
    assert_eq!(h[0].knowledge, json!({"name": "Ada"}));
    assert_eq!((h[0].valid_from, h[0].valid_until), (t0(), Some(secs(60))));
    assert_eq!(
        (h[1].valid_from, h[1].valid_until),
        (secs(60), Some(secs(120)))
    );
    assert_eq!((h[2].valid_from, h[2].valid_until), (secs(120), None));

    assert_eq!(value_as_of(&mem, "ceo", secs(-1)), None);
    assert_eq!(value_as_of(&mem, "ceo", t0()), Some(json!({"name": "Ada"})));
    assert_eq!(
        value_as_of(&mem, "ceo", secs(59)),
        Some(json!({"name": "Ada"}))
    );
    assert_eq!(
        value_as_of(&mem, "ceo", secs(60)),
        Some(json!({"name": "Grace"}))
    );
    let old = s.get_with("ceo", &at(secs(30))).unwrap().unwrap();
    assert_eq!(old.version, 1);
    assert_eq!(old.valid_until, Some(secs(60)));
    assert_eq!(old.updated_at, t0());
    assert_eq!(
        value_as_of(&mem, "ceo", secs(10_000)),
        Some(json!({"name": "Grace", "since": 2026}))
    );
    // Without as_of: the current version.
    assert_eq!(
        s.get_with("ceo", &ReadOptions::default())
            .unwrap()
            .unwrap()
            .version,
        3
    );

    // Query as of a time: the version that held then (the text matched is the current one).
    assert_eq!(
        query_keys(&mem, "Grace", &at(secs(30))),
        vec![("ceo".to_owned(), json!({"name": "Ada"}))]
    );
    let hit = s
        .query_with("Grace", 10, &VectorQuery::default(), &at(secs(30)))
        .unwrap()
        .remove(0);
    assert_eq!((hit.valid_from, hit.valid_until), (t0(), Some(secs(60))));
    assert_eq!(query_keys(&mem, "Grace", &at(secs(-30))), vec![]);

    // Forget removes every version: nothing as of any time.
    assert!(s.forget("ceo").unwrap());
    assert_eq!(value_as_of(&mem, "ceo", secs(30)), None);
}

#[test]
fn caller_validity_expiry_and_query_exclusion() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::new(t0()));
    let mem = open(&dir.path(), &clock);
    let s = mem.semantic();
    let k = s
        .store_with(
            "promo",
            json!({"text": "spring discount code SPRING26"}),
            StoreOptions::default()
                .valid_from(secs(-3600))
                .valid_until(secs(3600)),
        )
        .unwrap();
    assert_eq!(
        (k.valid_from, k.valid_until),
        (secs(-3600), Some(secs(3600)))
    );
    s.store("other", json!({"text": "discount policy for partners"}))
        .unwrap();
    assert_eq!(value_as_of(&mem, "promo", secs(-3601)), None);
    assert!(value_as_of(&mem, "promo", secs(-3600)).is_some());
    assert_eq!(value_as_of(&mem, "promo", secs(3600)), None);

    let plain = ReadOptions::default();
    assert_eq!(query_keys(&mem, "discount", &plain).len(), 2);
    clock.set(secs(3600));
    // Expired: left out of query (the default), kept by get and history.
    let keys: Vec<String> = query_keys(&mem, "discount", &plain)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, vec!["other"]);
    assert_eq!(s.query("discount", 10).unwrap().len(), 1);
    assert_eq!(
        query_keys(
            &mem,
            "discount",
            &ReadOptions::default().include_expired(true)
        )
        .len(),
        2
    );
    assert_eq!(query_keys(&mem, "spring", &at(secs(0))).len(), 1);
    assert!(s.get("promo").unwrap().is_some());

    // An expired entry crowded out of `limit` does not hide a live one.
    for i in 0..12 {
        s.store_with(
            &format!("old{i}"),
            json!({"text": format!("discount number {i}")}),
            StoreOptions::default().valid_until(secs(3601)),
        )
        .unwrap();
    }
    clock.set(secs(4000));
    let hits = s
        .query_with("discount", 3, &VectorQuery::default(), &plain)
        .unwrap();
    assert_eq!(
        hits.iter().map(|h| h.key.as_str()).collect::<Vec<_>>(),
        vec!["other"]
    );

    // Bad spans name the field.
    assert_eq!(
        field_of(
            s.store_with(
                "bad",
                json!(1),
                StoreOptions::default()
                    .valid_from(secs(10))
                    .valid_until(secs(10)),
            )
        ),
        "valid_until"
    );
    assert_eq!(
        field_of(s.store_with(
            "bad",
            json!(1),
            StoreOptions::default().valid_until(secs(0)),
        )),
        "valid_until"
    );
    assert_eq!(
        field_of(s.update_with(
            "other",
            json!({}),
            UpdateOptions::default().valid_until(secs(1)),
        )),
        "valid_until"
    );
    assert!(s.get("bad").unwrap().is_none());
}

#[test]
fn backdated_and_future_versions() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::new(t0()));
    let mem = open(&dir.path(), &clock);
    let s = mem.semantic();
    s.store("plan", json!("a")).unwrap();
    clock.advance(Duration::from_secs(100));
    // A correction that held from before the version it supersedes: that
    // version is left with an empty span (still in history), the new one wins.
    s.store_with(
        "plan",
        json!("b"),
        StoreOptions::default().valid_from(secs(-50)),
    )
    .unwrap();
    assert_eq!(value_as_of(&mem, "plan", secs(-50)), Some(json!("b")));
    assert_eq!(value_as_of(&mem, "plan", secs(50)), Some(json!("b")));
    assert_eq!(value_as_of(&mem, "plan", secs(-51)), None);
    let h = s.history("plan").unwrap();
    assert_eq!((h[0].valid_from, h[0].valid_until), (t0(), Some(t0())));

    // A version that starts in the future: until then the previous one holds.
    s.update_with(
        "plan",
        json!("c"),
        UpdateOptions::default().valid_from(secs(1000)),
    )
    .unwrap();
    assert_eq!(value_as_of(&mem, "plan", secs(100)), Some(json!("b")));
    assert_eq!(value_as_of(&mem, "plan", secs(1000)), Some(json!("c")));
    assert_eq!(s.retrieve("plan").unwrap(), Some(json!("c")));
}

#[test]
fn skip_keeps_validity_and_batches_carry_it() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::new(t0()));
    let mem = open(&dir.path(), &clock);
    let s = mem.semantic();
    s.store("k", json!({"text": "the same value again and again"}))
        .unwrap();
    clock.advance(Duration::from_secs(5));
    let again = s
        .store_with(
            "k",
            json!({"text": "the same value again and again"}),
            StoreOptions::default().on_duplicate(OnDuplicate::Skip),
        )
        .unwrap();
    assert_eq!(again.version, 1);
    assert_eq!(s.history("k").unwrap()[0].valid_until, None);

    let out = s
        .store_many(vec![
            NewKnowledge::new("a", json!(1)).valid_until(secs(100)),
            NewKnowledge::new("a", json!(2)).valid_from(secs(50)),
            NewKnowledge::new("b", json!(3)).valid_from(secs(-10)),
        ])
        .unwrap();
    assert_eq!(out[0].valid_until, Some(secs(100)));
    assert_eq!(out[1].valid_from, secs(50));
    assert_eq!(value_as_of(&mem, "a", secs(20)), Some(json!(1)));
    assert_eq!(value_as_of(&mem, "a", secs(60)), Some(json!(2)));
    assert_eq!(value_as_of(&mem, "b", secs(-10)), Some(json!(3)));
    let h = s.history("a").unwrap();
    assert_eq!(h[0].valid_until, Some(secs(50)));

    let err = s.store_many(vec![
        NewKnowledge::new("c", json!(1)),
        NewKnowledge::new("d", json!(1))
            .valid_from(secs(9))
            .valid_until(secs(8)),
    ]);
    assert_eq!(field_of(err), "items[1].valid_until");
    assert!(s.get("c").unwrap().is_none());
}

#[test]
fn episodes_as_of_what_was_recorded_by_then() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::new(t0()));
    let mem = open(&dir.path(), &clock);
    let ep = mem.episodic();
    let a = ep
        .record(NewEpisode::new("deploy of the billing service"))
        .unwrap();
    clock.advance(Duration::from_secs(60));
    // Recorded now, about something that happened before t0.
    let b = ep
        .record(NewEpisode::new("billing outage last week").timestamp(secs(-600)))
        .unwrap();
    clock.advance(Duration::from_secs(60));
    let c = ep.record(NewEpisode::new("billing fix shipped")).unwrap();

    let got = ep.get(&b).unwrap().unwrap();
    assert_eq!(got.timestamp, secs(-600));
    assert_eq!(got.recorded_at, secs(60));
    assert_eq!(ep.get(&a).unwrap().unwrap().recorded_at, t0());

    let ids = |as_of: Option<DateTime<Utc>>| -> Vec<String> {
        let f = SearchFilters {
            as_of,
            ..Default::default()
        };
        let mut v: Vec<String> = ep
            .search("billing", &f, 10)
            .unwrap()
            .into_iter()
            .map(|h| h.episode.id)
            .collect();
        v.sort();
        v
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(ids(None), sorted(vec![a.clone(), b.clone(), c.clone()]));
    assert_eq!(ids(Some(secs(30))), vec![a.clone()]);
    assert_eq!(ids(Some(secs(60))), sorted(vec![a.clone(), b.clone()]));
    assert_eq!(ids(Some(secs(-1))), Vec::<String>::new());
    // The limit is filled with episodes recorded by then.
    let one = ep
        .search(
            "billing",
            &SearchFilters {
                as_of: Some(secs(30)),
                ..Default::default()
            },
            1,
        )
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].episode.id, a);

    let recent: Vec<String> = ep
        .recent_as_of(10, Some(secs(60)))
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(recent, vec![a.clone(), b.clone()]);
    assert_eq!(ep.recent_as_of(10, None).unwrap().len(), 3);

    // A backdated episode with an embedding: the vector index reads its record
    // (with the appended `recorded_at`), and vector search filters as of too.
    let v = ep
        .record(
            NewEpisode::new("vector episode")
                .timestamp(secs(-60))
                .embedding(vec![1.0, 0.0, 0.5]),
        )
        .unwrap();
    let vq = VectorQuery::embedding(vec![1.0, 0.0, 0.5]);
    let hits = ep
        .search_hybrid("", &SearchFilters::default(), 5, &vq)
        .unwrap();
    assert_eq!(hits[0].episode.id, v);
    let before = SearchFilters {
        as_of: Some(secs(60)),
        ..Default::default()
    };
    let hits = ep.search_hybrid("", &before, 5, &vq).unwrap();
    assert!(hits.iter().all(|h| h.episode.id != v), "{hits:?}");
}

#[test]
fn validity_survives_reopen_and_export_import() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::new(t0()));
    let mut buf = Vec::new();
    {
        let mem = open(&dir.join("a"), &clock);
        let s = mem.semantic();
        s.store("fact", json!("v1")).unwrap();
        clock.advance(Duration::from_secs(10));
        s.store_with(
            "fact",
            json!("v2"),
            StoreOptions::default().valid_until(secs(500)),
        )
        .unwrap();
        mem.episodic()
            .record(NewEpisode::new("backdated").timestamp(secs(-100)))
            .unwrap();
        mem.flush().unwrap();
        drop(mem);
    }
    let mem = open(&dir.join("a"), &clock);
    assert_eq!(value_as_of(&mem, "fact", secs(5)), Some(json!("v1")));
    assert_eq!(value_as_of(&mem, "fact", secs(20)), Some(json!("v2")));
    assert_eq!(value_as_of(&mem, "fact", secs(500)), None);
    mem.admin().export(&mut buf).unwrap();
    let text = String::from_utf8(buf.clone()).unwrap();
    assert!(text.contains("\"format_version\":2"), "{text}");
    assert!(text.contains("\"valid_until\""), "{text}");
    assert!(text.contains("\"recorded_at\""), "{text}");

    let dst = open(&dir.join("b"), &clock);
    dst.admin().import(&mut buf.as_slice()).unwrap();
    assert_eq!(value_as_of(&dst, "fact", secs(5)), Some(json!("v1")));
    assert_eq!(value_as_of(&dst, "fact", secs(20)), Some(json!("v2")));
    assert_eq!(value_as_of(&dst, "fact", secs(500)), None);
    assert_eq!(
        dst.semantic().history("fact").unwrap(),
        mem.semantic().history("fact").unwrap()
    );
    let eps = dst.episodic().recent(10).unwrap();
    assert_eq!(eps[0].recorded_at, secs(10));
    assert_eq!(eps[0].timestamp, secs(-100));
    assert!(
        dst.episodic()
            .recent_as_of(10, Some(secs(5)))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn format_1_export_files_import_with_derived_validity() {
    let dir = common::tempdir();
    let clock = Arc::new(ManualClock::new(t0()));
    let v1 = concat!(
        r#"{"type":"memstrata_export","format_version":1,"exported_at":"2026-01-01T00:00:00Z","engine_version":"0.1.0"}"#,
        "\n",
        r#"{"type":"knowledge","context":"default","key":"city","knowledge":"Lyon","version":3,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-03T00:00:00Z","history":[{"version":1,"knowledge":"Paris","recorded_at":"2026-01-01T00:00:00Z"},{"version":2,"knowledge":"Nice","recorded_at":"2026-01-02T00:00:00Z"},{"version":3,"knowledge":"Lyon","recorded_at":"2026-01-03T00:00:00Z"}]}"#,
        "\n",
        r#"{"type":"episode","context":"default","id":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","timestamp":"2026-01-02T00:00:00Z","summary":"moved","importance":5}"#,
        "\n",
    );
    let mem = open(&dir.path(), &clock);
    mem.admin().import(&mut v1.as_bytes()).unwrap();
    let day = |d: u32, h: u32| Utc.with_ymd_and_hms(2026, 1, d, h, 0, 0).unwrap();
    assert_eq!(value_as_of(&mem, "city", day(1, 12)), Some(json!("Paris")));
    assert_eq!(value_as_of(&mem, "city", day(2, 12)), Some(json!("Nice")));
    assert_eq!(value_as_of(&mem, "city", day(3, 12)), Some(json!("Lyon")));
    let h = mem.semantic().history("city").unwrap();
    assert_eq!(h[0].valid_until, Some(day(2, 0)));
    assert_eq!(h[2].valid_until, None);
    let ep = mem.episodic().recent(1).unwrap().remove(0);
    assert_eq!(ep.recorded_at, day(2, 0));
    // Re-exported as format 2 with the validity stated.
    let mut out = Vec::new();
    mem.admin().export(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("\"valid_until\":\"2026-01-02T00:00:00Z\""),
        "{text}"
    );
}
