//! (c) Sessions against a model: create / save at levels 0..=3 / restore / delete, with `optimize`
//! pruning each session to its newest `RETENTION` stored versions.

use super::*;

const RETENTION: usize = 2;

#[derive(Debug, Clone)]
enum SeOp {
    Create { name: u8 },
    Save { pick: u8, level: u8, seed: u16 },
    Restore { pick: u8, version: Option<u8> },
    Delete { pick: u8 },
    Versions { pick: u8 },
    List,
    Optimize { medium: bool, target: Option<u8> },
    Advance { secs: u8 },
    Reopen,
}

fn se_op() -> impl Strategy<Value = SeOp> {
    prop_oneof![
        1 => (0..4u8).prop_map(|name| SeOp::Create { name }),
        6 => (any::<u8>(), 0..=3u8, any::<u16>()).prop_map(|(pick, level, seed)| SeOp::Save { pick, level, seed }),
        4 => (any::<u8>(), proptest::option::of(any::<u8>())).prop_map(|(pick, version)| SeOp::Restore { pick, version }),
        1 => any::<u8>().prop_map(|pick| SeOp::Delete { pick }),
        2 => any::<u8>().prop_map(|pick| SeOp::Versions { pick }),
        1 => Just(SeOp::List),
        2 => (proptest::bool::weighted(0.8), proptest::option::of(any::<u8>())).prop_map(|(medium, target)| SeOp::Optimize { medium, target }),
        1 => (0..30u8).prop_map(|secs| SeOp::Advance { secs }),
        1 => Just(SeOp::Reopen),
    ]
}

/// Session content: similar from one seed to the next, so level 3 stores real deltas.
fn session_content(seed: u16) -> Value {
    let n = seed % 7;
    json!({
        "title": "refactor the storage layer",
        "seed": seed,
        "ratio": f64::from(seed) / 4.0,
        "steps": (0..n).map(|i| json!({"i": i, "done": i % 2 == 0, "note": format!("step {i} of {n}")})).collect::<Vec<_>>(),
        "open": seed.is_multiple_of(3),
    })
}

#[derive(Debug)]
struct SeModel {
    id: String,
    name: String,
    metadata: Value,
    created_ms: i64,
    updated_ms: i64,
    live: bool,
    last_version: u64,
    /// Stored versions: version -> (content, level, saved_at ms).
    versions: BTreeMap<u64, (Value, u8, i64)>,
}

impl SeModel {
    /// What `optimize(medium)` keeps: the newest `RETENTION` stored versions.
    fn prune(&mut self) {
        while self.versions.len() > RETENTION {
            self.versions.pop_first();
        }
    }
}

/// A session picked from every one ever created (deleted or not), or `None`
/// (an id no session has) for small `pick`s.
fn pick_se(ss: &[SeModel], pick: u8) -> Option<usize> {
    (pick >= 16 && !ss.is_empty()).then(|| usize::from(pick) % ss.len())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20, ..ProptestConfig::default() })]
    #[test]
    fn sessions_match_model(ops in proptest::collection::vec(se_op(), 1..40)) {
        let dir = common::tempdir();
        let clock = Arc::new(ManualClock::new(start()));
        let limits = Limits::default();
        let mut mem = Some(open(&dir.path(), &clock, &limits, RETENTION));
        let mut ss: Vec<SeModel> = Vec::new();
        let mut now_ms = start().timestamp_millis();
        for op in ops {
            let h = mem.as_ref().unwrap();
            match op {
                SeOp::Create { name } => {
                    let name = format!("session-{name}");
                    let metadata = json!({"n": ss.len(), "name": name});
                    let c = h.sessions().create(&name, metadata.clone()).unwrap();
                    prop_assert_eq!(c.created_at.timestamp_millis(), now_ms);
                    ss.push(SeModel { id: c.session_id, name, metadata, created_ms: now_ms, updated_ms: now_ms, live: true, last_version: 0, versions: BTreeMap::new() });
                }
                SeOp::Save { pick, level, seed } => {
                    let i = pick_se(&ss, pick);
                    let id = i.map_or(MISSING_ID.to_owned(), |i| ss[i].id.clone());
                    let r = h.sessions().save(&id, session_content(seed), level);
                    match i.filter(|&i| ss[i].live) {
                        Some(i) => {
                            let s = &mut ss[i];
                            s.last_version += 1;
                            s.updated_ms = now_ms;
                            s.versions.insert(s.last_version, (session_content(seed), level, now_ms));
                            let r = r.unwrap();
                            prop_assert_eq!(r.version, s.last_version);
                            prop_assert_eq!(r.saved_at.timestamp_millis(), now_ms);
                        }
                        None => prop_assert!(is_not_found(&r), "save to a missing session: {r:?}"),
                    }
                }
                SeOp::Restore { pick, version } => {
                    let i = pick_se(&ss, pick);
                    let id = i.map_or(MISSING_ID.to_owned(), |i| ss[i].id.clone());
                    // Versions 0..=last+1: stored, pruned and never-saved ones.
                    let version = version.map(|v| u64::from(v) % (i.map_or(0, |i| ss[i].last_version) + 2));
                    let r = h.sessions().restore(&id, version);
                    let want = i.filter(|&i| ss[i].live).and_then(|i| {
                        let s = &ss[i];
                        let v = match version {
                            Some(v) => v,
                            None => *s.versions.keys().next_back()?,
                        };
                        s.versions.get(&v).map(|(c, _, _)| (v, c.clone(), s.metadata.clone()))
                    });
                    match want {
                        Some((v, content, metadata)) => {
                            let r = r.unwrap();
                            prop_assert_eq!(r.version, v);
                            prop_assert_eq!(r.content, content);
                            prop_assert_eq!(r.metadata, metadata);
                        }
                        None => prop_assert!(is_not_found(&r), "restore {id} {version:?}: {r:?}"),
                    }
                }
                SeOp::Delete { pick } => {
                    let i = pick_se(&ss, pick);
                    let id = i.map_or(MISSING_ID.to_owned(), |i| ss[i].id.clone());
                    let want = i.is_some_and(|i| ss[i].live);
                    prop_assert_eq!(h.sessions().delete(&id).unwrap(), want);
                    if let Some(i) = i {
                        ss[i].live = false;
                        ss[i].versions.clear();
                    }
                }
                SeOp::Versions { pick } => {
                    let i = pick_se(&ss, pick);
                    let id = i.map_or(MISSING_ID.to_owned(), |i| ss[i].id.clone());
                    let r = h.sessions().versions(&id);
                    match i.filter(|&i| ss[i].live) {
                        Some(i) => {
                            let got: Vec<(u64, u8, i64)> = r.unwrap().into_iter().map(|v| (v.version, v.compression_level, v.saved_at.timestamp_millis())).collect();
                            let want: Vec<(u64, u8, i64)> = ss[i].versions.iter().map(|(v, (_, l, t))| (*v, *l, *t)).collect();
                            prop_assert_eq!(got, want);
                        }
                        None => prop_assert!(is_not_found(&r), "versions of a missing session: {r:?}"),
                    }
                }
                SeOp::List => {
                    let mut got: Vec<(String, String, Option<u64>, u64, i64, i64)> = h.sessions().list().unwrap().into_iter()
                        .map(|s| (s.session_id, s.name, s.latest_version, s.version_count, s.created_at.timestamp_millis(), s.updated_at.timestamp_millis()))
                        .collect();
                    got.sort();
                    let mut want: Vec<(String, String, Option<u64>, u64, i64, i64)> = ss.iter().filter(|s| s.live)
                        .map(|s| (s.id.clone(), s.name.clone(), s.versions.keys().next_back().copied(), s.versions.len() as u64, s.created_ms, s.updated_ms))
                        .collect();
                    want.sort();
                    prop_assert_eq!(got, want);
                }
                SeOp::Optimize { medium, target } => {
                    let level = if medium { OptimizeLevel::Medium } else { OptimizeLevel::Light };
                    let t = target.map(|p| pick_se(&ss, p));
                    let tid = t.map(|i| i.map_or(MISSING_ID.to_owned(), |i| ss[i].id.clone()));
                    let r = h.admin().optimize(level, tid.as_deref());
                    match t {
                        // A target that does not exist (never did, or deleted) is NotFound at any level.
                        Some(i) if !i.is_some_and(|i| ss[i].live) => prop_assert!(is_not_found(&r), "optimize target: {r:?}"),
                        _ => {
                            let report = r.unwrap();
                            if medium {
                                let mut pruned = 0;
                                for (j, s) in ss.iter_mut().enumerate() {
                                    if s.live && t.is_none_or(|i| i == Some(j)) {
                                        pruned += s.versions.len().saturating_sub(RETENTION);
                                        s.prune();
                                    }
                                }
                                prop_assert_eq!(&report.optimization_details["sessions"]["versions_pruned"], &json!(pruned));
                            }
                        }
                    }
                }
                SeOp::Advance { secs } => {
                    clock.advance(Duration::from_secs(secs.into()));
                    now_ms += i64::from(secs) * 1000;
                }
                SeOp::Reopen => {
                    drop(mem.take());
                    mem = Some(open(&dir.path(), &clock, &limits, RETENTION));
                }
            }
        }
        // After a reopen every stored version restores exactly.
        drop(mem.take());
        let mem = open(&dir.path(), &clock, &limits, RETENTION);
        prop_assert_eq!(mem.sessions().list().unwrap().len(), ss.iter().filter(|s| s.live).count());
        for s in ss.iter().filter(|s| s.live) {
            for (v, (content, _, _)) in &s.versions {
                let r = mem.sessions().restore(&s.id, Some(*v)).unwrap();
                prop_assert_eq!(&r.content, content);
            }
        }
    }
}
