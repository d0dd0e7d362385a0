//! Model-based tests for the layers `model.rs` does not cover: episodes,
//! working memory, sessions (with retention pruning) and procedures. Each test
//! runs random operation sequences (with clock moves and reopens of the same
//! store) against a small in-memory model of the documented behaviour.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use memstrata::{
    Durability, Error, Limits, ManualClock, Memory, NewEpisode, SearchFilters,
    admin::OptimizeLevel, procedural::Actions, procedural::Branch, procedural::Next,
    procedural::RunStatus, procedural::Step,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap()
}

fn open(path: &Path, clock: &Arc<ManualClock>, limits: &Limits, retention: usize) -> Memory {
    Memory::builder()
        .path(path)
        .durability(Durability::Manual)
        .clock(clock.clone())
        .limits(limits.clone())
        .session_retention(retention)
        .open()
        .unwrap()
}

fn ctx_name(c: u8) -> &'static str {
    if c == 0 { "default" } else { "other" }
}

fn is_not_found<T: std::fmt::Debug>(r: &memstrata::Result<T>) -> bool {
    matches!(r, Err(Error::NotFound { .. }))
}

/// The names selected by the low bits of `mask`.
fn pick_names(mask: u8, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect()
}

/// A well-formed id that no record has.
const MISSING_ID: &str = "00000000-0000-7000-8000-000000000000";

// ---------------------------------------------------------------------------
// (a) Episodes: record, forget, get, search with filters.

const TAGS: [&str; 3] = ["red", "green", "blue"];
const PEOPLE: [&str; 3] = ["alice", "bob", "carol"];

#[derive(Debug, Clone)]
enum EpOp {
    Record {
        ctx: u8,
        tags: u8,
        people: u8,
        importance: u8,
    },
    Forget {
        ctx: u8,
        pick: u8,
    },
    Get {
        ctx: u8,
        pick: u8,
    },
    Search {
        ctx: u8,
        tags: u8,
        people: u8,
        min_importance: Option<u8>,
        since_secs: Option<u16>,
        /// `Some`: search for the marker word of the picked episode; `None`: empty query.
        marker_of: Option<u8>,
    },
    Advance {
        secs: u8,
    },
    Reopen,
}

/// Importance values, few enough that `min_importance` often equals one recorded.
fn importance() -> impl Strategy<Value = u8> {
    prop_oneof![Just(1u8), 4..=6u8, Just(10u8)]
}

fn ep_op() -> impl Strategy<Value = EpOp> {
    prop_oneof![
        5 => (0..2u8, 0..8u8, 0..8u8, importance())
            .prop_map(|(ctx, tags, people, importance)| EpOp::Record { ctx, tags, people, importance }),
        2 => (0..2u8, any::<u8>()).prop_map(|(ctx, pick)| EpOp::Forget { ctx, pick }),
        2 => (0..2u8, any::<u8>()).prop_map(|(ctx, pick)| EpOp::Get { ctx, pick }),
        5 => (0..2u8, 0..8u8, 0..8u8, proptest::option::of(importance()), proptest::option::weighted(0.3, 0..600u16), proptest::option::weighted(0.5, any::<u8>()))
            .prop_map(|(ctx, tags, people, min_importance, since_secs, marker_of)| EpOp::Search { ctx, tags, people, min_importance, since_secs, marker_of }),
        2 => (0..60u8).prop_map(|secs| EpOp::Advance { secs }),
        1 => Just(EpOp::Reopen),
    ]
}

#[derive(Debug)]
struct EpModel {
    id: String,
    ctx: u8,
    /// Unique marker word in the summary.
    marker: String,
    n: usize,
    tags: Vec<String>,
    people: Vec<String>,
    importance: u8,
    ts_ms: i64,
    live: bool,
}

impl EpModel {
    fn summary(&self) -> String {
        format!("note {} about the work", self.marker)
    }
    fn content(&self) -> Value {
        json!({"n": self.n, "text": format!("content of episode {}", self.n)})
    }
    fn matches(&self, ctx: u8, f: &SearchFilters) -> bool {
        self.live
            && self.ctx == ctx
            && f.tags.iter().all(|t| self.tags.contains(t))
            && (f.participants.is_empty() || f.participants.iter().any(|p| self.people.contains(p)))
            && f.min_importance.is_none_or(|m| self.importance >= m)
            && f.since.is_none_or(|s| self.ts_ms >= s.timestamp_millis())
    }
}

/// An episode picked from every one ever recorded (any context, forgotten or not),
/// or `None` (meaning: an id no episode has) when `pick` lands past the end.
fn pick_ep(eps: &[EpModel], pick: u8) -> Option<&EpModel> {
    eps.get(usize::from(pick) % (eps.len() + 1))
}

fn check_episode(got: &memstrata::episodic::Episode, want: &EpModel) -> Result<(), TestCaseError> {
    prop_assert_eq!(&got.id, &want.id);
    prop_assert_eq!(got.summary.clone(), want.summary());
    prop_assert_eq!(&got.content, &want.content());
    prop_assert_eq!(&got.tags, &want.tags);
    prop_assert_eq!(&got.participants, &want.people);
    prop_assert_eq!(got.importance, want.importance);
    prop_assert_eq!(got.timestamp.timestamp_millis(), want.ts_ms);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20, ..ProptestConfig::default() })]
    #[test]
    fn episodes_match_model(ops in proptest::collection::vec(ep_op(), 1..40)) {
        let dir = common::tempdir();
        let clock = Arc::new(ManualClock::new(start()));
        let limits = Limits::default();
        let mut mem = Some(open(&dir.path(), &clock, &limits, 10));
        let mut eps: Vec<EpModel> = Vec::new();
        let mut now_ms = start().timestamp_millis();
        for op in ops {
            let h = mem.as_ref().unwrap();
            match op {
                EpOp::Record { ctx, tags, people, importance } => {
                    let n = eps.len();
                    let mut m = EpModel {
                        id: String::new(),
                        ctx,
                        marker: format!("mkr{n}z"),
                        n,
                        tags: pick_names(tags, &TAGS),
                        people: pick_names(people, &PEOPLE),
                        importance,
                        ts_ms: now_ms,
                        live: true,
                    };
                    let ep = NewEpisode::new(m.summary())
                        .content(m.content())
                        .tags(m.tags.clone())
                        .participants(m.people.clone())
                        .importance(importance);
                    m.id = h.namespace(ctx_name(ctx)).unwrap().episodic().record(ep).unwrap();
                    eps.push(m);
                }
                EpOp::Forget { ctx, pick } => {
                    let (id, want) = match pick_ep(&eps, pick) {
                        Some(m) => (m.id.clone(), m.live && m.ctx == ctx),
                        None => (MISSING_ID.to_owned(), false),
                    };
                    let got = h.namespace(ctx_name(ctx)).unwrap().episodic().forget(&id).unwrap();
                    prop_assert_eq!(got, want, "forget({}) in {}", id, ctx_name(ctx));
                    if want {
                        eps.iter_mut().find(|m| m.id == id).unwrap().live = false;
                    }
                }
                EpOp::Get { ctx, pick } => {
                    let picked = pick_ep(&eps, pick);
                    let id = picked.map_or(MISSING_ID.to_owned(), |m| m.id.clone());
                    let got = h.namespace(ctx_name(ctx)).unwrap().episodic().get(&id).unwrap();
                    match picked.filter(|m| m.live && m.ctx == ctx) {
                        Some(m) => check_episode(got.as_ref().expect("live episode must be found"), m)?,
                        None => prop_assert!(got.is_none(), "episode {id} must be absent from {}", ctx_name(ctx)),
                    }
                }
                EpOp::Search { ctx, tags, people, min_importance, since_secs, marker_of } => {
                    let filters = SearchFilters {
                        tags: pick_names(tags, &TAGS),
                        participants: pick_names(people, &PEOPLE),
                        min_importance,
                        since: since_secs.map(|s| start() + chrono::Duration::seconds(i64::from(s))),
                        ..SearchFilters::default()
                    };
                    let target = marker_of.and_then(|p| eps.get(usize::from(p) % eps.len().max(1)));
                    let query = target.map_or(String::new(), |m| m.marker.clone());
                    let hits = h.namespace(ctx_name(ctx)).unwrap().episodic().search(&query, &filters, 1000).unwrap();
                    let got: Vec<String> = hits.iter().map(|x| x.episode.id.clone()).collect();
                    let got_set: BTreeSet<String> = got.iter().cloned().collect();
                    prop_assert_eq!(got.len(), got_set.len(), "duplicate hits");
                    let want: BTreeSet<String> = match target {
                        // The marker is unique: at most its episode, if it is live and passes the filters.
                        Some(m) => m.matches(ctx, &filters).then(|| m.id.clone()).into_iter().collect(),
                        None => eps.iter().filter(|m| m.matches(ctx, &filters)).map(|m| m.id.clone()).collect(),
                    };
                    prop_assert_eq!(&got_set, &want, "search {:?} with {:?} in {}", query, filters, ctx_name(ctx));
                    for hit in &hits {
                        let m = eps.iter().find(|m| m.id == hit.episode.id).unwrap();
                        check_episode(&hit.episode, m)?;
                    }
                    if query.is_empty() {
                        // Filter-only searches are newest first.
                        let ts: Vec<i64> = hits.iter().map(|x| x.episode.timestamp.timestamp_millis()).collect();
                        prop_assert!(ts.windows(2).all(|w| w[0] >= w[1]), "not newest first: {ts:?}");
                    }
                }
                EpOp::Advance { secs } => {
                    clock.advance(Duration::from_secs(secs.into()));
                    now_ms += i64::from(secs) * 1000;
                }
                EpOp::Reopen => {
                    drop(mem.take());
                    mem = Some(open(&dir.path(), &clock, &limits, 10));
                }
            }
        }
        // After one more reopen every live episode is readable and searchable, nothing else is.
        drop(mem.take());
        let mem = open(&dir.path(), &clock, &limits, 10);
        for ctx in 0..2u8 {
            let epi = mem.namespace(ctx_name(ctx)).unwrap().episodic();
            let all: BTreeSet<String> = epi.search("", &SearchFilters::default(), 1000).unwrap().into_iter().map(|x| x.episode.id).collect();
            let want: BTreeSet<String> = eps.iter().filter(|m| m.live && m.ctx == ctx).map(|m| m.id.clone()).collect();
            prop_assert_eq!(all, want);
        }
        for m in &eps {
            let epi = mem.namespace(ctx_name(m.ctx)).unwrap().episodic();
            let got = epi.get(&m.id).unwrap();
            prop_assert_eq!(got.is_some(), m.live);
            let found = epi.search(&m.marker, &SearchFilters::default(), 10).unwrap();
            prop_assert_eq!(found.iter().any(|x| x.episode.id == m.id), m.live, "marker {}", m.marker);
        }
    }
}

// ---------------------------------------------------------------------------
// (b) Working memory: focus / workspace / clear with small capacities, and the
// clearing done by `switch_context(preserve_current = false)`.

const FOCUS_CAP: usize = 3;
const WORKSPACE_CAP: usize = 4;

#[derive(Debug, Clone)]
enum WmOp {
    Focus { item: u8 },
    Add { val: i64 },
    Clear,
    Get { ctx: u8 },
    Switch { target: u8, preserve: bool },
    Advance { secs: u8 },
    Reopen,
}

fn wm_op() -> impl Strategy<Value = WmOp> {
    prop_oneof![
        5 => (0..6u8).prop_map(|item| WmOp::Focus { item }),
        5 => any::<i64>().prop_map(|val| WmOp::Add { val }),
        1 => Just(WmOp::Clear),
        3 => (0..2u8).prop_map(|ctx| WmOp::Get { ctx }),
        2 => (0..2u8, any::<bool>()).prop_map(|(target, preserve)| WmOp::Switch { target, preserve }),
        2 => (0..30u8).prop_map(|secs| WmOp::Advance { secs }),
        1 => Just(WmOp::Reopen),
    ]
}

#[derive(Debug, Default, Clone)]
struct WmModel {
    focus: Vec<String>,
    /// (id, value, added_at ms)
    workspace: Vec<(String, Value, i64)>,
    /// Whether the context's working-memory record exists (any focus/add since the last clear).
    stored: bool,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn working_memory_matches_model(ops in proptest::collection::vec(wm_op(), 1..40)) {
        let dir = common::tempdir();
        let clock = Arc::new(ManualClock::new(start()));
        let limits = Limits { focus_capacity: FOCUS_CAP, workspace_capacity: WORKSPACE_CAP, ..Limits::default() };
        let mut mem = Some(open(&dir.path(), &clock, &limits, 10));
        let mut m: [WmModel; 2] = Default::default();
        let mut active = 0u8;
        let mut now_ms = start().timestamp_millis();
        for op in ops {
            let h = mem.as_ref().unwrap();
            prop_assert_eq!(h.active_context(), ctx_name(active));
            match op {
                WmOp::Focus { item } => {
                    let item = format!("item{item}");
                    let got = h.working().focus(&item).unwrap();
                    let wm = &mut m[usize::from(active)];
                    let want = !wm.focus.contains(&item);
                    if want {
                        wm.focus.push(item);
                        while wm.focus.len() > FOCUS_CAP {
                            wm.focus.remove(0);
                        }
                        wm.stored = true;
                    }
                    prop_assert_eq!(got, want);
                }
                WmOp::Add { val } => {
                    let id = h.working().add_to_workspace(json!({"val": val})).unwrap();
                    let wm = &mut m[usize::from(active)];
                    prop_assert!(wm.workspace.iter().all(|(i, _, _)| *i != id), "ids are unique");
                    wm.workspace.push((id, json!({"val": val}), now_ms));
                    while wm.workspace.len() > WORKSPACE_CAP {
                        wm.workspace.remove(0);
                    }
                    wm.stored = true;
                }
                WmOp::Clear => {
                    h.working().clear().unwrap();
                    m[usize::from(active)] = WmModel::default();
                }
                WmOp::Get { ctx } => {
                    let w = h.namespace(ctx_name(ctx)).unwrap().working();
                    let wm = &m[usize::from(ctx)];
                    prop_assert_eq!(w.current_focus().unwrap(), wm.focus.clone());
                    let items: Vec<(String, Value, i64)> = w.workspace_items().unwrap().into_iter()
                        .map(|i| (i.id, i.value, i.added_at.timestamp_millis())).collect();
                    prop_assert_eq!(&items, &wm.workspace);
                    let values: Vec<Value> = wm.workspace.iter().map(|(_, v, _)| v.clone()).collect();
                    prop_assert_eq!(w.workspace().unwrap(), values);
                }
                WmOp::Switch { target, preserve } => {
                    let r = h.switch_context(ctx_name(target), preserve).unwrap();
                    prop_assert_eq!(r.previous_context, ctx_name(active));
                    if !preserve && target != active {
                        m[usize::from(active)] = WmModel::default();
                    }
                    // Only working memory is written in this test, so "holds data" = has a record.
                    prop_assert_eq!(r.context_loaded, m[usize::from(target)].stored);
                    active = target;
                }
                WmOp::Advance { secs } => {
                    clock.advance(Duration::from_secs(secs.into()));
                    now_ms += i64::from(secs) * 1000;
                }
                WmOp::Reopen => {
                    drop(mem.take());
                    mem = Some(open(&dir.path(), &clock, &limits, 10));
                    // A new handle starts in the default context; working memory persists.
                    active = 0;
                }
            }
        }
        drop(mem.take());
        let mem = open(&dir.path(), &clock, &limits, 10);
        for ctx in 0..2u8 {
            let w = mem.namespace(ctx_name(ctx)).unwrap().working();
            let wm = &m[usize::from(ctx)];
            prop_assert_eq!(w.current_focus().unwrap(), wm.focus.clone());
            let ids: Vec<String> = w.workspace_items().unwrap().into_iter().map(|i| i.id).collect();
            prop_assert_eq!(ids, wm.workspace.iter().map(|(i, _, _)| i.clone()).collect::<Vec<_>>());
        }
    }
}

// ---------------------------------------------------------------------------
// (c) Sessions: create / save at levels 0..=3 / restore / delete, with
// `optimize` pruning each session to its newest `RETENTION` stored versions.

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

// ---------------------------------------------------------------------------
// (d) Procedures: random small valid graphs of `set` / `fail` / host-action
// steps with CEL branches, executed (and resumed) and compared with a tiny
// interpreter of the documented semantics.

const MAX_STEPS: usize = 12;

#[derive(Debug, Clone)]
enum Act {
    /// `set {"v": k}`
    Lit(i64),
    /// `set {"v": "{{ params.x + k }}", "note": "x={{ params.x }} at <id>"}`
    Tpl(i64),
    /// `fail {"message": "boom at <id>"}`
    Fail,
    /// An action no handler takes: the run pauses until `resume`.
    Ask,
}

#[derive(Debug, Clone)]
enum Cond {
    XGt(i64),
    LastEq(i64),
    True,
    Flag,
    NotFlagXLe(i64),
}

#[derive(Debug, Clone)]
enum GenNext {
    End,
    To(usize),
    Br(Vec<(Cond, usize)>),
}

#[derive(Debug, Clone)]
struct GenStep {
    act: Act,
    next: GenNext,
}

type Graph = Vec<GenStep>;

fn cond() -> impl Strategy<Value = Cond> {
    prop_oneof![
        (0..6i64).prop_map(Cond::XGt),
        (0..8i64).prop_map(Cond::LastEq),
        Just(Cond::True),
        Just(Cond::Flag),
        (0..6i64).prop_map(Cond::NotFlagXLe),
    ]
}

fn graph() -> impl Strategy<Value = Graph> {
    (1..=5usize).prop_flat_map(|n| {
        let act = prop_oneof![
            4 => (0..8i64).prop_map(Act::Lit),
            4 => (0..4i64).prop_map(Act::Tpl),
            1 => Just(Act::Fail),
            1 => Just(Act::Ask),
        ];
        let next = prop_oneof![
            2 => Just(GenNext::End),
            3 => (0..n).prop_map(GenNext::To),
            4 => proptest::collection::vec((cond(), 0..n), 1..=3).prop_map(GenNext::Br),
        ];
        proptest::collection::vec((act, next).prop_map(|(act, next)| GenStep { act, next }), n)
    })
}

fn sid(i: usize) -> String {
    format!("s{i}")
}

fn cond_src(c: &Cond) -> String {
    match c {
        Cond::XGt(k) => format!("params.x > {k}"),
        Cond::LastEq(k) => format!("last.v == {k}"),
        Cond::True => "true".to_owned(),
        Cond::Flag => "params.flag".to_owned(),
        Cond::NotFlagXLe(k) => format!("!params.flag && params.x <= {k}"),
    }
}

fn to_steps(g: &Graph) -> Vec<Step> {
    g.iter()
        .enumerate()
        .map(|(i, s)| {
            let (action, parameters) = match &s.act {
                Act::Lit(k) => ("set", json!({"v": k})),
                Act::Tpl(k) => ("set", json!({"v": format!("{{{{ params.x + {k} }}}}"), "note": format!("x={{{{ params.x }}}} at {}", sid(i))})),
                Act::Fail => ("fail", json!({"message": format!("boom at {}", sid(i))})),
                Act::Ask => ("ask_human", json!({"question": format!("what next after {}?", sid(i))})),
            };
            let mut step = Step::new(sid(i), action).parameters(parameters);
            step.next = match &s.next {
                GenNext::End => None,
                GenNext::To(j) => Some(Next::Step(sid(*j))),
                GenNext::Br(bs) => Some(Next::Branches(bs.iter().map(|(c, j)| Branch::new(cond_src(c), sid(*j))).collect())),
            };
            step
        })
        .collect()
}

/// The interpreter's view of one run.
#[derive(Debug, Clone)]
struct RunModel {
    graph: Graph,
    x: i64,
    flag: bool,
    status: RunStatus,
    trace: Vec<String>,
    outputs: Map<String, Value>,
    last: Value,
    executed: u64,
    /// The paused step (awaiting_action).
    paused_at: Option<usize>,
    error: Option<String>,
}

impl RunModel {
    fn new(graph: Graph, x: i64, flag: bool) -> Self {
        RunModel {
            graph,
            x,
            flag,
            status: RunStatus::Running,
            trace: Vec::new(),
            outputs: Map::new(),
            last: Value::Null,
            executed: 0,
            paused_at: None,
            error: None,
        }
    }

    fn holds(&self, c: &Cond) -> bool {
        match c {
            Cond::XGt(k) => self.x > *k,
            Cond::LastEq(k) => self.last["v"] == json!(k),
            Cond::True => true,
            Cond::Flag => self.flag,
            Cond::NotFlagXLe(k) => !self.flag && self.x <= *k,
        }
    }

    /// Record `out` as step `i`'s output and pick the next step.
    fn done(&mut self, i: usize, out: Value) -> Option<usize> {
        self.trace.push(sid(i));
        self.outputs.insert(sid(i), out.clone());
        self.last = out;
        match &self.graph[i].next {
            GenNext::End => None,
            GenNext::To(j) => Some(*j),
            GenNext::Br(bs) => bs.iter().find(|(c, _)| self.holds(c)).map(|(_, j)| *j),
        }
    }

    /// Run from step `at` until the run ends or pauses.
    fn drive(&mut self, mut at: Option<usize>) {
        self.status = RunStatus::Running;
        self.paused_at = None;
        loop {
            let Some(i) = at else {
                self.status = RunStatus::Completed;
                return;
            };
            if self.executed >= MAX_STEPS as u64 {
                self.status = RunStatus::Failed;
                self.error = Some("step limit".to_owned());
                return;
            }
            self.executed += 1;
            at = match self.graph[i].act {
                Act::Lit(k) => self.done(i, json!({"v": k})),
                Act::Tpl(k) => {
                    let out =
                        json!({"v": self.x + k, "note": format!("x={} at {}", self.x, sid(i))});
                    self.done(i, out)
                }
                Act::Fail => {
                    self.trace.push(sid(i));
                    self.status = RunStatus::Failed;
                    self.error = Some(format!("boom at {}", sid(i)));
                    return;
                }
                Act::Ask => {
                    self.status = RunStatus::AwaitingAction;
                    self.paused_at = Some(i);
                    return;
                }
            };
        }
    }

    fn resume(&mut self, out: Value) {
        let i = self.paused_at.expect("paused");
        let next = self.done(i, out);
        self.drive(next);
    }
}

fn check_run(
    h: &Memory,
    run: &memstrata::procedural::Run,
    m: &RunModel,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(run.status, m.status, "run {:?}: {:?}", run.error, m);
    let steps: Vec<String> = run.trace.iter().map(|t| t.step.clone()).collect();
    prop_assert_eq!(&steps, &m.trace);
    prop_assert_eq!(&run.outputs, &m.outputs);
    prop_assert_eq!(run.steps_executed, m.executed);
    match (&m.error, &run.error) {
        (None, got) => prop_assert!(got.is_none(), "unexpected error {got:?}"),
        (Some(want), got) if want == "step limit" => {
            prop_assert!(
                got.as_deref().is_some_and(|g| g.contains("step limit")),
                "{got:?}"
            )
        }
        (Some(want), got) => prop_assert_eq!(got.as_deref(), Some(want.as_str())),
    }
    match m.paused_at {
        Some(i) => {
            let p = run.pending.as_ref().expect("pending step");
            prop_assert_eq!(p.step.clone(), sid(i));
            prop_assert_eq!(p.action.as_str(), "ask_human");
        }
        None => prop_assert!(run.pending.is_none()),
    }
    if m.status == RunStatus::Completed || m.status == RunStatus::Failed {
        // A finished run is recorded as an episode tagged `procedure`.
        let eid = run
            .episode_id
            .as_deref()
            .expect("finished run has an episode");
        let ep = h
            .namespace(&run.context)
            .unwrap()
            .episodic()
            .get(eid)
            .unwrap()
            .expect("run episode");
        prop_assert!(ep.tags.iter().any(|t| t == "procedure"));
    } else {
        prop_assert!(run.episode_id.is_none());
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum PrOp {
    Learn { graph: Graph },
    Update { pick: u8, graph: Graph },
    Execute { pick: u8, x: i64, flag: bool },
    Resume { pick: u8, v: i64 },
    Reopen,
}

fn pr_op() -> impl Strategy<Value = PrOp> {
    prop_oneof![
        3 => graph().prop_map(|graph| PrOp::Learn { graph }),
        1 => (any::<u8>(), graph()).prop_map(|(pick, graph)| PrOp::Update { pick, graph }),
        6 => (any::<u8>(), -3..8i64, any::<bool>()).prop_map(|(pick, x, flag)| PrOp::Execute { pick, x, flag }),
        3 => (any::<u8>(), 0..8i64).prop_map(|(pick, v)| PrOp::Resume { pick, v }),
        1 => Just(PrOp::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    #[test]
    fn procedures_match_interpreter(ops in proptest::collection::vec(pr_op(), 1..30)) {
        let dir = common::tempdir();
        let clock = Arc::new(ManualClock::new(start()));
        let limits = Limits { max_steps: MAX_STEPS, ..Limits::default() };
        let mut mem = Some(open(&dir.path(), &clock, &limits, 10));
        let no_actions = Actions::new();
        // name -> (graph, version)
        let mut procs: Vec<(String, Graph, u64)> = Vec::new();
        // run id -> model
        let mut runs: Vec<(String, RunModel)> = Vec::new();
        for op in ops {
            let h = mem.as_ref().unwrap();
            let p = h.procedural();
            match op {
                PrOp::Learn { graph } => {
                    let name = format!("proc{}", procs.len());
                    let got = p.learn(&name, to_steps(&graph)).unwrap();
                    prop_assert_eq!(got.version, 1);
                    prop_assert_eq!(&got.steps, &to_steps(&graph));
                    // Learning an existing name is a conflict and changes nothing.
                    if let Some((first, _, _)) = procs.first() {
                        let r = p.learn(first, to_steps(&graph));
                        prop_assert!(matches!(r, Err(Error::Conflict(_))), "{r:?}");
                    }
                    procs.push((name, graph, 1));
                }
                PrOp::Update { pick, graph } => {
                    let i = usize::from(pick) % (procs.len() + 1);
                    match procs.get_mut(i) {
                        Some((name, g, version)) => {
                            let got = p.update(name, to_steps(&graph)).unwrap();
                            *version += 1;
                            *g = graph;
                            prop_assert_eq!(got.version, *version);
                        }
                        None => {
                            let r = p.update("no-such-procedure", to_steps(&graph));
                            prop_assert!(is_not_found(&r), "{r:?}");
                        }
                    }
                }
                PrOp::Execute { pick, x, flag } => {
                    let i = usize::from(pick) % (procs.len() + 1);
                    match procs.get(i) {
                        Some((name, g, version)) => {
                            let run = p.execute(name, json!({"x": x, "flag": flag}), &no_actions).unwrap();
                            prop_assert_eq!(run.procedure_version, *version);
                            let mut m = RunModel::new(g.clone(), x, flag);
                            m.drive(Some(0));
                            check_run(h, &run, &m)?;
                            runs.push((run.run_id, m));
                        }
                        None => {
                            let r = p.execute("no-such-procedure", json!({"x": x}), &no_actions);
                            prop_assert!(is_not_found(&r), "{r:?}");
                        }
                    }
                }
                PrOp::Resume { pick, v } => {
                    if runs.is_empty() {
                        continue;
                    }
                    let i = usize::from(pick) % runs.len();
                    let (run_id, m) = &mut runs[i];
                    let r = p.resume(run_id, json!({"v": v}), &no_actions);
                    if m.status == RunStatus::AwaitingAction {
                        // The run keeps the steps it started with, whatever `update` did since.
                        m.resume(json!({"v": v}));
                        check_run(h, &r.unwrap(), m)?;
                    } else {
                        prop_assert!(matches!(r, Err(Error::Conflict(_))), "{r:?}");
                    }
                    // The stored run reads back the same.
                    let stored = p.run(run_id).unwrap().expect("stored run");
                    check_run(h, &stored, m)?;
                }
                PrOp::Reopen => {
                    drop(mem.take());
                    mem = Some(open(&dir.path(), &clock, &limits, 10));
                }
            }
        }
        drop(mem.take());
        let mem = open(&dir.path(), &clock, &limits, 10);
        let p = mem.procedural();
        prop_assert_eq!(p.list().unwrap(), { let mut n: Vec<String> = procs.iter().map(|(n, _, _)| n.clone()).collect(); n.sort(); n });
        for (run_id, m) in &runs {
            check_run(&mem, &p.run(run_id).unwrap().expect("stored run"), m)?;
        }
    }
}
