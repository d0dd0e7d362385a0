//! Model-based tests of facts with validity: random sequences of stores and
//! updates (with and without caller validity), forgets, clock moves and
//! reopens of the same store, checked after every step against a small
//! in-memory model of supersession and as-of reads (`get_with`, `history`,
//! `query_with` with and without `as_of` / `include_expired`); and episodes
//! recorded with and without a timestamp, read `as_of` a time.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use memstrata::semantic::{ReadOptions, StoreOptions, UpdateOptions};
use memstrata::{
    Durability, Error, Limits, ManualClock, Memory, NewEpisode, SearchFilters, VectorQuery,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 4, 1, 0, 0, 0).unwrap()
}

fn ms(t: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(t).unwrap()
}

fn open(path: &Path, clock: &Arc<ManualClock>) -> Memory {
    Memory::builder()
        .path(path)
        .durability(Durability::Manual)
        .clock(clock.clone())
        .limits(Limits {
            semantic_history: 1000,
            ..Limits::default()
        })
        .open()
        .unwrap()
}

const KEYS: [&str; 3] = ["alpha", "beta", "gamma"];

#[derive(Debug, Clone)]
enum Op {
    /// key, field value, valid_from offset (s from now), valid_until offset (s from now)
    Store(usize, u8, Option<i16>, Option<i16>),
    /// key, patch field value, valid_from offset, valid_until offset
    Update(usize, u8, Option<i16>, Option<i16>),
    Forget(usize),
    Advance(u16),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let off = proptest::option::of(-30i16..30);
    prop_oneof![
        4 => (0..3usize, 0..4u8, off.clone(), off.clone()).prop_map(|(k, v, f, u)| Op::Store(k, v, f, u)),
        3 => (0..3usize, 0..4u8, off.clone(), off).prop_map(|(k, v, f, u)| Op::Update(k, v, f, u)),
        1 => (0..3usize).prop_map(Op::Forget),
        3 => (0..40u16).prop_map(Op::Advance),
        1 => Just(Op::Reopen),
    ]
}

/// One version of the model: value, valid_from, valid_until (ms).
#[derive(Debug, Clone)]
struct Ver {
    value: Value,
    from: i64,
    until: Option<i64>,
}

fn holds(v: &Ver, t: i64) -> bool {
    v.from <= t && v.until.is_none_or(|u| t < u)
}

/// The model's answer to an as-of read: the newest version holding at `t`.
fn model_as_of(vers: &[Ver], t: i64) -> Option<&Ver> {
    vers.iter().rev().find(|v| holds(v, t))
}

/// Push a new version, closing the current one as the engine documents.
fn supersede(vers: &mut Vec<Ver>, new: Ver) {
    if let Some(c) = vers.last_mut() {
        let closed = new.from.max(c.from);
        c.until = Some(c.until.map_or(closed, |u| u.min(closed)));
    }
    vers.push(new);
}

fn check_knowledge(mem: &Memory, m: &BTreeMap<usize, Vec<Ver>>, now: i64) {
    let s = mem.semantic();
    for (k, name) in KEYS.iter().enumerate() {
        let vers = m.get(&k).map(Vec::as_slice).unwrap_or(&[]);
        let h = s.history(name).unwrap();
        assert_eq!(h.len(), vers.len(), "history of {name}");
        for (got, want) in h.iter().zip(vers) {
            assert_eq!(got.knowledge, want.value);
            assert_eq!(
                got.valid_from.timestamp_millis(),
                want.from,
                "{name}: {h:?}"
            );
            assert_eq!(
                got.valid_until.map(|t| t.timestamp_millis()),
                want.until,
                "{name}: {h:?}"
            );
        }
        // As-of reads at every boundary and around it.
        let mut times: Vec<i64> = vec![now, now - 1, now + 1];
        for v in vers {
            times.extend([v.from - 1, v.from, v.from + 1]);
            if let Some(u) = v.until {
                times.extend([u - 1, u]);
            }
        }
        for t in times {
            let got = s
                .get_with(name, &ReadOptions::default().as_of(ms(t)))
                .unwrap()
                .map(|k| k.knowledge);
            assert_eq!(
                got,
                model_as_of(vers, t).map(|v| v.value.clone()),
                "{name} as of {t}"
            );
        }
    }
    // Query: every value holds the word "fact".
    let q = |opts: &ReadOptions| -> BTreeMap<String, Value> {
        s.query_with("fact", 10, &VectorQuery::default(), opts)
            .unwrap()
            .into_iter()
            .map(|h| (h.key, h.knowledge))
            .collect()
    };
    let current = |keep: &dyn Fn(&Ver) -> bool| -> BTreeMap<String, Value> {
        m.iter()
            .filter_map(|(k, v)| {
                v.last()
                    .filter(|c| keep(c))
                    .map(|c| (KEYS[*k].to_owned(), c.value.clone()))
            })
            .collect()
    };
    assert_eq!(
        q(&ReadOptions::default()),
        current(&|c| c.until.is_none_or(|u| u > now))
    );
    assert_eq!(
        q(&ReadOptions::default().include_expired(true)),
        current(&|_| true)
    );
    for t in [now - 20_000, now, now + 20_000] {
        let want: BTreeMap<String, Value> = m
            .iter()
            .filter_map(|(k, v)| model_as_of(v, t).map(|x| (KEYS[*k].to_owned(), x.value.clone())))
            .collect();
        assert_eq!(
            q(&ReadOptions::default().as_of(ms(t))),
            want,
            "query as of {t}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn knowledge_supersession_and_as_of_reads(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = common::tempdir();
        let clock = Arc::new(ManualClock::new(start()));
        let mut mem = Some(open(&dir.path(), &clock));
        let mut model: BTreeMap<usize, Vec<Ver>> = BTreeMap::new();
        let mut now = start().timestamp_millis();
        for op in ops {
            let m = mem.as_ref().unwrap();
            match op {
                Op::Store(k, v, f, u) | Op::Update(k, v, f, u) => {
                    let is_store = matches!(op, Op::Store(..));
                    let from = f.map(|s| now + i64::from(s) * 1000);
                    let until = u.map(|s| now + i64::from(s) * 1000);
                    let bad = until.is_some_and(|u| u <= from.unwrap_or(now));
                    let exists = model.contains_key(&k);
                    let r = if is_store {
                        let mut o = StoreOptions::default();
                        if let Some(t) = from { o = o.valid_from(ms(t)); }
                        if let Some(t) = until { o = o.valid_until(ms(t)); }
                        m.semantic().store_with(KEYS[k], json!({"a": v, "t": "fact"}), o)
                    } else {
                        let mut o = UpdateOptions::default();
                        if let Some(t) = from { o = o.valid_from(ms(t)); }
                        if let Some(t) = until { o = o.valid_until(ms(t)); }
                        m.semantic().update_with(KEYS[k], json!({"b": v}), o)
                    };
                    if bad {
                        prop_assert!(matches!(r, Err(Error::InvalidInput { ref field, .. }) if field == "valid_until"), "{r:?}");
                    } else if !is_store && !exists {
                        prop_assert!(matches!(r, Err(Error::NotFound { .. })), "{r:?}");
                    } else {
                        let got = r.unwrap();
                        let vers = model.entry(k).or_default();
                        let value = if is_store {
                            json!({"a": v, "t": "fact"})
                        } else {
                            let mut o: Map<String, Value> = vers.last().unwrap().value.as_object().unwrap().clone();
                            o.insert("b".into(), json!(v));
                            Value::Object(o)
                        };
                        prop_assert_eq!(&got.knowledge, &value);
                        prop_assert_eq!(got.valid_from.timestamp_millis(), from.unwrap_or(now));
                        supersede(vers, Ver { value, from: from.unwrap_or(now), until });
                    }
                }
                Op::Forget(k) => {
                    prop_assert_eq!(m.semantic().forget(KEYS[k]).unwrap(), model.remove(&k).is_some());
                }
                Op::Advance(s) => {
                    clock.advance(Duration::from_secs(u64::from(s)));
                    now += i64::from(s) * 1000;
                }
                Op::Reopen => {
                    m.flush().unwrap();
                    drop(mem.take());
                    mem = Some(open(&dir.path(), &clock));
                }
            }
            check_knowledge(mem.as_ref().unwrap(), &model, now);
        }
    }

    #[test]
    fn episodes_as_of(steps in proptest::collection::vec((0..30u16, proptest::option::of(-60i16..60), any::<bool>()), 1..20)) {
        let dir = common::tempdir();
        let clock = Arc::new(ManualClock::new(start()));
        let mem = open(&dir.path(), &clock);
        let mut now = start().timestamp_millis();
        // id -> recorded at (ms)
        let mut model: Vec<(String, i64)> = Vec::new();
        for (adv, ts, forget) in steps {
            clock.advance(Duration::from_secs(u64::from(adv)));
            now += i64::from(adv) * 1000;
            let mut ep = NewEpisode::new("event in the log");
            if let Some(s) = ts {
                ep = ep.timestamp(ms(now + i64::from(s) * 1000));
            }
            let id = mem.episodic().record(ep).unwrap();
            model.push((id, now));
            if forget && model.len() > 2 {
                let (gone, _) = model.remove(0);
                prop_assert!(mem.episodic().forget(&gone).unwrap());
            }
            for t in [now - 30_000, now - 1000, now] {
                let mut want: Vec<String> = model.iter().filter(|(_, r)| *r <= t).map(|(i, _)| i.clone()).collect();
                want.sort();
                let f = SearchFilters { as_of: Some(ms(t)), ..Default::default() };
                let mut got: Vec<String> = mem.episodic().search("event", &f, 100).unwrap().into_iter().map(|h| h.episode.id).collect();
                got.sort();
                prop_assert_eq!(&got, &want, "search as of {}", t);
                let mut listed: Vec<String> = mem.episodic().recent_as_of(100, Some(ms(t))).unwrap().into_iter().map(|e| e.id).collect();
                listed.sort();
                prop_assert_eq!(&listed, &want, "recent as of {}", t);
            }
        }
    }
}
