//! Model-based test: random sequences of short-term and semantic operations
//! (with clock moves and reopens) checked against a simple in-memory model.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use memstrata::{Durability, ManualClock, Memory};
use proptest::prelude::*;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
enum Op {
    Store {
        ctx: u8,
        key: u8,
        val: i64,
        ttl: Option<u8>,
    },
    Retrieve {
        ctx: u8,
        key: u8,
    },
    Forget {
        ctx: u8,
        key: u8,
    },
    Keys {
        ctx: u8,
    },
    SemStore {
        key: u8,
        val: i64,
    },
    SemUpdate {
        key: u8,
        field: u8,
        val: Option<i64>,
    },
    SemForget {
        key: u8,
    },
    SemGet {
        key: u8,
    },
    Advance {
        secs: u8,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2u8, 0..6u8, any::<i64>(), proptest::option::of(1..20u8)).prop_map(|(ctx, key, val, ttl)| Op::Store { ctx, key, val, ttl }),
        3 => (0..2u8, 0..6u8).prop_map(|(ctx, key)| Op::Retrieve { ctx, key }),
        2 => (0..2u8, 0..6u8).prop_map(|(ctx, key)| Op::Forget { ctx, key }),
        1 => (0..2u8).prop_map(|ctx| Op::Keys { ctx }),
        3 => (0..4u8, any::<i64>()).prop_map(|(key, val)| Op::SemStore { key, val }),
        3 => (0..4u8, 0..3u8, proptest::option::of(any::<i64>())).prop_map(|(key, field, val)| Op::SemUpdate { key, field, val }),
        1 => (0..4u8).prop_map(|key| Op::SemForget { key }),
        2 => (0..4u8).prop_map(|key| Op::SemGet { key }),
        2 => (0..30u8).prop_map(|secs| Op::Advance { secs }),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Default)]
struct Model {
    now: i64,
    st: BTreeMap<(u8, String), (Value, Option<i64>)>,
    sem: BTreeMap<String, (Value, u64)>,
}

fn open(path: &Path, clock: &Arc<ManualClock>) -> Memory {
    Memory::builder()
        .path(path)
        .durability(Durability::Manual)
        .clock(clock.clone())
        .open()
        .unwrap()
}

fn ctx_name(c: u8) -> &'static str {
    if c == 0 { "default" } else { "other" }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn short_term_and_semantic_match_model(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = common::tempdir();
        let start = Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap();
        let clock = Arc::new(ManualClock::new(start));
        let mut mem = Some(open(&dir.path(), &clock));
        let mut m = Model::default();
        for op in ops {
            let h = mem.as_ref().unwrap();
            let live = |m: &Model, ctx: u8, k: &str| m.st.get(&(ctx, k.to_string())).filter(|(_, exp)| exp.is_none_or(|e| e > m.now)).map(|(v, _)| v.clone());
            match op {
                Op::Store { ctx, key, val, ttl } => {
                    let k = format!("k{key}");
                    h.namespace(ctx_name(ctx)).unwrap().short_term().store(&k, json!(val), ttl.map(|t| Duration::from_secs(t.into()))).unwrap();
                    m.st.insert((ctx, k), (json!(val), ttl.map(|t| m.now + i64::from(t))));
                }
                Op::Retrieve { ctx, key } => {
                    let k = format!("k{key}");
                    let got = h.namespace(ctx_name(ctx)).unwrap().short_term().retrieve(&k).unwrap();
                    prop_assert_eq!(got, live(&m, ctx, &k));
                }
                Op::Forget { ctx, key } => {
                    let k = format!("k{key}");
                    let got = h.namespace(ctx_name(ctx)).unwrap().short_term().forget(&k).unwrap();
                    let want = live(&m, ctx, &k).is_some();
                    m.st.remove(&(ctx, k));
                    prop_assert_eq!(got, want);
                }
                Op::Keys { ctx } => {
                    let got = h.namespace(ctx_name(ctx)).unwrap().short_term().keys("").unwrap();
                    let want: Vec<String> = m.st.keys().filter(|(c, k)| *c == ctx && live(&m, *c, k).is_some()).map(|(_, k)| k.clone()).collect();
                    prop_assert_eq!(got, want);
                }
                Op::SemStore { key, val } => {
                    let k = format!("s{key}");
                    let out = h.semantic().store(&k, json!({"v": val})).unwrap();
                    let ver = m.sem.get(&k).map_or(1, |(_, v)| v + 1);
                    m.sem.insert(k, (json!({"v": val}), ver));
                    prop_assert_eq!(out.version, ver);
                }
                Op::SemUpdate { key, field, val } => {
                    let k = format!("s{key}");
                    let f = format!("f{field}");
                    let patch = json!({ f.clone(): val });
                    let got = h.semantic().update(&k, patch);
                    match m.sem.get_mut(&k) {
                        None => { let nf = matches!(got, Err(memstrata::Error::NotFound { .. })); prop_assert!(nf, "update of a missing key must be NotFound"); }
                        Some((v, ver)) => {
                            let obj = v.as_object_mut().unwrap();
                            match val { Some(x) => { obj.insert(f, json!(x)); } None => { obj.remove(&f); } }
                            *ver += 1;
                            let got = got.unwrap();
                            prop_assert_eq!(&got.knowledge, &*v);
                            prop_assert_eq!(got.version, *ver);
                        }
                    }
                }
                Op::SemForget { key } => {
                    let k = format!("s{key}");
                    prop_assert_eq!(h.semantic().forget(&k).unwrap(), m.sem.remove(&k).is_some());
                }
                Op::SemGet { key } => {
                    let k = format!("s{key}");
                    prop_assert_eq!(h.semantic().retrieve(&k).unwrap(), m.sem.get(&k).map(|(v, _)| v.clone()));
                }
                Op::Advance { secs } => {
                    clock.advance(Duration::from_secs(secs.into()));
                    m.now += i64::from(secs);
                }
                Op::Reopen => {
                    drop(mem.take());
                    mem = Some(open(&dir.path(), &clock));
                }
            }
        }
        // Final full comparison, after one more reopen.
        drop(mem.take());
        let mem = open(&dir.path(), &clock);
        for ((ctx, k), _) in m.st.iter() {
            prop_assert_eq!(mem.namespace(ctx_name(*ctx)).unwrap().short_term().retrieve(k).unwrap(), live_final(&m, *ctx, k));
        }
        let keys = mem.semantic().keys("").unwrap();
        prop_assert_eq!(keys, m.sem.keys().cloned().collect::<Vec<_>>());
        for (k, (v, ver)) in &m.sem {
            let got = mem.semantic().get(k).unwrap().unwrap();
            prop_assert_eq!(&got.knowledge, v);
            prop_assert_eq!(got.version, *ver);
            // Every entry is findable by its key through the index.
            prop_assert!(mem.semantic().query(k, 50).unwrap().iter().any(|h| &h.key == k));
        }
    }
}

fn live_final(m: &Model, ctx: u8, k: &str) -> Option<Value> {
    m.st.get(&(ctx, k.to_string()))
        .filter(|(_, exp)| exp.is_none_or(|e| e > m.now))
        .map(|(v, _)| v.clone())
}
